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
mod rebuild;
mod stats;
mod survey;
mod task;

pub use crate::plan::Layout;
pub use compare::compare_with_source;
pub(crate) use rebuild::rebuild_shards;
pub use stats::AmplitudeStats;
pub use survey::{SurveyNames, AMPLITUDE, FILE_HEADER, RAW_HEADERS, TRACE_MASK};

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde_json::{json, Map, Value};

use crate::compress::{tune, ChunkErrors, Compression};
use crate::{
    config::Parallelism,
    dtype::DType,
    error::Result,
    plan::{
        dir_bytes, Access, AccessMix, CacheState, ChunkCodec, DeviceProfile, Evaluated, Planner,
        ReadSetup, Strategy,
    },
    progress::{Progress, Unit},
    segy::{Geometry, ScanOptions, SegyFile, SegyOptions},
    store::{
        new_generation, record_generation, recorded_generation, staging_path, sync_tree,
        Durability, Group, Publication, StoreError, StoreLock, StoreState, ZarrArray,
    },
};
use survey::RecordedLayouts;
pub use task::task_budget;
use task::{IngestTask, TaskArrays};

/// Default bound on the memory an ingest holds for trace and shard buffers.
pub const DEFAULT_MEMORY_LIMIT: u64 = 1 << 30;

/// The element type the amplitudes are stored as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmplitudeType {
    /// float32, the default: exact for the common formats, what tools expect.
    Float32,
    /// The type that holds the source's sample format exactly (int16 for format 3, ...).
    Native,
    /// A type the caller names.
    Given(DType),
}

/// How to ingest.
#[derive(Debug, Clone)]
pub struct IngestOptions {
    /// How to read the SEG-Y file.
    pub segy: SegyOptions,
    /// Where the geometry keys are.
    pub scan: ScanOptions,
    /// Element type of the amplitude array.
    pub dtype: AmplitudeType,
    /// How the chunk and shard shapes are chosen.
    pub layout: Strategy,
    /// Reads the layout is planned for (`inline,time=2`, see [`AccessMix::parse`]);
    /// `None`: [`AccessMix::default_for`] the survey's dimensions.
    pub access: Option<String>,
    /// The machine the layout is planned for.
    pub profile: DeviceProfile,
    /// How the amplitude chunks are costed (follows `compression`).
    pub codec: ChunkCodec,
    /// Orientation copies to write besides the amplitude array, one per
    /// access name (`inline`, `crossline`, `time`, ...), each laid out for
    /// that access alone; readers route each read to the fastest copy.
    pub views: Vec<String>,
    /// How amplitude chunks are compressed; error targets (`zfp:snr=40`)
    /// are tuned on a sample of the survey first.
    pub compression: Compression,
    /// Bound on buffer memory in bytes.
    pub memory_limit: u64,
    /// Threads (requests in flight do not apply to ingest).
    pub parallelism: Parallelism,
    /// Replace an existing store.
    pub overwrite: bool,
    /// Flush every file and folder of the store to the device (fsync)
    /// before marking it complete, and the marker after: a power cut then
    /// leaves a store marked incomplete, or a whole one. Without it the
    /// kernel writes back in its own time, and a power cut soon after the
    /// ingest may lose data of a store already marked complete.
    pub durable: bool,
    /// Continue an ingest that stopped: keep the shards it finished, write
    /// the rest. Starts afresh if there is no store yet.
    pub resume: bool,
    /// Name of the vertical axis: "time" or "depth".
    pub vertical: String,
}

impl Default for IngestOptions {
    fn default() -> Self {
        Self {
            segy: SegyOptions::default(),
            scan: ScanOptions::default(),
            dtype: AmplitudeType::Float32,
            layout: Strategy::Auto,
            access: None,
            profile: DeviceProfile::typical(),
            codec: ChunkCodec::Raw { crc: true },
            views: Vec::new(),
            compression: Compression::None,
            memory_limit: DEFAULT_MEMORY_LIMIT,
            parallelism: Parallelism::default(),
            overwrite: false,
            durable: false,
            resume: false,
            vertical: "time".into(),
        }
    }
}

/// An ingest in progress.
pub struct Ingest {
    source: SegyFile,
    geometry: Geometry,
    store: PathBuf,
    arrays: TaskArrays,
    tasks: Vec<IngestTask>,
    next: usize,
    /// Tasks run at once (see [`task::TaskPlan::workers`]).
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
    /// Held until the store is complete, or the ingest is dropped.
    lock: Option<StoreLock>,
    /// The store this ingest replaces, swapped out when this one is complete.
    /// Where the store goes when complete (none for a store resumed in place).
    publication: Option<Publication>,
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
        let store = store.as_ref().to_path_buf();
        // The store is written under a staging name and published when
        // complete (store/publish.rs); a stopped run resumes there. A store
        // left unfinished in place by an older version resumes in place.
        let staging = staging_path(&store);
        let resume_staged = options.resume && staging.join("zarr.json").is_file();
        let resume_in_place = options.resume
            && !resume_staged
            && Group::open(&store).is_ok_and(|g| matches!(g.state(), StoreState::Incomplete(_)));
        let resuming = resume_staged || resume_in_place;
        let write_to = if resume_in_place {
            store.clone()
        } else {
            staging
        };
        if !resuming {
            // Refuse before the (possibly long) header scan.
            if store.exists() && !options.overwrite {
                if options.resume
                    && Group::open(&store).is_ok_and(|g| g.state() == StoreState::Complete)
                {
                    return Err(StoreError::Unsupported {
                        path: store,
                        what: "the store is complete: nothing to resume".into(),
                    }
                    .into());
                }
                return Err(StoreError::AlreadyExists { path: store }.into());
            }
            if write_to.exists() && !options.overwrite {
                return Err(StoreError::Unfinished {
                    path: store,
                    staging: write_to,
                }
                .into());
            }
        }
        let source = SegyFile::open(source, &options.segy)?;
        progress.begin("scan headers", Unit::Items, source.traces, 0);
        let geometry = Geometry::scan(&source, &options.scan, options.parallelism, progress)?;
        let dtype = match options.dtype {
            AmplitudeType::Float32 => DType::Float32,
            AmplitudeType::Native => source.format.native_dtype(),
            AmplitudeType::Given(d) => d,
        };
        let names = SurveyNames::new(geometry.offsets.is_some(), &options.vertical);
        let mut shape = geometry.trace_shape();
        shape.push(source.samples as u64);
        let planner = Planner {
            profile: options.profile.clone(),
            mix: match &options.access {
                None => AccessMix::default_for(shape.len()),
                Some(text) => {
                    AccessMix::parse(text, shape.len()).map_err(|what| StoreError::Unsupported {
                        path: store.clone(),
                        what,
                    })?
                }
            },
            setup: ReadSetup {
                threads: options.parallelism.threads,
                in_flight: Parallelism::default().in_flight,
                verify: true,
            },
            codec: options.codec.clone(),
            state: CacheState::Both,
            block: options.compression.block_side(),
            ingest_task_limit: task_budget(options.memory_limit, options.parallelism.threads),
        };
        // A resumed `auto` ingest keeps the layouts the stopped one chose:
        // planned again, on a profile measured since, they could differ. (A
        // layout given explicitly must match the recorded one, as any option.)
        let recorded = if resuming && matches!(options.layout, Strategy::Auto) {
            survey::recorded_layouts(&write_to)?
        } else {
            RecordedLayouts::default()
        };
        progress.begin("plan layout", Unit::Items, 1, 0);
        let plan = recorded
            .volume
            .as_ref()
            .unwrap_or(&options.layout)
            .choose(&shape, dtype.size(), &planner)
            .map_err(|what| StoreError::Unsupported {
                path: store.clone(),
                what,
            })?;
        progress.add(1);
        let layout = plan[0].layout.clone();
        layout
            .check(&shape)
            .map_err(|what| StoreError::Unsupported {
                path: store.clone(),
                what,
            })?;
        let views = plan_views(&options.views, &shape, dtype, &planner, &recorded.views).map_err(
            |what| StoreError::Unsupported {
                path: store.clone(),
                what,
            },
        )?;

        if !dtype_holds(dtype, source.format) {
            return Err(StoreError::Unsupported {
                path: store.clone(),
                what: format!(
                    "dtype {} cannot hold every sample of format {} exactly; use float32, float64 or native",
                    dtype.name(),
                    source.format.code()
                ),
            }
            .into());
        }
        let unsupported = |what| StoreError::Unsupported {
            path: store.clone(),
            what,
        };
        let work = task::plan(
            &shape,
            &layout,
            dtype,
            options.memory_limit,
            options.parallelism.threads,
        )
        .map_err(unsupported)?;
        let compression = &options.compression;
        compression.check_dtype(dtype).map_err(unsupported)?;
        // ZFP has no NaN: cells without a trace read as 0 there (the trace
        // mask tells them apart), and NaN everywhere else.
        let fill_value = match compression {
            Compression::Zfp(_) => json!(0.0),
            _ => dtype.default_fill(),
        };
        let tuned = if compression.needs_tuning() {
            progress.begin("tune compression", Unit::Items, 2, 0);
            let fill = vec![0u8; dtype.size()];
            let sample =
                rebuild::sample_chunks(&source, &geometry, &shape, &layout.inner, dtype, &fill)?;
            progress.add(1);
            progress.check()?;
            let tuned = tune(compression, &sample).map_err(unsupported)?;
            progress.add(1);
            Some(tuned)
        } else {
            None
        };
        let chosen = tuned
            .as_ref()
            .map_or_else(|| compression.clone(), |t| t.compression.clone());
        let codecs = chosen.codecs(dtype).map_err(unsupported)?;
        let mut amplitude = survey::amplitude_spec(
            shape.clone(),
            &names,
            &layout,
            dtype,
            &codecs,
            fill_value.clone(),
        );
        amplitude.validate(&store.join(AMPLITUDE))?;

        let mut attributes = survey::group_attributes(&source, &geometry, &names, &layout, dtype);
        attributes["cubeslab"]["memory_limit"] = json!(options.memory_limit);
        attributes["cubeslab"]["source_passes"] = json!(work.passes);
        attributes["cubeslab"]["plan"] = json!({
            "strategy": options.layout.name(),
            "layout": layout.describe(),
            "padding": plan[0].padding,
            "predicted_ms": predicted_ms(&plan[0]),
        });
        attributes["cubeslab"]["compression"] = json!({
            "requested": compression.name(),
            "codec": chosen.name(),
            "lossy": chosen.is_lossy(),
        });
        if let Some(t) = &tuned {
            let mut on_sample = t.error.to_json();
            on_sample["ratio"] = json!(t.ratio);
            on_sample["chunks"] =
                json!(t.error.count / layout.inner.iter().product::<u64>().max(1));
            attributes["cubeslab"]["compression"]["tuned_on_sample"] = on_sample;
        }
        attributes["cubeslab"]["views"] = views
            .iter()
            .map(|v| {
                (
                    v.access.clone(),
                    json!({"array": v.array, "layout": v.plan.layout.describe(), "predicted_ms": predicted_ms(&v.plan)}),
                )
            })
            .collect::<Map<String, Value>>()
            .into();
        let fingerprint = survey::fingerprint(&source, &amplitude, options)?;
        attributes["cubeslab"]["fingerprint"] = fingerprint.clone();

        // Everything that can be checked has been: only now touch the disk.
        let (lock, publication) = if resume_in_place {
            let lock = survey::check_resumable(&write_to, &fingerprint)?;
            survey::remove_temporary_files(&write_to)?;
            (lock, None)
        } else if resuming {
            let publication = Publication::resume(&store)?;
            let lock = survey::check_resumable(&write_to, &fingerprint)?;
            survey::remove_temporary_files(&write_to)?;
            (lock, Some(publication))
        } else {
            let publication = Publication::begin(&store, options.overwrite)?;
            (StoreLock::acquire(&publication.staging)?, Some(publication))
        };
        let store = write_to;
        // The store's generation: every shard carries it (store/identity.rs).
        // A resume keeps the one the stopped ingest chose; a store written
        // before generations existed keeps having none.
        let generation = if resuming {
            Group::open(&store)
                .ok()
                .and_then(|g| recorded_generation(&g.attributes))
        } else {
            Some(new_generation())
        };
        if let Some(g) = generation {
            record_generation(&mut attributes, g);
        }
        amplitude.generation = generation;
        Group::write(&store, &attributes, Durability::Cached)?;
        // Idempotent: on a resume it rewrites the same metadata and coordinates.
        let arrays =
            survey::create_arrays(&store, &source, &geometry, &names, &layout, &amplitude)?;
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
        let (mut total, mut done) = (0, 0);
        let mut tasks = Vec::with_capacity(work.tasks.len());
        for t in work.tasks {
            let bytes = t.source_bytes(&geometry, source.trace_len);
            total += bytes;
            if resuming && t.is_done(&arrays) {
                done += bytes;
            } else {
                tasks.push(t);
            }
        }
        progress.begin("write volume", Unit::Bytes, total, done);
        Ok(Self {
            source,
            geometry,
            store,
            arrays,
            tasks,
            next: 0,
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
            lock: Some(lock),
            publication,
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
            if let Some(all) = self.stats.as_mut() {
                all.merge(&stats);
            }
            if let Some(e) = errors {
                self.errors
                    .get_or_insert_with(ChunkErrors::default)
                    .merge(&e);
            }
        }
        self.next = end;
        Ok(self.tasks.len() - self.next)
    }

    /// Mark the store complete (atomically, last) and return its summary.
    pub fn finish(mut self) -> Result<Value> {
        while self.step(usize::MAX)? > 0 {}
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
            )?);
            self.progress.add(1);
        }
        let c = self.attributes.get_mut("cubeslab").expect("set at start");
        let stored = dir_bytes(&self.arrays.amplitude.path().join("c"));
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
            extra.insert("statsV1".into(), stats.to_stats_v1());
            self.arrays.amplitude.add_attributes(&extra)?;
        }
        c["state"] = json!("complete");
        if self.durability == Durability::Synced {
            sync_tree(&self.store)?;
        }
        Group::write(&self.store, &self.attributes, self.durability)?;
        if let Some(publication) = self.publication.take() {
            self.lock = None; // the staging lock: an old store's is held until the swap
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

/// An orientation copy to write: the access it serves, its array, its plan.
struct PlannedView {
    access: String,
    array: String,
    plan: Evaluated,
}

/// Plan each view's layout for its access alone.
fn plan_views(
    views: &[String],
    shape: &[u64],
    dtype: DType,
    planner: &Planner,
    recorded: &Map<String, Value>,
) -> std::result::Result<Vec<PlannedView>, String> {
    let mut planned: Vec<PlannedView> = Vec::new();
    for text in views {
        let access = Access::parse(text, shape.len())?;
        let name = access.name(shape.len());
        if planned.iter().any(|v| v.access == name) {
            continue;
        }
        if let Some(layout) = recorded.get(&name).and_then(|v| v["layout"].as_str()) {
            let plan = Strategy::parse(layout)?
                .choose(shape, dtype.size(), planner)?
                .remove(0);
            let array = recorded[&name]["array"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            planned.push(PlannedView {
                array,
                access: name,
                plan,
            });
            continue;
        }
        let window = access.window(shape);
        let alone = Planner {
            mix: AccessMix {
                accesses: vec![(access, 1.0)],
            },
            ..planner.clone()
        };
        // A view is the volume laid out for its access: each read one shard
        // holding little else, fetched whole in one trip. When no such
        // layout fits the bounds (a tiny array), the best for the access.
        let mut fitted = alone.rank_one_read_per_shard(shape, dtype.size(), &window);
        let plan = if fitted.is_empty() {
            Strategy::Auto
                .choose(shape, dtype.size(), &alone)?
                .remove(0)
        } else {
            fitted.remove(0)
        };
        let suffix: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        planned.push(PlannedView {
            array: format!("{AMPLITUDE}_{suffix}"),
            access: name,
            plan,
        });
    }
    Ok(planned)
}

/// Predicted warm and cold milliseconds per access, for the record.
fn predicted_ms(plan: &Evaluated) -> Value {
    plan.accesses
        .iter()
        .map(|a| {
            (
                a.access.clone(),
                json!({"warm": a.warm.seconds * 1e3, "cold": a.cold.seconds * 1e3}),
            )
        })
        .collect::<Map<String, Value>>()
        .into()
}

/// Whether `dtype` holds every value of `format` exactly: floats hold what
/// they are asked to (float32 is the documented default, lossless for the
/// common formats), integers only formats whose whole range they cover.
fn dtype_holds(dtype: DType, format: crate::segy::SampleFormat) -> bool {
    use DType::*;
    if dtype.is_float() {
        return true;
    }
    let native = format.native_dtype();
    if native.is_float() {
        return false;
    }
    let range = |d: DType| -> (i128, i128) {
        match d {
            Int8 => (i8::MIN as i128, i8::MAX as i128),
            Int16 => (i16::MIN as i128, i16::MAX as i128),
            Int32 => (i32::MIN as i128, i32::MAX as i128),
            Int64 => (i64::MIN as i128, i64::MAX as i128),
            UInt8 | Bool => (0, u8::MAX as i128),
            UInt16 => (0, u16::MAX as i128),
            UInt32 => (0, u32::MAX as i128),
            UInt64 => (0, u64::MAX as i128),
            Float32 | Float64 => (i128::MIN, i128::MAX),
        }
    };
    // 24-bit formats are narrower than their native 32-bit holder.
    let source = match format {
        crate::segy::SampleFormat::Int24 => (-(1 << 23), (1 << 23) - 1),
        crate::segy::SampleFormat::UInt24 => (0, (1 << 24) - 1),
        _ => range(native),
    };
    let target = range(dtype);
    target.0 <= source.0 && source.1 <= target.1
}
