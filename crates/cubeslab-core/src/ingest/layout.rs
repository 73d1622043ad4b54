//! Chunk and shard shapes: the one place the default layout is chosen.
//!
//! Default: inner chunks of 16 along every dimension (16 KiB of float32 in
//! 3D), small enough that a verified read of a plane — which must read whole
//! chunks to check their crc32c — moves at most 16x the plane's bytes, and
//! large enough that per-chunk work stays a small share. Shards of 8 x 8 x 16
//! inner chunks (128 x 128 x 256 samples, 16 MiB) keep the file count low and
//! each plane's chunks in long runs inside a shard. The layout planner will
//! replace this rule with a measured choice.

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
    let last = shape.len() - 1;
    let inner: Vec<u64> = shape.iter().map(|&n| n.clamp(1, 16)).collect();
    let shard = shape
        .iter()
        .zip(&inner)
        .enumerate()
        .map(|(d, (&n, &i))| {
            let per_shard = if d == last { 16 } else { 8 };
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
        assert_eq!(thin.inner, vec![4, 3, 2, 10]);
        assert!(thin.check(&[4, 3, 2, 10]).is_ok());
    }
}
