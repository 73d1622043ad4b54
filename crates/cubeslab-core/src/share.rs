//! Work shared between the calling thread and a pool's workers, the caller
//! starting at once.
//!
//! `ThreadPool::install` makes the caller wait while the workers wake and do
//! all of the work, then wakes the caller: two wake-ups on the critical path,
//! which cost a short warm read more than a second thread saves. Here the
//! caller takes pieces from a shared counter straight away, and the
//! helpers take the rest from the same counter as they arrive. A helper that
//! arrives after the last piece is taken touches nothing and is not waited
//! for: the caller waits only for pieces in progress. So a read never takes
//! much longer than on one thread, and gains from a helper as soon as it is
//! there.

use std::{
    any::Any,
    panic::{catch_unwind, resume_unwind, AssertUnwindSafe},
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc, Condvar, Mutex,
    },
    time::{Duration, Instant},
};

use rayon::ThreadPool;

use crate::error::{Error, Result};

/// The output pointer, shared by worker threads that write disjoint parts.
#[derive(Clone, Copy)]
pub(crate) struct SendPtr(pub *mut u8);
// SAFETY: every task writes a disjoint region of the buffer behind the pointer.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}
impl SendPtr {
    pub fn get(self) -> *mut u8 {
        self.0
    }
}

/// One piece of the work: `run(p)` for `p` in `0..pieces`.
type Piece<'a> = dyn Fn(u64) -> Result<()> + Sync + 'a;

/// Set in [`Shared::helpers`] once the caller has taken the last piece: a
/// helper arriving later leaves without touching the work.
const CLOSED: usize = 1 << (usize::BITS - 1);

/// How long the caller spins for helpers still on a piece before it sleeps.
/// Pieces of a warm read take tens of microseconds; being woken from sleep
/// costs about as much again on a VM.
const SPIN: Duration = Duration::from_micros(100);

/// What a piece ended with, other than success.
enum Failure {
    Error(Error),
    Panic(Box<dyn Any + Send>),
}

struct Shared {
    next: AtomicU64,
    pieces: u64,
    /// The caller's closure, its lifetime erased: dereferenced only by
    /// helpers counted in `helpers`, and the caller waits for that count to
    /// reach zero after closing it.
    run: *const Piece<'static>,
    /// Helpers at work, plus [`CLOSED`].
    helpers: AtomicUsize,
    /// The first failure; later ones are dropped.
    failure: Mutex<Option<Failure>>,
    /// Where the last helper out tells a sleeping caller.
    done: Mutex<()>,
    left: Condvar,
}

// SAFETY: `run` points at a `Sync` closure, used as `&` from several threads
// only while the caller keeps it alive (see `Shared::run`).
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// Take and run pieces until none are left or one fails.
    fn work(&self, run: &Piece<'_>) {
        loop {
            let p = self.next.fetch_add(1, Ordering::Relaxed);
            if p >= self.pieces {
                return;
            }
            let failure = match catch_unwind(AssertUnwindSafe(|| run(p))) {
                Ok(Ok(())) => continue,
                Ok(Err(e)) => Failure::Error(e),
                Err(panic) => Failure::Panic(panic),
            };
            // No one starts another piece.
            self.next.store(self.pieces, Ordering::Relaxed);
            let mut first = self.failure.lock().unwrap_or_else(|p| p.into_inner());
            first.get_or_insert(failure);
            return;
        }
    }

    /// A helper's turn: join unless the caller has closed the work.
    fn help(&self) {
        let mut seen = self.helpers.load(Ordering::Acquire);
        loop {
            if seen & CLOSED != 0 {
                return;
            }
            match self.helpers.compare_exchange_weak(
                seen,
                seen + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => seen = now,
            }
        }
        // SAFETY: counted in `helpers` before the caller closed them, so
        // the caller waits for this helper before `run` goes away.
        self.work(unsafe { &*self.run });
        if self.helpers.fetch_sub(1, Ordering::AcqRel) == CLOSED + 1 {
            // The last helper out after the caller closed: it may be asleep.
            let _guard = self.done.lock().unwrap_or_else(|p| p.into_inner());
            self.left.notify_one();
        }
    }

    /// The caller's end: close the work to late helpers and wait for those
    /// still on a piece.
    fn close(&self) {
        self.helpers.fetch_or(CLOSED, Ordering::AcqRel);
        let start = Instant::now();
        while self.helpers.load(Ordering::Acquire) != CLOSED {
            if start.elapsed() > SPIN {
                let mut guard = self.done.lock().unwrap_or_else(|p| p.into_inner());
                while self.helpers.load(Ordering::Acquire) != CLOSED {
                    guard = self.left.wait(guard).unwrap_or_else(|p| p.into_inner());
                }
                return;
            }
            std::hint::spin_loop();
        }
    }
}

/// Closes the work when the caller leaves [`share`], even by unwinding.
struct CloseOnDrop<'a>(&'a Shared);

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Run `run(p)` for every `p` in `0..pieces`, each once: on the calling
/// thread from the start, and on up to `helpers` of `pool`'s workers as they
/// arrive. Returns the first error; a panic in a piece resumes on the caller.
pub(crate) fn share(
    pool: &ThreadPool,
    helpers: usize,
    pieces: u64,
    run: &(dyn Fn(u64) -> Result<()> + Sync),
) -> Result<()> {
    // SAFETY: only the lifetime is erased; see `Shared::run`.
    let erased: *const Piece<'static> = unsafe { std::mem::transmute(run as *const Piece<'_>) };
    let shared = Arc::new(Shared {
        next: AtomicU64::new(0),
        pieces,
        run: erased,
        helpers: AtomicUsize::new(0),
        failure: Mutex::new(None),
        done: Mutex::new(()),
        left: Condvar::new(),
    });
    for _ in 0..helpers.min(pieces.saturating_sub(1) as usize) {
        let shared = Arc::clone(&shared);
        pool.spawn(move || shared.help());
    }
    {
        let _close = CloseOnDrop(&shared);
        shared.work(run);
    }
    let failure = shared
        .failure
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    match failure {
        None => Ok(()),
        Some(Failure::Error(e)) => Err(e),
        Some(Failure::Panic(panic)) => resume_unwind(panic),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use std::sync::atomic::AtomicU32;

    fn pool(threads: usize) -> ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
    }

    #[test]
    fn every_piece_runs_once() {
        let pool = pool(3);
        for pieces in [0u64, 1, 2, 7, 1000] {
            let runs: Vec<AtomicU32> = (0..pieces).map(|_| AtomicU32::new(0)).collect();
            share(&pool, 3, pieces, &|p| {
                runs[p as usize].fetch_add(1, Ordering::Relaxed);
                Ok(())
            })
            .unwrap();
            assert!(
                runs.iter().all(|r| r.load(Ordering::Relaxed) == 1),
                "{pieces} pieces"
            );
        }
    }

    #[test]
    fn helpers_share_the_pieces() {
        // Pieces long enough that a helper arrives while some are left.
        let pool = pool(2);
        let callers_thread = std::thread::current().id();
        let on_helpers = AtomicU32::new(0);
        share(&pool, 2, 64, &|_| {
            std::thread::sleep(Duration::from_millis(2));
            if std::thread::current().id() != callers_thread {
                on_helpers.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        })
        .unwrap();
        assert!(on_helpers.load(Ordering::Relaxed) > 0);
    }

    #[test]
    fn the_first_error_is_returned_and_stops_new_pieces() {
        let pool = pool(2);
        let started = AtomicU32::new(0);
        let result = share(&pool, 2, 10_000, &|p| {
            started.fetch_add(1, Ordering::Relaxed);
            if p == 3 {
                return Err(Error::io(
                    format!("piece {p}"),
                    std::io::Error::other("failed"),
                ));
            }
            Ok(())
        });
        let e = result.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Io);
        assert_eq!(e.to_string(), "piece 3: failed");
        assert!(started.load(Ordering::Relaxed) < 10_000);
    }

    #[test]
    fn a_panicking_piece_panics_on_the_caller_after_the_helpers_are_done() {
        let pool = pool(2);
        let running = AtomicU32::new(0);
        let result = catch_unwind(AssertUnwindSafe(|| {
            share(&pool, 2, 100, &|p| {
                running.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_micros(200));
                running.fetch_sub(1, Ordering::SeqCst);
                if p == 5 {
                    panic!("piece 5");
                }
                Ok(())
            })
        }));
        assert!(result.is_err());
        // No piece still runs once the caller is back.
        assert_eq!(running.load(Ordering::SeqCst), 0);
    }
}
