//! Plane writes held back and copied into their chunks together.
//!
//! Planes written one after another across an axis whose neighbours lie a
//! few bytes apart in a chunk (time slices into trace-major chunks) put each
//! element on a cache line of its own, so every plane moves the whole of the
//! chunks it crosses through memory. Held back until a cache line's worth
//! of planes is in, they fill each line once.

use crate::window::{strides, DimRange, Window, MAX_DIMS};

/// Bytes of a CPU cache line: the planes a run holds span one line of a chunk.
const CACHE_LINE: u64 = 64;

/// Planes smaller than this stay in the CPU's caches with the chunks they
/// touch: they are written at once.
const MIN_PLANE_BYTES: usize = 256 << 10;

/// Planes written and not yet copied into their chunks.
pub(super) struct Staged {
    /// The first plane's window; the run covers `len` planes from it along `axis`.
    first: Window,
    axis: usize,
    /// The planes, one after another.
    data: Vec<u8>,
    plane_bytes: usize,
    /// The planes the run may hold.
    capacity: u64,
}

impl Staged {
    /// A run starting with `window` (`data` its elements), if the window is a
    /// plane worth holding back: one index along an axis whose neighbours lie
    /// less than a cache line apart in chunks of `chunk`, with room for at
    /// least two planes within `budget` bytes. The run ends at the end of the
    /// chunk or of the cache line along that axis.
    pub(super) fn start(
        window: &Window,
        data: &[u8],
        chunk: &[u64],
        shape: &[u64],
        elem: usize,
        budget: u64,
    ) -> Option<Self> {
        if data.len() < MIN_PLANE_BYTES {
            return None;
        }
        let chunk_strides = strides(chunk);
        let axis = (0..chunk.len()).rev().find(|&d| {
            window.dims[d].len() == 1
                && chunk[d] > 1
                && chunk_strides[d] * (elem as u64) < CACHE_LINE
        })?;
        let at = window.dims[axis].start;
        let per_line = CACHE_LINE / (chunk_strides[axis] * elem as u64);
        let capacity = (per_line - at % per_line)
            .min(chunk[axis] - at % chunk[axis])
            .min(shape[axis] - at)
            .min(budget / data.len() as u64);
        if capacity < 2 {
            return None;
        }
        let mut first = window.clone();
        first.dims[axis] = DimRange::new(at, at + 1);
        let mut held = Vec::with_capacity(capacity as usize * data.len());
        held.extend_from_slice(data);
        Some(Self {
            first,
            axis,
            data: held,
            plane_bytes: data.len(),
            capacity,
        })
    }

    /// The bytes the run holds when full, counted in the cache's bound.
    pub(super) fn reserved(&self) -> u64 {
        self.capacity * self.plane_bytes as u64
    }

    fn len(&self) -> u64 {
        (self.data.len() / self.plane_bytes) as u64
    }

    /// Whether `window` is the next plane of the run.
    pub(super) fn continues(&self, window: &Window) -> bool {
        let next = self.first.dims[self.axis].start + self.len();
        self.len() < self.capacity
            && window.dims.len() == self.first.dims.len()
            && window
                .dims
                .iter()
                .zip(&self.first.dims)
                .enumerate()
                .all(|(d, (w, f))| {
                    if d == self.axis {
                        w.start == next && w.len() == 1
                    } else {
                        w == f
                    }
                })
    }

    /// Hold the next plane's elements.
    pub(super) fn push(&mut self, data: &[u8]) {
        debug_assert_eq!(data.len(), self.plane_bytes);
        self.data.extend_from_slice(data);
    }

    pub(super) fn is_full(&self) -> bool {
        self.len() == self.capacity
    }

    /// The window of the planes held, their elements, and the strides (in
    /// elements, per dimension of the window) of those elements: planes
    /// outermost, each in C order.
    pub(super) fn into_block(self) -> (Window, Vec<u8>, [u64; MAX_DIMS]) {
        let planes = self.len();
        let mut window = self.first;
        let at = window.dims[self.axis].start;
        window.dims[self.axis] = DimRange::new(at, at + planes);
        let mut plane = window.shape();
        plane[self.axis] = 1;
        let mut block_strides = strides(&plane);
        block_strides[self.axis] = plane.iter().product();
        (window, self.data, block_strides)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plane(k: u64) -> Window {
        Window {
            dims: vec![
                DimRange::new(0, 512),
                DimRange::new(0, 256),
                DimRange::new(k, k + 1),
            ],
        }
    }

    const SHAPE: [u64; 3] = [512, 256, 100];
    const BYTES: usize = 512 * 256 * 4;

    #[test]
    fn a_run_ends_at_the_cache_line_the_chunk_or_the_array() {
        let data = vec![0u8; BYTES];
        let capacity = |k, chunk: [u64; 3]| {
            Staged::start(&plane(k), &data, &chunk, &SHAPE, 4, u64::MAX).map(|run| run.capacity)
        };
        assert_eq!(capacity(0, [32, 32, 64]), Some(16)); // 16 float32 per line
        assert_eq!(capacity(5, [32, 32, 64]), Some(11));
        assert_eq!(capacity(0, [32, 32, 10]), Some(10)); // the chunk ends first
        assert_eq!(capacity(97, [32, 32, 64]), Some(3)); // the array ends first
        assert_eq!(capacity(15, [32, 32, 64]), None); // one plane left in the line
        assert_eq!(capacity(0, [32, 32, 1]), None); // planes a chunk apart: written at once
    }

    #[test]
    fn planes_apart_by_a_line_or_small_or_beyond_the_budget_are_written_at_once() {
        let data = vec![0u8; BYTES];
        let inline = Window {
            dims: vec![
                DimRange::new(3, 4),
                DimRange::new(0, 256),
                DimRange::new(0, 100),
            ],
        };
        assert!(Staged::start(
            &inline,
            &data[..256 * 100 * 4],
            &[32, 32, 64],
            &SHAPE,
            4,
            u64::MAX
        )
        .is_none());
        let small = Window {
            dims: vec![
                DimRange::new(0, 8),
                DimRange::new(0, 8),
                DimRange::new(0, 1),
            ],
        };
        assert!(Staged::start(&small, &data[..256], &[32, 32, 64], &SHAPE, 4, u64::MAX).is_none());
        assert!(Staged::start(&plane(0), &data, &[32, 32, 64], &SHAPE, 4, BYTES as u64).is_none());
    }

    #[test]
    fn a_block_holds_the_planes_outermost() {
        let data: Vec<u8> = (0..BYTES).map(|i| i as u8).collect();
        let mut run = Staged::start(&plane(4), &data, &[32, 32, 64], &SHAPE, 4, u64::MAX).unwrap();
        assert!(run.continues(&plane(5)) && !run.continues(&plane(4)) && !run.continues(&plane(6)));
        run.push(&data);
        let (window, held, block_strides) = run.into_block();
        assert_eq!(window.dims[2], DimRange::new(4, 6));
        assert_eq!(held.len(), 2 * BYTES);
        assert_eq!(&block_strides[..3], &[256, 1, 512 * 256]);
    }
}
