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

/// Copy `n` bytes; the common element sizes as single moves, and runs up
/// to 64 bytes (a chunk's depth of a trace) as two fixed-size moves that
/// overlap, not a call to `memcpy` each.
#[inline(always)]
pub(crate) fn copy_run(from: &[u8], src: usize, to: &mut [u8], dst: usize, n: usize) {
    match n {
        4 => to[dst..dst + 4].copy_from_slice(&from[src..src + 4]),
        8 => to[dst..dst + 8].copy_from_slice(&from[src..src + 8]),
        2 => to[dst..dst + 2].copy_from_slice(&from[src..src + 2]),
        17..=32 => copy_overlapping::<16>(from, src, to, dst, n),
        33..=64 => copy_overlapping::<32>(from, src, to, dst, n),
        _ => to[dst..dst + n].copy_from_slice(&from[src..src + n]),
    }
}

/// Copy `n` bytes (`N <= n <= 2N`) as the first `N` and the last `N`.
#[inline(always)]
fn copy_overlapping<const N: usize>(from: &[u8], src: usize, to: &mut [u8], dst: usize, n: usize) {
    let head: [u8; N] = from[src..src + N].try_into().expect("N bytes");
    let tail: [u8; N] = from[src + n - N..src + n].try_into().expect("N bytes");
    to[dst..dst + N].copy_from_slice(&head);
    to[dst + n - N..dst + n].copy_from_slice(&tail);
}

#[cfg(test)]
mod tests {
    use super::copy_run;

    #[test]
    fn a_run_of_every_length_lands_whole_and_alone() {
        let from: Vec<u8> = (0..200u8).collect();
        for n in 0..=80 {
            let mut to = vec![0xAAu8; 200];
            copy_run(&from, 7, &mut to, 13, n);
            let mut want = vec![0xAAu8; 200];
            want[13..13 + n].copy_from_slice(&from[7..7 + n]);
            assert_eq!(to, want, "{n} bytes");
        }
    }
}
