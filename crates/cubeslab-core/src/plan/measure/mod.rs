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
    path::{Path, PathBuf},
    time::Instant,
};

use super::profile::{median, DeviceProfile, EngineCosts, MemoryRates, PROFILE_FORMAT};

mod codec;
mod engine;
mod io;
mod memory;

use crate::{
    compress::Compression, config::Parallelism, dtype::DType, error::Result, store::process_alive,
    Error,
};
use codec::measure_codec;
use engine::{measure_engine, Calibration};
pub use io::evict;
use io::measure_io;
use memory::measure_memory;

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

#[cfg(test)]
mod tests;
