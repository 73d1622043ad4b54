//! An ingest's work cut into tasks: each a block of rows (SEG-Y traces,
//! spectra, ...) over the leading dimensions and a run of the shards along
//! the last, sized so that the tasks running at once fit the memory bound.

use crate::{config::Parallelism, dtype::DType, plan::Layout, window::unravel};

/// A block of rows (one shard's extent over the leading dimensions) and
/// the shards along the last dimension to build from them.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct ColumnTask {
    /// Shard index along each leading dimension.
    pub block: Vec<u64>,
    /// Shard indices along the last dimension.
    pub z_shards: std::ops::Range<u64>,
    /// Full shard shape.
    pub shard: Vec<u64>,
    /// The array's shape.
    pub shape: Vec<u64>,
    pub dtype: DType,
    /// Largest read of consecutive rows, in bytes.
    pub read_bytes: u64,
}

/// Largest single read of consecutive rows.
const MAX_READ_BYTES: u64 = 8 << 20;
/// Smallest: a page. In between, a read buffer is an eighth of a task's memory.
const MIN_READ_BYTES: u64 = 4 << 10;

/// The size of a task's reads of consecutive rows under `per_task` bytes.
fn read_bytes(per_task: u64) -> u64 {
    (per_task / 8).clamp(MIN_READ_BYTES, MAX_READ_BYTES)
}

/// An ingest's work: its tasks, and how many run at once.
pub(crate) struct TaskPlan {
    pub tasks: Vec<ColumnTask>,
    /// Tasks run at once, each on its own thread: one more than the
    /// threads by default when the memory bound holds them, else as many
    /// as the threads, or fewer when a task's buffers need more of the bound.
    pub workers: usize,
    /// How many times the source is read: 1, unless a column of shards
    /// does not fit the memory bound even with one task at a time.
    pub passes: u64,
}

/// The most memory an ingest task may hold, besides its read buffer, for an
/// ingest to read its source once, two tasks at a time (one reading while
/// the other encodes), within `memory_limit`: the planner narrows shards to
/// fit it ([`crate::plan::Layout::ingest_task_bytes`]).
pub fn task_budget(memory_limit: u64, threads: usize) -> u64 {
    let per_task = memory_limit / threads.clamp(1, 2) as u64;
    per_task.saturating_sub(read_bytes(per_task))
}

/// Cut the work into tasks whose buffers, `workers` at a time, fit
/// `memory_limit`: each task one column of shards (its rows read once),
/// unless even one column at a time does not fit; then each task holds as
/// many shards along the last dimension as fit, and the source is read once per
/// such slab.
pub(crate) fn plan(
    shape: &[u64],
    layout: &Layout,
    dtype: DType,
    memory_limit: u64,
    parallelism: Parallelism,
) -> Result<TaskPlan, String> {
    let nt = shape.len() - 1;
    let elem = dtype.size();
    let shard_bytes = layout.shard_bytes(elem);
    let threads = parallelism.threads.max(1) as u64;
    let read = read_bytes(memory_limit / threads);
    let grid: Vec<u64> = shape
        .iter()
        .zip(&layout.shard)
        .map(|(n, s)| n.div_ceil(*s))
        .collect();
    let nz = grid[nt];
    let whole = layout.ingest_task_bytes(shape, elem) + read;
    let (workers, z_per_task) = if !parallelism.chosen && whole * (threads + 1) <= memory_limit {
        // One task more than the cores: a thread writing its shards to the
        // device waits on it, and the others' work fills the gap. Threads
        // the user chose are a bound on the cores used, and kept.
        (threads + 1, nz)
    } else if whole * threads <= memory_limit {
        (threads, nz)
    } else if whole <= memory_limit {
        (memory_limit / whole, nz)
    } else {
        // Slabs of shards along the samples: the column less the shards left out.
        let per_task = memory_limit / threads;
        let fixed = whole - layout.column_bytes(shape, elem);
        (threads, per_task.saturating_sub(fixed) / shard_bytes.max(1))
    };
    if z_per_task == 0 {
        return Err(format!(
            "a shard of {:.1} MiB (plus {:.1} MiB of trace buffers per task) does not fit a memory limit of {:.1} MiB shared by {threads} threads; use smaller shards, fewer threads or a higher limit",
            shard_bytes as f64 / 1048576.0,
            (whole - layout.column_bytes(shape, elem)) as f64 / 1048576.0,
            memory_limit as f64 / 1048576.0
        ));
    }
    let n_blocks: u64 = grid[..nt].iter().product();
    let mut tasks = Vec::new();
    for b in 0..n_blocks {
        let block = unravel(b, &grid[..nt])[..nt].to_vec();
        let mut z = 0;
        while z < nz {
            let end = (z + z_per_task).min(nz);
            tasks.push(ColumnTask {
                block: block.clone(),
                z_shards: z..end,
                shard: layout.shard.clone(),
                shape: shape.to_vec(),
                dtype,
                read_bytes: read,
            });
            z = end;
        }
    }
    Ok(TaskPlan {
        tasks,
        workers: workers as usize,
        passes: nz.div_ceil(z_per_task),
    })
}

impl ColumnTask {
    /// The leading dimensions' sizes.
    pub fn trace_shape(&self) -> &[u64] {
        &self.shape[..self.shape.len() - 1]
    }

    /// The block's first cell over the leading dimensions, and its size
    /// (clipped at the edge of the grid).
    pub fn block_cells(&self) -> (Vec<u64>, Vec<u64>) {
        let nt = self.shape.len() - 1;
        let lo: Vec<u64> = (0..nt).map(|d| self.block[d] * self.shard[d]).collect();
        let extent = (0..nt)
            .map(|d| self.shard[d].min(self.shape[d] - lo[d]))
            .collect();
        (lo, extent)
    }

    /// The block's cells: (index over the whole array's leading dimensions,
    /// index inside the block), both C order, in C order.
    pub fn cells(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let lead = self.shape.len() - 1;
        let (lo, extent) = self.block_cells();
        (0..extent.iter().product::<u64>()).map(move |i| {
            let idx = unravel(i, &extent);
            let (mut global, mut local) = (0u64, 0u64);
            for d in 0..lead {
                global = global * self.shape[d] + lo[d] + idx[d];
                local = local * self.shard[d] + idx[d];
            }
            (global, local)
        })
    }

    /// This task narrowed to the one shard along the last dimension at `z` (of
    /// those it covers), to sample the data.
    pub fn narrowed(&self, z: u64) -> Self {
        let z = z.clamp(self.z_shards.start, self.z_shards.end - 1);
        Self {
            z_shards: z..z + 1,
            ..self.clone()
        }
    }

    /// Shard indices of the shards this task builds.
    pub fn shard_indices(&self) -> impl Iterator<Item = Vec<u64>> + '_ {
        self.z_shards.clone().map(|z| {
            let mut indices = self.block.clone();
            indices.push(z);
            indices
        })
    }
}
