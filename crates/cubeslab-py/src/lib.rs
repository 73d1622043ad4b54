//! Python bindings of the cubeslab engine: conversion only.
//!
//! Every call into the engine goes through [`engine`], which releases the
//! GIL, turns a panic into an exception and maps engine errors to the
//! classes of `cubeslab.errors`.

mod array;
mod chunked_file;
mod errors;
mod imzml;
mod options;
mod plan;
mod remote;
mod rows;
mod verify;

use std::path::PathBuf;

use cubeslab_core::{
    config::Parallelism,
    dtype::DType,
    export::export_segy,
    ingest::Ingest as CoreIngest,
    progress::Progress as CoreProgress,
    store::ZarrArray as CoreArray,
    window::{DimRange, Window},
};
use pyo3::{buffer::PyBuffer, prelude::*};

use errors::engine;
use options::{ExportOptions, IngestOptions};

/// Run `fill` on the bytes of `out` with the GIL released, after checking
/// that `out` is writable and C-contiguous.
pub(crate) fn into_buffer(
    py: Python<'_>,
    out: &PyBuffer<u8>,
    fill: impl FnOnce(&mut [u8]) -> cubeslab_core::error::Result<()> + Send,
) -> PyResult<()> {
    if out.readonly() || !out.is_c_contiguous() {
        return Err(crate::errors::invalid_input(
            "out must be a writable C-contiguous buffer",
        ));
    }
    let (ptr, len) = (out.buf_ptr() as usize, out.len_bytes());
    engine(py, move || {
        // SAFETY: the buffer is held (and so kept alive and unmoved) by
        // `out` for the duration of the call; it is writable and contiguous.
        let slice = unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, len) };
        fill(slice)
    })
}

/// The bytes of the C-contiguous buffer `buffer` (`what` names it in the
/// error), read in place for as long as `buffer` is held: no copy.
pub(crate) fn bytes_of<'b>(buffer: &'b PyBuffer<u8>, what: &str) -> PyResult<&'b [u8]> {
    if !buffer.is_c_contiguous() {
        return Err(crate::errors::invalid_input(format!(
            "{what} must be a C-contiguous buffer"
        )));
    }
    // SAFETY: `buffer` holds the exporter's buffer (alive and unmoved) for
    // the slice's lifetime, and it is contiguous; the slice is only read.
    Ok(unsafe { std::slice::from_raw_parts(buffer.buf_ptr() as *const u8, buffer.len_bytes()) })
}

pub(crate) fn window(starts: &[u64], stops: &[u64], steps: &[u64]) -> PyResult<Window> {
    if starts.len() != stops.len() || starts.len() != steps.len() {
        return Err(crate::errors::invalid_input(
            "starts, stops and steps differ in length",
        ));
    }
    Ok(Window {
        dims: starts
            .iter()
            .zip(stops)
            .zip(steps)
            .map(|((&start, &stop), &step)| DimRange { start, stop, step })
            .collect(),
    })
}

/// A job's progress, read from another thread than the one running it,
/// and the means to stop the job.
#[pyclass(frozen)]
pub(crate) struct Progress {
    pub(crate) inner: CoreProgress,
}

#[pymethods]
impl Progress {
    #[new]
    fn new() -> Self {
        Self {
            inner: CoreProgress::default(),
        }
    }

    /// `(phase, phase_number, unit, done, total)`; unit is `bytes` or `items`.
    fn snapshot(&self) -> (String, u64, &'static str, u64, u64) {
        let s = self.inner.snapshot();
        (s.phase, s.phase_number, s.unit.name(), s.done, s.total)
    }

    /// The phases that ended, oldest first, as snapshots.
    fn ended(&self) -> Vec<(String, u64, &'static str, u64, u64)> {
        self.inner
            .ended()
            .into_iter()
            .map(|s| (s.phase, s.phase_number, s.unit.name(), s.done, s.total))
            .collect()
    }

    /// Ask the job to stop: it raises KeyboardInterrupt soon after.
    fn stop(&self) {
        self.inner.stop();
    }

    /// Whether the job was asked to stop.
    #[getter]
    fn stop_requested(&self) -> bool {
        self.inner.check().is_err()
    }
}

/// A SEG-Y ingest in progress; Python drives it step by step.
#[pyclass]
struct Ingest {
    inner: Option<CoreIngest>,
}

impl Ingest {
    fn get(&mut self) -> PyResult<&mut CoreIngest> {
        self.inner
            .as_mut()
            .ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("ingest already finished"))
    }
}

#[pymethods]
impl Ingest {
    #[new]
    #[pyo3(signature = (source, store, options, progress=None))]
    fn start(
        py: Python<'_>,
        source: PathBuf,
        store: PathBuf,
        options: &IngestOptions,
        progress: Option<&Progress>,
    ) -> PyResult<Self> {
        let options = &options.engine;
        let progress = progress.map_or_else(CoreProgress::default, |p| p.inner.clone());
        Ok(Self {
            inner: Some(engine(py, || {
                CoreIngest::start(&source, &store, options, &progress)
            })?),
        })
    }

    #[getter]
    fn total_tasks(&mut self) -> PyResult<usize> {
        Ok(self.get()?.total_tasks())
    }

    #[getter]
    fn done_tasks(&mut self) -> PyResult<usize> {
        Ok(self.get()?.done_tasks())
    }

    /// Run up to `max_tasks` tasks; returns the number left.
    fn step(&mut self, py: Python<'_>, max_tasks: usize) -> PyResult<usize> {
        let ingest = self.get()?;
        engine(py, || ingest.step(max_tasks))
    }

    /// Hand the tasks not run yet to other processes (see `run_ingest_task`):
    /// their descriptions, as JSON.
    fn hand_out(&mut self) -> PyResult<Vec<String>> {
        Ok(self.get()?.hand_out())
    }

    /// The staging folder the tasks write into.
    #[getter]
    fn staging(&mut self) -> PyResult<PathBuf> {
        Ok(self.get()?.staging().to_path_buf())
    }

    /// For a store going to object storage, the URL the tasks upload their
    /// files under (a store being replaced there stops being one); else None.
    fn upload_target(&mut self, py: Python<'_>) -> PyResult<Option<String>> {
        let ingest = self.get()?;
        engine(py, || ingest.upload_target())
    }

    /// Count the outcome of handed-out task number `task`.
    fn take_outcome(&mut self, py: Python<'_>, task: usize, outcome: &str) -> PyResult<()> {
        let ingest = self.get()?;
        engine(py, || ingest.take_outcome(task, outcome))
    }

    /// Finish and mark the store complete; returns the summary as JSON.
    fn finish(&mut self, py: Python<'_>) -> PyResult<String> {
        let ingest = self
            .inner
            .take()
            .ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("ingest already finished"))?;
        Ok(engine(py, || ingest.finish())?.to_string())
    }
}

/// Run one task an ingest handed out: read its traces from `source` and
/// write its shards into the staging store `store`; returns its outcome.
#[pyfunction]
fn run_ingest_task(
    py: Python<'_>,
    source: PathBuf,
    store: PathBuf,
    options: &IngestOptions,
    task: &str,
) -> PyResult<String> {
    let segy = &options.engine.segy;
    engine(py, || {
        cubeslab_core::ingest::run_task(&source, segy, &store, task)
    })
}

/// Export a store to SEG-Y; returns the number of traces written, how many
/// positions without a trace hold written values (left out) and the first
/// of those (positions along the trace dimensions), or None.
#[pyfunction]
fn export(
    py: Python<'_>,
    store: PathBuf,
    output: PathBuf,
    options: &ExportOptions,
) -> PyResult<(u64, u64, Option<Vec<u64>>)> {
    let done = engine(py, || export_segy(&store, &output, &options.engine))?;
    Ok((done.traces, done.left_out, done.first_left_out))
}

/// Describe a SEG-Y file (headers and geometry) as JSON, without ingesting it.
#[pyfunction]
fn segy_info(py: Python<'_>, path: PathBuf, options: &IngestOptions) -> PyResult<String> {
    let options = &options.engine;
    let described = engine(py, || {
        cubeslab_core::segy::describe(&path, &options.segy, &options.scan, options.parallelism)
    })?;
    Ok(described.to_string())
}

/// The names a survey store's arrays have, by role (`amplitude`,
/// `trace_mask`, `raw_headers`, `file_header`, `cdp_x`, `cdp_y`).
#[pyfunction]
fn survey_arrays() -> std::collections::HashMap<&'static str, &'static str> {
    cubeslab_core::ingest::SURVEY_ARRAYS
        .iter()
        .copied()
        .collect()
}

/// Create a group at `path` whose main array is `main` (None: a group
/// naming none), with `attributes` (a JSON object) besides.
#[pyfunction]
#[pyo3(signature = (path, main, attributes="{}"))]
fn create_group(
    py: Python<'_>,
    path: PathBuf,
    main: Option<&str>,
    attributes: &str,
) -> PyResult<()> {
    let attributes: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(attributes)
            .map_err(|e| crate::errors::invalid_input(format!("group attributes: {e}")))?;
    engine(py, || {
        cubeslab_core::store::Group::create(&path, main, &attributes)
    })
}

/// Start counting the data version of the array at `path` (for arrays
/// derived from it); returns the version now.
#[pyfunction]
fn track_data_version(py: Python<'_>, path: PathBuf) -> PyResult<u64> {
    engine(py, || cubeslab_core::writer::track_data_version(&path))
}

/// Add `attributes` (a JSON object) to the group at `path`, objects merged
/// key by key.
#[pyfunction]
fn add_group_attributes(py: Python<'_>, path: PathBuf, attributes: &str) -> PyResult<()> {
    let attributes: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(attributes)
            .map_err(|e| crate::errors::invalid_input(format!("group attributes: {e}")))?;
    engine(py, || {
        cubeslab_core::store::Group::add_attributes(&path, &attributes)
    })
}

/// Whether an array's `zarr.json` document describes text (labels), not numbers.
#[pyfunction]
fn is_text_array(document: &str) -> PyResult<bool> {
    let metadata: serde_json::Value = serde_json::from_str(document)
        .map_err(|e| crate::errors::invalid_input(format!("array document: {e}")))?;
    Ok(cubeslab_core::store::is_text(&metadata))
}

/// Write `values` (C order over `shape`) as a new text array at `path`,
/// with its dimension names and attributes (a JSON object).
#[pyfunction]
#[pyo3(signature = (path, shape, values, dimension_names=None, attributes="{}"))]
fn write_text_array(
    py: Python<'_>,
    path: PathBuf,
    shape: Vec<u64>,
    values: Vec<String>,
    dimension_names: Option<Vec<String>>,
    attributes: &str,
) -> PyResult<()> {
    let attributes: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(attributes)
            .map_err(|e| crate::errors::invalid_input(format!("text array attributes: {e}")))?;
    engine(py, || {
        cubeslab_core::store::write_text(
            &path,
            &shape,
            &values,
            dimension_names.as_deref(),
            attributes,
        )
    })
}

/// Mark the store at `path` (a group or a lone array) complete.
#[pyfunction]
fn mark_complete(py: Python<'_>, path: PathBuf) -> PyResult<()> {
    engine(py, || cubeslab_core::store::mark_complete(&path))
}

/// Attributes (JSON text) recording a new store generation: arrays that
/// record one write each shard's identity beside it, and read a shard that
/// is missing or not theirs as damage.
#[pyfunction]
fn new_generation_attributes() -> String {
    let mut attributes = serde_json::Map::new();
    cubeslab_core::store::record_generation(
        &mut attributes,
        cubeslab_core::store::new_generation(),
    );
    serde_json::Value::Object(attributes).to_string()
}

/// Mark the store at `path` (a group or a lone array) as made by `create`.
#[pyfunction]
fn mark_created(py: Python<'_>, path: PathBuf) -> PyResult<()> {
    engine(py, || cubeslab_core::store::mark_created(&path))
}

/// The states a store reports, by meaning: `complete` (an ingest
/// finished), `created` (made by `create`) and `foreign` (neither recorded).
#[pyfunction]
fn store_states() -> std::collections::HashMap<&'static str, &'static str> {
    use cubeslab_core::store::{COMPLETE, CREATED, FOREIGN};
    [
        ("complete", COMPLETE),
        ("created", CREATED),
        ("foreign", FOREIGN),
    ]
    .into_iter()
    .collect()
}

/// Fill the (sharded) array `target` with the contents of `source`, of the
/// same shape and type in another layout (an orientation copy), within
/// about `memory_limit` bytes of buffers.
#[pyfunction]
#[pyo3(signature = (source, target, memory_limit, threads=None))]
fn copy_array(
    py: Python<'_>,
    source: PathBuf,
    target: PathBuf,
    memory_limit: u64,
    threads: Option<usize>,
) -> PyResult<()> {
    engine(py, || {
        let source = CoreArray::open(&source)?;
        CoreArray::open(&target)?.copy_from(
            &source,
            Parallelism::resolve(threads, None),
            memory_limit,
            &CoreProgress::default(),
        )
    })
}

/// The `--compress` name of a chunk codec chain (JSON), or `None` for a
/// chain cubeslab does not write.
#[pyfunction]
fn compression_name(codecs: &str) -> PyResult<Option<String>> {
    let codecs: Vec<serde_json::Value> = serde_json::from_str(codecs)
        .map_err(|e| crate::errors::invalid_input(format!("codecs: {e}")))?;
    Ok(cubeslab_core::compress::Compression::from_codecs(&codecs).map(|c| c.name()))
}

/// The write-back cache's bound (bytes) when a caller gives none.
#[pyfunction]
fn write_cache_default() -> u64 {
    cubeslab_core::writer::DEFAULT_CACHE_BYTES
}

/// Default parallelism as (threads, in_flight).
#[pyfunction]
fn default_parallelism() -> (usize, usize) {
    let p = Parallelism::default();
    (p.threads, p.in_flight)
}

/// The most threads a call gets, and the most requests in flight.
#[pyfunction]
fn parallelism_limits() -> (usize, usize) {
    (
        cubeslab_core::config::max_threads(),
        cubeslab_core::config::MAX_IN_FLIGHT,
    )
}

/// Names of the supported element types.
#[pyfunction]
fn dtypes() -> Vec<&'static str> {
    DType::ALL.iter().map(|d| d.name()).collect()
}

/// The most dimensions an array may have.
#[pyfunction]
fn max_dims() -> usize {
    cubeslab_core::window::MAX_DIMS
}

/// The file a store's writer holds, in the store or its staging folder.
#[pyfunction]
fn store_lock_file() -> &'static str {
    cubeslab_core::store::LOCK_FILE
}

/// The main array's attribute (MDIO's) holding the statistics of its data.
#[pyfunction]
fn stats_attribute() -> &'static str {
    cubeslab_core::store::STATS_V1
}

/// The key, in a group's MDIO `attributes` entry, that names the main array.
#[pyfunction]
fn main_array_attribute() -> &'static str {
    cubeslab_core::store::MAIN_ARRAY_ATTR
}

/// The process id of another live process holding the lock of the store
/// (or staging folder) at `path`, if one does.
#[pyfunction]
fn lock_holder(path: PathBuf) -> Option<u32> {
    cubeslab_core::store::live_holder(&path)
}

#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<array::ZarrArray>()?;
    m.add_class::<chunked_file::ChunkedFileArray>()?;
    m.add_class::<Ingest>()?;
    m.add_function(wrap_pyfunction!(run_ingest_task, m)?)?;
    m.add_function(wrap_pyfunction!(track_data_version, m)?)?;
    m.add_class::<Progress>()?;
    m.add_class::<IngestOptions>()?;
    m.add_class::<ExportOptions>()?;
    m.add_class::<remote::Publication>()?;
    m.add_function(wrap_pyfunction!(remote::location, m)?)?;
    m.add_function(wrap_pyfunction!(remote::stored_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(remote::download, m)?)?;
    m.add_function(wrap_pyfunction!(remote::download_store, m)?)?;
    m.add_function(wrap_pyfunction!(remote::upload_folder, m)?)?;
    m.add_function(wrap_pyfunction!(export, m)?)?;
    m.add_function(wrap_pyfunction!(segy_info, m)?)?;
    m.add_function(wrap_pyfunction!(remote::read_node, m)?)?;
    m.add_function(wrap_pyfunction!(remote::store_contents, m)?)?;
    m.add_function(wrap_pyfunction!(survey_arrays, m)?)?;
    m.add_function(wrap_pyfunction!(write_cache_default, m)?)?;
    m.add_function(wrap_pyfunction!(compression_name, m)?)?;
    m.add_function(wrap_pyfunction!(create_group, m)?)?;
    m.add_function(wrap_pyfunction!(add_group_attributes, m)?)?;
    m.add_function(wrap_pyfunction!(mark_complete, m)?)?;
    m.add_function(wrap_pyfunction!(mark_created, m)?)?;
    m.add_function(wrap_pyfunction!(new_generation_attributes, m)?)?;
    m.add_function(wrap_pyfunction!(store_states, m)?)?;
    m.add_function(wrap_pyfunction!(is_text_array, m)?)?;
    m.add_function(wrap_pyfunction!(remote::read_text_array, m)?)?;
    m.add_function(wrap_pyfunction!(write_text_array, m)?)?;
    m.add_function(wrap_pyfunction!(copy_array, m)?)?;
    m.add_function(wrap_pyfunction!(rows::fill_from_rows, m)?)?;
    m.add_function(wrap_pyfunction!(rows::fill_from_binned_rows, m)?)?;
    m.add_function(wrap_pyfunction!(imzml::read_imzml_index, m)?)?;
    m.add_function(wrap_pyfunction!(errors::error_classes, m)?)?;
    m.add_function(wrap_pyfunction!(default_parallelism, m)?)?;
    m.add_function(wrap_pyfunction!(parallelism_limits, m)?)?;
    m.add_function(wrap_pyfunction!(dtypes, m)?)?;
    m.add_function(wrap_pyfunction!(max_dims, m)?)?;
    m.add_function(wrap_pyfunction!(store_lock_file, m)?)?;
    m.add_function(wrap_pyfunction!(stats_attribute, m)?)?;
    m.add_function(wrap_pyfunction!(main_array_attribute, m)?)?;
    m.add_function(wrap_pyfunction!(lock_holder, m)?)?;
    m.add_class::<plan::CostModel>()?;
    m.add_function(wrap_pyfunction!(plan::measure_profile, m)?)?;
    m.add_function(wrap_pyfunction!(plan::plan_layout, m)?)?;
    m.add_function(wrap_pyfunction!(plan::plan_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(plan::check_layout, m)?)?;
    m.add_function(wrap_pyfunction!(plan::check_access, m)?)?;
    m.add_function(wrap_pyfunction!(plan::check_compress, m)?)?;
    m.add_function(wrap_pyfunction!(verify::verify_store, m)?)?;
    m.add_function(wrap_pyfunction!(verify::compare_with_source, m)?)?;
    m.add_class::<verify::ErrorTally>()?;
    m.add_function(wrap_pyfunction!(verify::codec_trial, m)?)?;
    Ok(())
}
