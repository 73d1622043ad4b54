//! JSON option documents from Python → engine option structs.

use cubeslab_core::{
    compress::Compression,
    config::Parallelism,
    dtype::DType,
    export::ExportOptions,
    ingest::{AmplitudeType, IngestOptions},
    plan::{chunk_codec, DeviceProfile, Strategy},
    segy::{Endian, SampleFormat, ScanOptions, SegyOptions},
    store::ArraySpec,
};
use pyo3::PyResult;

use crate::errors::invalid_input;
use serde_json::{Map, Value};

/// Keys an ingest (and a SEG-Y description, and a comparison with the source) takes.
const INGEST_KEYS: &[&str] = &[
    "endian",
    "allow_truncated",
    "sample_interval_us",
    "inline_byte",
    "crossline_byte",
    "offset_byte",
    "dtype",
    "layout",
    "access",
    "profile",
    "compress",
    "views",
    "memory_limit",
    "threads",
    "in_flight",
    "overwrite",
    "durable",
    "resume",
    "vertical",
];
/// Keys an export takes.
const EXPORT_KEYS: &[&str] = &["format", "overwrite", "threads", "in_flight"];
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
pub fn parse(text: &str, accepted: &[&str]) -> PyResult<Map<String, Value>> {
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

fn usize_opt(m: &Map<String, Value>, key: &str) -> Option<usize> {
    m.get(key).and_then(Value::as_u64).map(|v| v as usize)
}

fn parallelism(m: &Map<String, Value>) -> Parallelism {
    Parallelism::resolve(usize_opt(m, "threads"), usize_opt(m, "in_flight"))
}

/// The `compress` name of an option document (`none` when absent).
pub fn compression(m: &Map<String, Value>) -> PyResult<Compression> {
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
        return Err(invalid_input(format!(
            "{} is an error target, tuned on the data at ingest; give zfp a tolerance, precision or rate here",
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
        dimension_names: match m.get("dimension_names").and_then(Value::as_array) {
            Some(names) => names
                .iter()
                .map(|n| n.as_str().unwrap_or("").to_string())
                .collect(),
            None => (0..shape.len()).map(|d| format!("dim_{d}")).collect(),
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

/// `"profile"`: a profile's JSON text; absent: the typical machine.
pub fn profile(m: &Map<String, Value>) -> PyResult<DeviceProfile> {
    device_profile(m.get("profile").and_then(Value::as_str))
}

/// A profile's JSON text; `None`: the typical machine.
pub fn device_profile(text: Option<&str>) -> PyResult<DeviceProfile> {
    match text {
        None => Ok(DeviceProfile::typical()),
        Some(text) => DeviceProfile::from_json(text)
            .map_err(|e| invalid_input(format!("device profile: {e}"))),
    }
}

fn endian(m: &Map<String, Value>) -> PyResult<Option<Endian>> {
    match m.get("endian").and_then(Value::as_str) {
        None | Some("auto") => Ok(None),
        Some("big") => Ok(Some(Endian::Big)),
        Some("little") => Ok(Some(Endian::Little)),
        Some(other) => Err(invalid_input(format!(
            "endian must be auto, big or little, not {other}"
        ))),
    }
}

/// Ingest options; every key optional.
pub fn ingest_options(text: &str) -> PyResult<IngestOptions> {
    let m = parse(text, INGEST_KEYS)?;
    let defaults = IngestOptions::default();
    let scan_defaults = ScanOptions::default();
    let layout = match m.get("layout").and_then(Value::as_str) {
        Some(name) => Strategy::parse(name).map_err(invalid_input)?,
        None => Strategy::Auto,
    };
    let profile = profile(&m)?;
    let codec = chunk_codec(&profile, m.get("compress").and_then(Value::as_str));
    Ok(IngestOptions {
        segy: SegyOptions {
            endian: endian(&m)?,
            allow_truncated: m
                .get("allow_truncated")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            sample_interval_us: m.get("sample_interval_us").and_then(Value::as_f64),
        },
        scan: ScanOptions {
            inline_byte: usize_opt(&m, "inline_byte").unwrap_or(scan_defaults.inline_byte),
            crossline_byte: usize_opt(&m, "crossline_byte").unwrap_or(scan_defaults.crossline_byte),
            offset_byte: usize_opt(&m, "offset_byte").unwrap_or(scan_defaults.offset_byte),
        },
        dtype: match m.get("dtype") {
            None | Some(Value::Null) => AmplitudeType::Float32,
            Some(Value::String(s)) if s == "native" => AmplitudeType::Native,
            Some(v) => AmplitudeType::Given(dtype(v)?),
        },
        layout,
        access: m.get("access").and_then(Value::as_str).map(str::to_string),
        profile,
        codec,
        views: m
            .get("views")
            .and_then(Value::as_array)
            .map(|v| {
                v.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
        compression: compression(&m)?,
        memory_limit: m
            .get("memory_limit")
            .and_then(Value::as_u64)
            .unwrap_or(defaults.memory_limit),
        parallelism: parallelism(&m),
        overwrite: m.get("overwrite").and_then(Value::as_bool).unwrap_or(false),
        durable: m.get("durable").and_then(Value::as_bool).unwrap_or(false),
        resume: m.get("resume").and_then(Value::as_bool).unwrap_or(false),
        vertical: m
            .get("vertical")
            .and_then(Value::as_str)
            .unwrap_or("time")
            .to_string(),
    })
}

/// Export options; every key optional.
pub fn export_options(text: &str) -> PyResult<ExportOptions> {
    let m = parse(text, EXPORT_KEYS)?;
    let format = match m.get("format").and_then(Value::as_i64) {
        None => None,
        Some(code) => Some(
            SampleFormat::from_code(code)
                .ok_or_else(|| invalid_input(format!("unknown SEG-Y sample format {code}")))?,
        ),
    };
    Ok(ExportOptions {
        format,
        overwrite: m.get("overwrite").and_then(Value::as_bool).unwrap_or(false),
        parallelism: parallelism(&m),
    })
}
