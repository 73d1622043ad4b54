//! Moving a window's elements into chunks: the chunks a window touches, and
//! the copy of its part of each.

use crate::{
    error::Result,
    window::{ChunkSpan, DimRange, MAX_DIMS},
};

/// Call `f` with every combination of one span per dimension.
pub(super) fn for_each_combination(
    per_dim: &[Vec<ChunkSpan>],
    mut f: impl FnMut(&[ChunkSpan]) -> Result<()>,
) -> Result<()> {
    if per_dim.iter().any(Vec::is_empty) {
        return Ok(());
    }
    let mut at = vec![0usize; per_dim.len()];
    let mut spans: Vec<ChunkSpan> = per_dim.iter().map(|s| s[0]).collect();
    loop {
        f(&spans)?;
        let mut d = per_dim.len();
        loop {
            if d == 0 {
                return Ok(());
            }
            d -= 1;
            at[d] += 1;
            if at[d] < per_dim[d].len() {
                spans[d] = per_dim[d][at[d]];
                break;
            }
            at[d] = 0;
            spans[d] = per_dim[d][0];
        }
    }
}

/// Copy the part of a window's elements (`src`, C order with
/// `window_strides`) that `spans` select into a chunk (`dst`, C order with
/// `chunk_strides`), at the window's steps.
pub(super) fn scatter(
    spans: &[ChunkSpan],
    src: &[u8],
    window_strides: &[u64; MAX_DIMS],
    dst: &mut [u8],
    chunk_strides: &[u64; MAX_DIMS],
    dims: &[DimRange],
    elem: usize,
) {
    let nd = spans.len();
    if nd == 0 {
        dst[..elem].copy_from_slice(&src[..elem]);
        return;
    }
    // Runs go along the last dimension that selects more than one element
    // (a time slice's runs go along crosslines), each run copied at once
    // when both sides are contiguous along it.
    let inner = (0..nd)
        .rev()
        .find(|&d| spans[d].count > 1)
        .unwrap_or(nd - 1);
    let n = spans[inner].count as usize;
    let src_step = window_strides[inner] as usize * elem;
    let dst_step = (chunk_strides[inner] * dims[inner].step) as usize * elem;
    let mut pos = [0u64; MAX_DIMS];
    loop {
        let mut s = spans[inner].out_first * window_strides[inner];
        let mut t = spans[inner].first * chunk_strides[inner];
        for d in (0..nd).filter(|&d| d != inner) {
            s += (spans[d].out_first + pos[d]) * window_strides[d];
            t += (spans[d].first + pos[d] * dims[d].step) * chunk_strides[d];
        }
        let (s0, t0) = (s as usize * elem, t as usize * elem);
        if src_step == elem && dst_step == elem {
            dst[t0..t0 + n * elem].copy_from_slice(&src[s0..s0 + n * elem]);
        } else {
            assert!(s0 + (n - 1) * src_step + elem <= src.len());
            assert!(t0 + (n - 1) * dst_step + elem <= dst.len());
            // SAFETY: the asserts above keep every element of the run in bounds.
            unsafe {
                match elem {
                    1 => copy_run::<1>(src, s0, src_step, dst, t0, dst_step, n),
                    2 => copy_run::<2>(src, s0, src_step, dst, t0, dst_step, n),
                    4 => copy_run::<4>(src, s0, src_step, dst, t0, dst_step, n),
                    8 => copy_run::<8>(src, s0, src_step, dst, t0, dst_step, n),
                    _ => {
                        for i in 0..n {
                            let (a, b) = (s0 + i * src_step, t0 + i * dst_step);
                            dst[b..b + elem].copy_from_slice(&src[a..a + elem]);
                        }
                    }
                }
            }
        }
        // The next run: an odometer over the other dimensions, last fastest.
        let mut d = nd;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            if d == inner {
                continue;
            }
            pos[d] += 1;
            if pos[d] < spans[d].count {
                break;
            }
            pos[d] = 0;
        }
    }
}

/// Copy `n` elements of `E` bytes from `src` (every `src_step` bytes from
/// `s0`) to `dst` (every `dst_step` bytes from `t0`): a fixed-size copy per
/// element, which compiles to a move, not a call.
///
/// # Safety
/// Every element of the run must lie inside both slices.
#[allow(clippy::too_many_arguments)]
unsafe fn copy_run<const E: usize>(
    src: &[u8],
    s0: usize,
    src_step: usize,
    dst: &mut [u8],
    t0: usize,
    dst_step: usize,
    n: usize,
) {
    let (from, to) = (src.as_ptr(), dst.as_mut_ptr());
    for i in 0..n {
        // SAFETY: in bounds by the caller's contract; the slices do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(from.add(s0 + i * src_step), to.add(t0 + i * dst_step), E)
        };
    }
}
