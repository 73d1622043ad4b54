//! Rows of a binary file into an array: the array's last dimension is a
//! row (a spectrum, ...) stored in the file as a run of elements at a byte
//! offset, and each cell of the leading dimensions holds one row or none.
//!
//! The array is built in column tasks ([`tasks`]), several at once so the
//! device sees a queue of reads: each task reads its block's rows in file
//! order, rows lying back to back in one positioned read, places them into
//! its shards and writes those whole. Each row's sum and each column's sum
//! over all rows come out as well, computed from the bytes in hand.

mod binned;
pub(crate) mod placement;
mod sums;
pub(crate) mod tasks;

use std::{os::unix::fs::FileExt, path::PathBuf};

use rayon::prelude::*;

use crate::{
    compress::ChunkErrors,
    config::Parallelism,
    dtype::DType,
    error::{Error, Result},
    plan::Layout,
    progress::{Progress, Unit},
    store::{Prefill, ShardBuilder, StoreError, ZarrArray},
};
use binned::Binner;
pub use binned::{BinCounts, BinnedRows, BinnedRowsError, Bins, RecordNames};
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
    /// Sparse rows to bin, whose values are at `offsets` (the array then
    /// holds float32 or float64 bins).
    pub binned: Option<BinnedRows>,
}

/// Each row's sum (0 for a cell without one) and each column's sum over
/// every row, in f64.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowSums {
    /// By cell, C order over the leading dimensions.
    pub rows: Vec<f64>,
    /// By position along the last dimension.
    pub columns: Vec<f64>,
    /// Of binned rows: pairs outside the bins, and merged into a filled one.
    pub counts: BinCounts,
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
    if let Some(binned) = &source.binned {
        let per_cell = [&binned.keys, &binned.lengths, &binned.records];
        if per_cell.iter().any(|v| v.len() as u64 != cells)
            || !matches!(array.dtype(), DType::Float32 | DType::Float64)
        {
            return Err(refuse(format!(
                "binned rows into a {} array of shape {shape:?}",
                array.dtype().name()
            )));
        }
    }
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
    let plan =
        tasks::plan(&shape, &layout, array.dtype(), memory_limit, parallelism).map_err(refuse)?;
    let file = std::fs::File::open(&source.path).map_err(|e| Error::io(&source.path, e))?;
    let live = source
        .offsets
        .iter()
        .enumerate()
        .filter(|(_, &o)| o != NO_ROW);
    let source_bytes: u64 = match &source.binned {
        // Each task reads its rows whole, keys and values.
        Some(b) => {
            let pair = (b.key_type.size() + b.value_type.size()) as u64;
            live.map(|(c, _)| b.lengths[c] * pair).sum::<u64>() * plan.passes
        }
        None => live.count() as u64 * shape[nd - 1] * array.dtype().size() as u64,
    };
    progress.begin("write volume", Unit::Bytes, source_bytes, 0);
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
        counts: BinCounts::default(),
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
        sums.counts.outside += outcome.counts.outside;
        sums.counts.merged += outcome.counts.merged;
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
    /// Of binned rows, counted by the task holding each row's start.
    counts: BinCounts,
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

/// One task's shards and where its part of each row goes in them.
struct TaskShards {
    shards: Vec<ShardBuilder>,
    placement: RowPlacement,
    z_shards: std::ops::Range<u64>,
    /// The part of each row the shards hold: elements `part.start..part.end`.
    part: std::ops::Range<u64>,
}

impl TaskShards {
    fn place(&mut self, local: u64, row: &[u8]) {
        let z = self.z_shards.clone();
        self.placement
            .place(&mut self.shards, z, local, row, self.part.start);
    }
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
        let shards = task
            .shard_indices()
            .map(|indices| self.array.shard_builder(&indices, prefill))
            .collect::<Result<Vec<_>>>()?;
        let (ns, sz) = (shape[lead], task.shard[lead]);
        let part = task.z_shards.start * sz..(task.z_shards.end * sz).min(ns);
        let mut out = TaskShards {
            placement: RowPlacement::new(&task.shard, ns, task.dtype.size(), &shards[0]),
            shards,
            z_shards: task.z_shards.clone(),
            part: part.clone(),
        };
        let mut outcome = TaskOutcome {
            rows: Vec::with_capacity(placed.len()),
            columns: vec![0.0; (part.end - part.start) as usize],
            counts: BinCounts::default(),
            errors: None,
        };
        match &self.source.binned {
            Some(binned) => self.bin_rows(binned, task, &placed, &mut out, &mut outcome)?,
            None => self.copy_rows(task, &placed, &mut out, &mut outcome)?,
        }
        for shard in out.shards {
            if let Some(e) = self.array.write_shard(shard)? {
                outcome
                    .errors
                    .get_or_insert_with(ChunkErrors::default)
                    .merge(&e);
            }
        }
        Ok(outcome)
    }

    /// Dense rows: rows lying back to back read whole in one positioned
    /// read; else one part at a time.
    fn copy_rows(
        &self,
        task: &ColumnTask,
        placed: &[Placed],
        out: &mut TaskShards,
        outcome: &mut TaskOutcome,
    ) -> Result<()> {
        let elem = task.dtype.size();
        let (t0, t1) = (out.part.start, out.part.end);
        let part = ((t1 - t0) as usize) * elem;
        let whole_rows = t0 == 0 && t1 == task.shape[task.shape.len() - 1];
        let swap = elem > 1 && self.source.little_endian != cfg!(target_endian = "little");
        let max_run = (task.read_bytes / part as u64).max(1) as usize;
        let mut buffer = Vec::new();
        let mut start = 0;
        while start < placed.len() {
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
                out.place(p.local, row);
            }
            start = end;
        }
        Ok(())
    }

    /// Sparse rows: each read (keys, then values) and binned on its own.
    fn bin_rows(
        &self,
        binned: &BinnedRows,
        task: &ColumnTask,
        placed: &[Placed],
        out: &mut TaskShards,
        outcome: &mut TaskOutcome,
    ) -> Result<()> {
        let row_len = task.shape[task.shape.len() - 1];
        let mut binner = Binner::new(self.file, &self.source.path, binned, row_len);
        let mut row = Vec::new();
        for p in placed {
            self.progress.check()?;
            // Each row's pairs are counted once, by the task holding its start.
            let counts = (out.part.start == 0).then_some(&mut outcome.counts);
            let (sum, read) = binner.row(
                p.cell,
                p.offset,
                out.part.clone(),
                task.dtype,
                &mut row,
                &mut outcome.columns,
                counts,
            )?;
            self.progress.add(read);
            outcome.rows.push((p.cell, sum));
            out.place(p.local, &row);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
