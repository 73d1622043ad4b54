//! Memory rates: copies, faults, crc32c over working sets of every size, first writes.

use std::{fs::File, path::Path, sync::Barrier, time::Instant};

use super::{on_every_thread, per_thread};
use crate::plan::profile::{median, ChunkStart, MemoryRates, WorkingSet};

use super::io::read_all;
use crate::{error::Result, store::crc32c};

/// Working sets (MiB, over all threads) checked again and again; closer
/// between 16 and 64 MiB, where the rate falls off a cliff as the set
/// outgrows the caches, so interpolation does not smooth the cliff away.
const WORKING_SETS_MIB: [usize; 12] = [1, 2, 4, 8, 16, 24, 32, 40, 48, 64, 96, 128];

/// Chunk sizes at which the start of a chunk checked out of order is timed
/// (besides 8 KiB, `crc_chunk_start`), spread over the inner chunks the
/// optimizer tries; larger chunks take the largest size's cost.
const CHUNK_START_SIZES: [usize; 4] = [4 << 10, 32 << 10, 128 << 10, 512 << 10];

pub(super) fn measure_memory(
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
        // All threads in the same pass at once, as a read's workers are: a
        // thread alone in its pass would have the memory's bandwidth to itself.
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
