//! A layout: inner chunk and shard shapes, and the rules that derive one
//! from the other.

use serde::{Deserialize, Serialize};

/// Inner-chunk and shard shapes of an array.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Layout {
    /// Inner chunk shape (the unit of decoding and checksums).
    pub inner: Vec<u64>,
    /// Shard shape (the unit of files); a multiple of `inner` per dimension.
    pub shard: Vec<u64>,
}

/// Shards grow to at least this many bytes: few files, long runs of a
/// plane's chunks inside each, and an ingest task's buffers still small.
pub const SHARD_TARGET_BYTES: u64 = 16 << 20;

/// Shards never grow past this many bytes (an ingest holds whole shards).
pub const SHARD_MAX_BYTES: u64 = 256 << 20;

/// What an ingest task holds per trace of its block besides the samples:
/// the header (240), two coordinates (16) and the mask (1), and their
/// encoded copies.
pub const INGEST_BYTES_PER_TRACE: u64 = 2 * (240 + 16 + 1);

/// A shard's encoded copy, relative to its bytes (an ingest task encodes
/// and writes its shards one at a time).
pub const ENCODED_FACTOR: f64 = 1.1;

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

    /// Inner chunks of `inner` in shards grown by [`shard_for`].
    pub fn with_default_shards(inner: Vec<u64>, shape: &[u64], elem: usize) -> Self {
        let shard = shard_for(&inner, shape, elem, ShardGrowth::Balanced);
        Self { inner, shard }
    }

    /// Bytes of one inner chunk.
    pub fn chunk_bytes(&self, elem: usize) -> u64 {
        self.inner.iter().product::<u64>() * elem as u64
    }

    /// Bytes of one (full) shard.
    pub fn shard_bytes(&self, elem: usize) -> u64 {
        self.shard.iter().product::<u64>() * elem as u64
    }

    /// Stored elements beyond the array's own, as a fraction of them: edge
    /// chunks are stored whole (chunks wholly outside the array are not).
    pub fn padding(&self, shape: &[u64]) -> f64 {
        let stored: f64 = shape
            .iter()
            .zip(&self.inner)
            .map(|(&n, &c)| (n.div_ceil(c) * c) as f64)
            .product();
        let data: f64 = shape.iter().map(|&n| n as f64).product();
        stored / data - 1.0
    }

    /// Number of inner chunks and of shard files.
    pub fn counts(&self, shape: &[u64]) -> (u64, u64) {
        let count = |sides: &[u64]| -> u64 {
            shape
                .iter()
                .zip(sides)
                .map(|(&n, &c)| n.div_ceil(c))
                .product()
        };
        (count(&self.inner), count(&self.shard))
    }

    /// Bytes of a column of shards: one shard's extent over every dimension
    /// but the last, and the whole last one.
    pub fn column_bytes(&self, shape: &[u64], elem: usize) -> u64 {
        let last = shape.len() - 1;
        let across: u64 = self.shard[..last].iter().product();
        across * shape[last].div_ceil(self.shard[last]) * self.shard[last] * elem as u64
    }

    /// The memory an ingest task holds to read its block of traces once: a
    /// column of shards, one encoded shard, and the per-trace buffers.
    pub fn ingest_task_bytes(&self, shape: &[u64], elem: usize) -> u64 {
        let last = shape.len() - 1;
        let traces: u64 = self.shard[..last].iter().product();
        self.column_bytes(shape, elem)
            + (ENCODED_FACTOR * self.shard_bytes(elem) as f64) as u64
            + traces * INGEST_BYTES_PER_TRACE
    }

    /// This layout with shards narrowed over the dimensions but the last
    /// (halving the one holding the most chunks, in turn) until an ingest
    /// task's memory ([`Layout::ingest_task_bytes`]) is at most `limit`;
    /// `None` when even one inner chunk's column is too large.
    pub fn fit_ingest_task(&self, shape: &[u64], elem: usize, limit: u64) -> Option<Layout> {
        let last = shape.len() - 1;
        let mut fitted = self.clone();
        while fitted.ingest_task_bytes(shape, elem) > limit {
            let d = (0..last)
                .filter(|&d| fitted.shard[d] > self.inner[d])
                .max_by_key(|&d| fitted.shard[d] / self.inner[d])?;
            fitted.shard[d] = (fitted.shard[d] / self.inner[d]).div_ceil(2) * self.inner[d];
        }
        Some(fitted)
    }

    /// `16x16x16/128x128x256`: the form `--layout` takes and plans print.
    pub fn describe(&self) -> String {
        format!("{}/{}", join(&self.inner), join(&self.shard))
    }
}

/// `16x16x16`: sides joined as `--layout` writes them.
pub(super) fn join(sides: &[u64]) -> String {
    sides
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join("x")
}

/// Which dimensions a shard grows along first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardGrowth {
    /// Round robin from the last dimension: about equal chunk counts per side.
    Balanced,
    /// The last dimension (samples) first: a shard holds whole traces.
    Deep,
    /// The other dimensions first: a shard holds a wide, thin slab.
    Wide,
}

impl ShardGrowth {
    /// All growth rules, for the optimizer to try.
    pub const ALL: [ShardGrowth; 3] = [Self::Balanced, Self::Deep, Self::Wide];
}

/// A shard shape for inner chunks `inner`: double the chunks per shard
/// along the dimensions `growth` prefers until the shard reaches
/// [`SHARD_TARGET_BYTES`] or covers the array.
pub fn shard_for(inner: &[u64], shape: &[u64], elem: usize, growth: ShardGrowth) -> Vec<u64> {
    let nd = shape.len();
    let grid: Vec<u64> = shape
        .iter()
        .zip(inner)
        .map(|(&n, &c)| n.div_ceil(c))
        .collect();
    let mut per_shard = vec![1u64; nd];
    let bytes = |per: &[u64]| -> u64 {
        per.iter().zip(inner).map(|(p, c)| p * c).product::<u64>() * elem as u64
    };
    let order: Vec<usize> = match growth {
        ShardGrowth::Balanced => (0..nd).rev().collect(),
        ShardGrowth::Deep => std::iter::once(nd - 1).chain((0..nd - 1).rev()).collect(),
        ShardGrowth::Wide => (0..nd - 1).rev().chain(std::iter::once(nd - 1)).collect(),
    };
    loop {
        if bytes(&per_shard) >= SHARD_TARGET_BYTES {
            break;
        }
        // The first dimension in `order` that can still grow (for Deep and
        // Wide: exhaust one group before the other; Balanced takes turns).
        let growable: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&d| per_shard[d] < grid[d])
            .collect();
        let Some(&d) = (match growth {
            ShardGrowth::Balanced => growable.iter().min_by_key(|&&d| per_shard[d]),
            _ => growable.first(),
        }) else {
            break;
        };
        let grown = (per_shard[d] * 2).min(grid[d]);
        let mut next = per_shard.clone();
        next[d] = grown;
        if bytes(&next) > SHARD_MAX_BYTES {
            break;
        }
        per_shard = next;
    }
    per_shard.iter().zip(inner).map(|(p, c)| p * c).collect()
}

/// The shard holding exactly the chunks one read of `window` touches, if
/// that read falls in one shard of that shape and the shard is at most
/// [`SHARD_MAX_BYTES`]. Such a read covers its shard, which the reader then
/// requests whole, index and chunks at once: one trip to the device.
pub fn shard_fitting(
    window: &crate::window::Window,
    inner: &[u64],
    elem: usize,
) -> Option<Vec<u64>> {
    let mut shard = Vec::with_capacity(inner.len());
    for (r, &c) in window.dims.iter().zip(inner) {
        if r.stop <= r.start {
            return None;
        }
        let (first, last) = (r.start / c, (r.stop - 1) / c);
        let count = last - first + 1;
        if first / count != last / count {
            return None;
        }
        shard.push(count * c);
    }
    let bytes = shard.iter().product::<u64>() * elem as u64;
    (bytes <= SHARD_MAX_BYTES).then_some(shard)
}

/// The chunk shape formula published in the Pyrus chunk-shape study (see
/// docs/references.md): split the volume into about equal numbers of chunks of
/// `target_bytes` along each axis, squash the chunk by `ratio` in the last
/// (vertical) dimension, and stretch it by `asymmetry` along the first
/// (inline) dimension at the expense of the second. Published defaults:
/// 2 MiB, 2.0, 2.5. Arrays that are not 3-D get the equal split only.
pub fn pyrus_formula(shape: &[u64], elem: usize, params: PyrusFormula) -> Vec<u64> {
    let nd = shape.len();
    let samples: f64 = shape.iter().map(|&n| n as f64).product();
    let num_chunks = (samples / (params.target_bytes / elem as f64)).ceil();
    let per_axis = num_chunks.powf(1.0 / nd as f64).ceil();
    let mut sides: Vec<f64> = shape.iter().map(|&n| n as f64 / per_axis).collect();
    if nd == 3 {
        sides[0] = (sides[0] * params.ratio.sqrt() * params.asymmetry).floor();
        sides[1] = (sides[1] * params.ratio.sqrt() / params.asymmetry).floor();
        sides[2] = (sides[2] / params.ratio).floor();
    } else {
        sides.iter_mut().for_each(|s| *s = s.floor());
    }
    sides
        .iter()
        .zip(shape)
        .map(|(&s, &n)| (s as u64).clamp(1, n.max(1)))
        .collect()
}

/// Parameters of [`pyrus_formula`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PyrusFormula {
    /// Target chunk size in bytes (published: 2048 KiB).
    pub target_bytes: f64,
    /// Vertical squash (published: 2.0).
    pub ratio: f64,
    /// Inline stretch against crossline (published: 2.5).
    pub asymmetry: f64,
}

impl Default for PyrusFormula {
    fn default() -> Self {
        Self {
            target_bytes: 2048.0 * 1024.0,
            ratio: 2.0,
            asymmetry: 2.5,
        }
    }
}

#[cfg(test)]
mod column_tests {
    use super::*;

    #[test]
    fn a_task_too_large_is_narrowed_over_the_trace_dimensions_only() {
        let shape = [600, 800, 1000];
        let wide = Layout {
            inner: vec![12, 16, 24],
            shard: vec![600, 800, 24],
        };
        assert_eq!(wide.column_bytes(&shape, 4), 600 * 800 * 1008 * 4);
        let fitted = wide.fit_ingest_task(&shape, 4, 256 << 20).unwrap();
        assert!(fitted.ingest_task_bytes(&shape, 4) <= 256 << 20);
        assert_eq!(fitted.inner, wide.inner);
        assert_eq!(fitted.shard[2], 24);
        fitted.check(&shape).unwrap();
        // Narrowed by halvings, so not far below the bound.
        assert!(fitted.ingest_task_bytes(&shape, 4) > (256 << 20) / 4);
    }

    #[test]
    fn a_task_that_fits_is_left_alone_and_one_that_cannot_fit_is_refused() {
        let shape = [64, 64, 100];
        let layout = Layout {
            inner: vec![8, 8, 10],
            shard: vec![32, 32, 50],
        };
        assert_eq!(layout.fit_ingest_task(&shape, 4, u64::MAX).unwrap(), layout);
        assert!(layout.fit_ingest_task(&shape, 4, 8 * 8 * 100 * 4).is_none());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pyrus_formula_reproduces_the_published_volume() {
        // The Pyrus chunk-shape study's survey: 1966 inlines x 1103 crosslines x 3001
        // samples of float32. Worked by hand from the published code:
        // 6.507e9 samples / 524288 per chunk -> 12413 chunks -> 24 per axis;
        // 1966/24*sqrt(2)*2.5 = 289.6, 1103/24*sqrt(2)/2.5 = 25.99,
        // 3001/24/2 = 62.5.
        let chunk = pyrus_formula(&[1966, 1103, 3001], 4, PyrusFormula::default());
        assert_eq!(chunk, vec![289, 25, 62]);
        // About the 2 MiB the formula targets (1.79 MiB).
        let bytes = chunk.iter().product::<u64>() * 4;
        assert!((1 << 20..3 << 20).contains(&bytes), "{bytes}");
    }

    #[test]
    fn shards_reach_the_target_and_stay_multiples() {
        let shape = [600, 800, 1000];
        for growth in ShardGrowth::ALL {
            let shard = shard_for(&[16, 16, 16], &shape, 4, growth);
            let layout = Layout {
                inner: vec![16, 16, 16],
                shard: shard.clone(),
            };
            assert!(layout.check(&shape).is_ok());
            assert!(
                layout.shard_bytes(4) >= SHARD_TARGET_BYTES,
                "{growth:?} {shard:?}"
            );
        }
        let deep = shard_for(&[16, 16, 16], &shape, 4, ShardGrowth::Deep);
        assert_eq!(deep[2], 1008, "{deep:?}"); // whole traces first
        let wide = shard_for(&[16, 16, 16], &shape, 4, ShardGrowth::Wide);
        assert_eq!(wide[2], 16, "{wide:?}"); // one chunk deep, wide across traces
                                             // A small array: one shard covers it.
        assert_eq!(
            shard_for(&[16, 16, 16], &[23, 18, 75], 4, ShardGrowth::Balanced),
            vec![32, 32, 80]
        );
    }

    #[test]
    fn padding_counts_edge_chunks() {
        let l = Layout {
            inner: vec![16, 16, 16],
            shard: vec![16, 16, 16],
        };
        let p = l.padding(&[600, 800, 1000]);
        assert!((p - (608.0 * 1008.0 / 600_000.0 - 1.0)).abs() < 1e-12);
        assert_eq!(l.describe(), "16x16x16/16x16x16");
    }

    #[test]
    fn a_fitting_shard_holds_exactly_one_reads_chunks() {
        use crate::plan::access::Access;
        let shape = [600u64, 800, 1000];
        let inline = Access::Plane(0).window(&shape);
        assert_eq!(
            shard_fitting(&inline, &[12, 16, 6], 4),
            Some(vec![12, 800, 1002])
        );
        let time = Access::Plane(2).window(&shape);
        assert_eq!(
            shard_fitting(&time, &[600, 800, 1], 4),
            Some(vec![600, 800, 1])
        );
        // A box straddling a chunk boundary at an odd chunk: no aligned shard holds it alone.
        let window = crate::window::Window {
            dims: vec![
                crate::window::DimRange::new(22, 26),
                crate::window::DimRange::new(0, 800),
                crate::window::DimRange::new(0, 1000),
            ],
        };
        assert_eq!(shard_fitting(&window, &[12, 16, 6], 4), None);
        // Larger than a shard may be.
        assert_eq!(
            shard_fitting(
                &Access::Plane(0).window(&[8, 100_000, 1000]),
                &[1, 1, 1000],
                4
            ),
            None
        );
    }
}
