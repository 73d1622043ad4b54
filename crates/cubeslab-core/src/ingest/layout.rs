//! Chunk and shard shapes: the one place the default layout is chosen.
//!
//! Default: inner chunks of about 4096 elements, equal sides (16 x 16 x 16 in
//! 3D, 8^4 in 4D: 16 KiB of float32), small enough that a verified read of a
//! plane — which must read whole chunks to check their crc32c — moves at most
//! 16x the plane's bytes, large enough that per-chunk work stays a small
//! share. Shards of about 1024 inner chunks, 16 along the samples and the rest
//! shared by the trace dimensions (8 x 8 x 16 in 3D: 128 x 128 x 256 samples,
//! 16 MiB), keep the file count low, each plane's chunks in long runs inside a
//! shard, and an ingest task's buffers small. The layout planner will replace
//! this rule with a measured choice.

use crate::store::DType;

/// Inner-chunk and shard shapes of an array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Inner chunk shape (the unit of decoding and checksums).
    pub inner: Vec<u64>,
    /// Shard shape (the unit of files); a multiple of `inner` per dimension.
    pub shard: Vec<u64>,
}

impl Layout {
    /// Check the layout against an array shape.
    pub fn check(&self, shape: &[u64]) -> Result<(), String> {
        if self.inner.len() != shape.len() || self.shard.len() != shape.len() {
            return Err(format!(
                "layout has {}/{} dimensions for an array of {}",
                self.inner.len(),
                self.shard.len(),
                shape.len()
            ));
        }
        for (d, (&i, &s)) in self.inner.iter().zip(&self.shard).enumerate() {
            if i == 0 || s == 0 || s % i != 0 {
                return Err(format!(
                    "dimension {d}: shard side {s} is not a positive multiple of chunk side {i}"
                ));
            }
        }
        Ok(())
    }
}

/// The default layout for an array of `shape` (last dimension = samples).
pub fn default_layout(shape: &[u64], _dtype: DType) -> Layout {
    let nd = shape.len();
    let last = nd - 1;
    // Equal power-of-two sides whose product is about 4096 elements.
    let side = 1u64 << (12 / nd as u32);
    let inner: Vec<u64> = shape.iter().map(|&n| n.clamp(1, side)).collect();
    // 16 chunks along the samples; the trace dimensions share 64.
    let per_trace_dim = if nd > 1 {
        1u64 << (6 / (nd - 1) as u32)
    } else {
        1
    };
    let shard = shape
        .iter()
        .zip(&inner)
        .enumerate()
        .map(|(d, (&n, &i))| {
            let per_shard = if d == last { 16 } else { per_trace_dim };
            (i * per_shard).min(n.div_ceil(i) * i)
        })
        .collect();
    Layout { inner, shard }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_layout_is_valid_and_clipped() {
        let l = default_layout(&[600, 800, 1000], DType::Float32);
        assert_eq!(l.inner, vec![16, 16, 16]);
        assert_eq!(l.shard, vec![128, 128, 256]);
        let small = default_layout(&[23, 18, 75], DType::Float32);
        assert_eq!(small.inner, vec![16, 16, 16]);
        assert_eq!(small.shard, vec![32, 32, 80]);
        assert!(small.check(&[23, 18, 75]).is_ok());
        let thin = default_layout(&[4, 3, 2, 10], DType::Float32);
        assert_eq!(thin.inner, vec![4, 3, 2, 8]);
        assert!(thin.check(&[4, 3, 2, 10]).is_ok());
        // Pre-stack: shards stay near 16 MiB however many offsets there are.
        let gathers = default_layout(&[1000, 1000, 60, 1500], DType::Float32);
        assert_eq!(gathers.inner, vec![8, 8, 8, 8]);
        assert_eq!(gathers.shard, vec![32, 32, 32, 128]);
        assert!(gathers.shard.iter().product::<u64>() * 4 <= 16 << 20);
    }
}
