//! A SEG-Y file summarised without ingesting it: what `cubeslab info file.sgy` shows.

use std::path::Path;

use serde_json::{json, Value};

use super::{
    binary_header_fields, Endian, Geometry, ScanOptions, SegyFile, SegyOptions, TextEncoding,
};
use crate::{config::Parallelism, error::Result, progress::Progress};

/// Open `path`, scan its trace headers, and describe file and geometry as JSON.
pub fn describe(
    path: &Path,
    segy: &SegyOptions,
    scan: &ScanOptions,
    parallelism: Parallelism,
) -> Result<Value> {
    let file = SegyFile::open(path, segy)?;
    let geometry = Geometry::scan(&file, scan, parallelism, &Progress::default())?;
    let range = |v: &[i64]| json!({"count": v.len(), "first": v.first(), "last": v.last()});
    let (major, minor) = file.binary.revision();
    Ok(json!({
        "file": path.display().to_string(),
        "bytes": file.len,
        "endianness": if file.endian() == Endian::Big { "big" } else { "little" },
        "text_encoding": if file.text_encoding == TextEncoding::Ebcdic { "ebcdic" } else { "ascii" },
        "revision": format!("{major}.{minor}"),
        "sample_format": file.format.code(),
        "samples_per_trace": file.samples,
        "sample_interval_us": file.interval_us,
        "first_sample_ms": file.first_sample_ms,
        "traces": file.traces,
        "inline": range(&geometry.inlines),
        "crossline": range(&geometry.crosslines),
        "offset": geometry.offsets.as_deref().map(range),
        "live_traces": geometry.live,
        "missing_traces": geometry.missing(),
        "sorting": geometry.sorting,
        "warnings": file.warnings.iter().chain(&geometry.warnings).collect::<Vec<_>>(),
        "text_header": file.text(),
        "binary_header": binary_header_fields(&file.binary),
    }))
}
