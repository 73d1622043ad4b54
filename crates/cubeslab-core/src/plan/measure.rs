//! Measuring a [`DeviceProfile`]: device reads against request size and
//! queue depth (cold and warm), memory rates, the engine's fixed costs,
//! and each codec's speed on sample data — all on the filesystem and cores
//! that will serve the stores.
//!
//! Cold cells read the way the engine reads: the file memory-mapped, each
//! worker thread handing the kernel its next requests with
//! `madvise(WILLNEED)` ahead of the one it touches, `depth` requests in
//! flight in all. They evict the scratch file with `posix_fadvise(DONTNEED)`
//! first and never read a block twice. Warm cells time `pread` from the
//! page cache.

use std::{
    fs::File,
    io::Write,
    os::unix::fs::FileExt,
    os::unix::io::AsRawFd,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicU64, Ordering},
        Barrier,
    },
    time::Instant,
};

use serde_json::Value;

use super::profile::{
    median, ChunkStart, CodecRate, DeviceProfile, EngineCosts, IoTable, MemoryRates, WorkingSet,
    PROFILE_FORMAT,
};
use super::stored::dir_bytes;
use crate::{
    compress::Compression,
    config::Parallelism,
    dtype::DType,
    error::Result,
    store::{crc32c, process_alive, will_need, ArraySpec, ReadOptions, StoreError, ZarrArray},
    window::{strides, ChunkSpan, DimRange, Placement, Window, MAX_DIMS},
    Error,
};

/// What to measure and how long to spend.
#[derive(Debug, Clone)]
pub struct MeasureOptions {
    /// Directory on the filesystem to profile (scratch files go here and are removed).
    pub dir: PathBuf,
    /// Size of the scratch file read by the device measurements.
    pub file_bytes: u64,
    /// Time spent on each (size, depth) cell.
    pub cell_seconds: f64,
    /// Request sizes in bytes.
    pub sizes: Vec<u64>,
    /// Requests in flight.
    pub depths: Vec<u64>,
    /// Worker threads (the memory rates are measured with all of them busy).
    pub threads: usize,
    /// Codecs to time on `sample`.
    pub codecs: Vec<Compression>,
}

impl MeasureOptions {
    /// The default grid: 4 KiB .. 16 MiB by 4x, 1 .. 64 in flight by 2x;
    /// a 1 GiB scratch file and 0.15 s per cell (about 30 s in all).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            file_bytes: 1 << 30,
            cell_seconds: 0.15,
            sizes: (0..7).map(|i| 4096u64 << (2 * i)).collect(),
            depths: (0..7).map(|i| 1u64 << i).collect(),
            threads: Parallelism::default().threads,
            codecs: Vec::new(),
        }
    }

    /// The scratch file's size: `file_bytes`, grown to hold one request of the
    /// largest size (a cell reads whole requests from inside the file).
    pub fn scratch_bytes(&self) -> u64 {
        let largest = self.sizes.iter().copied().max().unwrap_or(0);
        self.file_bytes.max(largest)
    }
}

/// Sample data for the codec and engine measurements: a C-order array.
pub struct Sample<'a> {
    /// Shape (3-D).
    pub shape: [u64; 3],
    /// Element type.
    pub dtype: DType,
    /// The elements, native endian.
    pub bytes: &'a [u8],
}

/// Measure the machine. `progress` is told what is being measured.
pub fn measure(
    options: &MeasureOptions,
    sample: &Sample<'_>,
    progress: &mut dyn FnMut(&str),
) -> Result<DeviceProfile> {
    let scratch = Scratch::new(&options.dir)?;
    progress("writing the scratch file and calibration stores");
    let file = scratch.fill(options.scratch_bytes())?;
    let calibration = Calibration::write(&scratch.dir)?;
    // The CPU-side rates are sampled before, between and after the device
    // and codec measurements, and each keeps its median: a shared VM's
    // cores run tens of percent slower or faster for seconds at a time, and
    // one short sample can catch either.
    let mut cpu = Vec::with_capacity(CPU_SAMPLES);
    let sample_cpu =
        |cpu: &mut Vec<(MemoryRates, EngineCosts)>, progress: &mut dyn FnMut(&str)| -> Result<()> {
            progress(&format!(
                "memory rates and engine costs ({} of {CPU_SAMPLES})",
                cpu.len() + 1
            ));
            let memory = measure_memory(
                &file,
                &scratch.path,
                options.threads,
                options.scratch_bytes(),
            )?;
            let engine = measure_engine(&calibration, options.threads, &memory)?;
            cpu.push((memory, engine));
            Ok(())
        };
    sample_cpu(&mut cpu, progress)?;
    progress("device reads, cold and warm");
    let io = measure_io(&file, &scratch.path, options)?;
    sample_cpu(&mut cpu, progress)?;
    let mut codecs = Vec::new();
    for compression in &options.codecs {
        progress(&format!("codec {}", compression.name()));
        codecs.push(measure_codec(&scratch.dir, compression, sample)?);
    }
    while cpu.len() < CPU_SAMPLES {
        sample_cpu(&mut cpu, progress)?;
    }
    let (memory, engine): (Vec<MemoryRates>, Vec<EngineCosts>) = cpu.into_iter().unzip();
    Ok(DeviceProfile {
        format: PROFILE_FORMAT,
        path: options.dir.display().to_string(),
        threads: options.threads,
        io,
        memory: MemoryRates::median(&memory),
        engine: EngineCosts::median(&engine),
        codecs,
    })
}

/// How many times the memory rates and engine costs are measured.
const CPU_SAMPLES: usize = 3;

/// Working sets (MiB, over all threads) checked again and again. Between
/// 16 and 64 MiB the rate falls off a cliff where the set outgrows the
/// caches this machine gets, so points are closer there: interpolated
/// between 32 and 64 MiB alone, a 48 MiB set was given 30 GB/s a thread
/// where reads checking it ran at memory's 20.
const WORKING_SETS_MIB: [usize; 12] = [1, 2, 4, 8, 16, 24, 32, 40, 48, 64, 96, 128];

/// Chunk sizes at which the start of a chunk checked out of order is timed
/// (besides 8 KiB, `crc_chunk_start`), spread over the inner chunks the
/// optimizer tries; larger chunks take the largest size's cost.
const CHUNK_START_SIZES: [usize; 4] = [4 << 10, 32 << 10, 128 << 10, 512 << 10];

/// Scratch files, removed when dropped.
struct Scratch {
    dir: PathBuf,
    path: PathBuf,
}

/// The scratch folder of the profile run by process `pid`.
fn scratch_name(pid: u32) -> String {
    format!(".cubeslab-profile-{pid}.tmp")
}

/// Age past which a dead process's scratch folder is removed. A profile's
/// scratch lives about a minute; the wait spares a folder of a namesake
/// process on another machine sharing the filesystem.
const STALE_SCRATCH: std::time::Duration = std::time::Duration::from_secs(600);

/// Remove the scratch folders that killed profiles left in `parent` (up to
/// 1 GiB each): those of processes no longer running, untouched for
/// [`STALE_SCRATCH`]. Returns how many were removed.
fn remove_stale_scratch(parent: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(".cubeslab-profile-"))
            .and_then(|n| n.strip_suffix(".tmp"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let age = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok());
        let stale = age.is_some_and(|a| a > STALE_SCRATCH);
        if stale && !process_alive(pid) && std::fs::remove_dir_all(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

impl Scratch {
    fn new(parent: &Path) -> Result<Self> {
        remove_stale_scratch(parent);
        let dir = parent.join(scratch_name(std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        Ok(Self {
            path: dir.join("reads.bin"),
            dir,
        })
    }

    /// Write `bytes` of incompressible data and flush them, so that eviction works.
    fn fill(&self, bytes: u64) -> Result<File> {
        let io = |e| Error::io(&self.path, e);
        let mut file = File::create(&self.path).map_err(io)?;
        let mut block = vec![0u8; 16 << 20];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut written = 0;
        while written < bytes {
            for word in block.chunks_exact_mut(8) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                word.copy_from_slice(&state.to_le_bytes());
            }
            let n = (bytes - written).min(block.len() as u64) as usize;
            file.write_all(&block[..n]).map_err(io)?;
            written += n as u64;
        }
        file.sync_all().map_err(io)?;
        File::open(&self.path).map_err(io)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Drop a file's pages from the page cache.
pub fn evict(file: &File) {
    // SAFETY: plain system call on an open descriptor.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
    }
}

fn measure_io(file: &File, path: &Path, options: &MeasureOptions) -> Result<IoTable> {
    let n = options.sizes.len();
    let mut cold = vec![vec![0.0; options.depths.len()]; n];
    let mut warm = vec![vec![0.0; options.depths.len()]; n];
    // Warm cells read from a resident region.
    let file_bytes = options.scratch_bytes();
    let warm_region = (256u64 << 20).min(file_bytes);
    for (i, &size) in options.sizes.iter().enumerate() {
        for (j, &depth) in options.depths.iter().enumerate() {
            // Mapped pages survive eviction: map afresh for each cell, after it.
            evict(file);
            // SAFETY: the scratch file is not modified while mapped.
            let map = unsafe { memmap2::Mmap::map(file) }.map_err(|e| Error::io(path, e))?;
            let _ = map.advise(memmap2::Advice::Random);
            let slots = file_bytes / size;
            cold[i][j] = mapped_cell(
                &map,
                size,
                depth,
                slots,
                options.threads,
                options.cell_seconds,
            );
        }
    }
    read_all(file, path, warm_region)?;
    for (i, &size) in options.sizes.iter().enumerate() {
        for (j, &depth) in options.depths.iter().enumerate() {
            let slots = (warm_region / size).max(1);
            // Warm blocks may repeat: cycle through the region.
            warm[i][j] = read_cell(
                file,
                path,
                size,
                depth,
                slots,
                u64::MAX,
                options.cell_seconds / 3.0,
            )?;
        }
    }
    Ok(IoTable {
        sizes: options.sizes.clone(),
        depths: options.depths.clone(),
        cold: IoTable::envelope(&cold),
        cold_measured: cold,
        warm,
    })
}

/// Cold reads as the engine makes them: `threads` workers share the
/// requests (blocks of `size` in a shuffled order over `slots`); each keeps
/// `depth / threads` of them advised ahead and touches every page of the
/// one it is at. Stops after `seconds`; bytes per second.
fn mapped_cell(
    map: &memmap2::Mmap,
    size: u64,
    depth: u64,
    slots: u64,
    threads: usize,
    seconds: f64,
) -> f64 {
    let order = shuffled(slots);
    let threads = (threads as u64).min(slots).max(1);
    let ahead = depth.div_ceil(threads).max(1);
    let per_thread = slots / threads;
    let start = Instant::now();
    let bytes: u64 = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let order = &order[(t * per_thread) as usize..((t + 1) * per_thread) as usize];
                scope.spawn(move || {
                    let advise = |k: usize| will_need(map, order[k] * size, size);
                    let mut advised = 0usize;
                    let mut sum = 0u8;
                    let mut done = 0u64;
                    for k in 0..order.len() {
                        while advised < order.len() && advised < k + ahead as usize {
                            advise(advised);
                            advised += 1;
                        }
                        let offset = (order[k] * size) as usize;
                        for page in (offset..offset + size as usize).step_by(4096) {
                            sum = sum.wrapping_add(map[page]);
                        }
                        done += size;
                        if k as u64 + 1 >= ahead && start.elapsed().as_secs_f64() > seconds {
                            break;
                        }
                    }
                    std::hint::black_box(sum);
                    done
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("reader thread"))
            .sum()
    });
    bytes as f64 / start.elapsed().as_secs_f64().max(1e-9)
}

/// Read blocks of `size` at `depth` in flight, in a shuffled order over
/// `slots` blocks, at most `limit` reads or `seconds`; bytes per second.
fn read_cell(
    file: &File,
    path: &Path,
    size: u64,
    depth: u64,
    slots: u64,
    limit: u64,
    seconds: f64,
) -> Result<f64> {
    let order = shuffled(slots);
    let next = AtomicU64::new(0);
    let start = Instant::now();
    let bytes: Vec<Result<u64>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..depth)
            .map(|_| {
                scope.spawn(|| -> Result<u64> {
                    let mut buffer = vec![0u8; size as usize];
                    let mut done = 0u64;
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        // Every thread finishes its read; at least one read per thread.
                        if k >= limit || (k >= depth && start.elapsed().as_secs_f64() > seconds) {
                            return Ok(done);
                        }
                        let offset = order[(k % slots) as usize] * size;
                        file.read_exact_at(&mut buffer, offset)
                            .map_err(|e| Error::io(path, e))?;
                        done += size;
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("reader thread"))
            .collect()
    });
    let elapsed = start.elapsed().as_secs_f64();
    let total: u64 = bytes.into_iter().sum::<Result<u64>>()?;
    Ok(total as f64 / elapsed.max(1e-9))
}

fn read_all(file: &File, path: &Path, bytes: u64) -> Result<()> {
    let mut buffer = vec![0u8; 16 << 20];
    let mut at = 0;
    while at < bytes {
        let n = (bytes - at).min(buffer.len() as u64) as usize;
        file.read_exact_at(&mut buffer[..n], at)
            .map_err(|e| Error::io(path, e))?;
        at += n as u64;
    }
    Ok(())
}

/// A pseudo-random permutation of `0..n` (fixed seed: repeatable profiles).
fn shuffled(n: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).collect();
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    for i in (1..v.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        v.swap(i, (state % (i as u64 + 1)) as usize);
    }
    v
}

/// Per-thread rates with every thread busy: the median thread's.
fn per_thread(threads: usize, work: impl Fn(usize) -> f64 + Sync) -> f64 {
    median(on_every_thread(threads, work).into_iter())
}

/// `work(t)` on `threads` threads at once, t = 0..threads: each one's result.
fn on_every_thread<T: Send>(threads: usize, work: impl Fn(usize) -> T + Sync) -> Vec<T> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let work = &work;
                scope.spawn(move || work(t))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("measuring thread"))
            .collect()
    })
}

fn measure_memory(
    file: &File,
    path: &Path,
    threads: usize,
    file_bytes: u64,
) -> Result<MemoryRates> {
    const BUFFER: usize = 64 << 20;
    let copy = per_thread(threads, |_| {
        let src = vec![1u8; BUFFER];
        let mut dst = vec![0u8; BUFFER];
        dst.copy_from_slice(&src); // first touch outside the timing
        let start = Instant::now();
        for _ in 0..4 {
            dst.copy_from_slice(std::hint::black_box(&src));
        }
        std::hint::black_box(&dst);
        4.0 * BUFFER as f64 / start.elapsed().as_secs_f64()
    });
    // Copies out of a chunk the caches hold, as a read copies out of a chunk
    // it has just checked: a 16 KiB piece into consecutive places of a
    // 4 MiB output, kept from round to round as reads reuse the memory of
    // the output before. Its median round.
    let copy_from_cache = Some(per_thread(threads, |_| {
        const PIECE: usize = 16 << 10;
        const OUTPUT: usize = 4 << 20;
        let src = vec![1u8; PIECE];
        let mut dst = vec![0u8; OUTPUT];
        let mut fill = || {
            let start = Instant::now();
            for piece in dst.chunks_exact_mut(PIECE) {
                piece.copy_from_slice(std::hint::black_box(&src));
            }
            std::hint::black_box(&dst);
            OUTPUT as f64 / start.elapsed().as_secs_f64()
        };
        fill(); // first touch outside the timing
        median((0..15).map(|_| fill()))
    }));
    // Resident pages of the scratch file, mapped as the engine maps shards.
    let region = (BUFFER as u64).min(file_bytes / threads as u64);
    read_all(file, path, region * threads as u64)?;
    let map_region = |t: usize| {
        // SAFETY: the scratch file is not modified while mapped.
        let map = unsafe {
            memmap2::MmapOptions::new()
                .offset(t as u64 * region)
                .len(region as usize)
                .map(file)
        };
        if let Ok(map) = &map {
            let _ = map.advise(memmap2::Advice::Random);
        }
        map
    };
    let touch = |map: &[u8]| {
        let mut sum = 0u8;
        for page in (0..map.len()).step_by(4096) {
            sum = sum.wrapping_add(map[page]);
        }
        std::hint::black_box(sum);
    };
    // First touch of mapped, resident pages.
    let fault = per_thread(threads, |t| {
        let Ok(map) = map_region(t) else { return 1e9 };
        let start = Instant::now();
        touch(&map);
        region as f64 / start.elapsed().as_secs_f64()
    });
    // Checksums as reads compute them: over mapped page-cache pages, an
    // inner chunk (a few KiB) at a time. A buffer the CPU caches hold, or
    // one long call, runs faster than reads ever see.
    const PIECE: usize = 8 << 10;
    let pieces = region as usize / PIECE;
    let crc = per_thread(threads, |t| {
        let Ok(map) = map_region(t) else { return 1e9 };
        touch(&map);
        region as f64 / crc_pieces(&map, PIECE, 0..pieces)
    });
    // The same pieces out of order (every 61st, as a plane's chunks lie a
    // shard row apart): the difference per piece is what starting a chunk
    // away from the last one costs, from memory. Then both, in order and
    // out of order, over working sets from 1 MiB to 128 MiB (all threads;
    // as many as the regions above hold), each checked over and over as a
    // warm read repeats the read before it. How much of that the CPU's
    // caches keep depends on the part of them this machine gets, so it is
    // measured rather than taken from the cache's size.
    let checks = |piece: usize, pieces: usize, rounds: usize| {
        let together = Barrier::new(threads);
        on_every_thread(threads, |t| {
            let map = map_region(t).ok();
            if let Some(map) = &map {
                touch(map);
            }
            // Every thread takes part in every round, mapped or not, so
            // that none waits at the barrier for ever.
            let region = map.as_ref().map_or(&[][..], |m| &m[..pieces * piece]);
            let measured = working_set_checks(region, piece, rounds, &together);
            map.map_or((0.0, f64::NAN), |_| measured)
        })
    };
    let crc_chunk_start = median(checks(PIECE, pieces, 3).into_iter().map(|c| c.0));
    // The same start at other chunk sizes, from memory: here it grows
    // with the chunk, and the model scales each chunk's start by it.
    let crc_chunk_start_by_size = CHUNK_START_SIZES
        .iter()
        .map(|&piece| ChunkStart {
            bytes: piece as u64,
            seconds: median(
                checks(piece, region as usize / piece, 3)
                    .into_iter()
                    .map(|c| c.0),
            ),
        })
        .collect();
    let crc_within = WORKING_SETS_MIB
        .iter()
        .map(|&mib| mib << 20)
        .filter(|&bytes| bytes / threads / PIECE <= pieces)
        .map(|bytes| {
            let each = checks(PIECE, (bytes / threads / PIECE).max(1), 31);
            WorkingSet {
                bytes: bytes as u64,
                crc: median(each.iter().map(|c| c.1)),
                chunk_start: median(each.iter().map(|c| c.0)),
            }
        })
        .collect();
    let first_write = per_thread(threads, |_| {
        let start = Instant::now();
        let mut fresh: Vec<u8> = Vec::with_capacity(BUFFER);
        // SAFETY: every byte is written before the vector is read or dropped.
        unsafe {
            std::ptr::write_bytes(fresh.as_mut_ptr(), 1, BUFFER);
            fresh.set_len(BUFFER);
        }
        let rate = BUFFER as f64 / start.elapsed().as_secs_f64();
        std::hint::black_box(&fresh);
        rate
    });
    Ok(MemoryRates {
        copy,
        copy_from_cache,
        crc,
        fault,
        first_write,
        crc_chunk_start,
        crc_chunk_start_by_size,
        crc_within,
    })
}

/// crc32c of the `piece`-byte pieces of `map`, in order and out of order
/// (every 61st), alternating `rounds` times so a slow spell of the machine
/// falls on both: the extra seconds per piece out of order, and the rate in
/// order (bytes/s), each the median over the rounds.
fn working_set_checks(map: &[u8], piece: usize, rounds: usize, together: &Barrier) -> (f64, f64) {
    let pieces = map.len() / piece;
    let scattered = || (0..pieces).map(|i| i * 61 % pieces);
    let (mut extra, mut rate) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        // All threads in the same pass at once: the passes out of order
        // take longer, and a thread checking in order while the others
        // still check out of order had the memory's bandwidth to itself
        // (here 25 GB/s a thread over 128 MiB, where two threads checking
        // together get 14 each, as a read's workers do).
        together.wait();
        let apart = crc_pieces(map, piece, scattered());
        together.wait();
        let along = crc_pieces(map, piece, 0..pieces);
        extra.push((apart - along) / pieces as f64);
        rate.push((pieces * piece) as f64 / along);
    }
    (median(extra.into_iter()).max(0.0), median(rate.into_iter()))
}

/// Seconds to crc32c the `piece`-byte pieces of `map` in `order`.
fn crc_pieces(map: &[u8], piece: usize, order: impl Iterator<Item = usize>) -> f64 {
    let start = Instant::now();
    let mut sum = 0u32;
    for i in order {
        sum ^= crc32c(&map[i * piece..(i + 1) * piece]);
    }
    std::hint::black_box(sum);
    start.elapsed().as_secs_f64()
}

/// Median wall time of `runs` calls.
fn median_time(runs: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        f()?;
        times.push(start.elapsed().as_secs_f64());
    }
    Ok(median(times.into_iter()))
}

/// The small resident stores the engine costs are measured on, written
/// once before any timing (a store's writes keep the kernel busy for a
/// while after they return).
struct Calibration {
    /// One 16 MiB chunk.
    block: ZarrArray,
    /// 16384 chunks of 4 KiB.
    scattered: ZarrArray,
    /// 64 shards of one chunk each.
    shards: PathBuf,
}

impl Calibration {
    fn write(dir: &Path) -> Result<Self> {
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

fn read_window(array: &ZarrArray, window: &Window, options: &ReadOptions) -> Result<()> {
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
fn measure_engine(
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
/// reads in a loop do (the workers are asleep by then: here 30-40 us, and
/// 60-160 us after a millisecond idle).
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

/// A codec's ratio and speed on the sample, through the engine's own
/// write and read paths (so the decode rate is the one reads will see).
fn measure_codec(dir: &Path, compression: &Compression, sample: &Sample<'_>) -> Result<CodecRate> {
    let name = compression.name();
    let codecs = compression
        .codecs(sample.dtype)
        .map_err(|what| StoreError::Unsupported {
            path: dir.to_path_buf(),
            what,
        })?;
    let inner = [16u64, 16, 16].map(|c| c.min(sample.shape[0]).max(1));
    let spec = |codecs: Vec<Value>| ArraySpec {
        shape: sample.shape.to_vec(),
        dtype: sample.dtype,
        chunk_shape: sample.shape.to_vec(),
        inner_chunks: Some(
            inner
                .iter()
                .zip(&sample.shape)
                .map(|(&c, &n)| c.min(n))
                .collect(),
        ),
        codecs,
        dimension_names: vec!["a".into(), "b".into(), "c".into()],
        fill_value: sample.dtype.default_fill(),
        attributes: Default::default(),
        generation: None,
    };
    let one = Parallelism::resolve(Some(1), None);
    let options = ReadOptions {
        parallelism: one,
        verify: true,
    };
    let full = Window::full(&sample.shape);
    let logical = sample.bytes.len() as f64;
    // Each run opens the array afresh: an open array keeps decoded chunks,
    // and a second read of the same chunks would only measure that cache.
    let time_read =
        |path: &Path| median_time(9, || read_window(&ZarrArray::open(path)?, &full, &options));

    let raw_path = dir.join(format!("codec-raw-{}", sanitize(&name)));
    let raw = ZarrArray::create(&raw_path, &spec(Vec::new()))?;
    raw.write_array(sample.bytes, one)?;
    let raw_time = time_read(&raw_path)?;

    let path = dir.join(format!("codec-{}", sanitize(&name)));
    let array = ZarrArray::create(&path, &spec(codecs))?;
    let start = Instant::now();
    array.write_array(sample.bytes, one)?;
    let encode_time = start.elapsed().as_secs_f64();
    let stored = dir_bytes(&path.join("c")) as f64;
    let decode_time = time_read(&path)?;
    let _ = std::fs::remove_dir_all(&raw_path);
    let _ = std::fs::remove_dir_all(&path);
    Ok(CodecRate {
        name,
        ratio: logical / stored.max(1.0),
        decode: logical / (decode_time - raw_time).max(1e-6),
        encode: logical / encode_time.max(1e-6),
    })
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_of_killed_profiles_is_removed_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        // Pids of processes that have exited.
        let dead = || {
            let mut child = std::process::Command::new("true").spawn().unwrap();
            let pid = child.id();
            child.wait().unwrap();
            pid
        };
        let long_ago = std::time::SystemTime::now() - STALE_SCRATCH * 2;
        let folder = |name: String, aged: bool| {
            let path = dir.path().join(name);
            std::fs::create_dir(&path).unwrap();
            std::fs::write(path.join("reads.bin"), b"scratch").unwrap();
            if aged {
                File::open(&path).unwrap().set_modified(long_ago).unwrap();
            }
            path
        };
        let killed = folder(scratch_name(dead()), true);
        let just_killed = folder(scratch_name(dead()), false);
        let running = folder(scratch_name(std::process::id()), true);
        let not_ours = folder(".cubeslab-profile-notes.tmp".into(), true);
        assert_eq!(remove_stale_scratch(dir.path()), 1);
        assert!(!killed.exists());
        for kept in [just_killed, running, not_ours] {
            assert!(kept.join("reads.bin").exists(), "{}", kept.display());
        }
    }

    #[test]
    fn requests_larger_than_the_scratch_file_grow_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut options = MeasureOptions::new(dir.path());
        options.file_bytes = 1 << 20;
        options.cell_seconds = 0.001;
        options.sizes = vec![4096, 4 << 20];
        options.depths = vec![1, 2];
        options.threads = 2;
        assert_eq!(options.scratch_bytes(), 4 << 20);
        let scratch = Scratch::new(dir.path()).unwrap();
        let file = scratch.fill(options.scratch_bytes()).unwrap();
        let table = measure_io(&file, &scratch.path, &options).unwrap();
        assert!(table.cold_measured.iter().flatten().all(|&rate| rate > 0.0));
    }

    #[test]
    fn a_quick_profile_is_complete_and_sane() {
        let dir = tempfile::tempdir().unwrap();
        let mut options = MeasureOptions::new(dir.path());
        options.file_bytes = 8 << 20;
        options.cell_seconds = 0.002;
        options.sizes = vec![4096, 1 << 20];
        options.depths = vec![1, 4];
        options.threads = 2;
        options.codecs = vec![Compression::Zstd { level: 1 }];
        let data: Vec<u8> = (0..32 * 32 * 32)
            .flat_map(|i| ((i % 97) as f32).to_ne_bytes())
            .collect();
        let sample = Sample {
            shape: [32, 32, 32],
            dtype: DType::Float32,
            bytes: &data,
        };
        let mut steps = Vec::new();
        let profile = measure(&options, &sample, &mut |s| steps.push(s.to_string())).unwrap();
        assert!(steps.len() >= 4);
        let json = profile.to_json();
        let back = DeviceProfile::from_json(&json).unwrap();
        assert_eq!(back, profile);
        assert!(profile.memory.copy > 1e8 && profile.memory.crc > 1e8);
        assert!(profile.engine.call > 0.0 && profile.engine.task > 0.0);
        assert!((0.25..=1.0).contains(&profile.engine.parallel_efficiency));
        assert!(profile
            .engine
            .strided_element_dense
            .is_some_and(|c| c > 0.0));
        let zstd = profile.codec("zstd:1").unwrap();
        assert!(zstd.ratio > 2.0, "{zstd:?}"); // a repeating ramp compresses well
                                               // The scratch directory is gone.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
