//! SEG-Y → cube store.
//!
//! 1. scan every trace header in parallel → geometry ([`crate::segy::Geometry`]);
//! 2. create the store, marked incomplete, with its coordinate arrays;
//! 3. cut the amplitude array into tasks — one column of shards over a block
//!    of traces, as many shards along the samples as the memory bound allows;
//! 4. run tasks in parallel: read the block's traces, decode them into shard
//!    buffers, encode (crc32c on every chunk and index) and write each shard
//!    atomically; the first task of a block also writes its trace headers,
//!    coordinates and live mask;
//! 5. mark the store complete, atomically, last.
//!
//! The caller drives step 4 with [`Ingest::step`]. A [`Progress`] shared
//! with another thread shows each phase (scan, tuning, writing, views) with
//! its total, and stops the ingest on request; a stopped store stays
//! marked incomplete.

mod compare;
mod design;
mod distributed;
mod layouts;
mod options;
mod plan_ahead;
mod planning;
mod rebuild;
mod stats;
mod survey;
mod target;
mod task;

pub use crate::plan::Layout;
pub use compare::{compare_with_source, Reference};
pub use distributed::{run_task, TaskError};
pub use options::option_help;
pub use options::{AmplitudeType, IngestOptions, SourceOrigin, DEFAULT_MEMORY_LIMIT};
pub use planning::{plan_layout, PlanRequest};
pub(crate) use rebuild::rebuild_shards;
pub use stats::AmplitudeStats;
pub use survey::{
    SurveyNames, AMPLITUDE, CDP_X, CDP_Y, FILE_HEADER, RAW_HEADERS, SURVEY_ARRAYS, TRACE_MASK,
};

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde_json::{json, Map, Value};

use crate::compress::ChunkErrors;
pub use crate::rows::tasks::task_budget;
use crate::rows::tasks::ColumnTask;
use crate::{
    config::Parallelism,
    destination::Destination,
    error::Result,
    plan::{dir_bytes, Strategy},
    progress::{Progress, Unit},
    segy::{Geometry, SegyFile},
    store::{sync_tree, Durability, Group, StoreError, StoreLock, ZarrArray},
};
use design::Design;
use plan_ahead::PlanAhead;
use survey::RecordedLayouts;
use target::Target;
use task::TaskArrays;

/// An ingest in progress.
pub struct Ingest {
    source: SegyFile,
    geometry: Geometry,
    store: PathBuf,
    arrays: TaskArrays,
    tasks: Vec<ColumnTask>,
    next: usize,
    /// Tasks from here on were handed to other processes ([`Ingest::hand_out`]).
    handed_out: Option<usize>,
    /// Their outcomes, by task number, as they arrive.
    outcomes: Vec<Option<(AmplitudeStats, Option<ChunkErrors>)>>,
    /// Tasks run at once (see [`crate::rows::tasks::TaskPlan::workers`]).
    workers: Parallelism,
    parallelism: Parallelism,
    memory_limit: u64,
    /// How the completion marker is written (and the store flushed before it).
    durability: Durability,
    /// Orientation copies, filled from the amplitude array when all tasks are done.
    views: Vec<ZarrArray>,
    attributes: Map<String, Value>,
    progress: Progress,
    /// Statistics of the samples this run decoded; `None` for a resumed
    /// run, which does not decode the tasks an earlier run finished.
    stats: Option<AmplitudeStats>,
    /// Errors of the lossy chunks written by this run.
    errors: Option<ChunkErrors>,
    /// The lock of a store resumed in place: held until it is complete,
    /// or the ingest is dropped.
    _lock: Option<StoreLock>,
    /// Where the store goes when complete (none for a store resumed in place).
    publication: Option<Destination>,
    /// Whether handed-out tasks upload their files to the store's location.
    tasks_upload: bool,
    /// Whether a staged, complete store is only uploaded again.
    uploading_only: bool,
}

/// The key of `file`, in the store at `store`, relative to it.
fn relative_key(store: &Path, file: &Path) -> String {
    file.strip_prefix(store)
        .unwrap_or(file)
        .to_string_lossy()
        .into_owned()
}

impl Ingest {
    /// Scan `source`, create the store at `store` (marked incomplete) and
    /// plan the work; `progress` follows every phase and may stop it.
    pub fn start(
        source: impl AsRef<Path>,
        store: impl AsRef<Path>,
        options: &IngestOptions,
        progress: &Progress,
    ) -> Result<Self> {
        let target = Target::resolve(store.as_ref(), options)?;
        let store = target.store.clone();
        let source = SegyFile::open(source, &options.segy)?;
        progress.begin("scan headers", Unit::Items, source.traces, 0);
        let ahead = if target.resuming {
            None
        } else {
            PlanAhead::start(&store, &source, options)
        };
        let geometry = Geometry::scan(&source, &options.scan, options.parallelism, progress)?;
        // A resumed `auto` ingest keeps the layouts the stopped one chose:
        // planned again, on a profile measured since, they could differ. (A
        // layout given explicitly must match the recorded one, as any option.)
        let recorded = if target.resuming && matches!(options.layout, Strategy::Auto) {
            survey::recorded_layouts(&target.write_to)?
        } else {
            RecordedLayouts::default()
        };
        let Design {
            dtype,
            names,
            shape,
            layout,
            views,
            work,
            codecs,
            fill_value,
            mut amplitude,
            mut attributes,
        } = Design::new(
            &store, &source, &geometry, options, &recorded, ahead, progress,
        )?;
        let fingerprint = survey::fingerprint(&source, &amplitude, options)?;
        attributes["cubeslab"]["fingerprint"] = fingerprint.clone();

        // Everything that can be checked has been: only now touch the disk.
        let opened = target.open(
            &fingerprint,
            options.overwrite,
            &options.storage,
            &mut attributes,
        )?;
        let generation = opened.generation;
        amplitude.generation = generation;
        let store = target.write_to.clone();
        let uploading_only = target.stopped_uploading();
        let (arrays, view_arrays, attributes) = if uploading_only {
            // Staged whole, and checked against this source: only its
            // upload is left, and its recorded summary stands.
            let recorded = Group::open(&store)?.attributes;
            (survey::open_arrays(&store)?, Vec::new(), recorded)
        } else {
            Group::write(&store, &attributes, Durability::Cached)?;
            // Idempotent: on a resume it rewrites the same metadata and coordinates.
            let arrays =
                survey::create_arrays(&store, &source, &geometry, &names, &layout, &amplitude)?;
            // A task's shards go to the next task: never more than were held at once.
            arrays
                .amplitude
                .recycle_buffers(options.memory_limit as usize);
            let view_arrays = views
                .iter()
                .map(|v| {
                    let mut spec = survey::amplitude_spec(
                        shape.clone(),
                        &names,
                        &v.plan.layout,
                        dtype,
                        &codecs,
                        fill_value.clone(),
                    );
                    spec.attributes.insert("view_of".into(), json!(AMPLITUDE));
                    spec.generation = generation;
                    ZarrArray::create(store.join(&v.array), &spec)
                })
                .collect::<Result<Vec<_>>>()?;
            (arrays, view_arrays, attributes)
        };
        let (mut total, mut done) = (0, 0);
        let mut tasks = Vec::with_capacity(work.tasks.len());
        let mut publication = opened.publication;
        // Tasks run on a cluster upload their files to the store's location.
        let uploaded = match &publication {
            Some(Destination::Remote(upload)) if target.resuming => upload.uploaded_keys()?,
            _ => Default::default(),
        };
        let mut adopted = Vec::new();
        for t in work.tasks {
            let bytes = t.source_bytes(&geometry, source.trace_len);
            total += bytes;
            let files = t.files(&arrays);
            let keys: Vec<String> = files.iter().map(|f| relative_key(&store, f)).collect();
            let there = |(f, k): (&PathBuf, &String)| f.is_file() || uploaded.contains_key(k);
            if target.resuming && files.iter().zip(&keys).all(there) {
                done += bytes;
                adopted.extend(
                    keys.into_iter()
                        .filter_map(|k| uploaded.get(&k).map(|size| (k, *size))),
                );
            } else {
                tasks.push(t);
            }
        }
        if uploading_only && !tasks.is_empty() {
            return Err(StoreError::Unsupported {
                path: store.clone(),
                what: "the store staged for upload is missing shards; start again with --overwrite"
                    .into(),
            }
            .into());
        }
        if let Some(Destination::Remote(upload)) = publication.as_mut() {
            upload.adopt(adopted);
        }
        progress.begin("write volume", Unit::Bytes, total, done);
        Ok(Self {
            source,
            geometry,
            store,
            arrays,
            tasks,
            next: 0,
            handed_out: None,
            outcomes: Vec::new(),
            workers: Parallelism::resolve(Some(work.workers), None),
            parallelism: options.parallelism,
            memory_limit: options.memory_limit,
            durability: if options.durable {
                Durability::Synced
            } else {
                Durability::Cached
            },
            views: view_arrays,
            attributes,
            progress: progress.clone(),
            stats: (done == 0).then(AmplitudeStats::default),
            errors: None,
            _lock: opened.lock,
            publication,
            tasks_upload: false,
            uploading_only,
        })
    }

    /// Number of tasks in all.
    pub fn total_tasks(&self) -> usize {
        self.tasks.len()
    }

    /// Tasks done so far.
    pub fn done_tasks(&self) -> usize {
        self.next
    }

    /// Run up to `max_tasks` more tasks in parallel; returns tasks left.
    pub fn step(&mut self, max_tasks: usize) -> Result<usize> {
        let end = self
            .next
            .saturating_add(max_tasks.max(1))
            .min(self.tasks.len());
        let batch = &self.tasks[self.next..end];
        let (source, geometry, arrays) = (&self.source, &self.geometry, &self.arrays);
        let progress = &self.progress;
        let done = self.workers.pool().install(|| {
            batch
                .par_iter()
                .map(|t| t.run(source, geometry, arrays, progress))
                .collect::<Result<Vec<_>>>()
        })?;
        for (stats, errors) in done {
            self.count(&stats, errors.as_ref());
        }
        self.next = end;
        Ok(self.tasks.len() - self.next)
    }

    fn count(&mut self, stats: &AmplitudeStats, errors: Option<&ChunkErrors>) {
        if let Some(all) = self.stats.as_mut() {
            all.merge(stats);
        }
        if let Some(e) = errors {
            self.errors
                .get_or_insert_with(ChunkErrors::default)
                .merge(e);
        }
    }

    /// Mark the store complete (atomically, last) and return its summary.
    pub fn finish(mut self) -> Result<Value> {
        if self.uploading_only {
            if let Some(publication) = self.publication.take() {
                publication.commit(self.durability)?;
            }
            return Ok(self.summary());
        }
        while self.step(usize::MAX)? > 0 {}
        self.check_handed_out()?;
        let mut view_bytes = Map::new();
        for view in &self.views {
            let name = view
                .path()
                .file_name()
                .map(|n| n.to_string_lossy().to_string());
            let data_bytes = view.shape().iter().product::<u64>() * view.dtype().size() as u64;
            self.progress.begin(
                &format!("write {}", name.as_deref().unwrap_or("view")),
                Unit::Bytes,
                data_bytes,
                0,
            );
            view.copy_from(
                &self.arrays.amplitude,
                self.parallelism,
                self.memory_limit,
                &self.progress,
            )?;
            view_bytes.insert(
                name.unwrap_or_default(),
                json!(dir_bytes(&view.path().join("c"))),
            );
        }
        let lossy = self.attributes["cubeslab"]["compression"]["lossy"].as_bool() == Some(true);
        if lossy && self.stats.is_none() {
            // This run resumed one that had written chunks already: the error
            // recorded must cover those too, so every chunk is measured again.
            self.progress
                .begin("measure compression error", Unit::Items, 1, 0);
            self.errors = Some(compare_with_source(
                &self.arrays.amplitude,
                &self.source,
                &self.geometry,
                self.parallelism,
                self.memory_limit,
                Reference::Stored,
            )?);
            self.progress.add(1);
        }
        let uploaded = match &self.publication {
            Some(Destination::Remote(upload)) => upload.adopted_bytes(&format!("{AMPLITUDE}/c/")),
            _ => 0,
        };
        let c = self.attributes.get_mut("cubeslab").expect("set at start");
        let stored = dir_bytes(&self.arrays.amplitude.path().join("c")) + uploaded;
        c["stored_bytes"] = json!(stored);
        let data_bytes = self.arrays.amplitude.shape().iter().product::<u64>()
            * self.arrays.amplitude.dtype().size() as u64;
        c["compression"]["ratio"] = json!(data_bytes as f64 / stored.max(1) as f64);
        if let Some(errors) = &self.errors {
            // Measured on every chunk this run wrote: each was decoded again
            // and compared with the samples it was made from.
            c["compression"]["achieved"] = errors.to_json();
        }
        if let Some(views) = c["views"].as_object_mut() {
            for view in views.values_mut() {
                let bytes = view["array"]
                    .as_str()
                    .and_then(|a| view_bytes.get(a))
                    .cloned();
                view["stored_bytes"] = bytes.unwrap_or(Value::Null);
            }
        }
        if let Some(stats) = &self.stats {
            // As MDIO records them, where readers of MDIO stores look.
            let mut extra = Map::new();
            extra.insert(crate::store::STATS_V1.into(), stats.to_stats_v1());
            self.arrays.amplitude.add_attributes(&extra)?;
        }
        c["state"] = json!(crate::store::COMPLETE);
        if self.durability == Durability::Synced {
            sync_tree(&self.store)?;
        }
        Group::write(&self.store, &self.attributes, self.durability)?;
        if let Some(publication) = self.publication.take() {
            publication.commit(self.durability)?;
        }
        Ok(self.summary())
    }

    /// What was ingested, as JSON.
    pub fn summary(&self) -> Value {
        self.attributes["cubeslab"].clone()
    }

    /// The open amplitude array.
    pub fn amplitude(&self) -> &ZarrArray {
        &self.arrays.amplitude
    }
}
