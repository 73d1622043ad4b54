//! Arrays of text: an axis's labels, such as a NetCDF variable of region
//! names, as Zarr v3's `string` data type (or zarr-python's
//! `fixed_length_utf32`, which xarray writes). They are small and read or
//! written whole through `zarrs`; the engine's own paths are for numbers.

use std::{path::Path, sync::Arc};

use serde_json::{json, Map, Value};
use zarrs::{
    array::{
        Array, ArrayBytes, ArrayMetadata, ArrayMetadataV3, ArraySubset, DataType, ElementError,
        ElementOwned,
    },
    filesystem::FilesystemStore,
};

use super::{
    metadata::{metadata_error, read_metadata},
    write_json_atomic, Durability, StoreError,
};
use crate::error::Result;

/// The data type written for text.
const STRING: &str = "string";
/// zarr-python's fixed-width text (UTF-32 code units, zero-padded), read only.
pub(crate) const FIXED_UTF32: &str = "fixed_length_utf32";

/// The name of an array document's data type (`"float32"`, or an object's `name`).
pub(crate) fn data_type_name(metadata: &Value) -> Option<&str> {
    let data_type = metadata.get("data_type")?;
    data_type
        .as_str()
        .or_else(|| data_type.get("name").and_then(Value::as_str))
}

/// Whether an array's `zarr.json` document describes text.
pub fn is_text(metadata: &Value) -> bool {
    matches!(data_type_name(metadata), Some(STRING | FIXED_UTF32))
}

/// A text array's shape and values (C order).
pub fn read_text(dir: &Path) -> Result<(Vec<u64>, Vec<String>)> {
    let metadata = read_metadata(dir)?;
    let kind = data_type_name(&metadata).unwrap_or("").to_owned();
    if !is_text(&metadata) {
        return Err(StoreError::Unsupported {
            path: dir.to_path_buf(),
            what: format!("reading data type {kind:?} as text"),
        }
        .into());
    }
    let array = open(dir, metadata)?;
    let shape = array.shape().to_vec();
    let failed = |e: String| metadata_error(dir, format!("text values: {e}"));
    let bytes = array
        .retrieve_array_subset::<ArrayBytes<'static>>(&ArraySubset::new_with_shape(shape.clone()))
        .map_err(|e| failed(e.to_string()))?;
    let values =
        labels(kind == FIXED_UTF32, array.data_type(), bytes).map_err(|e| failed(e.to_string()))?;
    Ok((shape, values))
}

/// Decoded text values as strings (zarr-python's fixed-width text, `fixed`, without its zero padding).
pub(crate) fn labels(
    fixed: bool,
    data_type: &DataType,
    bytes: ArrayBytes<'_>,
) -> std::result::Result<Vec<String>, ElementError> {
    if !fixed {
        return <String as ElementOwned>::from_array_bytes(data_type, bytes);
    }
    Ok(
        <Vec<char> as ElementOwned>::from_array_bytes(data_type, bytes)?
            .into_iter()
            .map(|chars| chars.into_iter().collect())
            .collect(),
    )
}

/// Write `values` (C order over `shape`) as a new text array in `dir`, one chunk.
pub fn write_text(
    dir: &Path,
    shape: &[u64],
    values: &[String],
    dimension_names: Option<&[String]>,
    attributes: Map<String, Value>,
) -> Result<()> {
    let count: u64 = shape.iter().product();
    if count != values.len() as u64 {
        return Err(StoreError::Unsupported {
            path: dir.to_path_buf(),
            what: format!("{} text values for shape {shape:?}", values.len()),
        }
        .into());
    }
    let mut metadata = json!({
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": STRING,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": shape.iter().map(|&n| n.max(1)).collect::<Vec<_>>()}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": "",
        "codecs": [{"name": "vlen-utf8"}],
        "attributes": attributes,
    });
    if let Some(names) = dimension_names {
        metadata["dimension_names"] = json!(names);
    }
    std::fs::create_dir_all(dir).map_err(|e| crate::Error::io(dir, e))?;
    write_json_atomic(&dir.join("zarr.json"), &metadata, Durability::Cached)?;
    if count == 0 {
        return Ok(());
    }
    let array = open(dir, metadata)?;
    array
        .store_array_subset(&ArraySubset::new_with_shape(shape.to_vec()), values)
        .map_err(|e| metadata_error(dir, format!("writing text values: {e}")))
}

fn open(dir: &Path, metadata: Value) -> Result<Array<FilesystemStore>> {
    let store = FilesystemStore::new(dir).map_err(|e| metadata_error(dir, e.to_string()))?;
    let parsed: ArrayMetadataV3 =
        serde_json::from_value(metadata).map_err(|e| metadata_error(dir, e.to_string()))?;
    Array::new_with_metadata(Arc::new(store), "/", ArrayMetadata::V3(parsed))
        .map_err(|e| metadata_error(dir, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips_with_empty_and_non_ascii_values() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("region");
        let values: Vec<String> = ["north", "", "Zürich", "南"].map(String::from).to_vec();
        write_text(
            &path,
            &[2, 2],
            &values,
            Some(&["a".into(), "b".into()]),
            Map::new(),
        )
        .unwrap();
        assert!(is_text(&read_metadata(&path).unwrap()));
        assert_eq!(read_text(&path).unwrap(), (vec![2, 2], values));
    }

    #[test]
    fn numbers_are_not_read_as_text() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n");
        std::fs::create_dir_all(&path).unwrap();
        std::fs::write(
            path.join("zarr.json"),
            r#"{"zarr_format":3,"node_type":"array","shape":[2],"data_type":"float32","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":[{"name":"bytes","configuration":{"endian":"little"}}]}"#,
        )
        .unwrap();
        assert!(read_text(&path).is_err());
    }
}
