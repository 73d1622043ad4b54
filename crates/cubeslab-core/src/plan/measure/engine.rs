//! The engine's fixed costs, timed on small calibration stores: a call, a slice, a task, a
//! copy run, a helper thread's arrival, the scaling over threads.

use std::{
    path::{Path, PathBuf},
    time::Instant,
};

use super::median_time;
use crate::plan::profile::{median, EngineCosts, MemoryRates};

use crate::{
    config::Parallelism,
    dtype::DType,
    error::Result,
    store::{ArraySpec, ReadOptions, ZarrArray},
    window::{strides, ChunkSpan, DimRange, Placement, Window, MAX_DIMS},
};

/// The small resident stores the engine costs are measured on, written
/// once before any timing (a store's writes keep the kernel busy for a
/// while after they return).
pub(super) struct Calibration {
    /// One 16 MiB chunk.
    block: ZarrArray,
    /// 16384 chunks of 4 KiB.
    scattered: ZarrArray,
    /// 64 shards of one chunk each.
    shards: PathBuf,
}

impl Calibration {
    pub(super) fn write(dir: &Path) -> Result<Self> {
        let block =
            calibration_array(dir, "block", [256, 256, 64], [256, 256, 64], [256, 256, 64])?;
        let scattered = calibration_array(
            dir,
            "scattered",
            [128, 128, 1024],
            [1, 1, 1024],
            [128, 128, 1024],
        )?;
        calibration_array(dir, "shards", [64, 64, 64], [8, 8, 64], [8, 8, 64])?;
        Ok(Self {
            block,
            scattered,
            shards: dir.join("shards"),
        })
    }
}

fn calibration_array(
    dir: &Path,
    name: &str,
    shape: [u64; 3],
    inner: [u64; 3],
    shard: [u64; 3],
) -> Result<ZarrArray> {
    let spec = ArraySpec {
        shape: shape.to_vec(),
        dtype: DType::Float32,
        chunk_shape: shard.to_vec(),
        inner_chunks: Some(inner.to_vec()),
        codecs: Vec::new(),
        dimension_names: vec!["a".into(), "b".into(), "c".into()],
        fill_value: DType::Float32.default_fill(),
        attributes: Default::default(),
        generation: None,
    };
    let path = dir.join(name);
    let array = ZarrArray::create(&path, &spec)?;
    let n = shape.iter().product::<u64>() as usize;
    let data: Vec<u8> = (0..n).flat_map(|i| (i as f32).to_ne_bytes()).collect();
    array.write_array(&data, Parallelism::resolve(Some(1), None))?;
    // Written back before it is read: writeback competing with the reads,
    // and dirty pages that eviction cannot drop, would skew every number.
    // SAFETY: sync(2) has no preconditions.
    unsafe { libc::sync() };
    ZarrArray::open(&path)
}

pub(super) fn read_window(array: &ZarrArray, window: &Window, options: &ReadOptions) -> Result<()> {
    let mut out = vec![0u8; window.num_elements() as usize * array.dtype().size()];
    array.read_into(window, &mut out, options)
}

fn window(ranges: [(u64, u64); 3]) -> Window {
    Window {
        dims: ranges.iter().map(|&(a, b)| DimRange::new(a, b)).collect(),
    }
}

/// The engine's fixed costs, from reads of small resident stores whose
/// work is one kind at a time (many tiny chunks; many runs in one chunk;
/// strided elements; fresh shards).
pub(super) fn measure_engine(
    calibration: &Calibration,
    threads: usize,
    memory: &MemoryRates,
) -> Result<EngineCosts> {
    let one = ReadOptions {
        parallelism: Parallelism::resolve(Some(1), None),
        verify: false,
    };
    let all = ReadOptions {
        parallelism: Parallelism::resolve(Some(threads), None),
        verify: false,
    };
    let runs = 21;
    // One 16 MiB chunk, read as 256 runs of 256 strided elements, or as
    // 65536 runs of 32 elements sharing cache lines: large reads, so fixed
    // costs are a small share.
    let block = &calibration.block;
    // A one-element read runs on the calling thread: the fixed cost of a call.
    let call = median_time(runs * 4, || {
        read_window(block, &window([(0, 1), (0, 1), (0, 1)]), &all)
    })?;
    // (A one-thread read, as below, runs on the calling thread whatever its
    // size: no helpers.)
    let helper_arrival = helper_arrival(threads, runs * 4)?;
    let slice = median_time(runs, || {
        read_window(block, &window([(0, 256), (0, 256), (7, 8)]), &one)
    })?;
    let run = runs_from_cache(runs, memory);
    let n = 65536.0;
    let strided_element = ((slice - call - 256.0 * run) / n).max(1e-11);
    // Every other sample of the same chunk: 2^21 elements 8 bytes apart,
    // sharing cache lines, in 65536 runs, into an output kept between runs
    // (a fresh one each time would add its page faults).
    let every_other = Window {
        dims: vec![
            DimRange::new(0, 256),
            DimRange::new(0, 256),
            DimRange {
                start: 0,
                stop: 64,
                step: 2,
            },
        ],
    };
    let mut out = vec![0u8; every_other.num_elements() as usize * 4];
    block.read_into(&every_other, &mut out, &one)?;
    let dense = median_time(runs, || block.read_into(&every_other, &mut out, &one))?;
    let strided_element_dense = Some(((dense - call - n * run) / (32.0 * n)).max(1e-11));
    let gathered = strided_from_cache(runs);
    let strided_element_cached = Some(gathered);
    let scattered_store = Some(scattered_from_cache(runs, gathered));
    // Many chunks, one element from each: 16384 chunks of 4 KiB, each in
    // its own page, as a plane's chunks lie scattered through memory (the
    // cost includes the cache and TLB misses of reaching a chunk).
    let scattered = &calibration.scattered;
    let tasks = median_time(runs, || {
        read_window(scattered, &window([(0, 128), (0, 128), (5, 6)]), &one)
    })?;
    let task = ((tasks - call) / 16384.0 - run).max(1e-9);
    let parallel_efficiency = measure_scaling(scattered, threads, runs)?;
    // Fresh shards: 64 shards of one chunk each, on a new handle every time.
    let shards_path = &calibration.shards;
    let reused = ZarrArray::open(shards_path)?;
    let shards_window = Window::full(&[64, 64, 64]);
    read_window(&reused, &shards_window, &one)?;
    let warm_handle = median_time(runs, || read_window(&reused, &shards_window, &one))?;
    let fresh_handle = {
        let mut times = Vec::new();
        for _ in 0..runs {
            let fresh = ZarrArray::open(shards_path)?;
            let start = Instant::now();
            read_window(&fresh, &shards_window, &one)?;
            times.push(start.elapsed().as_secs_f64());
        }
        median(times.into_iter())
    };
    let shard_open = ((fresh_handle - warm_handle) / 64.0).max(1e-7);
    Ok(EngineCosts {
        call,
        helper_arrival,
        task,
        run,
        strided_element,
        strided_element_dense,
        strided_element_cached,
        scattered_store,
        shard_open,
        parallel_efficiency,
    })
}

/// The strides of a copy out of a float32 chunk into an output, both 3-D
/// and in C order, as a read's copy sees them.
struct Float32Copy {
    src: [u64; MAX_DIMS],
    dst: [u64; MAX_DIMS],
}

impl Float32Copy {
    fn new(chunk: [u64; 3], out: [u64; 3]) -> Self {
        Self {
            src: strides(&chunk),
            dst: strides(&out),
        }
    }

    fn placement(&self) -> Placement<'_> {
        Placement {
            src_strides: &self.src,
            dst_strides: &self.dst,
            steps: &[1; MAX_DIMS],
            ndim: 3,
            elem: 4,
        }
    }
}

/// Seconds per run of the copy out of a chunk the CPU caches hold, as after
/// the chunk's check: 256 runs of 8 float32 elements out of a 256 x 2 x 8
/// chunk (16 KiB; many runs, so the copy's fixed cost is a small share)
/// copied into each of 2 x 128 tiles of a 2 MiB output plane, chunk by
/// chunk as a read walks them, so that each run writes a row 4 KiB from the
/// last, as a plane's runs do; less the runs' bytes at the rate out of the
/// caches. (Runs that follow each other in the output cost about the same
/// here: 3.2-3.7 ns against 3.7-4.2.) Timed apart from a read's other
/// work: measured inside a read from memory, the runs' cost was a small
/// difference of two large times (0.1 to 4.3 ns from one profile to the
/// next here).
fn runs_from_cache(runs: usize, memory: &MemoryRates) -> f64 {
    const CHUNK: [u64; 3] = [256, 2, 8];
    let tiles = [2, 128];
    let copies: Vec<[ChunkSpan; 3]> = (0..tiles[0])
        .flat_map(|row| {
            (0..tiles[1]).map(move |column| {
                [
                    span(0, CHUNK[0], CHUNK[0] * row),
                    span(1, 1, 0),
                    span(0, CHUNK[2], CHUNK[2] * column),
                ]
            })
        })
        .collect();
    let out_shape = [tiles[0] * CHUNK[0], 1, tiles[1] * CHUNK[2]];
    let time = time_copies(runs, CHUNK, out_shape, &copies);
    let n = (tiles[0] * tiles[1] * CHUNK[0]) as f64;
    let run_bytes = (CHUNK[2] * 4) as f64;
    let rate = memory.copy_from_cache.unwrap_or(memory.copy);
    (time / n - run_bytes / rate).max(1e-11)
}

/// Seconds per element of the copy's strided gather out of a chunk the CPU
/// caches hold, as after the chunk's check: the time slice of one
/// 32 x 32 x 32 float32 chunk (128 KiB; 1024 elements 128 bytes apart),
/// copied 1024 times over.
fn strided_from_cache(runs: usize) -> f64 {
    const SIDE: u64 = 32;
    let copies = vec![[span(0, SIDE, 0), span(0, SIDE, 0), span(7, 1, 0)]; 1024];
    let time = time_copies(runs, [SIDE; 3], [SIDE, SIDE, 1], &copies);
    (time / (copies.len() as u64 * SIDE * SIDE) as f64).max(1e-12)
}

/// Extra seconds per element of the gather out of a cached chunk when each
/// element goes to a new page of the output: a 256 x 1 x 16 float32 chunk
/// (16 KiB) copied into each of the 1024 columns of a 256 x 1024 output
/// (1 MiB), chunk by chunk as a read walks the chunks of a time slice one
/// crossline wide, so that every element lands 4 KiB from the last one;
/// less the same gather into neighbouring elements (`gathered`, s per
/// element). Here 4.5-6.2 ns against 0.6: the writes pay for reaching a
/// new page, not the reads.
fn scattered_from_cache(runs: usize, gathered: f64) -> f64 {
    const CHUNK: [u64; 3] = [256, 1, 16];
    const COLUMNS: u64 = 1024;
    let copies: Vec<[ChunkSpan; 3]> = (0..COLUMNS)
        .map(|column| [span(0, CHUNK[0], 0), span(0, 1, column), span(7, 1, 0)])
        .collect();
    let time = time_copies(runs, CHUNK, [CHUNK[0], COLUMNS, 1], &copies);
    (time / (COLUMNS * CHUNK[0]) as f64 - gathered).max(1e-12)
}

/// `count` elements of a chunk from `first` along one dimension, placed
/// from `out_first` in the output.
fn span(first: u64, count: u64, out_first: u64) -> ChunkSpan {
    ChunkSpan {
        chunk: 0,
        first,
        count,
        out_first,
    }
}

/// Median seconds, over `runs`, to copy out of one float32 chunk of shape
/// `chunk` (a buffer the CPU's caches hold) into an output of shape `out`
/// once for each set of spans in `copies`, in turn.
fn time_copies(runs: usize, chunk: [u64; 3], out: [u64; 3], copies: &[[ChunkSpan; 3]]) -> f64 {
    let inside = |spans: &[ChunkSpan; 3]| {
        (0..3).all(|d| {
            let s = &spans[d];
            s.count > 0 && s.first + s.count <= chunk[d] && s.out_first + s.count <= out[d]
        })
    };
    assert!(
        copies.iter().all(inside),
        "spans outside the chunk or output"
    );
    let source = vec![1u8; (chunk.iter().product::<u64>() * 4) as usize];
    let mut output = vec![0u8; (out.iter().product::<u64>() * 4) as usize];
    let strides = Float32Copy::new(chunk, out);
    let placement = strides.placement();
    median_time(runs, || {
        for spans in copies {
            // SAFETY: every span lies inside the chunk and the output (above).
            unsafe { placement.copy(spans, std::hint::black_box(&source), output.as_mut_ptr()) };
        }
        std::hint::black_box(&output);
        Ok(())
    })
    .unwrap_or(f64::NAN)
}

/// How long after a read hands out its pieces a worker starts on one,
/// while the calling thread works: the median over `runs` reads of two
/// pieces, the caller holding the first until a helper takes the second.
/// Each follows the last after 30 us of work on the calling thread, as
/// reads in a loop do (the workers are asleep by then).
fn helper_arrival(threads: usize, runs: usize) -> Result<f64> {
    if threads < 2 {
        return Ok(0.0);
    }
    let parallelism = Parallelism::resolve(Some(threads), None);
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let gap = Instant::now();
        while gap.elapsed().as_secs_f64() < 30e-6 {
            std::hint::spin_loop();
        }
        let start = Instant::now();
        let arrived = std::sync::OnceLock::new();
        parallelism.share(2, &|piece| {
            if piece == 1 {
                let _ = arrived.set(start.elapsed().as_secs_f64());
            } else {
                // No helper within 10 ms: the caller takes the second piece
                // itself, and that run counts as 10 ms.
                let deadline = start.elapsed().as_secs_f64() + 10e-3;
                while arrived.get().is_none() && start.elapsed().as_secs_f64() < deadline {
                    std::hint::spin_loop();
                }
            }
            Ok(())
        })?;
        times.push(*arrived.get().expect("the second piece ran"));
    }
    Ok(median(times.into_iter()))
}

/// How well `threads` workers share the engine's steps (per chunk, per
/// run, per strided element: measured above on one thread), on a read of
/// 16 elements from each of 16384 chunks (enough output to go to the
/// workers, not stay on the calling thread): one thread's time over `threads`
/// times theirs, the median of runs that alternate the two, so a slow
/// spell of the machine hits both alike. (Memory rates need no such
/// factor: they are measured with every thread busy.)
fn measure_scaling(array: &ZarrArray, threads: usize, runs: usize) -> Result<f64> {
    if threads < 2 {
        return Ok(1.0);
    }
    let options = |threads: usize| ReadOptions {
        parallelism: Parallelism::resolve(Some(threads), None),
        verify: false,
    };
    let (one, all) = (options(1), options(threads));
    // 2 MiB of output, past `SERIAL_BYTES`, so that the read is parallel.
    let plane = window([(0, 128), (0, 128), (0, 32)]);
    // Each timed read follows the same read with the same threads, as warm
    // reads are timed and predicted: a parallel read straight after a serial
    // one also pays for waking the idle cores (here it halved the ratio).
    let timed = |options: &ReadOptions| -> Result<f64> {
        read_window(array, &plane, options)?;
        let start = Instant::now();
        read_window(array, &plane, options)?;
        Ok(start.elapsed().as_secs_f64())
    };
    let mut ratios = Vec::with_capacity(runs);
    for _ in 0..runs {
        let serial = timed(&one)?;
        let parallel = timed(&all)?;
        ratios.push(serial / (threads as f64 * parallel));
    }
    Ok(median(ratios.into_iter()).clamp(0.25, 1.0))
}
