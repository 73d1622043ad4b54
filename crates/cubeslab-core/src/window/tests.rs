//! Selection maths against direct gathers, and the copies against slice copies.

use super::*;
use proptest::prelude::*;

fn selected(r: &DimRange) -> Vec<u64> {
    (r.start..r.stop).step_by(r.step as usize).collect()
}

/// Seeds of an array's shape (one to three dimensions), a chunk's and a window.
type Seeds = (Vec<u64>, Vec<u64>, Vec<(u64, u64, u64)>);

fn seeds() -> impl Strategy<Value = Seeds> {
    use proptest::collection::vec;
    (
        vec(1u64..9, 1..4),
        vec(1u64..6, 4),
        vec((0u64..9, 0u64..9, 1u64..4), 4),
    )
}

/// A chunk shape and a window over an array of `shape`, from proptest's seeds.
fn case(shape: &[u64], chunk_seed: &[u64], window_seed: &[(u64, u64, u64)]) -> (Vec<u64>, Window) {
    let nd = shape.len();
    let dims = (0..nd)
        .map(|d| {
            let (a, b, step) = window_seed[d];
            let (a, b) = (a % (shape[d] + 1), b % (shape[d] + 1));
            DimRange {
                start: a.min(b),
                stop: a.max(b),
                step,
            }
        })
        .collect();
    (chunk_seed[..nd].to_vec(), Window { dims })
}

/// Every combination of one span per dimension.
fn tasks(per_dim: &[Vec<ChunkSpan>]) -> Vec<Vec<ChunkSpan>> {
    let n: usize = per_dim.iter().map(Vec::len).product();
    (0..n)
        .map(|t| {
            let mut rem = t;
            let mut spans: Vec<ChunkSpan> = Vec::new();
            for d in (0..per_dim.len()).rev() {
                spans.push(per_dim[d][rem % per_dim[d].len()]);
                rem /= per_dim[d].len();
            }
            spans.reverse();
            spans
        })
        .collect()
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
            copy_run(&src, from, &mut dst, to, len);
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
        (shape, chunk_seed, window_seed) in seeds(),
    ) {
        let nd = shape.len();
        let (chunk, window) = case(&shape, &chunk_seed, &window_seed);
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
        for spans in tasks(&per_dim) {
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

    /// A window written into each chunk it touches lands on the selected
    /// elements, at their output positions, and leaves the others.
    #[test]
    fn copy_back_writes_the_selection_and_nothing_else(
        (shape, chunk_seed, window_seed) in seeds(),
    ) {
        let nd = shape.len();
        let (chunk, window) = case(&shape, &chunk_seed, &window_seed);
        let out_shape = window.shape();
        let values: Vec<u8> = (0..window.num_elements() as u32).flat_map(|v| (v + 1_000_000).to_ne_bytes()).collect();
        let per_dim: Vec<Vec<ChunkSpan>> = (0..nd).map(|d| chunk_spans(&window.dims[d], chunk[d])).collect();
        let (chunk_strides, out_strides) = (strides(&chunk), strides(&out_shape));
        let steps = window.steps();
        let placement = Placement { src_strides: &chunk_strides, dst_strides: &out_strides, steps: &steps, ndim: nd, elem: 4 };
        let chunk_len = chunk.iter().product::<u64>() as usize;
        for spans in tasks(&per_dim) {
            let mut bytes: Vec<u8> = (0..chunk_len as u32).flat_map(|v| v.to_ne_bytes()).collect();
            placement.copy_back(&spans, &values, &mut bytes);
            for i in 0..chunk_len {
                let (mut rem, mut out, mut selected) = (i as u64, 0u64, true);
                for d in (0..nd).rev() {
                    let g = spans[d].chunk * chunk[d] + rem % chunk[d];
                    rem /= chunk[d];
                    let r = window.dims[d];
                    selected &= g >= r.start && g < r.stop && (g - r.start).is_multiple_of(r.step);
                    out += (g.saturating_sub(r.start) / r.step) * out_strides[d];
                }
                let got = u32::from_ne_bytes(bytes[i * 4..i * 4 + 4].try_into().unwrap());
                prop_assert_eq!(got, if selected { out as u32 + 1_000_000 } else { i as u32 });
            }
        }
    }
}

/// A 0-d array's one element goes both ways, and a fill sets it.
#[test]
fn a_zero_dimensional_placement_moves_its_one_element() {
    let zeros = [0u64; MAX_DIMS];
    let placement = Placement {
        src_strides: &zeros,
        dst_strides: &zeros,
        steps: &[1; MAX_DIMS],
        ndim: 0,
        elem: 4,
    };
    let mut chunk = 7u32.to_ne_bytes().to_vec();
    let mut out = [0u8; 4];
    unsafe { placement.copy(&[], &chunk, out.as_mut_ptr()) };
    assert_eq!(u32::from_ne_bytes(out), 7);
    placement.copy_back(&[], &9u32.to_ne_bytes(), &mut chunk);
    assert_eq!(chunk, 9u32.to_ne_bytes());
    unsafe { placement.fill(&[], &5u32.to_ne_bytes(), out.as_mut_ptr()) };
    assert_eq!(u32::from_ne_bytes(out), 5);
}
