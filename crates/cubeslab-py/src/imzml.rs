//! imzML indexes: the engine's reading of one, handed to Python.

use std::path::PathBuf;

use cubeslab_core::imzml::{read_index, Encoding};
use pyo3::{prelude::*, types::PyBytes};

use crate::errors::engine;

fn encoding(e: &Encoding) -> serde_json::Value {
    serde_json::json!({"dtype": e.dtype.name(), "zlib": e.zlib})
}

/// The index of the imzML file at `path`: its description as JSON (mode,
/// UUID, checksum, encodings, pixel size, polarity), and per spectrum nine
/// native int64 (x, y, z; the m/z array's offset, length and encoded
/// length; the intensity array's) as bytes.
#[pyfunction]
pub(crate) fn read_imzml_index<'py>(
    py: Python<'py>,
    path: PathBuf,
) -> PyResult<(String, Bound<'py, PyBytes>)> {
    let index = engine(py, || read_index(&path))?;
    let description = serde_json::json!({
        "continuous": index.continuous,
        "uuid": index.uuid,
        "checksum": index.checksum,
        "mz": encoding(&index.mz),
        "intensity": encoding(&index.intensity),
        "pixel_size_um": index.pixel_size_um,
        "polarity": index.polarity,
    });
    let table: Vec<u8> = index.table.iter().flat_map(|v| v.to_ne_bytes()).collect();
    Ok((description.to_string(), PyBytes::new(py, &table)))
}
