//! Copying a block of a C-order array into a C-order chunk: what an
//! orientation copy and a shard built from a window both do.

use crate::window::strides;

/// Copy the block of `extent` at `corner` of a C-order array of `from_shape`
/// into the corner of a C-order chunk of `to_shape`. Rows along the last
/// dimension are copied whole; when they are short (a chunk one sample
/// deep), the copy walks the last two dimensions element by element with
/// running offsets, as such a row would otherwise cost a call per element.
pub(super) fn copy_block(
    from: &[u8],
    from_shape: &[u64],
    corner: &[u64],
    to: &mut [u8],
    to_shape: &[u64],
    extent: &[u64],
    elem: usize,
) {
    let nd = extent.len();
    if extent.contains(&0) {
        return;
    }
    let (fs, ts) = (strides(from_shape), strides(to_shape));
    let row = extent[nd - 1] as usize * elem;
    // Dimensions walked by the odometer: all but the last, or all but the
    // last two when rows are short and there are two to walk.
    let short = row < SHORT_ROW_BYTES && nd >= 2;
    let walked = if short { nd - 2 } else { nd - 1 };
    let mut src = (0..nd).map(|d| corner[d] * fs[d]).sum::<u64>() as usize * elem;
    let mut dst = 0usize;
    let mut at = [0u64; crate::window::MAX_DIMS];
    loop {
        if short {
            let (n, s_step, d_step) = (
                extent[nd - 2] as usize,
                fs[nd - 2] as usize * elem,
                ts[nd - 2] as usize * elem,
            );
            let (mut s, mut d) = (src, dst);
            for _ in 0..n {
                copy_run(from, s, to, d, row);
                s += s_step;
                d += d_step;
            }
        } else {
            to[dst..dst + row].copy_from_slice(&from[src..src + row]);
        }
        // Advance the odometer over the walked dimensions.
        let mut d = walked;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            at[d] += 1;
            src += fs[d] as usize * elem;
            dst += ts[d] as usize * elem;
            if at[d] < extent[d] {
                break;
            }
            src -= (fs[d] * extent[d]) as usize * elem;
            dst -= (ts[d] * extent[d]) as usize * elem;
            at[d] = 0;
        }
    }
}

/// Rows shorter than this are copied by [`copy_run`], element sizes known.
const SHORT_ROW_BYTES: usize = 64;

/// Copy `n` bytes; the common element sizes as single moves.
#[inline(always)]
pub(super) fn copy_run(from: &[u8], src: usize, to: &mut [u8], dst: usize, n: usize) {
    match n {
        4 => to[dst..dst + 4].copy_from_slice(&from[src..src + 4]),
        8 => to[dst..dst + 8].copy_from_slice(&from[src..src + 8]),
        2 => to[dst..dst + 2].copy_from_slice(&from[src..src + 2]),
        _ => to[dst..dst + n].copy_from_slice(&from[src..src + n]),
    }
}
