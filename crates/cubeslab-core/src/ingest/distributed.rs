//! Ingest tasks run by other processes (Dask workers): the ingest that
//! planned them hands each out as a JSON description holding what it needs
//! besides the source file and the staging store (its block's trace
//! indices, not the whole geometry), and takes back each outcome (the
//! statistics and compression errors of what the task wrote). A store
//! going to object storage has its tasks upload their files to their final
//! keys; the ingest checks them with one listing and writes the root
//! document last, as ever.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{
    relative_key,
    stats::AmplitudeStats,
    survey::{self, open_arrays},
    task::CellTraces,
    Ingest,
};
use crate::{
    compress::{ChunkErrors, ErrorStats},
    destination::Destination,
    error::{ErrorKind, PartError, Result},
    progress::Progress,
    rows::tasks::ColumnTask,
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
    #[error("{store}: the task that writes {shard} was handed out but did not write it; the store stays incomplete: continue with --resume")]
    NotWritten {
        /// The staging store.
        store: PathBuf,
        /// The missing file, relative to the store.
        shard: String,
    },
    /// Something a cluster ingest to object storage does not do yet.
    #[error("{url}: {what} is not done by an ingest on a cluster to object storage yet; ingest on one machine (without --scheduler), or to a folder")]
    Unsupported {
        /// The store.
        url: String,
        /// What.
        what: &'static str,
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
            TaskError::Unsupported { .. } => ErrorKind::InvalidInput,
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
struct TaskSpec {
    task: ColumnTask,
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
    fn of(task: &ColumnTask, geometry: &Geometry) -> Self {
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
    fn new(task: &ColumnTask, geometry: &Geometry) -> Self {
        Self {
            traces: BlockTraces::of(task, geometry),
            task: task.clone(),
        }
    }

    fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a task is plain data")
    }
}

/// What a task reports back. Floats travel as their bits: the statistics
/// hold infinities, which JSON numbers cannot.
#[derive(Serialize, Deserialize, Default)]
struct TaskOutcome {
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
    fn new(stats: &AmplitudeStats, errors: Option<&ChunkErrors>) -> Self {
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

    fn parse(text: &str) -> Result<(AmplitudeStats, Option<ChunkErrors>)> {
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

impl Ingest {
    /// Hand the tasks not run yet to other processes, which run them with
    /// [`run_task`]: their descriptions, in order. They write into this
    /// store's staging folder ([`Ingest::staging`], which they must share),
    /// or, after [`Ingest::upload_target`], into folders of their own whose
    /// files they upload. Give each outcome back to [`Ingest::take_outcome`];
    /// [`Ingest::finish`] checks every task's files before the store is
    /// marked complete.
    pub fn hand_out(&mut self) -> Vec<String> {
        let specs = self.tasks[self.next..]
            .iter()
            .map(|t| TaskSpec::new(t, &self.geometry).to_json())
            .collect();
        self.handed_out = Some(self.next);
        self.next = self.tasks.len();
        specs
    }

    /// The staging folder the handed-out tasks write into.
    pub fn staging(&self) -> &Path {
        &self.store
    }

    /// For a store going to object storage: the URL handed-out tasks upload
    /// their files under (a store being replaced there stops being one now).
    /// `None` for a store on this machine.
    pub fn upload_target(&mut self) -> Result<Option<String>> {
        let Some(Destination::Remote(upload)) = &self.publication else {
            return Ok(None);
        };
        // Both read the amplitude shards here, which the tasks upload instead.
        let lossy = self.attributes["cubeslab"]["compression"]["lossy"].as_bool() == Some(true);
        let unsupported = if !self.views.is_empty() {
            Some("orientation views")
        } else if lossy && self.stats.is_none() && !self.uploading_only {
            Some("resuming a lossy ingest")
        } else {
            None
        };
        if let Some(what) = unsupported {
            return Err(TaskError::Unsupported {
                url: upload.url.to_string(),
                what,
            }
            .into());
        }
        upload.open_to_others()?;
        self.tasks_upload = true;
        Ok(Some(upload.url.to_string()))
    }

    /// Count the outcome of handed-out task number `task` (from 0).
    pub fn take_outcome(&mut self, task: usize, outcome: &str) -> Result<()> {
        let counted = TaskOutcome::parse(outcome)?;
        let first = self.handed_out.unwrap_or(self.tasks.len());
        if let Some(t) = self.tasks.get(first + task) {
            self.progress
                .add(t.source_bytes(&self.geometry, self.source.trace_len));
        }
        // Counted in task order at the end, as a local ingest counts them: floating-point sums
        // depend on the order, and the store must not depend on which worker finished first.
        if self.outcomes.len() <= task {
            self.outcomes.resize_with(task + 1, || None);
        }
        self.outcomes[task] = Some(counted);
        Ok(())
    }

    /// After tasks ran elsewhere: remove what a process killed midway left
    /// (its temporary files) and check that every task's files are there,
    /// in the staging folder or uploaded.
    pub(super) fn check_handed_out(&mut self) -> Result<()> {
        let Some(first) = self.handed_out else {
            return Ok(());
        };
        survey::remove_temporary_files(&self.store)?;
        let uploaded = match (&self.publication, self.tasks_upload) {
            (Some(Destination::Remote(upload)), true) => upload.uploaded_keys()?,
            _ => Default::default(),
        };
        let mut adopted = Vec::new();
        for task in &self.tasks[first..] {
            for file in task.files(&self.arrays) {
                let key = relative_key(&self.store, &file);
                if let Some(size) = uploaded.get(&key) {
                    adopted.push((key, *size));
                } else if !file.is_file() {
                    return Err(TaskError::NotWritten {
                        store: self.store.clone(),
                        shard: key,
                    }
                    .into());
                }
            }
        }
        if let Some(Destination::Remote(upload)) = self.publication.as_mut() {
            upload.adopt(adopted);
        }
        let outcomes = std::mem::take(&mut self.outcomes);
        if outcomes.len() < self.tasks.len() - first || outcomes.iter().any(Option::is_none) {
            self.stats = None; // a task's statistics never came back: none are recorded
        }
        for (stats, errors) in outcomes.into_iter().flatten() {
            self.count(&stats, errors.as_ref());
        }
        Ok(())
    }
}
