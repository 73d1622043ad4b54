//! An array of a store on object storage, read through zarrs: each window's
//! bounding box is fetched as the inner chunks it touches (a shard's index,
//! kept once fetched, then the chunks' byte ranges, neighbours merged into
//! one request, many requests in flight; `objects.rs`), decoded, and its
//! stepped elements picked out.

use std::{ops::Range, path::PathBuf, sync::Arc};

use futures::StreamExt;

use serde_json::Value;
use zarrs::array::{Array, ArrayBytes, ArrayMetadata, ArraySubset, CodecOptions};

use super::{
    client::{block_on, connect},
    contents::get_json,
    objects::{ExpectedShards, StoreObjects},
    RemoteError, S3Url, StorageOptions,
};
use crate::{
    dtype::DType,
    error::Result,
    store::{recorded_generation, ReadOptions, StoreError},
    window::{strides, unravel, ChunkSpan, Placement, Window, MAX_DIMS},
};

/// An open array on object storage, read-only.
pub struct RemoteArray {
    url: S3Url,
    array: Array<StoreObjects>,
    objects: Arc<StoreObjects>,
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
        let chunk_shape = u64s(metadata.pointer("/chunk_grid/configuration/chunk_shape"))
            .ok_or_else(|| invalid("a chunk grid that is not regular".into()))?;
        let shard_bytes = chunk_shape.iter().product::<u64>() * dtype.size() as u64;
        let expected = expected_shards(url, &metadata, &chunk_shape);
        let objects = Arc::new(StoreObjects::new(client, &url.key, shard_bytes, expected));
        let array = Array::new_with_metadata(objects.clone(), "/", parsed)
            .map_err(|e| invalid(e.to_string()))?;
        if array.shape().len() > MAX_DIMS {
            return Err(invalid(format!("{} dimensions", array.shape().len())).into());
        }
        let inner_chunk_shape =
            sharding_codec(&metadata).and_then(|c| u64s(c.pointer("/configuration/chunk_shape")));
        Ok(Self {
            url: url.clone(),
            array,
            objects,
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

    /// Forget what was kept of the object at `key` (relative to the array),
    /// which this process just replaced.
    pub fn forget_object(&self, key: &str) {
        self.objects.forget(key);
    }

    /// Read `window` into `out` (native-endian C-order bytes of its shape):
    /// the bounding box shard by shard, the shards `in_flight` at a time
    /// (zarrs alone takes them one after another, each shard's chunks at
    /// once), then the stepped elements picked out.
    pub fn read_into(&self, window: &Window, out: &mut [u8], options: &ReadOptions) -> Result<()> {
        if window.check_buffer(self.shape(), self.dtype.size(), out.len())? == 0 {
            return Ok(());
        }
        let elem = self.dtype.size();
        let codec_options = CodecOptions::default().with_validate_checksums(options.verify);
        let bbox = window.bounding_box();
        let box_shape: Vec<u64> = bbox.iter().map(|r| r.end - r.start).collect();
        let pieces = shard_pieces(&bbox, &self.chunk_shape);
        let subsets: Vec<ArraySubset> = pieces
            .iter()
            .map(|p| ArraySubset::new_with_ranges(p))
            .collect();
        let failed = |message: String| RemoteError::Failed {
            url: self.url.to_string(),
            operation: "read".into(),
            message,
        };
        let fetched: Vec<_> = block_on(
            futures::stream::iter(subsets.iter())
                .map(|subset| {
                    self.array
                        .async_retrieve_array_subset_opt::<ArrayBytes<'static>>(
                            subset,
                            &codec_options,
                        )
                })
                .buffered(options.parallelism.in_flight.max(1))
                .collect(),
        );
        // A window without steps is its own bounding box: the pieces go straight into `out`.
        let stepped = window.dims.iter().any(|r| r.step > 1);
        let mut boxed = if stepped {
            vec![0u8; box_shape.iter().product::<u64>() as usize * elem]
        } else {
            Vec::new()
        };
        for (piece, bytes) in pieces.iter().zip(fetched) {
            let bytes = bytes
                .map_err(|e| match self.objects.take_refusal() {
                    Some(refused) => refused.into(),
                    None => crate::error::Error::from(failed(e.to_string())),
                })?
                .into_fixed()
                .map_err(|e| failed(e.to_string()))?;
            let target = if stepped {
                &mut boxed[..]
            } else {
                &mut out[..]
            };
            place_piece(&bytes, piece, &bbox, target, elem);
        }
        if stepped {
            window.pick_from_box(&boxed, out, elem);
        }
        Ok(())
    }
}

/// The parts of `bbox` in each shard (chunk) of shape `chunk` it touches.
fn shard_pieces(bbox: &[Range<u64>], chunk: &[u64]) -> Vec<Vec<Range<u64>>> {
    let first: Vec<u64> = bbox.iter().zip(chunk).map(|(r, c)| r.start / c).collect();
    let counts: Vec<u64> = bbox
        .iter()
        .zip(chunk)
        .zip(&first)
        .map(|((r, c), f)| (r.end - 1) / c - f + 1)
        .collect();
    (0..counts.iter().product::<u64>())
        .map(|i| {
            let at = unravel(i, &counts);
            bbox.iter()
                .enumerate()
                .map(|(d, r)| {
                    let start = (first[d] + at[d]) * chunk[d];
                    start.max(r.start)..(start + chunk[d]).min(r.end)
                })
                .collect()
        })
        .collect()
}

/// Copy `bytes` (C order, of the box `piece`) into `boxed` (C order, of `bbox`).
fn place_piece(
    bytes: &[u8],
    piece: &[Range<u64>],
    bbox: &[Range<u64>],
    boxed: &mut [u8],
    elem: usize,
) {
    if piece.is_empty() {
        boxed.copy_from_slice(bytes); // a 0-d array: one element
        return;
    }
    let piece_shape: Vec<u64> = piece.iter().map(|r| r.end - r.start).collect();
    let box_shape: Vec<u64> = bbox.iter().map(|r| r.end - r.start).collect();
    let spans: Vec<ChunkSpan> = piece
        .iter()
        .zip(bbox)
        .map(|(p, b)| ChunkSpan {
            chunk: 0,
            first: 0,
            count: p.end - p.start,
            out_first: p.start - b.start,
        })
        .collect();
    let (src, dst) = (strides(&piece_shape), strides(&box_shape));
    let placement = Placement {
        src_strides: &src,
        dst_strides: &dst,
        steps: &[1; MAX_DIMS],
        ndim: piece.len(),
        elem,
    };
    assert_eq!(
        bytes.len(),
        piece_shape.iter().product::<u64>() as usize * elem
    );
    assert_eq!(
        boxed.len(),
        box_shape.iter().product::<u64>() as usize * elem
    );
    // SAFETY: both buffers' sizes were checked; the piece lies inside the box.
    unsafe { placement.copy(&spans, bytes, boxed.as_mut_ptr()) };
}

/// What the shards of the array at `url` must say of themselves, if its
/// store records a generation: only a sharded array with its index at the
/// end carries identities.
fn expected_shards(url: &S3Url, metadata: &Value, shard: &[u64]) -> Option<ExpectedShards> {
    let generation = recorded_generation(metadata.get("attributes")?.as_object()?)?;
    let configuration = sharding_codec(metadata)?.get("configuration")?;
    if configuration.get("index_location").and_then(Value::as_str) == Some("start") {
        return None;
    }
    let inner = u64s(configuration.get("chunk_shape"))?;
    let chunks: u64 = shard
        .iter()
        .zip(&inner)
        .map(|(s, c)| s.div_ceil(*c))
        .product();
    let checksummed = configuration
        .get("index_codecs")
        .and_then(Value::as_array)
        .is_some_and(|codecs| {
            codecs
                .iter()
                .any(|c| c.get("name").and_then(Value::as_str) == Some("crc32c"))
        });
    Some(ExpectedShards {
        array: url
            .key
            .trim_end_matches('/')
            .rsplit('/')
            .next()?
            .to_string(),
        generation,
        index_bytes: Some(chunks * 16 + if checksummed { 4 } else { 0 }),
    })
}

/// The sharding codec of an array's `zarr.json`, if it is sharded.
fn sharding_codec(metadata: &Value) -> Option<&Value> {
    metadata
        .get("codecs")?
        .as_array()?
        .iter()
        .find(|c| c.get("name").and_then(Value::as_str) == Some("sharding_indexed"))
}

fn u64s(value: Option<&Value>) -> Option<Vec<u64>> {
    value?.as_array()?.iter().map(Value::as_u64).collect()
}
