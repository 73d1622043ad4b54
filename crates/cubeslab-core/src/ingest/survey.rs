//! The arrays and attributes of a seismic cube store, named as MDIO v1 names
//! them so that MDIO users find their way around.

use std::path::Path;

use serde_json::{json, Map, Value};

use super::{task::TaskArrays, IngestOptions, Layout};
use crate::{
    compress::Compression,
    config::Parallelism,
    dtype::DType,
    error::Result,
    plan::Strategy,
    segy::{binary_header_fields, Endian, Geometry, SegyFile, TextEncoding},
    store::{ArraySpec, Group, StoreError, StoreState, ZarrArray, MAIN_ARRAY_ATTR, VIEWS_ATTR},
};

/// The seismic data.
pub const AMPLITUDE: &str = "amplitude";
/// Which (inline, crossline[, offset]) cells hold a trace.
pub const TRACE_MASK: &str = "trace_mask";
/// The 240-byte trace headers as stored in the source.
pub const RAW_HEADERS: &str = "raw_headers";
/// Holds the textual and binary file headers as attributes.
pub const FILE_HEADER: &str = "segy_file_header";
/// The x of each trace's CDP, in the survey's length unit.
pub const CDP_X: &str = "cdp_x";
/// The y of each trace's CDP.
pub const CDP_Y: &str = "cdp_y";

/// The names of a survey store's arrays, by role: the schema readers in
/// other languages take from here.
pub const SURVEY_ARRAYS: &[(&str, &str)] = &[
    ("amplitude", AMPLITUDE),
    ("trace_mask", TRACE_MASK),
    ("raw_headers", RAW_HEADERS),
    ("file_header", FILE_HEADER),
    ("cdp_x", CDP_X),
    ("cdp_y", CDP_Y),
];

/// Dimension names of a survey.
#[derive(Debug, Clone)]
pub struct SurveyNames {
    /// Trace dimensions: inline, crossline[, offset].
    pub trace_dims: Vec<String>,
    /// Vertical dimension: time or depth.
    pub vertical: String,
}

impl SurveyNames {
    /// Names for a post-stack (3D) or pre-stack (4D) survey.
    pub fn new(prestack: bool, vertical: &str) -> Self {
        let mut trace_dims = vec!["inline".to_string(), "crossline".to_string()];
        if prestack {
            trace_dims.push("offset".into());
        }
        Self {
            trace_dims,
            vertical: vertical.to_string(),
        }
    }

    fn amplitude_dims(&self) -> Vec<String> {
        let mut d = self.trace_dims.clone();
        d.push(self.vertical.clone());
        d
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The group's attributes, with cubeslab's state set to "incomplete".
pub(super) fn group_attributes(
    source: &SegyFile,
    source_name: &str,
    geometry: &Geometry,
    names: &SurveyNames,
    layout: &Layout,
    dtype: DType,
) -> Map<String, Value> {
    let prestack = geometry.offsets.is_some();
    let template = match (prestack, names.vertical.as_str()) {
        (false, "depth") => "PostStack3DDepth",
        (false, _) => "PostStack3DTime",
        (true, "depth") => "PreStackCdpOffsetGathers3DDepth",
        (true, _) => "PreStackCdpOffsetGathers3DTime",
    };
    let mut attributes = Map::new();
    attributes.insert(
        "apiVersion".into(),
        json!(concat!("cubeslab-", env!("CARGO_PKG_VERSION"))),
    );
    attributes.insert("name".into(), json!(template));
    attributes.insert(
        "attributes".into(),
        json!({
            "surveyType": "3D",
            "gatherType": if prestack { "cdp_gathers" } else { "stacked" },
            MAIN_ARRAY_ATTR: AMPLITUDE,
        }),
    );
    attributes.insert(
        "cubeslab".into(),
        json!({
            "state": "incomplete",
            "format_version": 1,
            "source": source_name,
            "source_bytes": source.len,
            "traces": source.traces,
            "live_traces": geometry.live,
            "missing_traces": geometry.missing(),
            "sorting": geometry.sorting,
            "dtype": dtype.name(),
            "chunk_shape": layout.inner,
            "shard_shape": layout.shard,
            "warnings": source.warnings.iter().chain(&geometry.warnings).collect::<Vec<_>>(),
        }),
    );
    attributes
}

/// The amplitude array of a survey.
pub(super) fn amplitude_spec(
    shape: Vec<u64>,
    names: &SurveyNames,
    layout: &Layout,
    dtype: DType,
    codecs: &[Value],
    fill_value: Value,
) -> ArraySpec {
    ArraySpec {
        shape,
        dtype,
        chunk_shape: layout.shard.clone(),
        inner_chunks: Some(layout.inner.clone()),
        codecs: codecs.to_vec(),
        dimension_names: names.amplitude_dims(),
        fill_value,
        attributes: json!({"coordinates": "cdp_x cdp_y"})
            .as_object()
            .cloned()
            .unwrap_or_default(),
        generation: None,
    }
}

/// What must match for an ingest to resume another: the source and every
/// option that shapes the stored bytes.
pub(super) fn fingerprint(
    source: &SegyFile,
    amplitude: &ArraySpec,
    options: &IngestOptions,
) -> Result<Value> {
    let (name, version) = match &options.origin {
        Some(origin) => (
            origin.url.clone(),
            ("source_version", origin.version.clone()),
        ),
        None => {
            let path = std::fs::canonicalize(source.path())
                .unwrap_or_else(|_| source.path().to_path_buf());
            let modified = std::fs::metadata(source.path())
                .and_then(|m| m.modified())
                .map_err(|e| crate::Error::io(source.path(), e))?
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let name = path.display().to_string();
            (name, ("source_modified_ns", modified.to_string()))
        }
    };
    let mut fingerprint = json!({
        "source": name,
        "source_bytes": source.len,
        // A file rewritten in place keeps its path and maybe its size: its
        // time (or the object's version) and a checksum of its headers and
        // sampled traces tell.
        "source_sample_crc32c": content_sample(source)?,
        "endianness": if source.endian() == Endian::Big { "big" } else { "little" },
        "sample_format": source.format.code(),
        "inline_byte": options.scan.inline_byte,
        "crossline_byte": options.scan.crossline_byte,
        "offset_byte": options.scan.offset_byte,
        "allow_truncated": options.segy.allow_truncated,
        "sample_interval_us": options.segy.sample_interval_us,
        "amplitude": amplitude.metadata(),
        "views": options.views,
    });
    fingerprint[version.0] = json!(version.1);
    Ok(fingerprint)
}

/// Traces whose bytes the fingerprint checksums, spread evenly over the file.
const SAMPLED_TRACES: u64 = 64;

/// crc32c of the file headers and of [`SAMPLED_TRACES`] whole traces (the
/// first and the last among them): a few hundred KiB read, whatever the size.
fn content_sample(source: &SegyFile) -> Result<u32> {
    let mut bytes = vec![0u8; source.trace_offset(0) as usize];
    source.read_at(&mut bytes, 0)?;
    let mut trace = vec![0u8; source.trace_len as usize];
    let last = source.traces.saturating_sub(1);
    for k in 0..=SAMPLED_TRACES.min(last) {
        let i = k * last / SAMPLED_TRACES.min(last).max(1);
        source.read_at(&mut trace, source.trace_offset(i))?;
        bytes.extend_from_slice(&trace);
    }
    Ok(crate::store::crc32c(&bytes))
}

/// The layouts a stopped ingest recorded in its store: the volume's, and
/// each view's entry (`{"array", "layout", ...}`) by access name.
#[derive(Debug, Default)]
pub(super) struct RecordedLayouts {
    pub volume: Option<Strategy>,
    pub views: Map<String, Value>,
}

/// Read the [`RecordedLayouts`] of the store at `store`.
pub(super) fn recorded_layouts(store: &Path) -> Result<RecordedLayouts> {
    let group = Group::open(store)?;
    let recorded = group.attributes.get("cubeslab");
    let volume = recorded
        .and_then(|c| c.pointer("/plan/layout"))
        .and_then(Value::as_str)
        .and_then(|text| Strategy::parse(text).ok());
    let views = recorded
        .and_then(|c| c.get(VIEWS_ATTR))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    Ok(RecordedLayouts { volume, views })
}

/// Check that the store at `written` (named `store` in messages) is an
/// unfinished ingest of the same source with the same options (or,
/// `uploading`, a complete one whose upload stopped).
pub(super) fn check_resumable(
    written: &Path,
    store: &Path,
    fingerprint: &Value,
    uploading: bool,
) -> Result<()> {
    let group = Group::open(written)?;
    let refuse = |what: String| -> crate::Error {
        StoreError::Unsupported {
            path: store.to_path_buf(),
            what,
        }
        .into()
    };
    match group.state() {
        StoreState::Complete if !uploading => {
            return Err(refuse("the store is complete: nothing to resume".into()))
        }
        StoreState::Complete => {}
        StoreState::Foreign | StoreState::Created => {
            return Err(refuse(
                "the store was not written by a cubeslab ingest: cannot resume it".into(),
            ))
        }
        StoreState::Incomplete(_) => {}
    }
    let recorded = group
        .attributes
        .get("cubeslab")
        .and_then(|c| c.get("fingerprint"));
    if recorded != Some(fingerprint) {
        let differences = recorded.map_or_else(
            || vec!["its record of them is missing".to_string()],
            |recorded| differences("", recorded, fingerprint),
        );
        return Err(refuse(format!(
            "the stopped ingest had another source or other options ({}); resume with the same ones, \
             or start again with --overwrite",
            differences.join("; ")
        )));
    }
    Ok(())
}

/// What differs between a recorded ingest fingerprint and this run's: the
/// paths of the fields, with both values when they are short.
fn differences(at: &str, recorded: &Value, now: &Value) -> Vec<String> {
    match (recorded, now) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            keys.into_iter()
                .flat_map(|key| {
                    let path = if at.is_empty() {
                        key.clone()
                    } else {
                        format!("{at}.{key}")
                    };
                    let (was, is) = (
                        a.get(key).unwrap_or(&Value::Null),
                        b.get(key).unwrap_or(&Value::Null),
                    );
                    differences(&path, was, is)
                })
                .collect()
        }
        _ if recorded == now => Vec::new(),
        _ => {
            let (was, is) = (recorded.to_string(), now.to_string());
            // The amplitude's codecs hold the compression and the inner chunks, as Zarr JSON.
            let named = if at == "amplitude.codecs" {
                "compression or inner chunks (amplitude.codecs)"
            } else {
                at
            };
            if was.len() + is.len() <= 120 {
                vec![format!("{named}: was {was}, now {is}")]
            } else {
                vec![format!("{named} differs")]
            }
        }
    }
}

/// Delete the temporary files a stopped writer left (`*.tmp`): whole files
/// only ever appear under their final names, so these are never needed.
pub(super) fn remove_temporary_files(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| crate::Error::io(dir, e))? {
        let path = entry.map_err(|e| crate::Error::io(dir, e))?.path();
        if path.is_dir() {
            remove_temporary_files(&path)?;
        } else if path.extension().is_some_and(|e| e == "tmp") {
            std::fs::remove_file(&path).map_err(|e| crate::Error::io(&path, e))?;
        }
    }
    Ok(())
}

/// The arrays tasks write, of a store [`create_arrays`] made.
pub(super) fn open_arrays(store: &Path) -> Result<TaskArrays> {
    Ok(TaskArrays {
        amplitude: ZarrArray::open(store.join(AMPLITUDE))?,
        trace_mask: ZarrArray::open(store.join(TRACE_MASK))?,
        cdp_x: ZarrArray::open(store.join(CDP_X))?,
        cdp_y: ZarrArray::open(store.join(CDP_Y))?,
        raw_headers: ZarrArray::open(store.join(RAW_HEADERS))?,
    })
}

/// Create every array of the store; write the coordinate arrays now, the
/// trace-block arrays are written by the tasks.
pub(super) fn create_arrays(
    store: &Path,
    source: &SegyFile,
    geometry: &Geometry,
    names: &SurveyNames,
    layout: &Layout,
    amplitude: &ArraySpec,
) -> Result<TaskArrays> {
    let trace_shape = geometry.trace_shape();
    let nt = trace_shape.len();
    let mut shape = trace_shape.clone();
    shape.push(source.samples as u64);
    let amplitude = ZarrArray::create(store.join(AMPLITUDE), amplitude)?;
    // Every array is sharded, so that every chunk file carries its identity.
    let generation = amplitude.generation();
    // Trace-block arrays share the amplitude shards' grid over the trace dims.
    let block = layout.shard[..nt].to_vec();
    let per_trace =
        |name: &str, dtype: DType, extra: Option<u64>, attributes: Value| -> Result<ZarrArray> {
            let mut shape = trace_shape.clone();
            let mut chunk = block.clone();
            let mut dims = names.trace_dims.clone();
            if let Some(n) = extra {
                shape.push(n);
                chunk.push(n);
                dims.push("header_byte".into());
            }
            ZarrArray::create(
                store.join(name),
                &ArraySpec {
                    shape,
                    dtype,
                    chunk_shape: chunk.clone(),
                    inner_chunks: Some(chunk),
                    codecs: Compression::Zstd { level: 1 }
                        .codecs(dtype)
                        .expect("zstd takes every type"),
                    dimension_names: dims,
                    fill_value: dtype.default_fill(),
                    attributes: attributes.as_object().cloned().unwrap_or_default(),
                    generation,
                },
            )
        };
    let length = source.binary.length_unit();
    let arrays = TaskArrays {
        trace_mask: per_trace(TRACE_MASK, DType::Bool, None, json!({}))?,
        cdp_x: per_trace(
            CDP_X,
            DType::Float64,
            None,
            json!({"unitsV1": {"length": length}}),
        )?,
        cdp_y: per_trace(
            CDP_Y,
            DType::Float64,
            None,
            json!({"unitsV1": {"length": length}}),
        )?,
        raw_headers: per_trace(
            RAW_HEADERS,
            DType::UInt8,
            Some(240),
            json!({"endianness": if source.endian() == Endian::Big { "big" } else { "little" }}),
        )?,
        amplitude,
    };

    // 1-D coordinates.
    let coordinate = |name: &str, dtype: DType, bytes: Vec<u8>, n: usize| -> Result<()> {
        // MDIO's unit attribute, on the vertical axis: time in ms, depth in the file's length unit.
        let attributes = if name == names.vertical {
            let unit = if name == "time" {
                json!({"time": "ms"})
            } else {
                json!({"length": length})
            };
            json!({"unitsV1": unit})
                .as_object()
                .cloned()
                .unwrap_or_default()
        } else {
            Map::new()
        };
        let array = ZarrArray::create(
            store.join(name),
            &ArraySpec {
                shape: vec![n as u64],
                dtype,
                chunk_shape: vec![(n as u64).max(1)],
                inner_chunks: Some(vec![(n as u64).max(1)]),
                codecs: Vec::new(),
                dimension_names: vec![name.to_string()],
                fill_value: dtype.default_fill(),
                attributes,
                generation,
            },
        )?;
        array
            .write_array(&bytes, Parallelism::resolve(Some(1), None))
            .map(drop)
    };
    let ints =
        |v: &[i64]| -> Vec<u8> { v.iter().flat_map(|&x| (x as i32).to_ne_bytes()).collect() };
    coordinate(
        "inline",
        DType::Int32,
        ints(&geometry.inlines),
        geometry.inlines.len(),
    )?;
    coordinate(
        "crossline",
        DType::Int32,
        ints(&geometry.crosslines),
        geometry.crosslines.len(),
    )?;
    if let Some(offsets) = &geometry.offsets {
        coordinate("offset", DType::Int32, ints(offsets), offsets.len())?;
    }
    let axis: Vec<u8> = source
        .sample_axis()
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    coordinate(&names.vertical, DType::Float64, axis, source.samples)?;

    // File headers: decoded for people, raw (hex) for an exact export.
    let header_attributes = json!({
        "textHeader": source.text(),
        "binaryHeader": binary_header_fields(&source.binary),
        "rawTextHeaderHex": hex(&source.text_raw),
        "rawBinaryHeaderHex": hex(&source.binary.raw),
        "textEncoding": if source.text_encoding == TextEncoding::Ebcdic { "ebcdic" } else { "ascii" },
        "endianness": if source.endian() == Endian::Big { "big" } else { "little" },
        "sampleFormat": source.format.code(),
        "sampleIntervalUs": source.interval_us,
    });
    ZarrArray::create(
        store.join(FILE_HEADER),
        &ArraySpec {
            shape: vec![],
            dtype: DType::UInt8,
            chunk_shape: vec![],
            inner_chunks: None,
            codecs: Vec::new(),
            dimension_names: vec![],
            fill_value: json!(0),
            attributes: header_attributes.as_object().cloned().unwrap_or_default(),
            // Recorded so that readers see which store it belongs to, as every other array.
            generation,
        },
    )?;
    Ok(arrays)
}
