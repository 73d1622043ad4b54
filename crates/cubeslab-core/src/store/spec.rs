//! The description of a new array: shape, type, chunking and codecs, as a
//! Zarr v3 `zarr.json` document.

use std::path::Path;

use serde_json::{json, Map, Value};
use zarrs::array::{ArrayMetadata, CodecChain};

use super::{record_generation, StoreError};
use crate::dtype::DType;
use crate::error::Result;

/// What a new array looks like.
#[derive(Debug, Clone)]
pub struct ArraySpec {
    /// Array shape.
    pub shape: Vec<u64>,
    /// Element type.
    pub dtype: DType,
    /// Shape of a chunk of the regular grid (a shard, when `inner_chunks` is set).
    pub chunk_shape: Vec<u64>,
    /// Inner chunk shape inside each shard; `None` for an unsharded array.
    pub inner_chunks: Option<Vec<u64>>,
    /// The chunk codecs as Zarr v3 JSON up to the crc32c that every chunk
    /// gets (see [`crate::compress::Compression::codecs`]); empty for raw
    /// little-endian elements.
    pub codecs: Vec<Value>,
    /// Names of the dimensions.
    pub dimension_names: Vec<String>,
    /// Fill value as Zarr v3 JSON (`"NaN"`, `0`, ...).
    pub fill_value: Value,
    /// User attributes.
    pub attributes: Map<String, Value>,
    /// The generation of the store the array belongs to. With one, every
    /// shard carries its identity and a missing shard is an error.
    pub generation: Option<u64>,
}

impl ArraySpec {
    /// The names of the dimensions of an array that gives none: `dim_0`, `dim_1`, ...
    pub fn default_dimension_names(ndim: usize) -> Vec<String> {
        (0..ndim).map(|d| format!("dim_{d}")).collect()
    }

    /// Why an array of this spec could not be read or written, if so: a
    /// chunk or shard shape of another rank than the array, a side of 0, or
    /// inner chunks that do not tile the shard (zarrs accepts the document,
    /// then refuses every chunk).
    pub fn check(&self) -> Result<(), String> {
        let nd = self.shape.len();
        let mut shapes = vec![("chunk shape", &self.chunk_shape)];
        if let Some(inner) = &self.inner_chunks {
            shapes.push(("inner chunk shape", inner));
        }
        for (name, sides) in &shapes {
            if sides.len() != nd || sides.contains(&0) {
                return Err(format!(
                    "{name} {sides:?} does not fit an array of shape {:?}: one positive side per dimension",
                    self.shape
                ));
            }
        }
        if self.dimension_names.len() != nd {
            return Err(format!(
                "{} dimension names {:?} for an array of {nd} dimensions: give one name per dimension",
                self.dimension_names.len(),
                self.dimension_names
            ));
        }
        if let Some(inner) = &self.inner_chunks {
            if inner.iter().zip(&self.chunk_shape).any(|(i, s)| s % i != 0) {
                return Err(format!(
                    "inner chunks {inner:?} do not divide the shards {:?}: each shard side must be a \
                     whole number of inner chunks",
                    self.chunk_shape
                ));
            }
        }
        Ok(())
    }

    /// The `zarr.json` document of this spec. Every chunk and every shard
    /// index carries a crc32c.
    pub fn metadata(&self) -> Value {
        let mut chunk_codecs = if self.codecs.is_empty() {
            vec![json!({"name": "bytes", "configuration": {"endian": "little"}})]
        } else {
            self.codecs.clone()
        };
        chunk_codecs.push(json!({"name": "crc32c"}));
        let codecs = match &self.inner_chunks {
            Some(inner) => vec![json!({
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": inner,
                    "codecs": chunk_codecs,
                    "index_codecs": [
                        {"name": "bytes", "configuration": {"endian": "little"}},
                        {"name": "crc32c"}
                    ],
                    "index_location": "end"
                }
            })],
            None => chunk_codecs,
        };
        let mut attributes = self.attributes.clone();
        if let Some(generation) = self.generation {
            record_generation(&mut attributes, generation);
        }
        json!({
            "zarr_format": 3,
            "node_type": "array",
            "shape": self.shape,
            "data_type": self.dtype.name(),
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": self.chunk_shape}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": self.fill_value,
            "codecs": codecs,
            "attributes": attributes,
            "dimension_names": self.dimension_names,
        })
    }

    /// Check the spec as `zarrs` would when opening the array — metadata and
    /// codec chain — without writing anything; `path` is for messages.
    pub fn validate(&self, path: &Path) -> Result<()> {
        let invalid = |message: String| StoreError::Metadata {
            path: path.join("zarr.json"),
            message,
        };
        if self.shape.len() > crate::window::MAX_DIMS {
            return Err(invalid(format!(
                "{} dimensions; cubeslab stores at most {}",
                self.shape.len(),
                crate::window::MAX_DIMS
            ))
            .into());
        }
        let metadata: ArrayMetadata =
            serde_json::from_value(self.metadata()).map_err(|e| invalid(e.to_string()))?;
        if let ArrayMetadata::V3(v3) = &metadata {
            CodecChain::from_metadata(&v3.codecs).map_err(|e| invalid(e.to_string()))?;
        }
        Ok(())
    }
}
