//! The survey's chunks rebuilt in memory from the SEG-Y source, cut exactly
//! as an ingest cuts them: a sample of them to tune compression on before
//! the store is written, or all of them to compare a store with its source.

use rayon::prelude::*;

use crate::{
    compress::Sample,
    config::Parallelism,
    dtype::DType,
    error::Result,
    progress::Progress,
    rows::tasks,
    segy::{Geometry, SegyFile},
    store::ShardBuilder,
};

use super::Layout;

/// At most this many bytes of chunks are sampled.
pub const SAMPLE_BYTES: u64 = 32 << 20;

/// Most blocks of traces sampled.
const SAMPLE_BLOCKS: usize = 64;

/// Chunks of a survey of `shape` with inner chunks `inner`: up to
/// [`SAMPLE_BLOCKS`] columns of chunks (one chunk's traces, all depths)
/// scattered over the traces (a small survey is taken whole); `fill` is
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
    let grid: Vec<u64> = (0..=nt).map(|d| shape[d].div_ceil(inner[d])).collect();
    let whole = shape.iter().product::<u64>() * dtype.size() as u64 <= SAMPLE_BYTES;
    let per_block: Vec<u64> = (0..=nt)
        // A block's traces are read whole anyway: take every chunk down them.
        .map(|d| if whole || d == nt { grid[d] } else { 1 })
        .collect();
    let layout = Layout {
        inner: inner.to_vec(),
        shard: inner.iter().zip(&per_block).map(|(c, p)| c * p).collect(),
    };
    let block_bytes = per_block.iter().product::<u64>() * chunk_bytes;
    let blocks = ((SAMPLE_BYTES / block_bytes.max(1)) as usize).clamp(1, SAMPLE_BLOCKS);
    // One task per block of traces, in C order of the blocks (no memory
    // bound worth the name here).
    let tasks = tasks::plan(
        shape,
        &layout,
        dtype,
        u64::MAX / 4,
        Parallelism::resolve(Some(1), None),
    )
    .map_err(|what| crate::store::StoreError::Unsupported {
        path: source.path().to_path_buf(),
        what,
    })?
    .tasks;
    let block_grid: Vec<u64> = (0..nt)
        .map(|d| shape[d].div_ceil(layout.shard[d]))
        .collect();
    let z_shards = shape[nt].div_ceil(layout.shard[nt]);
    // Block k sits at fraction (k + 1/2) / blocks along the first trace
    // dimension and at additive-recurrence (golden ratio) fractions along the
    // others and the depth: an even, unaligned scatter, so that no row,
    // column or depth of the survey stands in for the rest.
    let fractions = |k: usize, d: usize| -> f64 {
        let first = (k as f64 + 0.5) / blocks as f64;
        (first + d as f64 * 0.618_033_988_749_895 * (k as f64 + 1.0)).fract()
    };
    let mut chosen: Vec<(usize, u64)> = Vec::new();
    for k in 0..blocks {
        let mut index = 0u64;
        for d in 0..nt {
            let at = (fractions(k, d) * block_grid[d] as f64) as u64;
            index = index * block_grid[d] + at.min(block_grid[d] - 1);
        }
        let z = ((fractions(k, nt) * z_shards as f64) as u64).min(z_shards - 1);
        if !chosen.contains(&(index as usize, z)) {
            chosen.push((index as usize, z));
        }
    }
    let mut chunks = Vec::new();
    for (index, z) in chosen {
        let t = tasks[index].narrowed(z);
        let mut builders: Vec<ShardBuilder> = t
            .shard_indices()
            .map(|indices| ShardBuilder::new(&indices, shape, inner, &per_block, fill, 0))
            .collect();
        t.fill(source, geometry, &mut builders, &Progress::default())?;
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
    let plan = tasks::plan(shape, layout, dtype, memory_limit, parallelism).map_err(|what| {
        crate::store::StoreError::Unsupported {
            path: source.path().to_path_buf(),
            what,
        }
    })?;
    let tasks = plan.tasks;
    let cps: Vec<u64> = layout
        .shard
        .iter()
        .zip(&layout.inner)
        .map(|(s, c)| s / c)
        .collect();
    let workers = Parallelism::resolve(Some(plan.workers), Some(parallelism.in_flight));
    let per_task: Vec<Vec<T>> = workers.pool().install(|| {
        tasks
            .par_iter()
            .map(|t| {
                let mut builders: Vec<ShardBuilder> = t
                    .shard_indices()
                    .map(|indices| ShardBuilder::new(&indices, shape, &layout.inner, &cps, fill, 0))
                    .collect();
                t.fill(source, geometry, &mut builders, &Progress::default())?;
                builders.iter().map(&visit).collect::<Result<Vec<T>>>()
            })
            .collect::<Result<Vec<_>>>()
    })?;
    Ok(per_task.into_iter().flatten().collect())
}
