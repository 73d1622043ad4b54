//! Copying a chunk's selected elements into a window's buffer, and a
//! window's elements into a chunk: one walk over the runs of a selection,
//! both ways.

use super::{strides, ChunkSpan, MAX_DIMS};

/// Where one chunk's selected elements come from and go to.
#[derive(Debug, Clone, Copy)]
pub struct Placement<'a> {
    /// Strides (elements) of the source chunk.
    pub src_strides: &'a [u64; MAX_DIMS],
    /// Strides (elements) of the output.
    pub dst_strides: &'a [u64; MAX_DIMS],
    /// Step of the selection per dimension.
    pub steps: &'a [u64; MAX_DIMS],
    /// Number of dimensions.
    pub ndim: usize,
    /// Bytes per element.
    pub elem: usize,
}

impl Placement<'_> {
    /// The dimension walked by the innermost loop: the last one, unless it
    /// selects a single element (a time slice), then the last that selects
    /// more — so a run is as long as possible and per-run overhead is paid
    /// once per run, not once per element.
    #[inline]
    fn inner_dim(&self, spans: &[ChunkSpan]) -> usize {
        (0..self.ndim)
            .rev()
            .find(|&d| spans[d].count > 1)
            .unwrap_or(self.ndim - 1)
    }

    /// Call `run(src_elem, dst_elem)` at the start of every innermost run of
    /// the selection along dimension `inner`. The runs of the next dimension
    /// out are walked by a plain loop, and the offsets move by one stride per
    /// run: thin planes cut chunks into thousands of short runs per read, and
    /// a general odometer step per run cost as much as the copy itself.
    #[inline]
    fn for_each_run(&self, spans: &[ChunkSpan], inner: usize, mut run: impl FnMut(u64, u64)) {
        let nd = self.ndim;
        let mut src = 0u64;
        let mut dst = 0u64;
        let mut src_step = [0u64; MAX_DIMS];
        for d in 0..nd {
            src += spans[d].first * self.src_strides[d];
            dst += spans[d].out_first * self.dst_strides[d];
            src_step[d] = self.steps[d] * self.src_strides[d];
        }
        // The dimension of the plain loop: the last one besides `inner`.
        let Some(middle) = (0..nd).rev().find(|&d| d != inner) else {
            run(src, dst);
            return;
        };
        let (rows, row_src, row_dst) = (
            spans[middle].count,
            src_step[middle],
            self.dst_strides[middle],
        );
        let mut counter = [0u64; MAX_DIMS];
        loop {
            let (mut s, mut t) = (src, dst);
            for _ in 0..rows {
                run(s, t);
                s += row_src;
                t += row_dst;
            }
            // Odometer over the remaining dimensions.
            let mut d = middle;
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                if d == inner {
                    continue;
                }
                counter[d] += 1;
                if counter[d] < spans[d].count {
                    src += src_step[d];
                    dst += self.dst_strides[d];
                    break;
                }
                // Back to this dimension's first index; carry into the next.
                src -= (spans[d].count - 1) * src_step[d];
                dst -= (spans[d].count - 1) * self.dst_strides[d];
                counter[d] = 0;
            }
        }
    }

    /// Call `run(src_byte, dst_byte, len)` for each stretch of the selection
    /// that is contiguous in both the chunk and the output, neighbouring
    /// runs merged (whole rows of a chunk make one stretch), if the
    /// innermost runs are contiguous and at least `min_bytes` long; else
    /// return false without calling it.
    pub fn for_each_stretch(
        &self,
        spans: &[ChunkSpan],
        min_bytes: usize,
        mut run: impl FnMut(usize, usize, usize),
    ) -> bool {
        let inner = self.inner_dim(spans);
        let e = self.elem;
        let len = spans[inner].count as usize * e;
        if self.steps[inner] * self.src_strides[inner] != 1
            || self.dst_strides[inner] != 1
            || len < min_bytes
        {
            return false;
        }
        let mut pending: Option<(usize, usize, usize)> = None;
        self.for_each_run(spans, inner, |s, d| {
            let (s, d) = (s as usize * e, d as usize * e);
            match &mut pending {
                Some((ps, pd, pl)) if *ps + *pl == s && *pd + *pl == d => *pl += len,
                _ => {
                    if let Some((ps, pd, pl)) = pending.replace((s, d, len)) {
                        run(ps, pd, pl);
                    }
                }
            }
        });
        if let Some((ps, pd, pl)) = pending {
            run(ps, pd, pl);
        }
        true
    }

    /// Copy the selected elements of `src` (a whole chunk, C order) into `dst`.
    ///
    /// # Safety
    /// `dst` must be valid for writes over every output element the spans
    /// address, and no other thread may write those elements concurrently.
    /// `src` must hold the whole chunk described by `src_strides`.
    pub unsafe fn copy(&self, spans: &[ChunkSpan], src: &[u8], dst: *mut u8) {
        if self.ndim == 0 {
            assert!(src.len() >= self.elem);
            std::ptr::copy_nonoverlapping(src.as_ptr(), dst, self.elem);
            return;
        }
        let inner = self.inner_dim(spans);
        let last = (spans[inner].count as usize - 1)
            * (self.steps[inner] * self.src_strides[inner]) as usize
            * self.elem
            + self.elem;
        debug_assert!(spans_fit(self, spans, inner, last, src.len()));
        self.copy_runs::<false>(spans, src.as_ptr(), dst);
    }

    /// The other way from [`Self::copy`], what a window write does: into
    /// the selected elements of `chunk` (a whole chunk, C order), the
    /// elements of `window` at their output positions.
    ///
    /// # Panics
    /// If the selection reaches past either buffer.
    pub fn copy_back(&self, spans: &[ChunkSpan], window: &[u8], chunk: &mut [u8]) {
        let e = self.elem;
        let (mut chunk_last, mut window_last) = (0u64, 0u64);
        for (d, s) in spans.iter().enumerate().take(self.ndim) {
            chunk_last += (s.first + (s.count - 1) * self.steps[d]) * self.src_strides[d];
            window_last += (s.out_first + s.count - 1) * self.dst_strides[d];
        }
        // Strides are not negative: the last element lies furthest in.
        assert!((chunk_last as usize + 1) * e <= chunk.len());
        assert!((window_last as usize + 1) * e <= window.len());
        // SAFETY: every run lies inside both buffers (asserted above), and
        // `chunk` is borrowed mutably, so nothing else writes it.
        unsafe { self.copy_runs::<true>(spans, window.as_ptr(), chunk.as_mut_ptr()) }
    }

    /// Copy every run of the selection from the chunk at `from` to the
    /// window at `to`, or (`BACK`) from the window at `from` to the chunk
    /// at `to`.
    ///
    /// # Safety
    /// Every run must lie inside both buffers, and nothing else may write
    /// the elements copied to meanwhile.
    #[inline(always)]
    unsafe fn copy_runs<const BACK: bool>(
        &self,
        spans: &[ChunkSpan],
        from: *const u8,
        to: *mut u8,
    ) {
        let e = self.elem;
        if self.ndim == 0 {
            // A 0-d array: its one element.
            std::ptr::copy_nonoverlapping(from, to, e);
            return;
        }
        let inner = self.inner_dim(spans);
        let count = spans[inner].count as usize;
        let chunk_step = (self.steps[inner] * self.src_strides[inner]) as usize * e;
        let window_step = self.dst_strides[inner] as usize * e;
        let (from_step, to_step) = if BACK {
            (window_step, chunk_step)
        } else {
            (chunk_step, window_step)
        };
        // A run's offsets (chunk, window) as (from, to), in bytes.
        let ends = |c: u64, w: u64| {
            let (c, w) = (c as usize * e, w as usize * e);
            if BACK {
                (w, c)
            } else {
                (c, w)
            }
        };
        // Two loops, not a branch per run: each closure stays small enough
        // to be inlined into its walk.
        if from_step == e && to_step == e {
            let len = count * e;
            self.for_each_run(spans, inner, |c, w| {
                let (f, t) = ends(c, w);
                copy_run_raw(from.add(f), to.add(t), len)
            });
        } else {
            self.for_each_run(spans, inner, |c, w| {
                let (f, t) = ends(c, w);
                copy_strided(from.add(f), to.add(t), count, from_step, to_step, e)
            });
        }
    }

    /// Write `value` (one element's bytes) into every selected output element.
    ///
    /// # Safety
    /// As for [`Placement::copy`].
    pub unsafe fn fill(&self, spans: &[ChunkSpan], value: &[u8], dst: *mut u8) {
        let e = self.elem;
        if self.ndim == 0 {
            std::ptr::copy_nonoverlapping(value.as_ptr(), dst, e);
            return;
        }
        let inner = self.inner_dim(spans);
        let count = spans[inner].count as usize;
        let dst_step = self.dst_strides[inner] as usize * e;
        self.for_each_run(spans, inner, |_, d| {
            let mut p = dst.add(d as usize * e);
            for _ in 0..count {
                std::ptr::copy_nonoverlapping(value.as_ptr(), p, e);
                p = p.add(dst_step);
            }
        });
    }
}

/// Whether every run `placement` walks over `spans` ends (`last` bytes
/// after its start) inside a chunk of `chunk_len` bytes.
fn spans_fit(
    placement: &Placement<'_>,
    spans: &[ChunkSpan],
    inner: usize,
    last: usize,
    chunk_len: usize,
) -> bool {
    let mut fits = true;
    placement.for_each_run(spans, inner, |s, _| {
        fits &= s as usize * placement.elem + last <= chunk_len
    });
    fits
}

/// Copy `len` contiguous bytes. Runs of up to 64 bytes (a thin plane's
/// piece of a chunk row) are copied as two overlapping words or vectors,
/// in line: a call to `memcpy` per run costs more than the bytes do.
#[inline]
unsafe fn copy_run_raw(src: *const u8, dst: *mut u8, len: usize) {
    macro_rules! two {
        ($t:ty) => {{
            let n = std::mem::size_of::<$t>();
            let head = std::ptr::read_unaligned(src as *const $t);
            let tail = std::ptr::read_unaligned(src.add(len - n) as *const $t);
            std::ptr::write_unaligned(dst as *mut $t, head);
            std::ptr::write_unaligned(dst.add(len - n) as *mut $t, tail);
        }};
    }
    match len {
        0 => {}
        1..=3 => std::ptr::copy_nonoverlapping(src, dst, len),
        4..=7 => two!(u32),
        8..=15 => two!(u64),
        16..=31 => two!(u128),
        32..=64 => two!([u128; 2]),
        _ => std::ptr::copy_nonoverlapping(src, dst, len),
    }
}

/// Copy `count` elements of `elem` bytes, `src_step` bytes apart, to
/// `dst_step` bytes apart. Specialised for the common element sizes so the
/// compiler emits plain loads and stores.
#[inline]
unsafe fn copy_strided(
    src: *const u8,
    dst: *mut u8,
    count: usize,
    src_step: usize,
    dst_step: usize,
    elem: usize,
) {
    macro_rules! gather {
        ($t:ty) => {{
            for i in 0..count {
                let v = std::ptr::read_unaligned(src.add(i * src_step) as *const $t);
                std::ptr::write_unaligned(dst.add(i * dst_step) as *mut $t, v);
            }
        }};
    }
    match elem {
        1 => gather!(u8),
        2 => gather!(u16),
        4 => gather!(u32),
        8 => gather!(u64),
        _ => {
            for i in 0..count {
                std::ptr::copy_nonoverlapping(src.add(i * src_step), dst.add(i * dst_step), elem);
            }
        }
    }
}

/// Copy `n` bytes from `from` at `src` to `to` at `dst`, short runs as
/// fixed-size moves (see [`copy_run_raw`]).
///
/// # Panics
/// If either run reaches past its slice.
#[inline(always)]
pub fn copy_run(from: &[u8], src: usize, to: &mut [u8], dst: usize, n: usize) {
    let (from, to) = (&from[src..src + n], &mut to[dst..dst + n]);
    // SAFETY: both runs are `n` bytes of their slices, which cannot overlap.
    unsafe { copy_run_raw(from.as_ptr(), to.as_mut_ptr(), n) }
}

/// Copy the block of `extent` at `corner` of a C-order array of
/// `from_shape` into the corner of a C-order chunk of `to_shape`: what an
/// orientation copy and a shard built from a window both do.
pub fn copy_block(
    from: &[u8],
    from_shape: &[u64],
    corner: &[u64],
    to: &mut [u8],
    to_shape: &[u64],
    extent: &[u64],
    elem: usize,
) {
    if extent.contains(&0) {
        return;
    }
    let spans: Vec<ChunkSpan> = (0..extent.len())
        .map(|d| ChunkSpan {
            chunk: 0,
            first: 0,
            count: extent[d],
            out_first: corner[d],
        })
        .collect();
    let (chunk_strides, array_strides) = (strides(to_shape), strides(from_shape));
    Placement {
        src_strides: &chunk_strides,
        dst_strides: &array_strides,
        steps: &[1; MAX_DIMS],
        ndim: extent.len(),
        elem,
    }
    .copy_back(&spans, from, to);
}
