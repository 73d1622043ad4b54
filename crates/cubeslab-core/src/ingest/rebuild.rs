//! The survey's chunks rebuilt in memory from the SEG-Y source, cut exactly
//! as an ingest cuts them: a sample of them to tune compression on before
//! the store is written, or all of them to compare a store with its source.

use rayon::prelude::*;

use crate::{
    compress::Sample,
    config::Parallelism,
    error::Result,
    segy::{Geometry, SegyFile},
    store::{DType, ShardBuilder},
};

use super::{task, Layout};

/// At most this many bytes of chunks are sampled.
pub const SAMPLE_BYTES: u64 = 32 << 20;

/// Blocks of traces sampled.
const SAMPLE_BLOCKS: usize = 8;

/// Chunks of a survey of `shape` with inner chunks `inner`, from up to
/// [`SAMPLE_BLOCKS`] blocks spread over its traces and depths; `fill` is
/// the fill value's bytes.
pub(super) fn sample_chunks(
    source: &SegyFile,
    geometry: &Geometry,
    shape: &[u64],
    inner: &[u64],
    dtype: DType,
    fill: &[u8],
) -> Result<Sample> {
    let nt = shape.len() - 1;
    let chunk_bytes = inner.iter().product::<u64>() * dtype.size() as u64;
    // Blocks of 2 x 2 (x ...) chunks over the traces, 4 chunks deep, while
    // the sample stays within its byte budget.
    // A survey that fits the budget is sampled whole.
    let whole = shape.iter().product::<u64>() * dtype.size() as u64 <= SAMPLE_BYTES;
    let mut per_block: Vec<u64> = (0..=nt)
        .map(|d| {
            let grid = shape[d].div_ceil(inner[d]);
            if whole {
                grid
            } else {
                grid.min(if d == nt { 4 } else { 2 })
            }
        })
        .collect();
    while per_block.iter().product::<u64>() * chunk_bytes > SAMPLE_BYTES
        && per_block.iter().any(|&p| p > 1)
    {
        let d = (0..=nt).max_by_key(|&d| per_block[d]).expect("dimensions");
        per_block[d] = per_block[d].div_ceil(2);
    }
    let layout = Layout {
        inner: inner.to_vec(),
        shard: inner.iter().zip(&per_block).map(|(c, p)| c * p).collect(),
    };
    let block_bytes = per_block.iter().product::<u64>() * chunk_bytes;
    let blocks = ((SAMPLE_BYTES / block_bytes.max(1)) as usize).clamp(1, SAMPLE_BLOCKS);
    // One task per block of traces (no memory bound worth the name here).
    let tasks = task::plan(shape, &layout, dtype, u64::MAX / 4, 1).map_err(|what| {
        crate::store::StoreError::Unsupported {
            path: source.path().to_path_buf(),
            what,
        }
    })?;
    // Blocks spread evenly over the traces, and each at its own depth, so
    // that the sample sees amplitudes from top to bottom.
    let z_shards = shape[nt].div_ceil(layout.shard[nt]);
    let step = tasks.len().div_ceil(blocks).max(1);
    let mut chunks = Vec::new();
    for (k, t) in tasks.iter().step_by(step).take(blocks).enumerate() {
        let z = (2 * k as u64 + 1) * z_shards / (2 * blocks as u64);
        let t = t.narrowed(z);
        let mut builders: Vec<ShardBuilder> = t
            .shard_indices()
            .map(|indices| ShardBuilder::new(&indices, shape, inner, &per_block, fill, 0))
            .collect();
        t.fill(source, geometry, &mut builders)?;
        for b in &builders {
            chunks.extend(b.chunks().map(<[u8]>::to_vec));
        }
    }
    Ok(Sample {
        chunk_shape: inner.to_vec(),
        dtype,
        chunks,
    })
}

/// Rebuild every shard of a survey of `shape` laid out as `layout` from the
/// source, a task at a time within `memory_limit`, and hand each to `visit`
/// (in parallel); `fill` is the fill value's bytes. Returns what `visit` returned.
#[allow(clippy::too_many_arguments)]
pub(crate) fn rebuild_shards<T: Send>(
    source: &SegyFile,
    geometry: &Geometry,
    shape: &[u64],
    layout: &Layout,
    dtype: DType,
    fill: &[u8],
    memory_limit: u64,
    parallelism: Parallelism,
    visit: impl Fn(&ShardBuilder) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let tasks =
        task::plan(shape, layout, dtype, memory_limit, parallelism.threads).map_err(|what| {
            crate::store::StoreError::Unsupported {
                path: source.path().to_path_buf(),
                what,
            }
        })?;
    let cps: Vec<u64> = layout
        .shard
        .iter()
        .zip(&layout.inner)
        .map(|(s, c)| s / c)
        .collect();
    let per_task: Vec<Vec<T>> = parallelism.pool().install(|| {
        tasks
            .par_iter()
            .map(|t| {
                let mut builders: Vec<ShardBuilder> = t
                    .shard_indices()
                    .map(|indices| ShardBuilder::new(&indices, shape, &layout.inner, &cps, fill, 0))
                    .collect();
                t.fill(source, geometry, &mut builders)?;
                builders.iter().map(&visit).collect::<Result<Vec<T>>>()
            })
            .collect::<Result<Vec<_>>>()
    })?;
    Ok(per_task.into_iter().flatten().collect())
}
