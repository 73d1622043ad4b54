//! Device reads: cold cells through the mapped file as the engine reads, warm cells by `pread`.

use std::{
    fs::File,
    os::unix::fs::FileExt,
    os::unix::io::AsRawFd,
    path::Path,
    sync::atomic::{AtomicU64, Ordering},
    time::Instant,
};

use super::MeasureOptions;
use crate::plan::profile::IoTable;

use crate::{error::Result, read_ahead::will_need, Error};

/// Drop a file's pages from the page cache.
pub fn evict(file: &File) {
    // SAFETY: plain system call on an open descriptor.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
    }
}

pub(super) fn measure_io(file: &File, path: &Path, options: &MeasureOptions) -> Result<IoTable> {
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

pub(super) fn read_all(file: &File, path: &Path, bytes: u64) -> Result<()> {
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
