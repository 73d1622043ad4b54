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
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn selected(r: &DimRange) -> Vec<u64> {
        (r.start..r.stop).step_by(r.step as usize).collect()
    }

    #[test]
    fn copy_run_copies_every_length_and_nothing_more() {
        // Every branch of the in-line copy (and the memcpy beyond it), from
        // unaligned offsets, against slice copying; the bytes around the run
        // must stay untouched.
        let src: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        for len in 0..=150 {
            for (from, to) in [(0, 0), (1, 3), (5, 0), (13, 7)] {
                let mut dst = vec![0xAAu8; 300];
                // SAFETY: both ranges lie inside their buffers.
                unsafe { copy_run(src.as_ptr().add(from), dst.as_mut_ptr().add(to), len) };
                let mut expected = vec![0xAAu8; 300];
                expected[to..to + len].copy_from_slice(&src[from..from + len]);
                assert_eq!(dst, expected, "len {len}, from {from}, to {to}");
            }
        }
    }

    #[test]
    fn stretches_copy_what_copy_copies_and_merge_whole_rows() {
        // A 4x6x8 chunk of u16; windows that keep the last dimension contiguous.
        let chunk = [4u64, 6, 8];
        let src: Vec<u8> = (0..4 * 6 * 8 * 2).map(|i| (i % 251) as u8).collect();
        // (start, stop, step) per dimension, and the stretches expected.
        type Case = (&'static [(u64, u64, u64)], usize);
        let cases: [Case; 3] = [
            (&[(0, 4, 1), (0, 6, 1), (0, 8, 1)], 1), // the whole chunk: one stretch
            (&[(1, 3, 1), (2, 5, 1), (0, 8, 1)], 2), // whole rows, two blocks
            (&[(0, 4, 2), (1, 2, 1), (2, 7, 1)], 2), // part rows, stepped
        ];
        for (window, stretches) in cases {
            let dims: Vec<DimRange> = window
                .iter()
                .map(|&(start, stop, step)| DimRange { start, stop, step })
                .collect();
            let out_shape: Vec<u64> = dims.iter().map(DimRange::len).collect();
            let spans: Vec<ChunkSpan> = dims.iter().map(|r| chunk_spans(r, 8)[0]).collect();
            let (src_strides, dst_strides) = (strides(&chunk), strides(&out_shape));
            let mut steps = [1u64; MAX_DIMS];
            for (d, r) in dims.iter().enumerate() {
                steps[d] = r.step;
            }
            let placement = Placement {
                src_strides: &src_strides,
                dst_strides: &dst_strides,
                steps: &steps,
                ndim: 3,
                elem: 2,
            };
            let n = out_shape.iter().product::<u64>() as usize * 2;
            let mut expected = vec![0u8; n];
            unsafe { placement.copy(&spans, &src, expected.as_mut_ptr()) };
            let mut got = vec![0u8; n];
            let mut count = 0;
            assert!(placement.for_each_stretch(&spans, 0, |s, d, len| {
                got[d..d + len].copy_from_slice(&src[s..s + len]);
                count += 1;
            }));
            assert_eq!(got, expected, "{window:?}");
            assert_eq!(count, stretches, "{window:?}");
            assert!(!placement.for_each_stretch(&spans, n + 1, |_, _, _| {}));
        }
    }

    proptest! {
        /// The spans cover exactly the selected indices, each once, in order.
        #[test]
        fn spans_cover_selection(start in 0u64..200, len in 0u64..300, step in 1u64..40, chunk in 1u64..50) {
            let r = DimRange { start, stop: start + len, step };
            let mut got = Vec::new();
            for s in chunk_spans(&r, chunk) {
                prop_assert!(s.count > 0);
                prop_assert!(s.first + (s.count - 1) * step < chunk);
                for i in 0..s.count {
                    prop_assert_eq!(s.out_first + i, got.len() as u64);
                    got.push(s.chunk * chunk + s.first + i * step);
                }
            }
            prop_assert_eq!(got, selected(&r));
        }

        /// Copying every chunk's part of a window reproduces a direct gather.
        #[test]
        fn copy_matches_direct_gather(
            shape in proptest::collection::vec(1u64..9, 1..4),
            chunk_seed in proptest::collection::vec(1u64..6, 4),
            window_seed in proptest::collection::vec((0u64..9, 0u64..9, 1u64..4), 4),
        ) {
            let nd = shape.len();
            let chunk: Vec<u64> = (0..nd).map(|d| chunk_seed[d]).collect();
            let dims: Vec<DimRange> = (0..nd).map(|d| {
                let (a, b, step) = window_seed[d];
                let (a, b) = (a % (shape[d] + 1), b % (shape[d] + 1));
                DimRange { start: a.min(b), stop: a.max(b), step }
            }).collect();
            let window = Window { dims };
            let total: u64 = shape.iter().product();
            let data: Vec<u32> = (0..total as u32).collect();
            let out_shape = window.shape();
            let mut out = vec![u32::MAX; window.num_elements() as usize];
            // Reference: direct gather.
            let mut expected = Vec::new();
            let full = strides(&shape);
            let mut idx = vec![0u64; nd];
            if window.num_elements() > 0 {
                loop {
                    let flat: u64 = (0..nd).map(|d| (window.dims[d].start + idx[d] * window.dims[d].step) * full[d]).sum();
                    expected.push(data[flat as usize]);
                    let mut d = nd;
                    loop {
                        if d == 0 { break; }
                        d -= 1;
                        idx[d] += 1;
                        if idx[d] < out_shape[d] { break; }
                        idx[d] = 0;
                    }
                    if idx.iter().all(|&i| i == 0) { break; }
                }
            }
            // Through chunks: cut each chunk out of `data`, then copy its part.
            let per_dim: Vec<Vec<ChunkSpan>> = (0..nd).map(|d| chunk_spans(&window.dims[d], chunk[d])).collect();
            let src_strides = strides(&chunk);
            let dst_strides = strides(&out_shape);
            let mut steps = [1u64; MAX_DIMS];
            for d in 0..nd { steps[d] = window.dims[d].step; }
            let placement = Placement { src_strides: &src_strides, dst_strides: &dst_strides, steps: &steps, ndim: nd, elem: 4 };
            let n_tasks: usize = per_dim.iter().map(Vec::len).product();
            for t in 0..n_tasks {
                let mut rem = t;
                let mut spans = Vec::new();
                for d in (0..nd).rev() {
                    spans.push(per_dim[d][rem % per_dim[d].len()]);
                    rem /= per_dim[d].len();
                }
                spans.reverse();
                let chunk_len: u64 = chunk.iter().product();
                let mut chunk_data = vec![0u32; chunk_len as usize];
                for (i, v) in chunk_data.iter_mut().enumerate() {
                    let mut rem = i as u64;
                    let mut flat = 0u64;
                    let mut inside = true;
                    for d in (0..nd).rev() {
                        let c = rem % chunk[d];
                        rem /= chunk[d];
                        let g = spans[d].chunk * chunk[d] + c;
                        inside &= g < shape[d];
                        flat += g * full[d];
                    }
                    *v = if inside { data[flat as usize] } else { 0 };
                }
                let bytes: Vec<u8> = chunk_data.iter().flat_map(|v| v.to_ne_bytes()).collect();
                unsafe { placement.copy(&spans, &bytes, out.as_mut_ptr() as *mut u8) };
            }
            prop_assert_eq!(out, expected);
        }
    }
}
