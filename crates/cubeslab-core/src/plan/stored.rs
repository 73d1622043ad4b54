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
    let inner = array.inner_chunk_shape()?.to_vec();
    let layout = Layout {
        inner,
        shard: array.chunk_shape().to_vec(),
    };
    let codecs = array
        .metadata()
        .pointer("/codecs/0/configuration/codecs")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let crc = codecs.iter().any(|c| c["name"] == "crc32c");
    let elem = array.dtype().size();
    let codec = match Compression::from_codecs(&codecs) {
        Some(Compression::None) => ChunkCodec::Raw { crc },
        compression => {
            let logical = array.shape().iter().product::<u64>() as f64 * elem as f64;
            let stored = dir_bytes(&array.path().join("c")) as f64;
            let ratio = if stored > 0.0 { logical / stored } else { 1.0 };
            let decode = compression
                .and_then(|c| profile.codec(&c.name()).map(|rate| rate.decode))
                .unwrap_or(1.0e9);
            ChunkCodec::Compressed { ratio, decode, crc }
        }
    };
    Some(StoredArray {
        shape: array.shape().to_vec(),
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
