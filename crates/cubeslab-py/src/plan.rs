//! Bindings of the layout planner: profiles, plans, and the cost model
//! over stored arrays.

use std::path::PathBuf;

use cubeslab_core::{
    compress::Compression,
    config::Parallelism,
    dtype::DType,
    plan::{
        chunk_codec, measure, predict, stored_array, AccessMix, Cache, CacheState, DeviceProfile,
        Planner, ReadSetup, StoredArray, Strategy,
    },
    store::ZarrArray as CoreArray,
    Error,
};
use pyo3::{buffer::PyBuffer, prelude::*};
use serde_json::{Map, Value};

use crate::{
    errors::{engine, invalid_input},
    options,
};

fn value_error(message: impl Into<String>) -> PyErr {
    invalid_input(message.into())
}

fn setup(m: &Map<String, Value>) -> ReadSetup {
    let p = Parallelism::resolve(
        m.get("threads").and_then(Value::as_u64).map(|v| v as usize),
        m.get("in_flight")
            .and_then(Value::as_u64)
            .map(|v| v as usize),
    );
    ReadSetup {
        threads: p.threads,
        in_flight: p.in_flight,
        verify: m.get("verify").and_then(Value::as_bool).unwrap_or(true),
    }
}

/// Keys a profile measurement takes.
const MEASURE_KEYS: &[&str] = &["file_bytes", "cell_seconds", "threads", "codecs"];
/// Keys a plan takes.
const PLAN_KEYS: &[&str] = &[
    "layout",
    "access",
    "profile",
    "compress",
    "threads",
    "in_flight",
    "verify",
    "state",
    "top",
    "memory_limit",
];
/// Keys the cost model takes.
const COST_KEYS: &[&str] = &["profile", "threads", "in_flight", "verify"];

/// Measure the machine under `dir`; returns the profile as JSON.
/// `sample` is a C-order array of `shape` and `dtype` used for the codecs.
#[pyfunction]
pub fn measure_profile(
    py: Python<'_>,
    dir: PathBuf,
    options: &str,
    sample: PyBuffer<u8>,
    shape: [u64; 3],
    dtype: &str,
) -> PyResult<String> {
    let m = options::parse(options, MEASURE_KEYS)?;
    let mut opts = measure::MeasureOptions::new(&dir);
    if let Some(v) = m.get("file_bytes").and_then(Value::as_u64) {
        opts.file_bytes = v;
    }
    if let Some(v) = m.get("cell_seconds").and_then(Value::as_f64) {
        opts.cell_seconds = v;
    }
    for (key, target) in [("sizes", &mut opts.sizes), ("depths", &mut opts.depths)] {
        if let Some(list) = m.get(key).and_then(Value::as_array) {
            *target = list
                .iter()
                .filter_map(Value::as_u64)
                .filter(|&v| v > 0)
                .collect();
            if target.is_empty() {
                return Err(value_error(format!("{key} must list positive integers")));
            }
            target.sort_unstable();
        }
    }
    opts.threads = setup(&m).threads;
    if let Some(codecs) = m.get("codecs").and_then(Value::as_array) {
        opts.codecs = codecs
            .iter()
            .map(|name| Compression::parse(name.as_str().unwrap_or("?")).map_err(value_error))
            .collect::<PyResult<_>>()?;
    }
    let dtype =
        DType::from_name(dtype).ok_or_else(|| value_error(format!("unsupported dtype {dtype}")))?;
    if !sample.is_c_contiguous()
        || sample.len_bytes() as u64 != shape.iter().product::<u64>() * dtype.size() as u64
    {
        return Err(value_error(
            "sample must be a C-contiguous array of the given shape",
        ));
    }
    let (ptr, len) = (sample.buf_ptr() as usize, sample.len_bytes());
    let profile = engine(py, move || {
        // SAFETY: `sample` keeps the buffer alive for the call; it is only read.
        let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
        let sample = measure::Sample {
            shape,
            dtype,
            bytes,
        };
        measure::measure(&opts, &sample, &mut |_| {})
    })?;
    Ok(profile.to_json())
}

/// Raise ValueError unless `layout` is a strategy name or shape.
#[pyfunction]
pub fn check_layout(layout: &str) -> PyResult<()> {
    Strategy::parse(layout).map(|_| ()).map_err(value_error)
}

/// Raise ValueError naming the problem if `access` is not an access list
/// (for an array of up to eight dimensions; its own count is checked later).
#[pyfunction]
pub fn check_access(access: &str) -> PyResult<()> {
    AccessMix::parse(access, cubeslab_core::window::MAX_DIMS)
        .map(|_| ())
        .map_err(value_error)
}

/// Raise ValueError naming the problem if `compress` is not a compression name.
#[pyfunction]
pub fn check_compress(compress: &str) -> PyResult<()> {
    cubeslab_core::compress::Compression::parse(compress)
        .map(|_| ())
        .map_err(value_error)
}

/// Plan a layout for an array of `shape` and `dtype`. Options: `layout`
/// (strategy name), `access`, `compress`, `profile` (JSON text), `threads`,
/// `in_flight`, `verify`, `state` (`cold`, `warm`, `both`), `top`.
/// Returns the chosen layout first, then runners-up, as JSON.
#[pyfunction]
pub fn plan_layout(
    py: Python<'_>,
    shape: Vec<u64>,
    dtype: &str,
    options: &str,
) -> PyResult<String> {
    let m = options::parse(options, PLAN_KEYS)?;
    let dtype =
        DType::from_name(dtype).ok_or_else(|| value_error(format!("unsupported dtype {dtype}")))?;
    if shape.is_empty() || shape.contains(&0) {
        return Err(value_error("shape must have positive sides"));
    }
    let strategy = match m.get("layout").and_then(Value::as_str) {
        None => Strategy::Auto,
        Some(name) => Strategy::parse(name).map_err(value_error)?,
    };
    let profile = options::profile(&m)?;
    let mix = match m.get("access").and_then(Value::as_str) {
        None => AccessMix::default_for(shape.len()),
        Some(text) => AccessMix::parse(text, shape.len()).map_err(value_error)?,
    };
    let state = match m.get("state").and_then(Value::as_str).unwrap_or("both") {
        "cold" => CacheState::Cold,
        "warm" => CacheState::Warm,
        "both" => CacheState::Both,
        other => {
            return Err(value_error(format!(
                "state must be cold, warm or both, not {other}"
            )))
        }
    };
    let planner = Planner {
        codec: chunk_codec(&profile, m.get("compress").and_then(Value::as_str)),
        profile,
        mix,
        setup: setup(&m),
        state,
        block: options::compression(&m)?.block_side(),
        ingest_task_limit: cubeslab_core::ingest::task_budget(
            m.get("memory_limit")
                .and_then(Value::as_u64)
                .unwrap_or(cubeslab_core::ingest::DEFAULT_MEMORY_LIMIT),
            setup(&m).threads,
        ),
    };
    let top = m.get("top").and_then(Value::as_u64).unwrap_or(5) as usize;
    let ranked = py
        .detach(|| strategy.choose(&shape, dtype.size(), &planner))
        .map_err(value_error)?;
    let kept: Vec<_> = ranked.into_iter().take(top.max(1)).collect();
    Ok(serde_json::to_string(&kept).expect("plans serialise"))
}

/// The cost model over stored arrays: predicts their reads.
#[pyclass(frozen)]
pub struct CostModel {
    arrays: Vec<StoredArray>,
    profile: DeviceProfile,
    setup: ReadSetup,
}

#[pymethods]
impl CostModel {
    /// Options: `profile` (JSON text), `threads`, `in_flight`, `verify`.
    #[new]
    fn new(py: Python<'_>, paths: Vec<PathBuf>, options: &str) -> PyResult<Self> {
        let m = options::parse(options, COST_KEYS)?;
        let profile = options::profile(&m)?;
        let arrays = engine(py, || {
            paths
                .iter()
                .map(|p| {
                    let array = CoreArray::open(p)?;
                    stored_array(&array, &profile).ok_or_else(|| {
                        Error::from(cubeslab_core::store::StoreError::Unsupported {
                            path: p.clone(),
                            what:
                                "the cost model covers sharded arrays read on the engine's own path"
                                    .into(),
                        })
                    })
                })
                .collect::<Result<Vec<_>, Error>>()
        })?;
        Ok(Self {
            arrays,
            setup: setup(&m),
            profile,
        })
    }

    /// Predicted cost of reading the window from array `index`, as JSON.
    fn predict(
        &self,
        index: usize,
        starts: Vec<u64>,
        stops: Vec<u64>,
        steps: Vec<u64>,
        cold: bool,
    ) -> PyResult<String> {
        let window = crate::window(&starts, &stops, &steps)?;
        let array = self
            .arrays
            .get(index)
            .ok_or_else(|| value_error(format!("no array {index}")))?;
        window
            .validate(&array.shape)
            .map_err(|e| value_error(e.to_string()))?;
        let cache = if cold { Cache::Cold } else { Cache::Warm };
        let p = predict(array, &window, &self.setup, cache, &self.profile);
        Ok(serde_json::to_string(&p).expect("predictions serialise"))
    }
}
