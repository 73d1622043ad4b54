//! An array of a store on object storage, read through zarrs: each window's
//! bounding box is fetched as the inner chunks it touches (a shard's index,
//! then the chunks' byte ranges, neighbours merged into one request, many
//! requests in flight), decoded, and its stepped elements picked out.

use std::{path::PathBuf, sync::Arc};

use object_store::{prefix::PrefixStore, ObjectStore};
use serde_json::Value;
use zarrs::array::{Array, ArrayBytes, ArrayMetadata, ArraySubset, CodecOptions};
use zarrs_object_store::AsyncObjectStore;

use super::{
    client::{block_on, connect},
    contents::get_json,
    RemoteError, S3Url, StorageOptions,
};
use crate::{
    dtype::DType,
    error::Result,
    store::{ReadOptions, StoreError},
    window::{Window, MAX_DIMS},
};

type Objects = AsyncObjectStore<PrefixStore<Arc<dyn ObjectStore>>>;

/// An open array on object storage, read-only.
pub struct RemoteArray {
    url: S3Url,
    array: Array<Objects>,
    dtype: DType,
    metadata: Value,
    chunk_shape: Vec<u64>,
    inner_chunk_shape: Option<Vec<u64>>,
}

impl RemoteArray {
    /// Open the array at `url` (its `zarr.json` is fetched once).
    pub fn open(url: &S3Url, options: &StorageOptions) -> Result<Self> {
        let client = connect(url, options)?;
        let metadata = get_json(&client, &url.join("zarr.json"), "open the array")?;
        let invalid = |message: String| StoreError::Metadata {
            path: PathBuf::from(url.join("zarr.json").to_string()),
            message,
        };
        if metadata.get("node_type").and_then(Value::as_str) != Some("array") {
            return Err(invalid("node_type is not \"array\"".into()).into());
        }
        let parsed: ArrayMetadata =
            serde_json::from_value(metadata.clone()).map_err(|e| invalid(e.to_string()))?;
        let name = metadata
            .get("data_type")
            .and_then(Value::as_str)
            .unwrap_or("");
        let dtype = DType::from_name(name).ok_or_else(|| RemoteError::Unsupported {
            url: url.to_string(),
            what: format!("data type {name:?}"),
        })?;
        let objects = AsyncObjectStore::new(PrefixStore::new(client, url.key.as_str()));
        let array = Array::new_with_metadata(Arc::new(objects), "/", parsed)
            .map_err(|e| invalid(e.to_string()))?;
        if array.shape().len() > MAX_DIMS {
            return Err(invalid(format!("{} dimensions", array.shape().len())).into());
        }
        let chunk_shape = u64s(metadata.pointer("/chunk_grid/configuration/chunk_shape"))
            .ok_or_else(|| invalid("a chunk grid that is not regular".into()))?;
        let inner_chunk_shape = metadata
            .get("codecs")
            .and_then(Value::as_array)
            .and_then(|codecs| {
                codecs
                    .iter()
                    .find(|c| c.get("name").and_then(Value::as_str) == Some("sharding_indexed"))
            })
            .and_then(|c| u64s(c.pointer("/configuration/chunk_shape")));
        Ok(Self {
            url: url.clone(),
            array,
            dtype,
            metadata,
            chunk_shape,
            inner_chunk_shape,
        })
    }

    /// The array's URL.
    pub fn url(&self) -> &S3Url {
        &self.url
    }

    /// Elements per dimension.
    pub fn shape(&self) -> &[u64] {
        self.array.shape()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The chunk shape (the shard shape of a sharded array).
    pub fn chunk_shape(&self) -> &[u64] {
        &self.chunk_shape
    }

    /// The inner chunk shape of a sharded array.
    pub fn inner_chunk_shape(&self) -> Option<&[u64]> {
        self.inner_chunk_shape.as_deref()
    }

    /// The array's `zarr.json`.
    pub fn metadata(&self) -> &Value {
        &self.metadata
    }

    /// Shards (chunks of an unsharded array) per dimension.
    pub fn chunk_grid_shape(&self) -> &[u64] {
        self.array.chunk_grid_shape()
    }

    /// The key of the shard (or chunk) at `indices`, relative to the array.
    pub fn chunk_key(&self, indices: &[u64]) -> String {
        self.array.chunk_key(indices).to_string()
    }

    /// Read `window` into `out` (native-endian C-order bytes of its shape).
    pub fn read_into(&self, window: &Window, out: &mut [u8], options: &ReadOptions) -> Result<()> {
        if window.check_buffer(self.shape(), self.dtype.size(), out.len())? == 0 {
            return Ok(());
        }
        let codec_options = CodecOptions::default()
            .with_validate_checksums(options.verify)
            .with_concurrent_target(options.parallelism.in_flight.max(1));
        let subset = ArraySubset::new_with_ranges(&window.bounding_box());
        let fetched = block_on(
            self.array
                .async_retrieve_array_subset_opt::<ArrayBytes<'static>>(&subset, &codec_options),
        );
        let failed = |message: String| RemoteError::Failed {
            url: self.url.to_string(),
            operation: "read".into(),
            message,
        };
        let bytes = fetched
            .map_err(|e| failed(e.to_string()))?
            .into_fixed()
            .map_err(|e| failed(e.to_string()))?;
        window.pick_from_box(&bytes, out, self.dtype.size());
        Ok(())
    }
}

fn u64s(value: Option<&Value>) -> Option<Vec<u64>> {
    value?.as_array()?.iter().map(Value::as_u64).collect()
}
