//! A window of a [`ChunkedFile`], read in parallel: the chunks it touches
//! in C order, split into runs shared by the workers; cold, each worker
//! hands its run's byte ranges to the kernel ahead of the chunk it copies.
//! Unfiltered chunks are copied from the mapped file, only where selected;
//! filtered ones are decoded whole, then copied.

use std::os::unix::fs::FileExt;

use super::{ChunkedFile, ChunkedFileError, Place};
use crate::{
    error::Result,
    read_ahead::{is_resident, will_need, Prefetcher},
    share::SendPtr,
    store::{pieces_per_thread, ReadOptions, SERIAL_BYTES},
    window::{chunk_spans, selected_extent, strides, ChunkSpan, Placement, Window, MAX_DIMS},
};

/// Stretches of unfiltered data at least this long are read with `pread`
/// rather than copied from the mapping (below it, a system call per
/// stretch costs more than the page faults it saves).
const PREAD_BYTES: usize = 16 << 10;

impl ChunkedFile {
    /// Read `window` into `out` (C order, native byte order).
    pub fn read_into(&self, window: &Window, out: &mut [u8], options: &ReadOptions) -> Result<()> {
        let nd = self.shape.len();
        let elem = self.dtype.size();
        if window.check_buffer(&self.shape, elem, out.len())? == 0 {
            return Ok(());
        }
        let spans: Vec<Vec<ChunkSpan>> = (0..nd)
            .map(|d| chunk_spans(&window.dims[d], self.chunk_shape[d]))
            .collect();
        let counts: Vec<u64> = spans.iter().map(|s| s.len() as u64).collect();
        let n_tasks: u64 = counts.iter().product();
        let grid: Vec<u64> = (0..nd)
            .map(|d| self.shape[d].div_ceil(self.chunk_shape[d]))
            .collect();
        let task = |t: u64| -> ([ChunkSpan; MAX_DIMS], usize) {
            let mut rem = t;
            let mut picked = [ChunkSpan::default(); MAX_DIMS];
            for d in (0..nd).rev() {
                picked[d] = spans[d][(rem % counts[d]) as usize];
                rem /= counts[d];
            }
            let at = (0..nd).fold(0u64, |at, d| at * grid[d] + picked[d].chunk);
            (picked, at as usize)
        };

        let steps = window.steps();
        let chunk_strides = strides(&self.chunk_shape);
        let out_strides = strides(&window.shape());
        let placement = Placement {
            src_strides: &chunk_strides,
            dst_strides: &out_strides,
            steps: &steps,
            ndim: nd,
            elem,
        };
        let chunk_bytes = self.chunk_shape.iter().product::<u64>() as usize * elem;

        // The bytes a task reads: an unfiltered chunk only between its first
        // and last selected element, any other whole.
        let range_of = |t: u64| -> Option<(usize, u64, u64)> {
            let (picked, at) = task(t);
            let place = self.places[at]?;
            if self.pipeline.passes_through(place.mask) {
                let (lo, hi) = selected_extent(&picked[..nd], &steps, &chunk_strides);
                Some((
                    0,
                    place.offset + lo * elem as u64,
                    (hi - lo + 1) * elem as u64,
                ))
            } else {
                Some((0, place.offset, place.size))
            }
        };
        let work = range_of(0).map_or(chunk_bytes as u64, |(_, _, len)| len) * n_tasks;
        let serial = work <= SERIAL_BYTES || options.parallelism.on_caller();
        let warm = [0, n_tasks / 2, n_tasks - 1]
            .iter()
            .filter_map(|&t| range_of(t))
            .all(|(_, offset, len)| is_resident(&self.map, offset, len));
        let threads = options.parallelism.threads.max(1) as u64;
        let outstanding = options
            .parallelism
            .in_flight
            .div_ceil(threads as usize)
            .max(1);
        let piece = n_tasks.div_ceil(threads * pieces_per_thread(warm)).max(1);
        let out_ptr = SendPtr(out.as_mut_ptr());
        let copy_task = |t: u64| -> Result<()> {
            let (picked, at) = task(t);
            let dst = out_ptr.get();
            match self.places[at] {
                // SAFETY (all three): tasks cover disjoint parts of the
                // output, which is as large as the window (checked above);
                // the source holds the whole chunk the spans address.
                None => unsafe { placement.fill(&picked[..nd], &self.fill, dst) },
                Some(place) if self.pipeline.passes_through(place.mask) => {
                    // Long stretches are read with pread: a copy from the page cache
                    // without mapping each page into this process first.
                    let mut failed = None;
                    let read =
                        placement.for_each_stretch(&picked[..nd], PREAD_BYTES, |s, d, len| {
                            if failed.is_none() {
                                // SAFETY: as for the copies: this task's part of the output.
                                let target =
                                    unsafe { std::slice::from_raw_parts_mut(dst.add(d), len) };
                                failed = self
                                    .file
                                    .read_exact_at(target, place.offset + s as u64)
                                    .err();
                            }
                        });
                    if let Some(error) = failed {
                        return Err(crate::Error::io(&self.path, error));
                    }
                    if !read {
                        unsafe { placement.copy(&picked[..nd], self.stored(place), dst) }
                    }
                }
                Some(place) => {
                    let decoded = self
                        .pipeline
                        .decode(self.stored(place), place.mask, chunk_bytes, options.verify)
                        .map_err(|message| self.corrupt(at, place, message))?;
                    unsafe { placement.copy(&picked[..nd], &decoded, dst) }
                }
            }
            Ok(())
        };
        let run_piece = |p: u64| -> Result<()> {
            let (first, last) = (p * piece, ((p + 1) * piece).min(n_tasks));
            let mut ahead = Prefetcher::new(first, last, outstanding);
            for t in first..last {
                if !warm {
                    ahead.advance(t, &range_of, &|_, offset, len| {
                        will_need(&self.map, offset, len)
                    });
                }
                copy_task(t)?;
            }
            Ok(())
        };
        let pieces = n_tasks.div_ceil(piece);
        if serial {
            (0..pieces).try_for_each(run_piece)?;
        } else {
            options.parallelism.share(pieces, &run_piece)?;
        }
        if self.watched.cut_short() {
            return Err(ChunkedFileError::CutShort {
                path: self.path.clone(),
                dataset: self.dataset.clone(),
            }
            .into());
        }
        if self.swap {
            swap_bytes(out, elem);
        }
        Ok(())
    }

    /// A stored chunk's bytes, as mapped (checked inside the file on open).
    fn stored(&self, place: Place) -> &[u8] {
        &self.map[place.offset as usize..(place.offset + place.size) as usize]
    }

    fn corrupt(&self, at: usize, place: Place, message: String) -> crate::Error {
        let grid: Vec<u64> = (0..self.shape.len())
            .map(|d| self.shape[d].div_ceil(self.chunk_shape[d]))
            .collect();
        let position = crate::window::unravel(at as u64, &grid)[..grid.len()].to_vec();
        ChunkedFileError::Corrupt {
            path: self.path.clone(),
            dataset: self.dataset.clone(),
            chunk: position,
            offset: place.offset,
            message,
        }
        .into()
    }
}

/// Reverse the bytes of every `elem`-byte element of `data`.
fn swap_bytes(data: &mut [u8], elem: usize) {
    macro_rules! swap {
        ($t:ty) => {
            for e in data.chunks_exact_mut(elem) {
                let v = <$t>::from_ne_bytes(e.try_into().expect("element")).swap_bytes();
                e.copy_from_slice(&v.to_ne_bytes());
            }
        };
    }
    match elem {
        2 => swap!(u16),
        4 => swap!(u32),
        8 => swap!(u64),
        _ => data.chunks_exact_mut(elem).for_each(<[u8]>::reverse),
    }
}
