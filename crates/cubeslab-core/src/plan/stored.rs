//! An existing array as the cost model sees it: its layout, and its chunk
//! encoding with the compression ratio it achieved on disk.

use std::path::Path;

use serde_json::Value;

use super::{
    cost::{ChunkCodec, StoredArray},
    layout::Layout,
    profile::DeviceProfile,
};
use crate::{compress::Compression, store::ZarrArray};

/// The model's view of `array`; `None` for arrays the engine does not read
/// on its own sharded path (the model describes that path only).
pub fn stored_array(array: &ZarrArray, profile: &DeviceProfile) -> Option<StoredArray> {
    stored_array_of(
        array.metadata(),
        array.dtype().size(),
        || Some(dir_bytes(&array.path().join("c"))),
        profile,
    )
}

/// The model's view of the sharded array that `metadata` (its `zarr.json`)
/// describes, of `elem`-byte elements, whose chunks take `stored()` bytes
/// (asked for compressed arrays only; unknown: counted as uncompressed).
pub fn stored_array_of(
    metadata: &Value,
    elem: usize,
    stored: impl FnOnce() -> Option<u64>,
    profile: &DeviceProfile,
) -> Option<StoredArray> {
    let u64s = |pointer: &str| -> Option<Vec<u64>> {
        metadata
            .pointer(pointer)?
            .as_array()?
            .iter()
            .map(Value::as_u64)
            .collect()
    };
    let shape = u64s("/shape")?;
    let shard = u64s("/chunk_grid/configuration/chunk_shape")?;
    if metadata.pointer("/codecs/0/name").and_then(Value::as_str) != Some("sharding_indexed") {
        return None;
    }
    let inner = u64s("/codecs/0/configuration/chunk_shape")?;
    let layout = Layout { inner, shard };
    let codecs = metadata
        .pointer("/codecs/0/configuration/codecs")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let crc = codecs.iter().any(|c| c["name"] == "crc32c");
    let codec = match Compression::from_codecs(&codecs) {
        Some(Compression::None) => ChunkCodec::Raw { crc },
        compression => {
            let logical = shape.iter().product::<u64>() as f64 * elem as f64;
            let ratio = match stored() {
                Some(bytes) if bytes > 0 => logical / bytes as f64,
                _ => 1.0,
            };
            let decode = compression
                .and_then(|c| profile.codec(&c.name()).map(|rate| rate.decode))
                .unwrap_or(1.0e9);
            ChunkCodec::Compressed { ratio, decode, crc }
        }
    };
    Some(StoredArray {
        shape,
        elem,
        layout,
        codec,
    })
}

/// Bytes of all files under `dir` (0 if it is missing).
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}
