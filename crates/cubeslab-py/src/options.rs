//! Options from Python → the engine's option structs: typed objects for
//! ingest and export, JSON documents (every key checked) for the rest.

use std::collections::HashMap;

use cubeslab_core::{
    compress::Compression,
    config::Parallelism,
    dtype::DType,
    export::ExportOptions as CoreExportOptions,
    ingest::{option_help, AmplitudeType, IngestOptions as CoreIngestOptions, SourceOrigin},
    plan::{chunk_codec, DeviceProfile, Strategy},
    segy::{Endian, SampleFormat, ScanOptions, SegyOptions},
    store::ArraySpec,
};
use pyo3::prelude::*;

use crate::errors::{invalid_input, option_error};
use serde_json::{Map, Value};

/// Keys a new array's description takes.
const ARRAY_KEYS: &[&str] = &[
    "shape",
    "dtype",
    "chunk_shape",
    "inner_chunks",
    "compress",
    "dimension_names",
    "fill_value",
    "attributes",
];

/// A JSON object of options, every key one of `accepted`: a misspelled
/// option is an error, never silently ignored.
fn parse(text: &str, accepted: &[&str]) -> PyResult<Map<String, Value>> {
    let m = match serde_json::from_str(text) {
        Ok(Value::Object(m)) => m,
        _ => return Err(invalid_input("options must be a JSON object")),
    };
    if let Some(unknown) = m.keys().find(|k| !accepted.contains(&k.as_str())) {
        return Err(invalid_input(format!(
            "unknown option '{unknown}'; the options are {}",
            accepted.join(", ")
        )));
    }
    Ok(m)
}

fn u64s(v: &Value, name: &str) -> PyResult<Vec<u64>> {
    v.as_array()
        .and_then(|a| a.iter().map(Value::as_u64).collect())
        .ok_or_else(|| invalid_input(format!("{name} must be a list of non-negative integers")))
}

fn dtype(v: &Value) -> PyResult<DType> {
    v.as_str()
        .and_then(DType::from_name)
        .ok_or_else(|| invalid_input(format!("unsupported dtype {v}")))
}

/// The `compress` name of an option document (`none` when absent).
fn compression(m: &Map<String, Value>) -> PyResult<Compression> {
    match m.get("compress").and_then(Value::as_str) {
        None => Ok(Compression::None),
        Some(name) => Compression::parse(name).map_err(invalid_input),
    }
}

/// `{"shape", "dtype", "chunk_shape", "inner_chunks"?, "compress"?, "dimension_names"?, "fill_value"?, "attributes"?}`
pub fn array_spec(text: &str) -> PyResult<ArraySpec> {
    let m = parse(text, ARRAY_KEYS)?;
    let shape = u64s(m.get("shape").unwrap_or(&Value::Null), "shape")?;
    let dt = dtype(m.get("dtype").unwrap_or(&Value::Null))?;
    let compression = compression(&m)?;
    if compression.needs_tuning() {
        return Err(crate::errors::option_error(format!(
            "{} is an error target, tuned on the data: a SEG-Y ingest tunes it on the survey's chunks; a new \
             array (create, or the ingest of an array file or imzML) takes zfp with a tolerance, precision \
             or rate",
            compression.name()
        )));
    }
    Ok(ArraySpec {
        chunk_shape: u64s(m.get("chunk_shape").unwrap_or(&Value::Null), "chunk_shape")?,
        inner_chunks: match m.get("inner_chunks") {
            None | Some(Value::Null) => None,
            Some(v) => Some(u64s(v, "inner_chunks")?),
        },
        codecs: compression.codecs(dt).map_err(invalid_input)?,
        dimension_names: match m.get("dimension_names") {
            None | Some(Value::Null) => ArraySpec::default_dimension_names(shape.len()),
            Some(names) => names
                .as_array()
                .and_then(|names| {
                    names
                        .iter()
                        .map(|n| n.as_str().map(str::to_string))
                        .collect()
                })
                .ok_or_else(|| {
                    invalid_input(format!(
                        "dimension_names must be a list of texts, not {names}"
                    ))
                })?,
        },
        fill_value: m
            .get("fill_value")
            .cloned()
            .unwrap_or_else(|| compression.fill_value(dt)),
        attributes: m
            .get("attributes")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
        shape,
        dtype: dt,
        generation: None,
    })
}

/// A profile's JSON text; `None`: the typical machine.
pub fn device_profile(text: Option<&str>) -> PyResult<DeviceProfile> {
    match text {
        None => Ok(DeviceProfile::typical()),
        Some(text) => DeviceProfile::from_json(text)
            .map_err(|e| invalid_input(format!("device profile: {e}"))),
    }
}

/// The options of an ingest (and of describing a SEG-Y file, and of
/// comparing a store with it), typed. A field not given takes the engine's
/// default; a value the engine cannot use is an `InvalidInputError` here.
#[pyclass(frozen, module = "cubeslab._engine")]
pub struct IngestOptions {
    #[pyo3(get)]
    endian: String,
    #[pyo3(get)]
    allow_truncated: bool,
    #[pyo3(get)]
    sample_interval_us: Option<f64>,
    #[pyo3(get)]
    inline_byte: usize,
    #[pyo3(get)]
    crossline_byte: usize,
    #[pyo3(get)]
    offset_byte: usize,
    #[pyo3(get)]
    dtype: String,
    #[pyo3(get)]
    layout: String,
    #[pyo3(get)]
    access: Option<String>,
    #[pyo3(get)]
    profile: Option<String>,
    #[pyo3(get)]
    compress: String,
    #[pyo3(get)]
    views: Vec<String>,
    #[pyo3(get)]
    memory_limit: u64,
    #[pyo3(get)]
    threads: Option<usize>,
    #[pyo3(get)]
    in_flight: Option<usize>,
    #[pyo3(get)]
    overwrite: bool,
    #[pyo3(get)]
    durable: bool,
    #[pyo3(get)]
    resume: bool,
    #[pyo3(get)]
    vertical: String,
    /// The same, as the engine takes them.
    pub engine: CoreIngestOptions,
}

#[pymethods]
impl IngestOptions {
    #[new]
    #[pyo3(signature = (
        *, endian=None, allow_truncated=false, sample_interval_us=None, inline_byte=None,
        crossline_byte=None, offset_byte=None, dtype=None, layout=None, access=None, profile=None,
        compress=None, views=Vec::new(), memory_limit=None, threads=None, in_flight=None,
        overwrite=false, durable=false, resume=false, vertical=None, storage_options=None,
        origin=None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        endian: Option<String>,
        allow_truncated: bool,
        sample_interval_us: Option<f64>,
        inline_byte: Option<usize>,
        crossline_byte: Option<usize>,
        offset_byte: Option<usize>,
        dtype: Option<String>,
        layout: Option<String>,
        access: Option<String>,
        profile: Option<String>,
        compress: Option<String>,
        views: Vec<String>,
        memory_limit: Option<u64>,
        threads: Option<usize>,
        in_flight: Option<usize>,
        overwrite: bool,
        durable: bool,
        resume: bool,
        vertical: Option<String>,
        storage_options: Option<std::collections::BTreeMap<String, String>>,
        origin: Option<(String, String)>,
    ) -> PyResult<Self> {
        let defaults = CoreIngestOptions::default();
        let endian = endian.unwrap_or_else(|| "auto".into());
        let dtype = dtype.unwrap_or_else(|| DType::Float32.name().into());
        let layout = layout.unwrap_or_else(|| defaults.layout.name());
        let compress = compress.unwrap_or_else(|| defaults.compression.name());
        let device = device_profile(profile.as_deref())?;
        let scan = ScanOptions {
            inline_byte: inline_byte.unwrap_or(defaults.scan.inline_byte),
            crossline_byte: crossline_byte.unwrap_or(defaults.scan.crossline_byte),
            offset_byte: offset_byte.unwrap_or(defaults.scan.offset_byte),
        };
        let engine = CoreIngestOptions {
            segy: SegyOptions {
                endian: match endian.as_str() {
                    "auto" => None,
                    "big" => Some(Endian::Big),
                    "little" => Some(Endian::Little),
                    other => {
                        return Err(option_error(format!(
                            "endian must be auto, big or little, not {other}"
                        )))
                    }
                },
                allow_truncated,
                sample_interval_us,
            },
            scan: scan.clone(),
            dtype: match dtype.as_str() {
                "native" => AmplitudeType::Native,
                "float32" => AmplitudeType::Float32,
                name => AmplitudeType::Given(
                    DType::from_name(name)
                        .ok_or_else(|| option_error(format!("unsupported dtype {name}")))?,
                ),
            },
            layout: Strategy::parse(&layout).map_err(option_error)?,
            access: access.clone(),
            codec: chunk_codec(&device, Some(&compress)),
            profile: device,
            views: views.clone(),
            compression: Compression::parse(&compress).map_err(option_error)?,
            memory_limit: memory_limit.unwrap_or(defaults.memory_limit),
            parallelism: Parallelism::resolve(threads, in_flight),
            overwrite,
            durable,
            resume,
            vertical: vertical.clone().unwrap_or(defaults.vertical),
            storage: storage_options.unwrap_or_default(),
            origin: origin.map(|(url, version)| SourceOrigin { url, version }),
        };
        Ok(Self {
            endian,
            allow_truncated,
            sample_interval_us,
            inline_byte: scan.inline_byte,
            crossline_byte: scan.crossline_byte,
            offset_byte: scan.offset_byte,
            dtype,
            layout,
            access,
            profile,
            compress,
            views,
            memory_limit: engine.memory_limit,
            threads,
            in_flight,
            overwrite,
            durable,
            resume,
            vertical: engine.vertical.clone(),
            engine,
        })
    }

    /// A sentence of help for each option, by name.
    #[staticmethod]
    fn help() -> HashMap<&'static str, String> {
        option_help().into_iter().collect()
    }

    fn __repr__(&self) -> String {
        format!(
            "IngestOptions(layout={:?}, compress={:?}, dtype={:?}, views={:?}, memory_limit={}, ...)",
            self.layout, self.compress, self.dtype, self.views, self.memory_limit
        )
    }
}

/// The options of an export to SEG-Y, typed.
#[pyclass(frozen, module = "cubeslab._engine")]
pub struct ExportOptions {
    #[pyo3(get)]
    format: Option<i64>,
    #[pyo3(get)]
    overwrite: bool,
    #[pyo3(get)]
    threads: Option<usize>,
    #[pyo3(get)]
    in_flight: Option<usize>,
    /// The same, as the engine takes them.
    pub engine: CoreExportOptions,
}

#[pymethods]
impl ExportOptions {
    #[new]
    #[pyo3(signature = (*, format=None, overwrite=false, threads=None, in_flight=None))]
    fn new(
        format: Option<i64>,
        overwrite: bool,
        threads: Option<usize>,
        in_flight: Option<usize>,
    ) -> PyResult<Self> {
        let sample_format = match format {
            None => None,
            Some(code) => Some(
                SampleFormat::from_code(code)
                    .ok_or_else(|| option_error(format!("unknown SEG-Y sample format {code}")))?,
            ),
        };
        Ok(Self {
            format,
            overwrite,
            threads,
            in_flight,
            engine: CoreExportOptions {
                format: sample_format,
                overwrite,
                parallelism: Parallelism::resolve(threads, in_flight),
            },
        })
    }
}
