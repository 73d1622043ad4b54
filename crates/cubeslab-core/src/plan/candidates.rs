//! The inner chunk shapes the optimizer tries: sides from a ladder of sizes
//! along each dimension, within the bounds on chunk size, count and padding.

use super::layout::Layout;

/// Stored bytes beyond the data's own may be at most this share of them
/// (the OpenMSI HDF5 study saw padding double a file): padding, and each chunk's
/// checksum and index entry.
pub const MAX_PADDING: f64 = 0.02;

/// Bytes each stored chunk adds: its crc32c (4) and its shard index entry (16).
pub const CHUNK_OVERHEAD_BYTES: f64 = 20.0;

/// Smallest inner chunk considered: below this, fixed per-chunk costs dominate.
pub const MIN_CHUNK_BYTES: u64 = 4 << 10;

/// Largest inner chunk considered: the unit of decoding and checksums.
pub const MAX_CHUNK_BYTES: u64 = 16 << 20;

/// At most this many inner chunks in an array (index and planning cost).
pub const MAX_CHUNKS: u64 = 1 << 26;

/// Inner shapes enumerated before the ladder is thinned.
const MAX_COMBINATIONS: usize = 40_000;

/// Chunk sides to try along a dimension of `n`: near a ladder of sizes
/// (1, 2, 4, 8, 12, 16, 24, ...), each nudged to split `n` evenly so the
/// last chunk is nearly full, plus the whole dimension.
pub fn side_candidates(n: u64) -> Vec<u64> {
    let mut ladder = vec![1u64, 2, 3];
    let mut p = 4u64;
    while p < n {
        ladder.push(p);
        ladder.push(p + p / 2);
        p *= 2;
    }
    let mut sides: Vec<u64> = ladder
        .into_iter()
        .filter(|&t| t <= n)
        .flat_map(|t| [t, n.div_ceil(n.div_ceil(t))])
        .chain(std::iter::once(n.max(1)))
        .collect();
    sides.sort_unstable();
    sides.dedup();
    sides
}

/// All inner chunk shapes within the size, padding and count bounds.
/// `ratio`: the expected compression ratio, which shrinks the chunks the
/// per-chunk overhead is weighed against.
pub(super) fn inner_candidates(
    shape: &[u64],
    elem: usize,
    block: u64,
    ratio: f64,
) -> Vec<Vec<u64>> {
    let block = block.max(1);
    let mut per_dim: Vec<Vec<u64>> = shape
        .iter()
        .map(|&n| {
            let mut sides = side_candidates(n);
            sides.retain(|&c| c % block == 0 || c == n);
            if block > 1 {
                // Whole blocks near each ladder step.
                sides.extend(
                    side_candidates(n)
                        .iter()
                        .map(|&c| c.div_ceil(block) * block)
                        .filter(|&c| c <= n),
                );
                sides.sort_unstable();
                sides.dedup();
            }
            sides
        })
        .collect();
    let mut total: usize = per_dim.iter().map(Vec::len).product();
    if total > MAX_COMBINATIONS {
        // Many dimensions: powers of two and the whole side only.
        for (sides, &n) in per_dim.iter_mut().zip(shape) {
            sides.retain(|&c| c.is_power_of_two() || c == n);
        }
        total = per_dim.iter().map(Vec::len).product();
    }
    let mut out = Vec::new();
    for i in 0..total {
        let mut rest = i;
        let mut inner = Vec::with_capacity(shape.len());
        for sides in per_dim.iter().rev() {
            inner.push(sides[rest % sides.len()]);
            rest /= sides.len();
        }
        inner.reverse();
        let layout = Layout {
            shard: inner.clone(),
            inner,
        };
        let bytes = layout.chunk_bytes(elem);
        let whole = shape.iter().product::<u64>() * elem as u64;
        let small_enough = bytes <= MAX_CHUNK_BYTES;
        // A small array may be one chunk smaller than the minimum.
        let big_enough = bytes >= MIN_CHUNK_BYTES.min(whole);
        if small_enough
            && big_enough
            // (One chunk holding a small array is always allowed.)
            && (bytes >= whole
                || layout.padding(shape) + CHUNK_OVERHEAD_BYTES * ratio.max(1.0) / bytes as f64
                    <= MAX_PADDING)
            && layout.counts(shape).0 <= MAX_CHUNKS
        {
            out.push(layout.inner);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sides_split_evenly() {
        let sides = side_candidates(600);
        assert!(sides.contains(&1) && sides.contains(&600));
        // 600 in chunks of 16 leaves 8 padded; 600 / 38 = 15.8 -> 16, but 12 -> 12 exactly.
        assert!(sides.contains(&12) && sides.contains(&16));
        assert!(sides.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(side_candidates(1), vec![1]);
    }
}
