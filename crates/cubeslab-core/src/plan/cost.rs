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
    profile::{DeviceProfile, MemoryRates},
};
use crate::{
    store::{pieces_per_thread, TaskOrder, COALESCE_GAP, MAX_REQUEST, SERIAL_BYTES},
    window::{strides, Window},
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

    let chunk_elems: u64 = inner.iter().product();
    let chunk_bytes = chunk_elems * elem;
    let (stored_chunk, crc, decode_rate) = match array.codec {
        ChunkCodec::Raw { crc } => (chunk_bytes + 4 * crc as u64, crc, None),
        ChunkCodec::Compressed { ratio, decode, crc } => (
            (chunk_bytes as f64 / ratio.max(1e-3)).ceil() as u64 + 4 * crc as u64,
            crc,
            Some(decode),
        ),
    };
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
    let mut request_sizes: Vec<u64> = Vec::new();
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
    // The open request of the current piece: (shard id, start, length).
    let mut open: Option<(u64, u64, u64)> = None;

    // Walk the tasks in the read path's order.
    let mut tasks = order.tasks(0..n_tasks);
    while let Some((t, task)) = tasks.advance() {
        if t.is_multiple_of(piece) {
            if let Some((_, _, len)) = open.take() {
                request_sizes.push(len);
            }
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
        if whole[task.slot] {
            // Requested with its shard at open: no request of its own.
        } else {
            // Merge into the open request exactly as the prefetcher does.
            open = match open.take() {
                Some((id, o, l))
                    if id == shard_id
                        && offset >= o
                        && offset <= o + l + COALESCE_GAP
                        && l < MAX_REQUEST =>
                {
                    Some((id, o, l.max(offset + len - o)))
                }
                Some((_, _, l)) => {
                    request_sizes.push(l);
                    Some((shard_id, offset, len))
                }
                None => Some((shard_id, offset, len)),
            };
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
        cpu_steps += runs as f64 * engine.run;
        if contiguous {
            cpu_memory += (selected * elem) as f64 / contiguous_rate;
        } else {
            // Each element is read `stride` elements from the last in the
            // chunk (unless the chunk is in the caches) and written
            // `out_strides` from the last in the output: across the output's
            // rows, a new page every few elements.
            let stride = chunk_strides[inner_dim] * steps[inner_dim];
            let gather = strided_cached.unwrap_or_else(|| engine.strided(stride * elem));
            let scatter = if out_strides[inner_dim] > 1 {
                engine.scattered(out_strides[inner_dim] * elem)
            } else {
                0.0
            };
            cpu_steps += selected as f64 * (gather + scatter);
        }
    }
    if let Some((_, _, len)) = open.take() {
        request_sizes.push(len);
    }
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
                let mut io: f64 = self
                    .request_sizes
                    .iter()
                    .map(|&s| s as f64 / profile.io.cold_rate(s as f64, depth))
                    .sum();
                // Whole shards are all requested as they are opened.
                let whole_depth = n_whole.min(setup.in_flight.max(1) as f64).max(1.0);
                io += self
                    .whole_sizes
                    .iter()
                    .map(|&s| s as f64 / profile.io.cold_rate(s as f64, whole_depth))
                    .sum::<f64>();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{
        access::Access,
        profile::{EngineCosts, WorkingSet},
    };
    use crate::window::DimRange;

    fn array(inner: [u64; 3], shard: [u64; 3]) -> StoredArray {
        StoredArray {
            shape: vec![600, 800, 1000],
            elem: 4,
            layout: Layout {
                inner: inner.to_vec(),
                shard: shard.to_vec(),
            },
            codec: ChunkCodec::Raw { crc: true },
        }
    }

    const SETUP: ReadSetup = ReadSetup {
        threads: 2,
        in_flight: 32,
        verify: true,
    };

    #[test]
    fn counts_follow_the_layout() {
        let a = array([16, 16, 16], [128, 128, 256]);
        let p = DeviceProfile::typical();
        let inline = Access::Plane(0).window(&a.shape);
        let pred = predict(&a, &inline, &SETUP, Cache::Cold, &p);
        // 50 x 63 chunks of 16 KiB (+ crc), in 7 x 4 shards.
        assert_eq!(pred.chunks, 50 * 63);
        assert_eq!(pred.shards, 7 * 4);
        assert_eq!(pred.touched_bytes, 50 * 63 * (16384 + 4));
        assert_eq!(pred.output_bytes, 800 * 1000 * 4);
        // An inline's chunks sit in runs along the samples inside a shard:
        // one request per (shard, crossline chunk) and piece boundary at most.
        assert!(pred.requests <= 50 * 4 + 8, "{}", pred.requests);
        assert!(pred.device_bytes >= pred.touched_bytes);
        let warm = predict(&a, &inline, &SETUP, Cache::Warm, &p);
        assert!(warm.seconds < pred.seconds);
    }

    #[test]
    fn time_is_monotone_in_work() {
        // Twice the chunk depth along the inline axis: twice the bytes to
        // check for an inline, so a slower verified warm read.
        let p = DeviceProfile::typical();
        let thin = array([8, 16, 16], [128, 128, 256]);
        let thick = array([16, 16, 16], [128, 128, 256]);
        let w = Access::Plane(0).window(&thin.shape);
        let t_thin = predict(&thin, &w, &SETUP, Cache::Warm, &p).seconds;
        let t_thick = predict(&thick, &w, &SETUP, Cache::Warm, &p).seconds;
        assert!(t_thick > 1.3 * t_thin, "{t_thin} {t_thick}");
        // Unverified raw reads only the selected span of each chunk.
        let setup = ReadSetup {
            verify: false,
            ..SETUP
        };
        let unverified = predict(&thick, &w, &setup, Cache::Cold, &p);
        // Per chunk: 16 rows of the selected crossline plane, from the first
        // element of the first row to the last of the last (15 * 16 + k
        // elements for k samples: 16, or 8 in the last chunk of 1000).
        assert_eq!(unverified.touched_bytes, 50 * (62 * 256 + 248) * 4);
        // More threads never predict slower.
        let one = ReadSetup {
            threads: 1,
            ..SETUP
        };
        assert!(
            predict(&thick, &w, &one, Cache::Warm, &p).seconds
                >= predict(&thick, &w, &SETUP, Cache::Warm, &p).seconds
        );
    }

    #[test]
    fn a_shard_the_read_covers_is_read_whole_in_one_request() {
        let p = DeviceProfile::typical();
        let w = Access::Plane(0).window(&[600, 800, 1000]);
        // One inline per shard, in two chunks: the shard file is the request.
        let fitted = array([1, 400, 1000], [1, 800, 1000]);
        let one = predict(&fitted, &w, &SETUP, Cache::Cold, &p);
        assert_eq!((one.shards, one.requests), (1, 1));
        assert_eq!(one.device_bytes, 2 * (400 * 1000 * 4 + 4) + 2 * 16 + 4);
        // Four inlines per shard: the inline is a quarter of its shard, so
        // the index is read first and the chunks after it.
        let thick = array([1, 400, 1000], [4, 800, 1000]);
        let apart = predict(&thick, &w, &SETUP, Cache::Cold, &p);
        assert_eq!(apart.device_bytes, 2 * (400 * 1000 * 4 + 4));
        assert!(apart.seconds > one.seconds, "{apart:?} {one:?}");
    }

    #[test]
    fn threads_speed_up_by_their_measured_efficiency() {
        let mut p = DeviceProfile::typical();
        p.engine.helper_arrival = 0.0;
        let a = array([16, 16, 16], [128, 128, 256]);
        let w = Access::Plane(2).window(&a.shape);
        let speedup = |p: &DeviceProfile, verify: bool| {
            let time = |threads| {
                let setup = ReadSetup {
                    threads,
                    verify,
                    ..SETUP
                };
                // Helpers that arrive at once: the scaling alone.
                predict(&a, &w, &setup, Cache::Warm, p).seconds - p.engine.call
            };
            time(1) / time(2)
        };
        p.engine.parallel_efficiency = 1.0;
        assert!((speedup(&p, false) - 2.0).abs() < 1e-9);
        assert!((speedup(&p, true) - 2.0).abs() < 1e-9);
        // An unverified time slice through chunks 16 deep is engine steps
        // only (per chunk, run and strided element): they scale by the
        // efficiency. Checksums run at memory rates measured with every
        // thread busy, so a verified read scales better.
        p.engine.parallel_efficiency = 0.6;
        assert!(
            (speedup(&p, false) - 1.2).abs() < 1e-9,
            "{}",
            speedup(&p, false)
        );
        let verified = speedup(&p, true);
        assert!(verified > 1.3 && verified < 2.0, "{verified}");
        // A profile saved before the efficiency was measured reads as perfect scaling.
        let mut old = serde_json::to_value(&p).unwrap();
        old["engine"]
            .as_object_mut()
            .unwrap()
            .remove("parallel_efficiency");
        let old = DeviceProfile::from_json(&old.to_string()).unwrap();
        assert_eq!(old.engine.parallel_efficiency, 1.0);
    }

    #[test]
    fn the_caller_works_alone_until_the_helpers_arrive() {
        let mut p = DeviceProfile::typical();
        let a = array([16, 16, 16], [128, 128, 256]);
        let w = Access::Plane(0).window(&a.shape);
        let time = |p: &DeviceProfile, threads| {
            let setup = ReadSetup { threads, ..SETUP };
            predict(&a, &w, &setup, Cache::Warm, p).seconds
        };
        // Helpers that come after the work is done leave it to the caller:
        // as on one thread (but for where the workers' runs would start).
        p.engine.helper_arrival = 1.0;
        let alone = time(&p, 2);
        let one_thread = time(&p, 1);
        assert!(
            (alone - one_thread).abs() < 1e-3 * one_thread,
            "{alone} {one_thread}"
        );
        p.engine.helper_arrival = 0.0;
        let at_once = time(&p, 2);
        assert!(at_once < 0.7 * alone, "{at_once} {alone}");
        // A helper arriving a quarter of the way through shares the rest.
        p.engine.helper_arrival = 0.25 * (alone - p.engine.call);
        let late = time(&p, 2);
        let expected = p.engine.helper_arrival + 0.75 * (at_once - p.engine.call) + p.engine.call;
        assert!((late - expected).abs() < 1e-12, "{late} {expected}");
    }

    /// CPU work of an unverified warm time slice through chunks 16 x 16 x `depth`.
    fn time_slice_cpu(p: &DeviceProfile, depth: u64) -> f64 {
        let setup = ReadSetup {
            verify: false,
            ..SETUP
        };
        let a = array([16, 16, depth], [128, 128, 256]);
        let w = Access::Plane(2).window(&a.shape);
        predict(&a, &w, &setup, Cache::Warm, p).cpu_seconds
    }

    #[test]
    fn runs_neighbouring_in_chunk_and_output_are_one_copy() {
        // A time slice through chunks one sample deep copies rows of
        // neighbours; through chunks 16 deep, every 16th element.
        let p = DeviceProfile::typical();
        let cpu = |depth| time_slice_cpu(&p, depth);
        let elements = 600.0 * 800.0;
        // Elements 64 bytes apart: a cache line each.
        let gap = elements * (p.engine.strided(64) - 4.0 / p.memory.copy);
        assert!(gap > 0.0);
        assert!(
            (cpu(16) - cpu(1) - gap).abs() < 0.01 * gap,
            "{} {}",
            cpu(1),
            cpu(16)
        );
    }

    #[test]
    fn runs_of_checked_chunks_copy_at_the_rate_out_of_the_caches() {
        // Warm CPU time of `window` through `inner` chunks, checked, with
        // and without a rate for copies out of the caches.
        let extra = |inner: [u64; 3], window: &Window| {
            let mut p = DeviceProfile::typical();
            let a = array(inner, [128, 128, inner[2] * 12]);
            let with = predict(&a, window, &SETUP, Cache::Warm, &p).cpu_seconds;
            p.memory.copy_from_cache = None;
            predict(&a, window, &SETUP, Cache::Warm, &p).cpu_seconds - with
        };
        let p = DeviceProfile::typical();
        let per_byte = 1.0 / p.memory.copy - 1.0 / p.memory.copy_from_cache.unwrap();
        // A time slice through chunks one sample deep: rows of 16 neighbours.
        let slice = Access::Plane(2).window(&[600, 800, 1000]);
        let bytes = 600.0 * 800.0 * 4.0;
        let got = extra([16, 16, 1], &slice);
        assert!((got / (bytes * per_byte) - 1.0).abs() < 1e-9, "{got}");
        // 20 samples of every trace: 38 MB, too big an output to be reused.
        let slab = Window {
            dims: vec![
                DimRange::new(0, 600),
                DimRange::new(0, 800),
                DimRange::new(0, 20),
            ],
        };
        assert_eq!(extra([16, 16, 20], &slab), 0.0);
    }

    #[test]
    fn elements_sharing_cache_lines_copy_faster() {
        let p = DeviceProfile::typical();
        let steps_of = |depth| time_slice_cpu(&p, depth);
        // The same elements, runs and chunks; 8-byte strides against 64-byte ones.
        let elements = 600.0 * 800.0;
        let dense = p.engine.strided_element_dense.unwrap();
        let expected = elements * (p.engine.strided_element - dense);
        let got = steps_of(16) - steps_of(2);
        assert!((got - expected).abs() < 0.01 * expected, "{got} {expected}");
        assert!((p.engine.strided(4) - dense).abs() < 1e-15);
        assert!((p.engine.strided(640) - p.engine.strided_element).abs() < 1e-15);
        let old = EngineCosts {
            strided_element_dense: None,
            ..p.engine.clone()
        };
        assert_eq!(old.strided(8), old.strided_element);
    }

    /// Working sets of `(MiB, chunk start)`, all checked at 20 GB/s.
    fn sets(points: &[(u64, f64)]) -> Vec<WorkingSet> {
        points
            .iter()
            .map(|&(mib, chunk_start)| WorkingSet {
                bytes: mib << 20,
                crc: 20e9,
                chunk_start,
            })
            .collect()
    }

    #[test]
    fn warm_checks_run_at_the_working_sets_rate_and_cold_ones_at_memorys() {
        let mut p = DeviceProfile::typical();
        let a = array([16, 16, 16], [16, 800, 1008]);
        // A time slice checks 1900 chunks of 16 KiB and a crc: 31 MB, between
        // working sets of 16 and 64 MiB checked at 40 and 10 GB/s.
        let w = Access::Plane(2).window(&a.shape);
        let checked = 1900.0 * 16388.0;
        p.memory.crc = 5e9;
        p.memory.crc_within = sets(&[(16, 0.0), (64, 0.0)]);
        p.memory.crc_within[0].crc = 40e9;
        p.memory.crc_within[1].crc = 10e9;
        // Halving every rate adds the checked bytes once more at that rate.
        let added = |p: &DeviceProfile, cache: Cache| {
            let mut slower = p.clone();
            slower.memory.crc /= 2.0;
            for s in &mut slower.memory.crc_within {
                s.crc /= 2.0;
            }
            predict(&a, &w, &SETUP, cache, &slower).cpu_seconds
                - predict(&a, &w, &SETUP, cache, p).cpu_seconds
        };
        let f = (checked / (16u64 << 20) as f64).ln() / 4f64.ln();
        let per_byte = 1.0 / 40e9 + (1.0 / 10e9 - 1.0 / 40e9) * f;
        let warm = added(&p, Cache::Warm);
        assert!((warm / (checked * per_byte) - 1.0).abs() < 1e-9, "{warm}");
        let cold = added(&p, Cache::Cold);
        assert!((cold / (checked / 5e9) - 1.0).abs() < 1e-9, "{cold}");
        // Without a curve, warm checks run at memory's rate too.
        p.memory.crc_within.clear();
        assert!((added(&p, Cache::Warm) / (checked / 5e9) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_checked_chunk_away_from_the_last_one_costs_a_start() {
        let mut p = DeviceProfile::typical();
        let a = array([16, 16, 16], [16, 800, 1008]);
        // Warm CPU time of `plane` over the profile without, and with, a
        // cost per chunk start: 1 us from memory (no curve measured).
        p.memory.crc_within.clear();
        let extra = |p: &mut DeviceProfile, plane: usize| {
            let w = Access::Plane(plane).window(&a.shape);
            let (start, curve) = (p.memory.crc_chunk_start, p.memory.crc_within.clone());
            p.memory.crc_chunk_start = 0.0;
            p.memory.crc_within = curve
                .iter()
                .map(|s| WorkingSet {
                    chunk_start: 0.0,
                    ..*s
                })
                .collect();
            let without = predict(&a, &w, &SETUP, Cache::Warm, p).cpu_seconds;
            (p.memory.crc_chunk_start, p.memory.crc_within) = (start, curve);
            predict(&a, &w, &SETUP, Cache::Warm, p).cpu_seconds - without
        };
        p.memory.crc_chunk_start = 1e-6;
        // An inline's 50 x 63 chunks lie end to end in one shard: a start
        // only where each of the 2 threads' 4 pieces begins.
        let inline = extra(&mut p, 0);
        assert!((inline - 8e-6).abs() < 1e-12, "{inline}");
        // A time slice takes every 63rd chunk of 38 shards: each is a start.
        let time = extra(&mut p, 2);
        assert!((time - 38.0 * 50.0 * 1e-6).abs() < 1e-12, "{time}");
        // Its 1900 chunks of 16 KiB and a crc (31 MB), repeated warm, start as fast as
        // the measured curve says at 31 MB: between its points at 16 and 64
        // MiB, log-linearly; past its end, as from memory. Cold, the chunks
        // always start in memory.
        p.memory.crc_within = sets(&[(1, 0.1e-6), (16, 0.2e-6), (64, 0.6e-6)]);
        let checked = 1900.0 * 16388.0 / (16u64 << 20) as f64;
        let at = 0.2e-6 + 0.4e-6 * checked.ln() / 4f64.ln();
        let warm = extra(&mut p, 2);
        assert!((warm - 1900.0 * at).abs() < 1e-12, "{warm} {at}");
        p.memory.crc_within = sets(&[(1, 0.1e-6), (16, 0.2e-6)]);
        assert!((extra(&mut p, 2) - time).abs() < 1e-12);
        let w = Access::Plane(2).window(&a.shape);
        let cold = |p: &mut DeviceProfile, start| {
            p.memory.crc_chunk_start = start;
            predict(&a, &w, &SETUP, Cache::Cold, p).cpu_seconds
        };
        let cold_extra = cold(&mut p, 1e-6) - cold(&mut p, 0.0);
        assert!((cold_extra - time).abs() < 1e-12, "{cold_extra}");
        p.memory.crc_chunk_start = 1e-6;
        // Unchecked, no chunk is streamed through whole.
        let setup = ReadSetup {
            verify: false,
            ..SETUP
        };
        let w = Access::Plane(2).window(&a.shape);
        let unchecked = predict(&a, &w, &setup, Cache::Warm, &p).cpu_seconds;
        p.memory.crc_chunk_start = 0.0;
        assert_eq!(
            unchecked,
            predict(&a, &w, &setup, Cache::Warm, &p).cpu_seconds
        );
    }

    #[test]
    fn a_larger_chunk_costs_more_to_start_as_the_profile_measured() {
        use crate::plan::profile::ChunkStart;
        let mut p = DeviceProfile::typical();
        p.memory.crc_within.clear();
        p.memory.crc_chunk_start = 0.5e-6;
        let starts = |p: &DeviceProfile, inner: [u64; 3]| {
            // One chunk a shard: every chunk checked starts away from the last.
            let a = array(inner, inner);
            let w = Access::Plane(2).window(&a.shape);
            let mut none = p.clone();
            none.memory.crc_chunk_start = 0.0;
            let extra = predict(&a, &w, &SETUP, Cache::Warm, p).cpu_seconds
                - predict(&a, &w, &SETUP, Cache::Warm, &none).cpu_seconds;
            let chunks = predict(&a, &w, &SETUP, Cache::Warm, p).chunks as f64;
            extra / chunks
        };
        // Without sizes measured, every chunk's start costs the 8 KiB one's.
        let (small, large) = ([8, 8, 16], [16, 16, 64]);
        assert!((starts(&p, small) - 0.5e-6).abs() < 1e-15);
        assert!((starts(&p, large) - 0.5e-6).abs() < 1e-15);
        // Measured at 4 and 128 KiB: a 64 KiB chunk (and its crc) lies
        // between 8 and 128 KiB, log-linearly; past the sizes, the nearest.
        p.memory.crc_chunk_start_by_size = vec![
            ChunkStart {
                bytes: 4 << 10,
                seconds: 0.25e-6,
            },
            ChunkStart {
                bytes: 128 << 10,
                seconds: 2.5e-6,
            },
        ];
        let bytes: f64 = (16 * 16 * 64 * 4 + 4) as f64;
        let f = (bytes / 8192.0).ln() / 16f64.ln();
        let expected = 0.5e-6 + 2.0e-6 * f;
        let got = starts(&p, large);
        assert!((got - expected).abs() < 1e-12, "{got} {expected}");
        let huge = starts(&p, [64, 64, 64]);
        assert!((huge - 2.5e-6).abs() < 1e-12, "{huge}");
        // Profiles older than the sizes read as before.
        let old: MemoryRates = serde_json::from_value({
            let mut v = serde_json::to_value(&p.memory).unwrap();
            v.as_object_mut().unwrap().remove("crc_chunk_start_by_size");
            v
        })
        .unwrap();
        assert_eq!(old.chunk_start_scale(1 << 20), 1.0);
    }

    #[test]
    fn elements_of_a_checked_chunk_are_gathered_from_cache() {
        let p = DeviceProfile::typical();
        let cached = p.engine.strided_element_cached.unwrap();
        let w = Access::Plane(2).window(&[600, 800, 1000]);
        let cpu = |a: &StoredArray, p: &DeviceProfile, verify: bool| {
            let setup = ReadSetup { verify, ..SETUP };
            predict(a, &w, &setup, Cache::Warm, p).cpu_seconds
        };
        // A time slice of 600 x 800 elements, each 64 bytes from the next.
        let small = array([16, 16, 16], [128, 128, 256]);
        let without = EngineCosts {
            strided_element_cached: None,
            ..p.engine.clone()
        };
        let old = DeviceProfile {
            engine: without,
            ..p.clone()
        };
        let saved = cpu(&small, &old, true) - cpu(&small, &p, true);
        let expected = 600.0 * 800.0 * (p.engine.strided(64) - cached);
        assert!(
            (saved - expected).abs() < 1e-3 * expected,
            "{saved} {expected}"
        );
        // Unchecked, the copy meets the chunk in memory.
        assert_eq!(cpu(&small, &old, false), cpu(&small, &p, false));
        // A chunk too big to stay in the caches: as before.
        let big = array([128, 128, 32], [128, 128, 256]);
        assert!(big.layout.inner.iter().product::<u64>() * 4 > CACHED_CHUNK_BYTES);
        assert_eq!(cpu(&big, &old, true), cpu(&big, &p, true));
    }

    #[test]
    fn elements_written_across_the_outputs_rows_pay_for_new_pages() {
        let p = DeviceProfile::typical();
        let extra = p.engine.scattered_store.unwrap();
        let old = DeviceProfile {
            engine: EngineCosts {
                scattered_store: None,
                ..p.engine.clone()
            },
            ..p.clone()
        };
        let time_slice = Access::Plane(2).window(&[600, 800, 1000]);
        let added = |a: &StoredArray| {
            predict(a, &time_slice, &SETUP, Cache::Warm, &p).cpu_seconds
                - predict(a, &time_slice, &SETUP, Cache::Warm, &old).cpu_seconds
        };
        // Chunks one crossline wide: each chunk's run goes down the output's
        // rows, 800 elements (3200 bytes) apart, so 3200/4096 of a page
        // per element, for all 600 x 800 of them.
        let thin = array([64, 1, 16], [128, 64, 256]);
        let expected = 600.0 * 800.0 * extra * 3200.0 / 4096.0;
        assert!(
            (added(&thin) - expected).abs() < 1e-6 * expected,
            "{} {expected}",
            added(&thin)
        );
        // Chunks wider than one crossline write along the output's rows.
        assert_eq!(added(&array([16, 16, 16], [128, 128, 256])), 0.0);
    }

    #[test]
    fn compressed_chunks_move_fewer_bytes() {
        let p = DeviceProfile::typical();
        let mut a = array([16, 16, 16], [128, 128, 256]);
        let w = Access::Plane(2).window(&a.shape);
        let raw = predict(&a, &w, &SETUP, Cache::Cold, &p);
        a.codec = ChunkCodec::Compressed {
            ratio: 4.0,
            decode: 1e9,
            crc: true,
        };
        let packed = predict(&a, &w, &SETUP, Cache::Cold, &p);
        assert!(packed.touched_bytes * 3 < raw.touched_bytes);
        assert!(packed.cpu_seconds > raw.cpu_seconds);
    }
}
