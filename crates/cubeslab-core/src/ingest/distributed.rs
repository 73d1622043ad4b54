//! Ingest tasks run by other processes (Dask workers): the ingest that
//! planned them hands each out as a JSON description holding what it needs
//! besides the source file and the staging store (its block's trace
//! indices, not the whole geometry), and takes back each outcome (the
//! statistics and compression errors of what the task wrote).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{
    stats::AmplitudeStats,
    survey::open_arrays,
    task::{CellTraces, IngestTask},
};
use crate::{
    compress::{ChunkErrors, ErrorStats},
    error::{ErrorKind, PartError, Result},
    progress::Progress,
    segy::{Geometry, SegyFile, SegyOptions},
    window::{strides, unravel},
};

/// What can go wrong between the ingest and the processes running its tasks.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// A task description or outcome this version did not write.
    #[error("{what} is not one this version of cubeslab wrote: {reason}")]
    Message {
        /// Which message.
        what: &'static str,
        /// Why it does not parse.
        reason: String,
    },
    /// A task reported done whose files are not in the store.
    #[error("{store}: the task that writes shard {shard} was handed out but did not write it; the store stays incomplete: continue with --resume")]
    NotWritten {
        /// The staging store.
        store: PathBuf,
        /// The missing shard's indices.
        shard: String,
    },
}

impl From<TaskError> for crate::Error {
    fn from(error: TaskError) -> Self {
        crate::Error::Part(Box::new(error))
    }
}

impl PartError for TaskError {
    fn kind(&self) -> ErrorKind {
        match self {
            TaskError::Message { .. } => ErrorKind::InvalidInput,
            TaskError::NotWritten { .. } => ErrorKind::Incomplete,
        }
    }
}

fn parse<T: for<'a> Deserialize<'a>>(what: &'static str, text: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|e| {
        TaskError::Message {
            what,
            reason: e.to_string(),
        }
        .into()
    })
}

/// The C-order index of `at` in a grid of `shape`.
fn ravel(at: &[u64], shape: &[u64]) -> u64 {
    let s = strides(shape);
    at.iter().zip(&s).map(|(a, s)| a * s).sum()
}

/// One task as handed out.
#[derive(Serialize, Deserialize)]
pub(super) struct TaskSpec {
    pub task: IngestTask,
    /// The trace of each cell of the task's block, in C order.
    traces: BlockTraces,
}

/// The traces of one block of cells.
#[derive(Serialize, Deserialize)]
struct BlockTraces {
    /// The trace dimensions' sizes.
    shape: Vec<u64>,
    /// The block's first cell.
    lo: Vec<u64>,
    /// Its size (clipped at the edge of the grid).
    extent: Vec<u64>,
    traces: Vec<u64>,
}

impl BlockTraces {
    fn of(task: &IngestTask, geometry: &Geometry) -> Self {
        let (lo, extent) = task.block_cells();
        let shape = task.trace_shape().to_vec();
        let traces = (0..extent.iter().product::<u64>())
            .map(|i| {
                let at: Vec<u64> = unravel(i, &extent)
                    .iter()
                    .zip(&lo)
                    .map(|(i, l)| i + l)
                    .collect();
                geometry.trace_at(ravel(&at, &shape))
            })
            .collect();
        Self {
            shape,
            lo,
            extent,
            traces,
        }
    }
}

impl CellTraces for BlockTraces {
    fn trace_at(&self, cell: u64) -> u64 {
        let at = unravel(cell, &self.shape);
        let local: Vec<u64> = at.iter().zip(&self.lo).map(|(a, l)| a - l).collect();
        self.traces[ravel(&local, &self.extent) as usize]
    }
}

impl TaskSpec {
    pub fn new(task: &IngestTask, geometry: &Geometry) -> Self {
        Self {
            traces: BlockTraces::of(task, geometry),
            task: task.clone(),
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a task is plain data")
    }
}

/// What a task reports back. Floats travel as their bits: the statistics
/// hold infinities, which JSON numbers cannot.
#[derive(Serialize, Deserialize, Default)]
pub(super) struct TaskOutcome {
    /// count, sum, sum of squares, min, max.
    stats: (u64, u64, u64, u64, u64),
    errors: Option<WireErrors>,
}

#[derive(Serialize, Deserialize)]
struct WireErrors {
    /// count, signal energy, error energy, max abs error, min, max.
    total: (u64, u64, u64, u64, u64, u64),
    chunks: u64,
    worst_max_abs: Option<(u64, String)>,
    worst_snr: Option<(u64, String)>,
}

impl TaskOutcome {
    pub fn new(stats: &AmplitudeStats, errors: Option<&ChunkErrors>) -> Self {
        let s = stats;
        Self {
            stats: (
                s.count,
                s.sum.to_bits(),
                s.sum_squares.to_bits(),
                s.min.to_bits(),
                s.max.to_bits(),
            ),
            errors: errors.map(|e| {
                let t = &e.total;
                WireErrors {
                    total: (
                        t.count,
                        t.signal_energy.to_bits(),
                        t.error_energy.to_bits(),
                        t.max_abs_error.to_bits(),
                        t.min.to_bits(),
                        t.max.to_bits(),
                    ),
                    chunks: e.chunks,
                    worst_max_abs: e
                        .worst_max_abs
                        .as_ref()
                        .map(|(x, k)| (x.to_bits(), k.clone())),
                    worst_snr: e.worst_snr.as_ref().map(|(x, k)| (x.to_bits(), k.clone())),
                }
            }),
        }
    }

    pub fn parse(text: &str) -> Result<(AmplitudeStats, Option<ChunkErrors>)> {
        let o: Self = parse("an ingest task's outcome", text)?;
        let f = f64::from_bits;
        let stats = AmplitudeStats {
            count: o.stats.0,
            sum: f(o.stats.1),
            sum_squares: f(o.stats.2),
            min: f(o.stats.3),
            max: f(o.stats.4),
        };
        let errors = o.errors.map(|w| ChunkErrors {
            total: ErrorStats {
                count: w.total.0,
                signal_energy: f(w.total.1),
                error_energy: f(w.total.2),
                max_abs_error: f(w.total.3),
                min: f(w.total.4),
                max: f(w.total.5),
            },
            chunks: w.chunks,
            worst_max_abs: w.worst_max_abs.map(|(x, k)| (f(x), k)),
            worst_snr: w.worst_snr.map(|(x, k)| (f(x), k)),
        });
        Ok((stats, errors))
    }
}

/// Run one handed-out task (`spec`, from [`super::Ingest::hand_out`]):
/// read its traces from `source`, write its shards into the staging store
/// at `store`; returns its outcome for [`super::Ingest::take_outcome`].
pub fn run_task(source: &Path, segy: &SegyOptions, store: &Path, spec: &str) -> Result<String> {
    let spec: TaskSpec = parse("an ingest task's description", spec)?;
    let source = SegyFile::open(source, segy)?;
    let arrays = open_arrays(store)?;
    let (stats, errors) = spec
        .task
        .run(&source, &spec.traces, &arrays, &Progress::default())?;
    Ok(serde_json::to_string(&TaskOutcome::new(&stats, errors.as_ref())).expect("plain data"))
}
