//! The cost model: how long the engine's read path takes to read a window
//! of an array stored with a given layout, on a profiled machine.
//!
//! It follows `store::sharded` step by step: the inner chunks a window
//! touches, cut into the same per-worker pieces; each piece's byte ranges
//! merged into requests by the same rule; then, per chunk, checksum,
//! decode and copy work at the profiled rates. Warm, the time is the CPU
//! work shared by the threads. Cold, the requests go to the device at the
//! queue depth the prefetcher keeps, overlapped with the CPU work, after
//! the shards' indexes are read.

use serde::Serialize;

use super::{
    layout::Layout,
    profile::{DeviceProfile, EngineCosts, MemoryRates},
};
use requests::Requests;

use crate::{
    store::{pieces_per_thread, TaskOrder, SERIAL_BYTES},
    window::{strides, ChunkSpan, Window, MAX_DIMS},
};

/// How inner chunks are stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum ChunkCodec {
    /// The elements as they are, with a crc32c after each chunk if `crc`.
    Raw {
        /// A crc32c follows each chunk.
        crc: bool,
    },
    /// Compressed by a codec with these rates.
    Compressed {
        /// Decoded / encoded bytes.
        ratio: f64,
        /// Decoded bytes per second on one core.
        decode: f64,
        /// A crc32c follows each chunk.
        crc: bool,
    },
}

impl ChunkCodec {
    /// Decoded bytes over stored bytes (1 for raw chunks).
    pub fn ratio(&self) -> f64 {
        match self {
            ChunkCodec::Raw { .. } => 1.0,
            ChunkCodec::Compressed { ratio, .. } => *ratio,
        }
    }
}

/// An array as stored: what the model needs of it.
#[derive(Debug, Clone)]
pub struct StoredArray {
    /// Array shape.
    pub shape: Vec<u64>,
    /// Bytes per element.
    pub elem: usize,
    /// Chunks and shards.
    pub layout: Layout,
    /// Chunk encoding.
    pub codec: ChunkCodec,
}

/// How a read is made.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReadSetup {
    /// Worker threads.
    pub threads: usize,
    /// Requests in flight when cold.
    pub in_flight: usize,
    /// Checksums are checked.
    pub verify: bool,
}

/// Whether the data is in the page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Cache {
    /// Already in memory and mapped.
    Warm,
    /// On the device; shards not yet open.
    Cold,
}

/// What a read costs, and the predicted time.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Prediction {
    /// Inner chunks touched.
    pub chunks: u64,
    /// Shards touched.
    pub shards: u64,
    /// Requests sent to the device (cold), after merging neighbours.
    pub requests: u64,
    /// Bytes read from the device (cold).
    pub device_bytes: u64,
    /// Stored bytes the workers touch (checksummed, decoded or copied from).
    pub touched_bytes: u64,
    /// Bytes delivered to the caller.
    pub output_bytes: u64,
    /// Device time if nothing else ran (s).
    pub io_seconds: f64,
    /// CPU time summed over threads (s).
    pub cpu_seconds: f64,
    /// Predicted wall time (s).
    pub seconds: f64,
}

/// Outputs up to this size reuse memory a previous read freed (glibc's
/// largest dynamic mmap threshold); larger ones are fresh pages each time.
pub const FRESH_OUTPUT_BYTES: u64 = 32 << 20;

/// Chunks up to this size, checked or decoded whole, are still in the CPU's
/// caches (a core's L2 and its share of L3) when the copy gathers their
/// selected elements.
pub const CACHED_CHUNK_BYTES: u64 = 1 << 20;

/// A chunk of `array` as stored: its bytes, whether a crc32c follows it,
/// and the rate it decodes at (bytes/s; `None`: stored raw).
fn stored_chunk(array: &StoredArray) -> (u64, bool, Option<f64>) {
    let chunk_bytes = array.layout.chunk_bytes(array.elem);
    match array.codec {
        ChunkCodec::Raw { crc } => (chunk_bytes + 4 * crc as u64, crc, None),
        ChunkCodec::Compressed { ratio, decode, crc } => (
            (chunk_bytes as f64 / ratio.max(1e-3)).ceil() as u64 + 4 * crc as u64,
            crc,
            Some(decode),
        ),
    }
}

/// A floor under the cold time [`predict`] gives, without walking the
/// chunks: the window's whole chunks, as stored, at the device's best rate
/// (a read that takes whole chunks requests at least those bytes; the
/// other terms of its time are not negative). 0 for a read that takes
/// parts of chunks.
pub fn cold_floor(
    array: &StoredArray,
    window: &Window,
    setup: &ReadSetup,
    profile: &DeviceProfile,
) -> f64 {
    let (stored, _, decode_rate) = stored_chunk(array);
    if decode_rate.is_none() && !setup.verify {
        return 0.0;
    }
    let cps: Vec<u64> = (array.layout.shard.iter().zip(&array.layout.inner))
        .map(|(s, c)| s / c)
        .collect();
    let chunks = TaskOrder::new(&array.shape, window, &array.layout.inner, &cps).n_tasks();
    // Interpolated rates never pass the table's best, up to rounding.
    chunks as f64 * stored as f64 / profile.io.sequential_rate().max(1.0) * (1.0 - 1e-9)
}

/// Predict the time to read `window` of `array`.
pub fn predict(
    array: &StoredArray,
    window: &Window,
    setup: &ReadSetup,
    cache: Cache,
    profile: &DeviceProfile,
) -> Prediction {
    walk(array, window, setup, profile).finish(cache, setup, profile)
}

/// Predict warm and cold reads of `window` at once (one walk over the chunks).
pub fn predict_both(
    array: &StoredArray,
    window: &Window,
    setup: &ReadSetup,
    profile: &DeviceProfile,
) -> (Prediction, Prediction) {
    let w = walk(array, window, setup, profile);
    (
        w.finish(Cache::Warm, setup, profile),
        w.finish(Cache::Cold, setup, profile),
    )
}

/// The work of a read, before the cache state decides how it overlaps.
struct Walk {
    counts: Prediction,
    /// Requests for chunks, after each shard's index is read.
    request_sizes: Vec<u64>,
    /// Shards read whole: requested at open, index and chunks at once.
    whole_sizes: Vec<u64>,
    index_bytes: u64,
    /// CPU time over all chunks, warm, streaming memory (contiguous copies,
    /// fresh output pages): at rates the profile measured with every thread
    /// busy.
    cpu_memory: f64,
    /// The bytes checked in all, and the checked chunks that start away
    /// from the last one: a warm read finds as much of them in the CPU's
    /// caches as they keep of that many; a cold one finds them in memory.
    checked_bytes: u64,
    chunk_starts: usize,
    /// Bytes of each checked chunk: larger chunks cost more to start.
    checked_chunk: u64,
    /// CPU time over all chunks, warm, in the engine's per-chunk, per-run
    /// and per-element steps and in decoding: at one thread's rates.
    cpu_steps: f64,
    /// Worker threads that get a piece.
    busy: f64,
    /// The read runs on the calling thread alone.
    serial: bool,
}

fn walk(array: &StoredArray, window: &Window, setup: &ReadSetup, profile: &DeviceProfile) -> Walk {
    let nd = array.shape.len();
    let elem = array.elem as u64;
    let inner = &array.layout.inner;
    let cps: Vec<u64> = array
        .layout
        .shard
        .iter()
        .zip(inner)
        .map(|(s, c)| s / c)
        .collect();
    let order = TaskOrder::new(&array.shape, window, inner, &cps);
    let n_tasks = order.n_tasks();
    let mut prediction = Prediction {
        chunks: n_tasks,
        output_bytes: window.num_elements() * elem,
        ..Default::default()
    };
    let index_bytes = cps.iter().product::<u64>() * 16 + 4;
    if n_tasks == 0 {
        return Walk {
            counts: prediction,
            request_sizes: Vec::new(),
            whole_sizes: Vec::new(),
            index_bytes,
            cpu_memory: 0.0,
            chunk_starts: 0,
            checked_bytes: 0,
            checked_chunk: 0,
            cpu_steps: 0.0,
            busy: 1.0,
            serial: true,
        };
    }
    prediction.shards = order.n_shards();

    let chunk_bytes = array.layout.chunk_bytes(array.elem);
    let (stored_chunk, crc, decode_rate) = stored_chunk(array);
    let partial = decode_rate.is_none() && !setup.verify;
    // Shards the window mostly covers are read whole, as the reader does.
    let whole: Vec<bool> = (0..order.n_shards())
        .map(|slot| order.covers_most_of(slot))
        .collect();
    let whole_sizes: Vec<u64> = (0..order.n_shards())
        .filter(|&slot| whole[slot as usize])
        .map(|slot| order.chunks_held(slot) * stored_chunk + index_bytes)
        .collect();
    let mut chunk_strides = vec![1u64; nd];
    for d in (0..nd.saturating_sub(1)).rev() {
        chunk_strides[d] = chunk_strides[d + 1] * inner[d + 1];
    }
    let steps: Vec<u64> = window.dims.iter().map(|r| r.step).collect();
    let out_strides = strides(&window.shape());

    let threads = setup.threads.max(1) as u64;
    // Requests are merged within a worker's run of chunks, cut as a cold read cuts them.
    let piece = n_tasks.div_ceil(threads * pieces_per_thread(false)).max(1);
    let warm_piece = n_tasks.div_ceil(threads * pieces_per_thread(true)).max(1);
    let engine = &profile.engine;
    let memory = &profile.memory;
    let (mut cpu_memory, mut cpu_steps, mut chunk_starts) = (0.0, 0.0, 0);
    let mut fault_bytes = 0u64;
    let checked = crc && setup.verify;
    // A chunk checked or decoded whole is in the CPU's caches when its
    // elements are copied out, if it is not too big to stay there.
    let cached =
        (checked || decode_rate.is_some()) && chunk_bytes.max(stored_chunk) <= CACHED_CHUNK_BYTES;
    let strided_cached = engine.strided_element_cached.filter(|_| cached);
    // Runs copied whole come out of the caches too, into an output a
    // previous read left mapped (unless it is too big to reuse).
    let contiguous_rate = match memory.copy_from_cache {
        Some(rate) if cached && prediction.output_bytes <= FRESH_OUTPUT_BYTES => rate,
        _ => memory.copy,
    };
    // Where the last chunk this worker checked ends: (shard, byte).
    let mut checked_end: Option<(u64, u64)> = None;
    let mut requests = Requests::default();
    let copy = CopyCosts {
        chunk_strides: &chunk_strides,
        steps: &steps,
        out_strides: &out_strides,
        elem,
        engine,
        contiguous_rate,
        strided_cached,
    };

    // Walk the tasks in the read path's order.
    let mut tasks = order.tasks(0..n_tasks);
    while let Some((t, task)) = tasks.advance() {
        if t.is_multiple_of(piece) {
            requests.cut();
        }
        let spans = &task.spans[..nd];
        let shard_id = task.slot as u64;
        let inner_pos = task.inner as u64;
        let mut lo = 0u64;
        let mut hi = 0u64;
        let mut selected = 1u64;
        for d in 0..nd {
            let s = &spans[d];
            lo += s.first * chunk_strides[d];
            hi += (s.first + (s.count - 1) * steps[d]) * chunk_strides[d];
            selected *= s.count;
        }
        let start = inner_pos * stored_chunk;
        let (offset, len) = if partial {
            (start + lo * elem, (hi - lo + 1) * elem)
        } else {
            (start, stored_chunk)
        };
        fault_bytes += len;
        // A chunk of a shard read whole was requested with it, at open.
        if !whole[task.slot] {
            requests.add(shard_id, offset, len);
        }

        // CPU work for this chunk.
        cpu_steps += engine.task;
        if checked {
            if t.is_multiple_of(warm_piece) || checked_end != Some((shard_id, start)) {
                chunk_starts += 1;
            }
            checked_end = Some((shard_id, start + stored_chunk));
        }
        if let Some(rate) = decode_rate {
            cpu_steps += chunk_bytes as f64 / rate;
        }
        let (steps_of_copy, memory_of_copy) = copy.of(spans, selected);
        cpu_steps += steps_of_copy;
        cpu_memory += memory_of_copy;
    }
    let request_sizes = requests.finish();
    prediction.touched_bytes = fault_bytes;
    prediction.device_bytes = request_sizes.iter().chain(&whole_sizes).sum();
    prediction.requests = (request_sizes.len() + whole_sizes.len()) as u64;

    // The output is a fresh array. Up to glibc's largest dynamic mmap
    // threshold, the memory a previous read's output freed is reused, already
    // mapped; beyond it, each read maps fresh pages, faulted in and zeroed as
    // the workers first write them.
    if prediction.output_bytes > FRESH_OUTPUT_BYTES {
        cpu_memory += prediction.output_bytes as f64 / memory.first_write;
    }
    // Workers share the pieces; a read of fewer pieces than threads uses
    // fewer, and a small read, or any read with one thread, stays on the
    // calling thread.
    let work = if partial {
        prediction.output_bytes
    } else {
        n_tasks * chunk_bytes
    };
    let serial = work <= SERIAL_BYTES || threads <= 1;
    let busy = if serial {
        1.0
    } else {
        threads.min(n_tasks.div_ceil(warm_piece)) as f64
    };
    Walk {
        counts: prediction,
        request_sizes,
        whole_sizes,
        index_bytes,
        cpu_memory,
        chunk_starts,
        checked_bytes: if checked { n_tasks * stored_chunk } else { 0 },
        checked_chunk: stored_chunk,
        cpu_steps,
        busy,
        serial,
    }
}

/// What copying a chunk's selected elements out costs, as the copy does it.
struct CopyCosts<'a> {
    chunk_strides: &'a [u64],
    steps: &'a [u64],
    out_strides: &'a [u64; MAX_DIMS],
    elem: u64,
    engine: &'a EngineCosts,
    /// Bytes/s of runs copied whole.
    contiguous_rate: f64,
    /// Seconds per strided element when the chunk is in the caches.
    strided_cached: Option<f64>,
}

impl CopyCosts<'_> {
    /// (CPU seconds, memory seconds) of copying `selected` elements laid out by `spans`.
    fn of(&self, spans: &[ChunkSpan], selected: u64) -> (f64, f64) {
        let nd = spans.len();
        let (chunk_strides, steps, out_strides, elem, engine) = (
            self.chunk_strides,
            self.steps,
            self.out_strides,
            self.elem,
            self.engine,
        );
        let inner_dim = (0..nd)
            .rev()
            .find(|&d| spans[d].count > 1)
            .unwrap_or(nd - 1);
        let run_len = spans[inner_dim].count;
        let runs = selected / run_len;
        // As the copy decides: a run is one memcpy when its elements are
        // neighbours in both the chunk and the output (in a time slice
        // through chunks one sample deep, along the crosslines).
        let contiguous =
            chunk_strides[inner_dim] * steps[inner_dim] == 1 && out_strides[inner_dim] == 1;
        let run_steps = runs as f64 * engine.run;
        if contiguous {
            return (run_steps, (selected * elem) as f64 / self.contiguous_rate);
        }
        // Each element is read `stride` elements from the last in the chunk
        // (unless the chunk is in the caches) and written `out_strides` from
        // the last in the output: across the output's rows, a new page every
        // few elements.
        let stride = chunk_strides[inner_dim] * steps[inner_dim];
        let gather = self
            .strided_cached
            .unwrap_or_else(|| engine.strided(stride * elem));
        let scatter = if out_strides[inner_dim] > 1 {
            engine.scattered(out_strides[inner_dim] * elem)
        } else {
            0.0
        };
        (run_steps + selected as f64 * (gather + scatter), 0.0)
    }
}

/// Wall time of work that takes `alone` seconds on the calling thread and
/// `together` once the helpers work beside it, when they arrive after
/// `arrival` seconds (see `crate::share`): the caller's head start counts
/// for its share of the work.
fn with_helpers(alone: f64, together: f64, arrival: f64) -> f64 {
    if alone <= arrival {
        alone
    } else {
        arrival + (1.0 - arrival / alone) * together
    }
}

impl Walk {
    /// CPU time (over all threads) of the chunks' checksums: warm at the
    /// rates measured over a working set of the bytes checked, cold at
    /// memory's; each chunk started away from the last at the cost measured
    /// for 8 KiB chunks, scaled to its size.
    fn check_seconds(&self, memory: &MemoryRates, cache: Cache) -> f64 {
        let (rate, start) = match cache {
            Cache::Warm => (
                memory.crc_within(self.checked_bytes),
                memory.chunk_start_within(self.checked_bytes),
            ),
            Cache::Cold => (memory.crc, memory.crc_chunk_start),
        };
        let start = start * memory.chunk_start_scale(self.checked_chunk);
        self.checked_bytes as f64 / rate + self.chunk_starts as f64 * start
    }

    fn finish(&self, cache: Cache, setup: &ReadSetup, profile: &DeviceProfile) -> Prediction {
        let mut p = self.counts.clone();
        let engine = &profile.engine;
        if p.chunks == 0 {
            p.seconds = engine.call;
            return p;
        }
        // Threads working at once. Memory rates were measured with all of
        // them busy; the engine's steps on one thread, so together they
        // speed up by the measured efficiency only.
        let busy = self.busy;
        let efficiency = if busy > 1.0 {
            engine.parallel_efficiency.clamp(0.25, 1.0)
        } else {
            1.0
        };
        // The calling thread works alone until the helpers arrive.
        let arrival = if self.serial {
            0.0
        } else {
            engine.helper_arrival
        };
        let wall = |memory: f64| {
            let alone = memory + self.cpu_steps;
            with_helpers(
                alone,
                (memory + self.cpu_steps / efficiency) / busy,
                arrival,
            )
        };
        match cache {
            Cache::Warm => {
                let memory = self.cpu_memory + self.check_seconds(&profile.memory, cache);
                p.cpu_seconds = memory + self.cpu_steps;
                p.seconds = engine.call + wall(memory);
            }
            Cache::Cold => {
                // Shards are opened in parallel first: map, read and check each index.
                let threads = if self.serial {
                    1
                } else {
                    setup.threads.max(1) as u64
                };
                let open_depth = p.shards.min(threads) as f64;
                let index = self.index_bytes.max(4096) as f64;
                let index_time = index / profile.io.cold_rate(index, open_depth) * open_depth;
                // A shard read whole does not wait for its index alone: the
                // index comes in with the chunks.
                let n_whole = self.whole_sizes.len() as f64;
                // Several shards are opened by the caller and the helpers.
                let open_alone =
                    p.shards as f64 * engine.shard_open + (p.shards as f64 - n_whole) * index_time;
                let open_time = with_helpers(open_alone, open_alone / open_depth, arrival);
                // Each worker keeps ceil(in_flight / threads) requests outstanding.
                let outstanding = setup.in_flight.div_ceil(threads as usize).max(1) as u64;
                let depth = (outstanding * busy as u64)
                    .min(self.request_sizes.len() as u64)
                    .max(1) as f64;
                let mut io = seconds_of(&self.request_sizes, |s| profile.io.cold_rate(s, depth));
                // Whole shards are all requested as they are opened.
                let whole_depth = n_whole.min(setup.in_flight.max(1) as f64).max(1.0);
                io += seconds_of(&self.whole_sizes, |s| profile.io.cold_rate(s, whole_depth));
                // The first request for chunks must arrive before any copying
                // starts (whole shards' requests left at open).
                let startup = self.request_sizes.first().map_or(0.0, |&first| {
                    first as f64 / profile.io.cold_rate(first as f64, 1.0)
                });
                let memory = self.cpu_memory
                    + self.check_seconds(&profile.memory, cache)
                    + p.touched_bytes as f64 / profile.memory.fault;
                let cpu = memory + self.cpu_steps;
                p.io_seconds = io;
                p.cpu_seconds = cpu;
                // The helpers' requests go out when they arrive.
                p.seconds = engine.call + open_time + startup + (arrival + io).max(wall(memory));
            }
        }
        p
    }
}

/// Seconds to move requests of `sizes` bytes each at `rate(size)` bytes/s.
/// Most requests of a read are the size of the one before: its rate (an
/// interpolation in logarithms, a fifth of the planner's time) is reused.
fn seconds_of(sizes: &[u64], rate: impl Fn(f64) -> f64) -> f64 {
    let mut last: Option<(u64, f64)> = None;
    sizes
        .iter()
        .map(|&s| {
            let r = match last {
                Some((size, r)) if size == s => r,
                _ => rate(s as f64),
            };
            last = Some((s, r));
            s as f64 / r
        })
        .sum()
}

mod requests;
#[cfg(test)]
mod tests;
