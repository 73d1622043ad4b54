//! Which sharded arrays the engine reads and writes on its own path, and
//! how: the inner chunk shape, the shard index's layout, and the inner
//! chunks' codecs, recognised from an array's `zarr.json`.

use std::{path::Path, sync::Arc};

use serde_json::Value;
use zarrs::{array::CodecChain, metadata::v3::MetadataV3};

use super::{
    claims::Outer,
    metadata::{metadata_error, u64_list},
    shard::ShardLayout,
};
use crate::{compress::Compression, error::Result};

/// How the inner chunks of a shard are encoded and decoded on the engine's own path.
pub(super) enum InnerCodecs {
    /// `bytes` (little endian), optionally followed by `crc32c`: the stored
    /// bytes are the elements themselves.
    Raw { crc: bool },
    /// `bytes` (little endian), `zstd`, optionally `crc32c`: zstd with a
    /// context reused per thread (see `zstd_chunk`).
    Zstd {
        level: i32,
        checksum: bool,
        crc: bool,
    },
    /// Any other chain, decoded by `zarrs`.
    Chain(Arc<CodecChain>),
}

/// The engine's own path for sharded arrays: inner chunk shape, index layout, codecs.
pub(super) struct Sharding {
    pub inner_shape: Vec<u64>,
    /// Whether decoded chunks may differ from the written elements (ZFP, bitround).
    pub lossy: bool,
    /// The compressor each stored chunk starts with (checked against bombs).
    pub outer: Outer,
    pub layout: ShardLayout,
    pub codecs: InnerCodecs,
}

impl Sharding {
    /// Recognise `[sharding_indexed{ bytes(little) [compressors] [crc32c] }]`.
    pub(super) fn from_metadata(
        dir: &Path,
        meta: &Value,
        ndim: usize,
        shard_shape: &[u64],
    ) -> Result<Option<Self>> {
        let codecs = meta
            .get("codecs")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let [sharding] = codecs.as_slice() else {
            return Ok(None);
        };
        if sharding.get("name").and_then(Value::as_str) != Some("sharding_indexed") {
            return Ok(None);
        }
        let conf = &sharding["configuration"];
        let Some(inner_shape) = u64_list(conf.get("chunk_shape")).filter(|s| s.len() == ndim)
        else {
            return Ok(None);
        };
        if inner_shape
            .iter()
            .zip(shard_shape)
            .any(|(&i, &s)| i == 0 || s % i != 0)
        {
            return Ok(None);
        }
        let is_bytes_le = |c: &Value| {
            c.get("name").and_then(Value::as_str) == Some("bytes")
                && c.pointer("/configuration/endian")
                    .and_then(Value::as_str)
                    .unwrap_or("little")
                    == "little"
        };
        let is_crc = |c: &Value| c.get("name").and_then(Value::as_str) == Some("crc32c");
        let is_zstd = |c: &Value| c.get("name").and_then(Value::as_str) == Some("zstd");
        let index_codecs = conf
            .get("index_codecs")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let index_crc = match index_codecs.as_slice() {
            [b] if is_bytes_le(b) => false,
            [b, c] if is_bytes_le(b) && is_crc(c) => true,
            _ => return Ok(None),
        };
        let inner_codecs = conf
            .get("codecs")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let lossy = Compression::from_codecs(&inner_codecs).is_some_and(|c| c.is_lossy());
        let outer = Outer::of(&inner_codecs);
        let decode = match inner_codecs.as_slice() {
            [b] if is_bytes_le(b) => InnerCodecs::Raw { crc: false },
            [b, c] if is_bytes_le(b) && is_crc(c) => InnerCodecs::Raw { crc: true },
            [b, z, rest @ ..]
                if is_bytes_le(b)
                    && is_zstd(z)
                    && (rest.is_empty() || (rest.len() == 1 && is_crc(&rest[0]))) =>
            {
                InnerCodecs::Zstd {
                    level: z
                        .pointer("/configuration/level")
                        .and_then(Value::as_i64)
                        .unwrap_or(0) as i32,
                    checksum: z
                        .pointer("/configuration/checksum")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                    crc: !rest.is_empty(),
                }
            }
            _ => {
                let metas: Vec<MetadataV3> = serde_json::from_value(Value::Array(inner_codecs))
                    .map_err(|e| metadata_error(dir, e.to_string()))?;
                let chain = CodecChain::from_metadata(&metas)
                    .map_err(|e| metadata_error(dir, e.to_string()))?;
                InnerCodecs::Chain(Arc::new(chain))
            }
        };
        let chunks_per_shard = shard_shape
            .iter()
            .zip(&inner_shape)
            .map(|(s, i)| s / i)
            .collect();
        let index_at_end = conf
            .get("index_location")
            .and_then(Value::as_str)
            .unwrap_or("end")
            == "end";
        Ok(Some(Self {
            inner_shape,
            lossy,
            outer,
            layout: ShardLayout {
                chunks_per_shard,
                index_at_end,
                index_crc,
            },
            codecs: decode,
        }))
    }
}
