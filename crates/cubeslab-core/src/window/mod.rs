//! Selection maths: a window (start, stop, step per dimension), the part of it
//! that falls in each chunk, and the copy of a chunk's selected elements into
//! the output buffer.
//!
//! Everything is in C (row-major) order, the order of Zarr's `bytes` codec and
//! of numpy's default arrays.

/// The most dimensions an array may have.
pub const MAX_DIMS: usize = 8;

/// Why a window does not fit an array or a buffer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SelectionError {
    /// The window has a different number of dimensions than the array.
    #[error("window has {got} dimensions, the array has {expected}")]
    Dimensionality {
        /// Array dimensions.
        expected: usize,
        /// Window dimensions.
        got: usize,
    },
    /// A window range reaches outside the array.
    #[error("dimension {dim}: range {start}..{stop} is outside 0..{size}")]
    OutOfBounds {
        /// Dimension index.
        dim: usize,
        /// Requested start.
        start: u64,
        /// Requested stop.
        stop: u64,
        /// Array size along `dim`.
        size: u64,
    },
    /// A step of zero.
    #[error("dimension {dim}: step must be at least 1")]
    ZeroStep {
        /// Dimension index.
        dim: usize,
    },
    /// The output buffer has the wrong size.
    #[error("output buffer holds {got} bytes, the window needs {expected}")]
    BufferSize {
        /// Bytes the window needs.
        expected: usize,
        /// Bytes the buffer has.
        got: usize,
    },
    /// Too many dimensions.
    #[error("{got} dimensions, at most {MAX_DIMS} are supported")]
    TooManyDims {
        /// Dimensions requested.
        got: usize,
    },
}

/// The selected indices along one dimension: `start, start+step, ... < stop`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DimRange {
    /// First index.
    pub start: u64,
    /// One past the last index that may be selected.
    pub stop: u64,
    /// Distance between selected indices (at least 1).
    pub step: u64,
}

impl DimRange {
    /// Every index in `start..stop`.
    pub fn new(start: u64, stop: u64) -> Self {
        Self {
            start,
            stop,
            step: 1,
        }
    }

    /// Number of selected indices.
    pub fn len(&self) -> u64 {
        if self.stop <= self.start {
            0
        } else {
            (self.stop - self.start).div_ceil(self.step)
        }
    }

    /// Whether nothing is selected.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A selection of an N-D array: one [`DimRange`] per dimension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// The ranges, outermost dimension first.
    pub dims: Vec<DimRange>,
}

impl Window {
    /// The elements of the chunk at grid `indices` of chunks of `chunk`, in
    /// an array of `shape` (edge chunks clipped).
    pub fn of_chunk(indices: &[u64], chunk: &[u64], shape: &[u64]) -> Window {
        Window {
            dims: indices
                .iter()
                .zip(chunk)
                .zip(shape)
                .map(|((&i, &c), &n)| DimRange::new(i * c, ((i + 1) * c).min(n)))
                .collect(),
        }
    }
    /// The whole of an array of `shape`.
    pub fn full(shape: &[u64]) -> Self {
        Self {
            dims: shape.iter().map(|&n| DimRange::new(0, n)).collect(),
        }
    }

    /// Check the window against an array's shape.
    pub fn validate(&self, shape: &[u64]) -> Result<(), SelectionError> {
        if self.dims.len() != shape.len() {
            return Err(SelectionError::Dimensionality {
                expected: shape.len(),
                got: self.dims.len(),
            });
        }
        if shape.len() > MAX_DIMS {
            return Err(SelectionError::TooManyDims { got: shape.len() });
        }
        for (dim, (r, &size)) in self.dims.iter().zip(shape).enumerate() {
            if r.step == 0 {
                return Err(SelectionError::ZeroStep { dim });
            }
            if r.start > r.stop || r.stop > size {
                return Err(SelectionError::OutOfBounds {
                    dim,
                    start: r.start,
                    stop: r.stop,
                    size,
                });
            }
        }
        Ok(())
    }

    /// Shape of the output.
    pub fn shape(&self) -> Vec<u64> {
        self.dims.iter().map(DimRange::len).collect()
    }

    /// Number of selected elements.
    pub fn num_elements(&self) -> u64 {
        self.dims.iter().map(DimRange::len).product()
    }

    /// The step of each dimension (1 past the window's dimensions).
    pub fn steps(&self) -> [u64; MAX_DIMS] {
        let mut steps = [1u64; MAX_DIMS];
        for (d, r) in self.dims.iter().enumerate() {
            steps[d] = r.step;
        }
        steps
    }

    /// The smallest box holding every selected element: from each
    /// dimension's start to its last selected index, inclusive.
    pub fn bounding_box(&self) -> Vec<std::ops::Range<u64>> {
        self.dims
            .iter()
            .map(|r| r.start..r.start + (r.len() - 1) * r.step + 1)
            .collect()
    }

    /// Copy the selected elements (`elem` bytes each) out of `boxed`, the
    /// C-order contents of [`Self::bounding_box`], into `out`.
    pub fn pick_from_box(&self, boxed: &[u8], out: &mut [u8], elem: usize) {
        let nd = self.dims.len();
        let box_shape: Vec<u64> = self
            .bounding_box()
            .iter()
            .map(|r| r.end - r.start)
            .collect();
        assert_eq!(
            boxed.len() as u64,
            box_shape.iter().product::<u64>() * elem as u64
        );
        assert_eq!(out.len() as u64, self.num_elements() * elem as u64);
        if nd == 0 {
            out.copy_from_slice(&boxed[..out.len()]);
            return;
        }
        let spans: Vec<ChunkSpan> = self
            .dims
            .iter()
            .map(|r| ChunkSpan {
                chunk: 0,
                first: 0,
                count: r.len(),
                out_first: 0,
            })
            .collect();
        let steps = self.steps();
        let (src, dst) = (strides(&box_shape), strides(&self.shape()));
        let placement = Placement {
            src_strides: &src,
            dst_strides: &dst,
            steps: &steps,
            ndim: nd,
            elem,
        };
        // SAFETY: both buffers' sizes were checked above.
        unsafe { placement.copy(&spans, boxed, out.as_mut_ptr()) };
    }

    /// Check the window against an array of `shape` and a buffer of
    /// `buffer_len` bytes for it (`elem` bytes per element); the bytes the
    /// window holds.
    pub fn check_buffer(
        &self,
        shape: &[u64],
        elem: usize,
        buffer_len: usize,
    ) -> Result<usize, SelectionError> {
        self.validate(shape)?;
        let expected = self.num_elements() as usize * elem;
        if buffer_len != expected {
            return Err(SelectionError::BufferSize {
                expected,
                got: buffer_len,
            });
        }
        Ok(expected)
    }
}

/// The part of one dimension's selection that falls inside one chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChunkSpan {
    /// Chunk index along the dimension.
    pub chunk: u64,
    /// Offset of the first selected element inside the chunk.
    pub first: u64,
    /// Number of selected elements inside the chunk.
    pub count: u64,
    /// Position of the first of them in the output.
    pub out_first: u64,
}

/// Split one dimension's selection by chunks of `chunk_len`, skipping chunks
/// that a large step jumps over.
pub fn chunk_spans(range: &DimRange, chunk_len: u64) -> Vec<ChunkSpan> {
    let n = range.len();
    if n == 0 {
        return Vec::new();
    }
    let last = range.start + (n - 1) * range.step;
    let mut spans = Vec::new();
    let mut index = range.start;
    while index <= last {
        let chunk = index / chunk_len;
        let chunk_end = (chunk + 1) * chunk_len; // exclusive
        let last_here = last.min(chunk_end - 1);
        let count = (last_here - index) / range.step + 1;
        spans.push(ChunkSpan {
            chunk,
            first: index - chunk * chunk_len,
            count,
            out_first: (index - range.start) / range.step,
        });
        index += count * range.step;
    }
    spans
}

/// First and last element offsets (in elements, within the chunk) that a
/// task's selection touches.
pub fn selected_extent(
    spans: &[ChunkSpan],
    steps: &[u64; MAX_DIMS],
    chunk_strides: &[u64; MAX_DIMS],
) -> (u64, u64) {
    let mut lo = 0;
    let mut hi = 0;
    for (d, s) in spans.iter().enumerate() {
        lo += s.first * chunk_strides[d];
        hi += (s.first + (s.count - 1) * steps[d]) * chunk_strides[d];
    }
    (lo, hi)
}

/// C-order multi-index of linear index `i` in a grid of `shape` (a fixed
/// array, not a `Vec`: it runs once per chunk or trace on hot paths).
pub fn unravel(mut i: u64, shape: &[u64]) -> [u64; MAX_DIMS] {
    let mut idx = [0u64; MAX_DIMS];
    for d in (0..shape.len()).rev() {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    idx
}

/// C-order strides, in elements, of an array of `shape`.
pub fn strides(shape: &[u64]) -> [u64; MAX_DIMS] {
    let mut s = [0u64; MAX_DIMS];
    let mut acc = 1u64;
    for d in (0..shape.len()).rev() {
        s[d] = acc;
        acc *= shape[d];
    }
    s
}

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
        let e = self.elem;
        let inner = self.inner_dim(spans);
        let count = spans[inner].count as usize;
        let src_step = (self.steps[inner] * self.src_strides[inner]) as usize * e;
        let dst_step = self.dst_strides[inner] as usize * e;
        let last = (count - 1) * src_step + e;
        debug_assert!(spans_fit(self, spans, inner, last, src.len()));
        let src = src.as_ptr();
        // Two loops, not a branch per run: each closure stays small enough
        // to be inlined into its walk.
        if src_step == e && dst_step == e {
            let len = count * e;
            self.for_each_run(spans, inner, |s, d| {
                copy_run(src.add(s as usize * e), dst.add(d as usize * e), len)
            });
        } else {
            self.for_each_run(spans, inner, |s, d| {
                let (sp, dp) = (src.add(s as usize * e), dst.add(d as usize * e));
                copy_strided(sp, dp, count, src_step, dst_step, e)
            });
        }
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
        let inner = self.inner_dim(spans);
        let count = spans[inner].count as usize;
        let chunk_step = (self.steps[inner] * self.src_strides[inner]) as usize * e;
        let window_step = self.dst_strides[inner] as usize * e;
        let (from, to) = (window.as_ptr(), chunk.as_mut_ptr());
        // SAFETY: every run lies inside both buffers (asserted above), and
        // `chunk` is borrowed mutably, so nothing else writes it.
        unsafe {
            if chunk_step == e && window_step == e {
                let len = count * e;
                self.for_each_run(spans, inner, |c, w| {
                    copy_run(from.add(w as usize * e), to.add(c as usize * e), len)
                });
            } else {
                self.for_each_run(spans, inner, |c, w| {
                    let (wp, cp) = (from.add(w as usize * e), to.add(c as usize * e));
                    copy_strided(wp, cp, count, window_step, chunk_step, e)
                });
            }
        }
    }

    /// Write `value` (one element's bytes) into every selected output element.
    ///
    /// # Safety
    /// As for [`Placement::copy`].
    pub unsafe fn fill(&self, spans: &[ChunkSpan], value: &[u8], dst: *mut u8) {
        let e = self.elem;
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
unsafe fn copy_run(src: *const u8, dst: *mut u8, len: usize) {
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

#[cfg(test)]
mod tests;
