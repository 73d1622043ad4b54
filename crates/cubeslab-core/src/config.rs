//! Parallelism settings: how many threads decode, how many requests are in flight.
//!
//! Defaults: threads = the number of cores, requests in flight = 32 (deep enough
//! for an NVMe queue, see the Pyrus parallel IO study in docs/references.md).
//! Environment overrides: `CUBESLAB_THREADS`, `CUBESLAB_IN_FLIGHT`. Every read
//! and ingest call also takes explicit values, which win over both.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, OnceLock},
};

use rayon::{ThreadPool, ThreadPoolBuilder};

/// Default number of read requests the engine keeps in flight.
pub const DEFAULT_IN_FLIGHT: usize = 32;

/// The default for object storage, whose requests each wait a network round
/// trip: shards read at once (64 read an inline of the scale benchmark in
/// 103 ms where 32 took 146 and 128 no less than 64).
pub const DEFAULT_REMOTE_IN_FLIGHT: usize = 64;

/// Threads are capped at this many per core: beyond it more threads only
/// contend (4096 threads made one time slice take 23 s).
pub const MAX_THREADS_PER_CORE: usize = 4;

/// Requests in flight are capped at this many (far deeper than any device queue).
pub const MAX_IN_FLIGHT: usize = 4096;

/// Threads and queue depth for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parallelism {
    /// Worker threads that read, decode and scatter.
    pub threads: usize,
    /// Byte-range requests handed to the kernel ahead of the workers.
    pub in_flight: usize,
    /// Whether the threads were chosen (given, or `CUBESLAB_THREADS`)
    /// rather than the cores by default: an ingest then runs no more tasks
    /// at once than that.
    pub chosen: bool,
}

impl Default for Parallelism {
    fn default() -> Self {
        Self::resolve(None, None)
    }
}

impl Parallelism {
    /// As [`Parallelism::resolve`], for reads from object storage.
    pub fn resolve_remote(threads: Option<usize>, in_flight: Option<usize>) -> Self {
        let in_flight = in_flight.or_else(|| env_usize("CUBESLAB_IN_FLIGHT"));
        Self::resolve(threads, in_flight.or(Some(DEFAULT_REMOTE_IN_FLIGHT)))
    }

    /// Explicit values where given, else the environment, else the defaults.
    pub fn resolve(threads: Option<usize>, in_flight: Option<usize>) -> Self {
        let given = threads.or_else(|| env_usize("CUBESLAB_THREADS"));
        let threads = given.unwrap_or_else(cores);
        let in_flight = in_flight
            .or_else(|| env_usize("CUBESLAB_IN_FLIGHT"))
            .unwrap_or(DEFAULT_IN_FLIGHT);
        Self {
            threads: threads.clamp(1, max_threads()),
            in_flight: in_flight.clamp(1, MAX_IN_FLIGHT),
            chosen: given.is_some(),
        }
    }

    /// The shared pool of `self.threads` workers.
    pub fn pool(&self) -> Arc<ThreadPool> {
        thread_pool(self.threads)
    }

    /// Whether the work runs on the calling thread alone. One thread is the
    /// caller itself, never a pool: a pool's worker that handed work to
    /// another pool would, while it waits, run its own pool's queued tasks
    /// on its stack (rayon's cross-pool `install`), nesting them without
    /// bound. An orientation copy of 1000 shards, each reading its chunks
    /// with one thread, overflowed a worker's stack that way.
    pub fn on_caller(&self) -> bool {
        self.threads <= 1
    }

    /// Run `run(p)` for each `p` in `0..pieces`: the calling thread starts
    /// at once, and `threads - 1` of the pool's workers join as they wake
    /// (see [`crate::share`]). The first error is returned.
    pub(crate) fn share(
        &self,
        pieces: u64,
        run: &(dyn Fn(u64) -> crate::error::Result<()> + Sync),
    ) -> crate::error::Result<()> {
        if self.on_caller() || pieces < 2 {
            return (0..pieces).try_for_each(run);
        }
        crate::share::share(&self.pool(), self.threads - 1, pieces, run)
    }
}

/// The most threads a call gets: [`MAX_THREADS_PER_CORE`] per core.
pub fn max_threads() -> usize {
    MAX_THREADS_PER_CORE * cores()
}

/// The number of cores, asked once: the standard library reads cgroup
/// files to answer, which cost tens of microseconds per read call.
fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name)
        .ok()?
        .trim()
        .parse()
        .ok()
        .filter(|&n: &usize| n > 0)
}

/// Pools are built once per size and reused. The owning process id is kept
/// beside them because a forked child inherits the pool object but not its
/// threads: a child that reused it would wait forever, so it builds its own.
/// The pools of one process: its id and a pool per size.
type Pools = (u32, HashMap<usize, Arc<ThreadPool>>);

fn thread_pool(threads: usize) -> Arc<ThreadPool> {
    static POOLS: OnceLock<Mutex<Pools>> = OnceLock::new();
    let pools = POOLS.get_or_init(|| Mutex::new((std::process::id(), HashMap::new())));
    let mut guard = pools
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let pid = std::process::id();
    if guard.0 != pid {
        // Leak the parent's pools: dropping them would try to join threads
        // that do not exist in this process.
        std::mem::forget(std::mem::take(&mut guard.1));
        guard.0 = pid;
    }
    guard
        .1
        .entry(threads)
        .or_insert_with(|| {
            Arc::new(
                ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("cubeslab-{i}"))
                    .build()
                    .expect("a thread pool can be built"),
            )
        })
        .clone()
}
