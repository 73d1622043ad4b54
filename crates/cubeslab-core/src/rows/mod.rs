//! Rows of a binary file into an array: the array's last dimension is a
//! row (a spectrum, ...) stored in the file as a run of elements at a byte
//! offset, and each cell of the leading dimensions holds one row or none.
//!
//! The array is built in column tasks ([`tasks`]), several at once so the
//! device sees a queue of reads: each task reads its block's rows in file
//! order, rows lying back to back in one positioned read, places them into
//! its shards and writes those whole. Each row's sum and each column's sum
//! over all rows come out as well, computed from the bytes in hand.

pub(crate) mod placement;
mod sums;
pub(crate) mod tasks;

use std::{os::unix::fs::FileExt, path::PathBuf};

use rayon::prelude::*;

use crate::{
    compress::ChunkErrors,
    config::Parallelism,
    error::{Error, Result},
    plan::Layout,
    progress::{Progress, Unit},
    store::{Prefill, StoreError, ZarrArray},
};
use placement::RowPlacement;
use tasks::ColumnTask;

/// A cell with no row in the file.
pub const NO_ROW: u64 = u64::MAX;

/// Where a file holds the rows of an array.
#[derive(Debug, Clone)]
pub struct FileRows {
    /// The file.
    pub path: PathBuf,
    /// Each cell's row's byte offset, C order over the array's leading
    /// dimensions; [`NO_ROW`] where the file has none (the cell keeps the
    /// fill value).
    pub offsets: Vec<u64>,
    /// Whether the file's elements are little-endian (of the array's type).
    pub little_endian: bool,
}

/// Each row's sum (0 for a cell without one) and each column's sum over
/// every row, in f64.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowSums {
    /// By cell, C order over the leading dimensions.
    pub rows: Vec<f64>,
    /// By position along the last dimension.
    pub columns: Vec<f64>,
}

/// Fill `array` (sharded, at least 2-D) with the rows `source` names,
/// holding about `memory_limit` bytes of buffers at most; `progress` counts
/// the source bytes read in a phase `write volume` and may stop the work.
pub fn fill_from_rows(
    array: &ZarrArray,
    source: &FileRows,
    parallelism: Parallelism,
    memory_limit: u64,
    progress: &Progress,
) -> Result<RowSums> {
    let shape = array.shape().to_vec();
    let nd = shape.len();
    let cells: u64 = shape[..nd.saturating_sub(1)].iter().product();
    let refuse = |what: String| -> Error {
        StoreError::Unsupported {
            path: array.path().to_path_buf(),
            what,
        }
        .into()
    };
    let Some(inner) = array.inner_chunk_shape().map(<[u64]>::to_vec) else {
        return Err(refuse("filling an unsharded array from rows".into()));
    };
    if nd < 2 || source.offsets.len() as u64 != cells {
        return Err(refuse(format!(
            "{} row offsets for an array of shape {shape:?}",
            source.offsets.len()
        )));
    }
    let layout = Layout {
        inner,
        shard: array.chunk_shape().to_vec(),
    };
    let plan = tasks::plan(
        &shape,
        &layout,
        array.dtype(),
        memory_limit,
        parallelism.threads,
    )
    .map_err(refuse)?;
    let file = std::fs::File::open(&source.path).map_err(|e| Error::io(&source.path, e))?;
    let row_bytes = shape[nd - 1] * array.dtype().size() as u64;
    let live = source.offsets.iter().filter(|&&o| o != NO_ROW).count() as u64;
    progress.begin(
        "write volume",
        Unit::Bytes,
        live * row_bytes * plan.passes,
        0,
    );
    array.recycle_buffers(memory_limit as usize);
    let reader = RowReader {
        file: &file,
        source,
        array,
        progress,
    };
    let workers = Parallelism::resolve(Some(plan.workers), Some(parallelism.in_flight));
    let outcomes = workers.pool().install(|| {
        plan.tasks
            .par_iter()
            .map(|task| reader.run(task))
            .collect::<Result<Vec<_>>>()
    });
    array.recycle_buffers(0);
    let mut sums = RowSums {
        rows: vec![0.0; cells as usize],
        columns: vec![0.0; shape[nd - 1] as usize],
    };
    let mut errors: Option<ChunkErrors> = None;
    for (task, outcome) in plan.tasks.iter().zip(outcomes?) {
        for (cell, sum) in outcome.rows {
            sums.rows[cell as usize] += sum;
        }
        let z0 = (task.z_shards.start * task.shard[nd - 1]) as usize;
        for (total, part) in sums.columns[z0..].iter_mut().zip(&outcome.columns) {
            *total += part;
        }
        if let Some(e) = outcome.errors {
            errors.get_or_insert_with(ChunkErrors::default).merge(&e);
        }
    }
    if let Some(errors) = errors {
        crate::writer::record_lossy_writes(array.path(), &errors)?;
    }
    Ok(sums)
}

/// What one task found besides the shards it wrote.
struct TaskOutcome {
    /// (cell, sum of the part of its row this task placed).
    rows: Vec<(u64, f64)>,
    /// Column sums over the task's part of the last dimension.
    columns: Vec<f64>,
    errors: Option<ChunkErrors>,
}

/// A row of the block: where it goes in the block and where it is in the file.
struct Placed {
    local: u64,
    cell: u64,
    offset: u64,
}

struct RowReader<'a> {
    file: &'a std::fs::File,
    source: &'a FileRows,
    array: &'a ZarrArray,
    progress: &'a Progress,
}

impl RowReader<'_> {
    fn run(&self, task: &ColumnTask) -> Result<TaskOutcome> {
        let shape = &task.shape;
        let lead = shape.len() - 1;
        let (_, extent) = task.block_cells();
        let mut placed: Vec<Placed> = task
            .cells()
            .filter_map(|(cell, local)| {
                let offset = self.source.offsets[cell as usize];
                (offset != NO_ROW).then_some(Placed {
                    local,
                    cell,
                    offset,
                })
            })
            .collect();
        // File order, so that rows lying back to back are read at once.
        placed.sort_unstable_by_key(|p| p.offset);
        let prefill = if placed.len() as u64 == extent.iter().product::<u64>() {
            Prefill::EdgeChunks
        } else {
            Prefill::FillValue
        };
        let mut shards = task
            .shard_indices()
            .map(|indices| self.array.shard_builder(&indices, prefill))
            .collect::<Result<Vec<_>>>()?;
        let elem = task.dtype.size();
        let (ns, sz) = (shape[lead], task.shard[lead]);
        let (t0, t1) = (task.z_shards.start * sz, (task.z_shards.end * sz).min(ns));
        let part = ((t1 - t0) as usize) * elem;
        let whole_rows = t0 == 0 && t1 == ns;
        let placement = RowPlacement::new(&task.shard, ns, elem, &shards[0]);
        let swap = elem > 1 && self.source.little_endian != cfg!(target_endian = "little");
        let max_run = (task.read_bytes / part as u64).max(1) as usize;
        let mut outcome = TaskOutcome {
            rows: Vec::with_capacity(placed.len()),
            columns: vec![0.0; (t1 - t0) as usize],
            errors: None,
        };
        let mut buffer = Vec::new();
        let mut start = 0;
        while start < placed.len() {
            // Rows back to back in the file, read whole; else one part at a time.
            let mut end = start + 1;
            while whole_rows
                && end < placed.len()
                && end - start < max_run
                && placed[end].offset == placed[end - 1].offset + part as u64
            {
                end += 1;
            }
            let run = &placed[start..end];
            buffer.resize(run.len() * part, 0);
            self.progress.check()?;
            let at = run[0].offset + t0 * elem as u64;
            self.file.read_exact_at(&mut buffer, at).map_err(|e| {
                Error::io(
                    &self.source.path,
                    std::io::Error::new(
                        e.kind(),
                        format!(
                            "reading {} bytes of rows at byte offset {at}: {e}",
                            buffer.len()
                        ),
                    ),
                )
            })?;
            self.progress.add(buffer.len() as u64);
            if swap {
                buffer.chunks_exact_mut(elem).for_each(<[u8]>::reverse);
            }
            for (row, p) in buffer.chunks_exact(part).zip(run) {
                let sum = sums::add_row(task.dtype, row, &mut outcome.columns);
                outcome.rows.push((p.cell, sum));
                placement.place(&mut shards, task.z_shards.clone(), p.local, row, t0);
            }
            start = end;
        }
        for shard in shards {
            if let Some(e) = self.array.write_shard(shard)? {
                outcome
                    .errors
                    .get_or_insert_with(ChunkErrors::default)
                    .merge(&e);
            }
        }
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests;
