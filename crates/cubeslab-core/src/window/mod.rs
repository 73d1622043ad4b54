//! Selection maths: a window (start, stop, step per dimension) and the part
//! of it that falls in each chunk; the copies between chunks and windows
//! are in `placement.rs`.
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

mod placement;
pub use placement::{copy_block, copy_run, Placement};

#[cfg(test)]
mod tests;
