//! A SEG-Y ingest task run: a [`ColumnTask`]'s traces read, decoded and
//! placed into its shards, with their headers, coordinates and mask.

use crate::{
    compress::ChunkErrors,
    error::Result,
    progress::Progress,
    rows::{placement::RowPlacement, tasks::ColumnTask},
    segy::{header_field, Geometry, SegyFile, TRACE_HEADER_LEN},
    store::{Prefill, ShardBuilder, ZarrArray},
};

use super::stats::AmplitudeStats;

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

/// A live trace of the block: where it goes in the block and where it is in the file.
struct Placed {
    local: usize,
    trace: u64,
}

impl ColumnTask {
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

    /// Source bytes this task reads: the live traces of its block, whole.
    pub fn source_bytes(&self, geometry: &impl CellTraces, trace_len: u64) -> u64 {
        self.live_traces(geometry) * trace_len
    }

    /// How many cells of the block have a trace.
    fn live_traces(&self, geometry: &impl CellTraces) -> u64 {
        self.cells()
            .filter(|&(global, _)| geometry.trace_at(global) != crate::segy::MISSING_TRACE)
            .count() as u64
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
        let block_cells: u64 = self.shard[..nt].iter().product();

        // Live traces of the block, in C order of the cells (which is file
        // order for a file sorted that way, so reads coalesce).
        let placed: Vec<Placed> = self
            .cells()
            .filter_map(|(global, local)| {
                let trace = geometry.trace_at(global);
                (trace != crate::segy::MISSING_TRACE).then_some(Placed {
                    local: local as usize,
                    trace,
                })
            })
            .collect();

        let elem = self.dtype.size();
        let ns = self.shape[nt];
        let sz = self.shard[nt];
        let placement = RowPlacement::new(&self.shard, ns, elem, &shards[0]);
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
                placement.place(shards, self.z_shards.clone(), p.local as u64, &decoded, 0);
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
