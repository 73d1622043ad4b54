//! One unit of ingest work: a block of traces (one shard's extent over the
//! trace dimensions) and a range of shards along the samples.

use crate::{
    compress::ChunkErrors,
    dtype::DType,
    error::Result,
    progress::Progress,
    segy::{header_field, Geometry, SegyFile, TRACE_HEADER_LEN},
    store::{copy_run, Prefill, ShardBuilder, ZarrArray},
    window::{strides, unravel},
};

use super::{stats::AmplitudeStats, Layout};

/// The arrays tasks write into.
pub(crate) struct TaskArrays {
    pub amplitude: ZarrArray,
    pub trace_mask: ZarrArray,
    pub cdp_x: ZarrArray,
    pub cdp_y: ZarrArray,
    pub raw_headers: ZarrArray,
}

/// Where each cell's trace is in the source file ([`crate::segy::MISSING_TRACE`]
/// where none is), by the cell's index in C order over the trace dimensions:
/// the whole geometry, or the cells of one block ([`super::distributed`]).
pub(crate) trait CellTraces {
    fn trace_at(&self, cell: u64) -> u64;
}

impl CellTraces for Geometry {
    fn trace_at(&self, cell: u64) -> u64 {
        self.trace_of_cell[cell as usize]
    }
}

/// A block of traces and the sample shards to build from them.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct IngestTask {
    /// Shard index along each trace dimension.
    block: Vec<u64>,
    /// Shard indices along the sample dimension.
    z_shards: std::ops::Range<u64>,
    /// Full shard shape.
    shard: Vec<u64>,
    /// Amplitude array shape.
    shape: Vec<u64>,
    dtype: DType,
    /// Largest read of consecutive traces, in bytes.
    read_bytes: u64,
}

/// Largest single read of consecutive traces.
const MAX_READ_BYTES: u64 = 8 << 20;
/// Smallest: one read buffer is at most an eighth of a task's memory.
const MIN_READ_BYTES: u64 = 64 << 10;

/// The size of a task's reads of consecutive traces under `per_task` bytes.
fn read_bytes(per_task: u64) -> u64 {
    (per_task / 8).clamp(MIN_READ_BYTES, MAX_READ_BYTES)
}

/// The ingest's work: its tasks, and how many run at once.
pub(crate) struct TaskPlan {
    pub tasks: Vec<IngestTask>,
    /// Tasks run at once, each on its own thread: one more than the
    /// threads when the memory bound holds them, else as many as the
    /// threads, or fewer when a task's buffers need more of the bound.
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
/// `memory_limit`: each task one column of shards (its traces read once),
/// unless even one column at a time does not fit; then each task holds as
/// many shards along the samples as fit, and the source is read once per
/// such slab.
pub(crate) fn plan(
    shape: &[u64],
    layout: &Layout,
    dtype: DType,
    memory_limit: u64,
    threads: usize,
) -> Result<TaskPlan, String> {
    let nt = shape.len() - 1;
    let elem = dtype.size();
    let shard_bytes = layout.shard_bytes(elem);
    let threads = threads.max(1) as u64;
    let read = read_bytes(memory_limit / threads);
    let grid: Vec<u64> = shape
        .iter()
        .zip(&layout.shard)
        .map(|(n, s)| n.div_ceil(*s))
        .collect();
    let nz = grid[nt];
    let whole = layout.ingest_task_bytes(shape, elem) + read;
    let (workers, z_per_task) = if whole * (threads + 1) <= memory_limit {
        // One task more than threads: a thread writing its shards to the
        // device waits on it, and the others' work fills the gap.
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
            tasks.push(IngestTask {
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

/// A live trace of the block: where it goes in the block and where it is in the file.
struct Placed {
    local: usize,
    trace: u64,
}

impl IngestTask {
    /// The files this task writes. They appear only whole (by rename, or
    /// one upload), so a stopped ingest finished the task if all are there.
    pub fn files(&self, arrays: &TaskArrays) -> Vec<std::path::PathBuf> {
        let mut files: Vec<_> = self
            .shard_indices()
            .map(|indices| arrays.amplitude.chunk_path(&indices))
            .collect();
        if self.z_shards.start == 0 {
            for array in [&arrays.trace_mask, &arrays.cdp_x, &arrays.cdp_y] {
                files.push(array.chunk_path(&self.block));
            }
            let mut header_chunk = self.block.clone();
            header_chunk.push(0);
            files.push(arrays.raw_headers.chunk_path(&header_chunk));
        }
        files
    }

    /// Read, decode, encode and write; returns source bytes read and, for
    /// lossy compression, the errors of the chunks written.
    pub fn run(
        &self,
        source: &SegyFile,
        geometry: &impl CellTraces,
        arrays: &TaskArrays,
        progress: &Progress,
    ) -> Result<(AmplitudeStats, Option<ChunkErrors>)> {
        // Every trace there: `fill` writes every element inside the array.
        let prefill = if self.live_traces(geometry) == self.block_cells().1.iter().product::<u64>()
        {
            Prefill::EdgeChunks
        } else {
            Prefill::FillValue
        };
        let mut shards: Vec<ShardBuilder> = self
            .shard_indices()
            .map(|indices| arrays.amplitude.shard_builder(&indices, prefill))
            .collect::<Result<_>>()?;
        let (_, aux, stats) = self.fill(source, geometry, &mut shards, progress)?;
        let mut errors: Option<ChunkErrors> = None;
        for shard in shards {
            if let Some(e) = arrays.amplitude.write_shard(shard)? {
                errors.get_or_insert_with(ChunkErrors::default).merge(&e);
            }
        }
        if let Some(aux) = aux {
            arrays.trace_mask.write_chunk(&self.block, &aux.mask)?;
            arrays
                .cdp_x
                .write_chunk(&self.block, &to_bytes(&aux.cdp_x))?;
            arrays
                .cdp_y
                .write_chunk(&self.block, &to_bytes(&aux.cdp_y))?;
            let mut header_indices = self.block.clone();
            header_indices.push(0);
            arrays
                .raw_headers
                .write_chunk(&header_indices, &aux.headers)?;
        }
        Ok((stats, errors))
    }

    /// The trace dimensions' sizes.
    pub fn trace_shape(&self) -> &[u64] {
        &self.shape[..self.shape.len() - 1]
    }

    /// The block's first cell over the trace dimensions, and its size
    /// (clipped at the edge of the grid).
    pub fn block_cells(&self) -> (Vec<u64>, Vec<u64>) {
        let nt = self.shape.len() - 1;
        let lo: Vec<u64> = (0..nt).map(|d| self.block[d] * self.shard[d]).collect();
        let extent = (0..nt)
            .map(|d| self.shard[d].min(self.shape[d] - lo[d]))
            .collect();
        (lo, extent)
    }

    /// Source bytes this task reads: the live traces of its block, whole.
    pub fn source_bytes(&self, geometry: &impl CellTraces, trace_len: u64) -> u64 {
        self.live_traces(geometry) * trace_len
    }

    /// How many cells of the block have a trace.
    fn live_traces(&self, geometry: &impl CellTraces) -> u64 {
        let nt = self.shape.len() - 1;
        let (lo, extent) = self.block_cells();
        let mut live = 0u64;
        for i in 0..extent.iter().product::<u64>() {
            let idx = unravel(i, &extent);
            let mut global = 0u64;
            for d in 0..nt {
                global = global * self.shape[d] + lo[d] + idx[d];
            }
            if geometry.trace_at(global) != crate::segy::MISSING_TRACE {
                live += 1;
            }
        }
        live
    }

    /// This task narrowed to the one shard along the samples at `z` (of
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

    /// Read the block's live traces and place their samples into `shards`
    /// (one per shard of `z_shards`); returns the source bytes read and, for
    /// the first shards along the samples, the per-trace outputs.
    pub fn fill(
        &self,
        source: &SegyFile,
        geometry: &impl CellTraces,
        shards: &mut [ShardBuilder],
        progress: &Progress,
    ) -> Result<(u64, Option<Aux>, AmplitudeStats)> {
        let nt = self.shape.len() - 1;
        let (trace_shape, block_shape) = (&self.shape[..nt], &self.shard[..nt]);
        let (lo, extent) = self.block_cells();
        let block_cells: u64 = block_shape.iter().product();

        // Live traces of the block, in C order of the cells (which is file
        // order for a file sorted that way, so reads coalesce).
        let mut placed = Vec::new();
        for i in 0..extent.iter().product::<u64>() {
            let idx = unravel(i, &extent);
            let (mut global, mut local) = (0u64, 0u64);
            for d in 0..nt {
                global = global * trace_shape[d] + lo[d] + idx[d];
                local = local * block_shape[d] + idx[d];
            }
            let trace = geometry.trace_at(global);
            if trace != crate::segy::MISSING_TRACE {
                placed.push(Placed {
                    local: local as usize,
                    trace,
                });
            }
        }

        let elem = self.dtype.size();
        let ns = self.shape[nt];
        let sz = self.shard[nt];
        let (inner, cps) = (
            shards[0].inner_shape().to_vec(),
            shards[0].chunks_per_shard().to_vec(),
        );
        let (chunk_strides, elem_strides) = (strides(&cps), strides(&inner));
        let first = self.z_shards.start == 0;
        let mut aux = first.then(|| Aux::new(block_cells as usize));

        let bps = source.format.bytes();
        let trace_len = source.trace_len;
        let max_run = (self.read_bytes / trace_len).max(1) as usize;
        let mut buffer = Vec::new();
        let mut decoded = vec![0u8; ns as usize * elem];
        let mut bytes_read = 0u64;
        let mut stats = AmplitudeStats::default();
        let mut start = 0;
        while start < placed.len() {
            // A run of traces that are consecutive in the file.
            let mut end = start + 1;
            while end < placed.len()
                && end - start < max_run
                && placed[end].trace == placed[end - 1].trace + 1
            {
                end += 1;
            }
            let run = &placed[start..end];
            buffer.resize(run.len() * trace_len as usize, 0);
            progress.check()?;
            source.read_at(&mut buffer, source.trace_offset(run[0].trace))?;
            bytes_read += buffer.len() as u64;
            progress.add(buffer.len() as u64);
            for (k, p) in run.iter().enumerate() {
                let trace = &buffer[k * trace_len as usize..(k + 1) * trace_len as usize];
                let (header, samples) = trace.split_at(TRACE_HEADER_LEN);
                // The trace's place: which inner chunk column, and where in each chunk.
                let local = unravel(p.local as u64, block_shape);
                let (mut chunk_base, mut elem_base) = (0u64, 0u64);
                for d in 0..nt {
                    chunk_base += local[d] / inner[d] * chunk_strides[d];
                    elem_base += local[d] % inner[d] * elem_strides[d];
                }
                // Decode the samples this task needs in one call, then place
                // them chunk by chunk (runs of one chunk's depth).
                let (t0, t1) = (self.z_shards.start * sz, (self.z_shards.end * sz).min(ns));
                let wanted = &mut decoded[t0 as usize * elem..t1 as usize * elem];
                source.format.decode(
                    source.endian(),
                    &samples[t0 as usize * bps..t1 as usize * bps],
                    wanted,
                    self.dtype,
                );
                stats.add_bytes(wanted, self.dtype);
                for (j, z) in self.z_shards.clone().enumerate() {
                    for kz in 0..cps[nt] {
                        let z0 = z * sz + kz * inner[nt];
                        if z0 >= ns {
                            break;
                        }
                        let n = ((z0 + inner[nt]).min(ns) - z0) as usize;
                        let at = elem_base as usize * elem;
                        if let Some(chunk) = shards[j].chunk_mut((chunk_base + kz) as usize) {
                            copy_run(&decoded, z0 as usize * elem, chunk, at, n * elem);
                        }
                    }
                }
                if let Some(aux) = aux.as_mut() {
                    aux.record(p.local, header, source);
                }
            }
            start = end;
        }

        Ok((bytes_read, aux, stats))
    }
}

/// Per-trace outputs of a block besides amplitudes.
pub(crate) struct Aux {
    mask: Vec<u8>,
    cdp_x: Vec<f64>,
    cdp_y: Vec<f64>,
    headers: Vec<u8>,
}

impl Aux {
    fn new(cells: usize) -> Self {
        Self {
            mask: vec![0; cells],
            cdp_x: vec![f64::NAN; cells],
            cdp_y: vec![f64::NAN; cells],
            headers: vec![0; cells * TRACE_HEADER_LEN],
        }
    }

    fn record(&mut self, local: usize, header: &[u8], source: &SegyFile) {
        let e = source.endian();
        self.mask[local] = 1;
        // CDP X/Y (bytes 181/185) scaled by the coordinate scalar (byte 71).
        let scalar = header_field(header, 71, 2, e);
        self.cdp_x[local] =
            crate::segy::apply_scalar(header_field(header, 181, 4, e) as f64, scalar);
        self.cdp_y[local] =
            crate::segy::apply_scalar(header_field(header, 185, 4, e) as f64, scalar);
        self.headers[local * TRACE_HEADER_LEN..(local + 1) * TRACE_HEADER_LEN]
            .copy_from_slice(header);
    }
}

fn to_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}
