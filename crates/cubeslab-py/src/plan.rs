//! Bindings of the layout planner: profiles, plans, and the cost model
//! over stored arrays.

use std::path::PathBuf;

use cubeslab_core::{
    compress::Compression,
    config::Parallelism,
    dtype::DType,
    plan::{
        measure, predict, stored_array, AccessMix, Cache, DeviceProfile, ReadSetup, StoredArray,
        Strategy,
    },
    store::ZarrArray as CoreArray,
    Error,
};
use pyo3::{buffer::PyBuffer, prelude::*};

use crate::{
    bytes_of,
    errors::{engine, invalid_input},
    options,
};

fn value_error(message: impl Into<String>) -> PyErr {
    invalid_input(message.into())
}

fn read_setup(threads: Option<usize>, in_flight: Option<usize>, verify: bool) -> ReadSetup {
    let p = Parallelism::resolve(threads, in_flight);
    ReadSetup {
        threads: p.threads,
        in_flight: p.in_flight,
        verify,
    }
}

/// Measure the machine under `dir`; returns the profile as JSON.
/// `sample` is a C-order array of `shape` and `dtype` used for the codecs;
/// `codecs` the `--compress` names to measure; the rest, when given,
/// replace the measurement's own sizes and durations.
#[pyfunction]
#[pyo3(signature = (
    dir, sample, shape, dtype, *, codecs=None, file_bytes=None, cell_seconds=None, threads=None,
    sizes=None, depths=None,
))]
#[allow(clippy::too_many_arguments)]
pub fn measure_profile(
    py: Python<'_>,
    dir: PathBuf,
    sample: PyBuffer<u8>,
    shape: [u64; 3],
    dtype: &str,
    codecs: Option<Vec<String>>,
    file_bytes: Option<u64>,
    cell_seconds: Option<f64>,
    threads: Option<usize>,
    sizes: Option<Vec<u64>>,
    depths: Option<Vec<u64>>,
) -> PyResult<String> {
    let mut opts = measure::MeasureOptions::new(&dir);
    if let Some(v) = file_bytes {
        opts.file_bytes = v;
    }
    if let Some(v) = cell_seconds {
        opts.cell_seconds = v;
    }
    for (key, given, target) in [
        ("sizes", sizes, &mut opts.sizes),
        ("depths", depths, &mut opts.depths),
    ] {
        if let Some(mut list) = given {
            if list.is_empty() || list.contains(&0) {
                return Err(value_error(format!("{key} must list positive integers")));
            }
            list.sort_unstable();
            *target = list;
        }
    }
    opts.threads = Parallelism::resolve(threads, None).threads;
    if let Some(codecs) = codecs {
        opts.codecs = codecs
            .iter()
            .map(|name| Compression::parse(name).map_err(value_error))
            .collect::<PyResult<_>>()?;
    }
    let dtype =
        DType::from_name(dtype).ok_or_else(|| value_error(format!("unsupported dtype {dtype}")))?;
    let bytes = bytes_of(&sample, "sample")?;
    if bytes.len() as u64 != shape.iter().product::<u64>() * dtype.size() as u64 {
        return Err(value_error("sample must be an array of the given shape"));
    }
    let profile = engine(py, move || {
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

/// Plan a layout for an array of `shape` and `dtype` (see
/// [`cubeslab_core::ingest::PlanRequest`]); the chosen layout first, then
/// runners-up, as JSON.
#[pyfunction]
#[pyo3(signature = (
    shape, dtype, *, layout=None, access=None, compress=None, profile=None, threads=None,
    in_flight=None, verify=true, state=None, top=None, memory_limit=None,
))]
#[allow(clippy::too_many_arguments)]
pub fn plan_layout(
    py: Python<'_>,
    shape: Vec<u64>,
    dtype: &str,
    layout: Option<String>,
    access: Option<String>,
    compress: Option<String>,
    profile: Option<&str>,
    threads: Option<usize>,
    in_flight: Option<usize>,
    verify: bool,
    state: Option<String>,
    top: Option<usize>,
    memory_limit: Option<u64>,
) -> PyResult<String> {
    let dtype =
        DType::from_name(dtype).ok_or_else(|| value_error(format!("unsupported dtype {dtype}")))?;
    let request = cubeslab_core::ingest::PlanRequest {
        layout,
        access,
        compress,
        profile: options::device_profile(profile)?,
        setup: read_setup(threads, in_flight, verify),
        state,
        memory_limit,
        top,
    };
    let kept = py
        .detach(|| cubeslab_core::ingest::plan_layout(&shape, dtype, &request))
        .map_err(value_error)?;
    Ok(serde_json::to_string(&kept).expect("plans serialise"))
}

/// The plan defaults: (cache state, plans returned).
#[pyfunction]
pub fn plan_defaults() -> (&'static str, usize) {
    (
        cubeslab_core::plan::DEFAULT_STATE.name(),
        cubeslab_core::plan::DEFAULT_TOP,
    )
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
    /// The arrays at `paths`, costed on `profile` (JSON text; default the
    /// typical machine) for reads made with these settings.
    #[new]
    #[pyo3(signature = (paths, *, profile=None, threads=None, in_flight=None, verify=true))]
    fn new(
        py: Python<'_>,
        paths: Vec<PathBuf>,
        profile: Option<&str>,
        threads: Option<usize>,
        in_flight: Option<usize>,
        verify: bool,
    ) -> PyResult<Self> {
        let profile = options::device_profile(profile)?;
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
            setup: read_setup(threads, in_flight, verify),
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
