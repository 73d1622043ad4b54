//! A Zarr v3 array: open or create it, read any window into a caller's
//! buffer in parallel, write whole chunks atomically.

use std::{
    borrow::Cow,
    collections::HashMap,
    num::NonZeroU64,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use rayon::prelude::*;
use serde_json::{json, Map, Value};
use zarrs::{
    array::{Array, ArrayBytes, ArrayMetadata, ArraySubset, CodecChain, CodecOptions},
    filesystem::FilesystemStore,
    metadata::v3::MetadataV3,
};

use super::{
    group::read_metadata,
    shard::{ShardFile, ShardLayout},
    write_atomic, write_json_atomic, DType, StoreError,
};
use crate::{
    config::Parallelism,
    error::Result,
    window::{chunk_spans, strides, ChunkSpan, Placement, SelectionError, Window, MAX_DIMS},
    Error,
};

/// How a read runs.
#[derive(Debug, Clone, Copy)]
pub struct ReadOptions {
    /// Threads and requests in flight.
    pub parallelism: Parallelism,
    /// Check each chunk's crc32c before using it. On by default: a verified
    /// read must read whole inner chunks; off, an uncompressed chunk is read
    /// only where the window touches it.
    pub verify: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            parallelism: Parallelism::default(),
            verify: true,
        }
    }
}

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
    /// Bytes-to-bytes codecs (compressors) as Zarr v3 JSON, applied before
    /// the crc32c that every chunk gets.
    pub compressors: Vec<Value>,
    /// Names of the dimensions.
    pub dimension_names: Vec<String>,
    /// Fill value as Zarr v3 JSON (`"NaN"`, `0`, ...).
    pub fill_value: Value,
    /// User attributes.
    pub attributes: Map<String, Value>,
}

impl ArraySpec {
    /// The `zarr.json` document of this spec. Every chunk and every shard
    /// index carries a crc32c.
    pub fn metadata(&self) -> Value {
        let mut chunk_codecs =
            vec![json!({"name": "bytes", "configuration": {"endian": "little"}})];
        chunk_codecs.extend(self.compressors.iter().cloned());
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
        json!({
            "zarr_format": 3,
            "node_type": "array",
            "shape": self.shape,
            "data_type": self.dtype.name(),
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": self.chunk_shape}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": self.fill_value,
            "codecs": codecs,
            "attributes": self.attributes,
            "dimension_names": self.dimension_names,
        })
    }
}

/// How the inner chunks of a shard are decoded on the engine's own path.
enum InnerDecode {
    /// `bytes` (little endian), optionally followed by `crc32c`: the stored
    /// bytes are the elements themselves.
    Raw { crc: bool },
    /// Any other chain, decoded by `zarrs`.
    Chain(Arc<CodecChain>),
}

/// The engine's own read path for sharded arrays.
struct ShardedPath {
    inner_shape: Vec<u64>,
    layout: ShardLayout,
    decode: InnerDecode,
}

/// An open Zarr v3 array.
pub struct ZarrArray {
    dir: PathBuf,
    array: Array<FilesystemStore>,
    shape: Vec<u64>,
    dtype: DType,
    chunk_shape: Vec<u64>,
    fill: Vec<u8>,
    metadata: Value,
    sharded: Option<ShardedPath>,
    shards: Mutex<HashMap<Vec<u64>, Arc<ShardFile>>>,
}

impl std::fmt::Debug for ZarrArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZarrArray")
            .field("dir", &self.dir)
            .field("shape", &self.shape)
            .field("dtype", &self.dtype)
            .finish()
    }
}

/// Cap on cached open shards; past it the cache starts again (the maps are
/// cheap to rebuild, but each holds a file descriptor and a mapping).
const MAX_CACHED_SHARDS: usize = 4096;

fn metadata_error(dir: &Path, message: impl Into<String>) -> Error {
    StoreError::Metadata {
        path: dir.join("zarr.json"),
        message: message.into(),
    }
    .into()
}

fn u64_list(v: Option<&Value>) -> Option<Vec<u64>> {
    v?.as_array()?.iter().map(Value::as_u64).collect()
}

impl ZarrArray {
    /// Open the array in directory `dir`.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        let metadata = read_metadata(&dir)?;
        if metadata.get("node_type").and_then(Value::as_str) != Some("array") {
            return Err(metadata_error(&dir, "node_type is not \"array\""));
        }
        if metadata.get("zarr_format").and_then(Value::as_u64) != Some(3) {
            return Err(metadata_error(&dir, "zarr_format is not 3"));
        }
        let store = FilesystemStore::new(&dir).map_err(|e| metadata_error(&dir, e.to_string()))?;
        let array =
            Array::open(Arc::new(store), "/").map_err(|e| metadata_error(&dir, e.to_string()))?;
        let dtype_name = metadata
            .get("data_type")
            .and_then(Value::as_str)
            .unwrap_or("");
        let dtype = DType::from_name(dtype_name).ok_or_else(|| StoreError::Unsupported {
            path: dir.clone(),
            what: format!(
                "data type {}",
                metadata.get("data_type").unwrap_or(&Value::Null)
            ),
        })?;
        let shape = array.shape().to_vec();
        if shape.len() > MAX_DIMS {
            return Err(StoreError::Unsupported {
                path: dir,
                what: format!("{} dimensions", shape.len()),
            }
            .into());
        }
        let chunk_shape = u64_list(metadata.pointer("/chunk_grid/configuration/chunk_shape"))
            .filter(|c| c.len() == shape.len())
            .ok_or_else(|| StoreError::Unsupported {
                path: dir.clone(),
                what: "a chunk grid that is not regular".into(),
            })?;
        let fill = array.fill_value().as_ne_bytes().to_vec();
        let sharded = Self::sharded_path(&dir, &metadata, shape.len(), &chunk_shape)?;
        Ok(Self {
            dir,
            array,
            shape,
            dtype,
            chunk_shape,
            fill,
            metadata,
            sharded,
            shards: Mutex::new(HashMap::new()),
        })
    }

    /// Create a new array in `dir` (which must not hold one), writing its metadata.
    pub fn create(dir: impl AsRef<Path>, spec: &ArraySpec) -> Result<Self> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let metadata = spec.metadata();
        // Let zarrs validate the document before it is written.
        serde_json::from_value::<ArrayMetadata>(metadata.clone())
            .map_err(|e| metadata_error(dir, e.to_string()))?;
        write_json_atomic(&dir.join("zarr.json"), &metadata)?;
        Self::open(dir)
    }

    /// Recognise `[sharding_indexed{ bytes(little) [compressors] [crc32c] }]`.
    fn sharded_path(
        dir: &Path,
        meta: &Value,
        ndim: usize,
        shard_shape: &[u64],
    ) -> Result<Option<ShardedPath>> {
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
        let decode = match inner_codecs.as_slice() {
            [b] if is_bytes_le(b) => InnerDecode::Raw { crc: false },
            [b, c] if is_bytes_le(b) && is_crc(c) => InnerDecode::Raw { crc: true },
            _ => {
                let metas: Vec<MetadataV3> = serde_json::from_value(Value::Array(inner_codecs))
                    .map_err(|e| metadata_error(dir, e.to_string()))?;
                let chain = CodecChain::from_metadata(&metas)
                    .map_err(|e| metadata_error(dir, e.to_string()))?;
                InnerDecode::Chain(Arc::new(chain))
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
        Ok(Some(ShardedPath {
            inner_shape,
            layout: ShardLayout {
                chunks_per_shard,
                index_at_end,
                index_crc,
            },
            decode,
        }))
    }

    /// Directory of the array.
    pub fn path(&self) -> &Path {
        &self.dir
    }
    /// Shape.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }
    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Regular-grid chunk shape (the shard shape for sharded arrays).
    pub fn chunk_shape(&self) -> &[u64] {
        &self.chunk_shape
    }
    /// Inner chunk shape of a sharded array read on the engine's own path.
    pub fn inner_chunk_shape(&self) -> Option<&[u64]> {
        self.sharded.as_ref().map(|s| s.inner_shape.as_slice())
    }
    /// The parsed `zarr.json`.
    pub fn metadata(&self) -> &Value {
        &self.metadata
    }
    /// Fill value, as one element's native-endian bytes.
    pub fn fill_bytes(&self) -> &[u8] {
        &self.fill
    }

    /// Path of the file holding the chunk (shard) at `indices`.
    pub fn chunk_path(&self, indices: &[u64]) -> PathBuf {
        self.dir.join(self.array.chunk_key(indices).as_str())
    }

    /// Number of chunks (shards) along each dimension.
    pub fn chunk_grid_shape(&self) -> Vec<u64> {
        self.shape
            .iter()
            .zip(&self.chunk_shape)
            .map(|(n, c)| n.div_ceil(*c))
            .collect()
    }

    /// Encode one whole chunk (shard) from native-endian C-order bytes of the
    /// full chunk shape and write it atomically.
    pub fn write_chunk(&self, indices: &[u64], data: &[u8]) -> Result<()> {
        use zarrs::array::ArrayToBytesCodecTraits;
        let key = self.array.chunk_key(indices);
        let codec_error = |message: String| -> Error {
            StoreError::Codec {
                array: self.dir.clone(),
                key: key.as_str().to_string(),
                message,
            }
            .into()
        };
        let chunk_shape: Vec<NonZeroU64> = self
            .chunk_shape
            .iter()
            .map(|&c| NonZeroU64::new(c).expect("chunk sides are positive"))
            .collect();
        let expected = self.chunk_shape.iter().product::<u64>() as usize * self.dtype.size();
        if data.len() != expected {
            return Err(SelectionError::BufferSize {
                expected,
                got: data.len(),
            }
            .into());
        }
        let options = CodecOptions::default().with_concurrent_target(1);
        let encoded = self
            .array
            .codecs()
            .encode(
                ArrayBytes::new_flen(Cow::Borrowed(data)),
                &chunk_shape,
                self.array.data_type(),
                self.array.fill_value(),
                &options,
            )
            .map_err(|e| codec_error(e.to_string()))?;
        write_atomic(&self.dir.join(key.as_str()), &encoded)?;
        self.shards
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(indices);
        Ok(())
    }

    /// Write the whole array from one buffer (for small arrays whose single
    /// chunk covers them: coordinates, masks, headers).
    pub fn write_all(&self, data: &[u8]) -> Result<()> {
        if self.chunk_grid_shape().iter().any(|&n| n != 1) {
            return Err(StoreError::Unsupported {
                path: self.dir.clone(),
                what: "write_all on an array of more than one chunk".into(),
            }
            .into());
        }
        // Pad up to the chunk shape with the fill value.
        let elem = self.dtype.size();
        let n_chunk: u64 = self.chunk_shape.iter().product();
        let mut padded = self.fill.repeat(n_chunk as usize);
        let window = Window::full(&self.shape);
        let spans: Vec<ChunkSpan> = self
            .shape
            .iter()
            .map(|&n| ChunkSpan {
                chunk: 0,
                first: 0,
                count: n,
                out_first: 0,
            })
            .collect();
        let (src, dst, steps) = (
            strides(&self.shape),
            strides(&self.chunk_shape),
            [1u64; MAX_DIMS],
        );
        let expected = window.num_elements() as usize * elem;
        if data.len() != expected {
            return Err(SelectionError::BufferSize {
                expected,
                got: data.len(),
            }
            .into());
        }
        if self.shape.iter().all(|&n| n > 0) {
            let placement = Placement {
                src_strides: &src,
                dst_strides: &dst,
                steps: &steps,
                ndim: self.shape.len(),
                elem,
            };
            // SAFETY: `padded` holds the whole chunk, which contains the array.
            unsafe { placement.copy(&spans, data, padded.as_mut_ptr()) };
        }
        self.write_chunk(&vec![0; self.shape.len()], &padded)
    }

    /// Write the whole array from `data` (native-endian C-order bytes of
    /// the array's shape), every chunk encoded and written in parallel.
    pub fn write_array(&self, data: &[u8], parallelism: Parallelism) -> Result<()> {
        let elem = self.dtype.size();
        let expected = self.shape.iter().product::<u64>() as usize * elem;
        if data.len() != expected {
            return Err(SelectionError::BufferSize {
                expected,
                got: data.len(),
            }
            .into());
        }
        let grid = self.chunk_grid_shape();
        let n_chunks: u64 = grid.iter().product();
        let nd = self.shape.len();
        let chunk_elems = self.chunk_shape.iter().product::<u64>() as usize;
        let (src, dst, steps) = (
            strides(&self.shape),
            strides(&self.chunk_shape),
            [1u64; MAX_DIMS],
        );
        let placement = Placement {
            src_strides: &src,
            dst_strides: &dst,
            steps: &steps,
            ndim: nd,
            elem,
        };
        parallelism.pool().install(|| {
            (0..n_chunks).into_par_iter().try_for_each(|c| {
                let idx = unravel(c, &grid);
                let spans: Vec<ChunkSpan> = (0..nd)
                    .map(|d| {
                        let start = idx[d] * self.chunk_shape[d];
                        ChunkSpan {
                            chunk: 0,
                            first: start,
                            count: self.chunk_shape[d].min(self.shape[d] - start),
                            out_first: 0,
                        }
                    })
                    .collect();
                let mut chunk = self.fill.repeat(chunk_elems);
                // SAFETY: `chunk` holds a whole chunk; the spans lie inside `data`.
                unsafe { placement.copy(&spans, data, chunk.as_mut_ptr()) };
                self.write_chunk(&idx[..nd], &chunk)
            })
        })
    }

    /// Read `window` into `out` (native-endian C-order bytes of the window's shape).
    pub fn read_into(&self, window: &Window, out: &mut [u8], options: &ReadOptions) -> Result<()> {
        window.validate(&self.shape)?;
        let expected = window.num_elements() as usize * self.dtype.size();
        if out.len() != expected {
            return Err(SelectionError::BufferSize {
                expected,
                got: out.len(),
            }
            .into());
        }
        if expected == 0 {
            return Ok(());
        }
        let pool = options.parallelism.pool();
        match &self.sharded {
            Some(path) => pool.install(|| self.read_sharded(path, window, out, options)),
            None => pool.install(|| self.read_generic(window, out, options)),
        }
    }

    /// Read a whole array into a new buffer.
    pub fn read_all(&self, options: &ReadOptions) -> Result<Vec<u8>> {
        let window = Window::full(&self.shape);
        let mut out = vec![0u8; window.num_elements() as usize * self.dtype.size()];
        self.read_into(&window, &mut out, options)?;
        Ok(out)
    }

    /// Through zarrs: retrieve the bounding box, then pick the stepped elements.
    fn read_generic(&self, window: &Window, out: &mut [u8], options: &ReadOptions) -> Result<()> {
        let nd = self.shape.len();
        let bbox: Vec<std::ops::Range<u64>> = window
            .dims
            .iter()
            .map(|r| r.start..r.start + (r.len() - 1) * r.step + 1)
            .collect();
        let codec_options = CodecOptions::default().with_validate_checksums(options.verify);
        let bytes = self
            .array
            .retrieve_array_subset_opt::<ArrayBytes<'static>>(
                &ArraySubset::new_with_ranges(&bbox),
                &codec_options,
            )
            .map_err(|e| StoreError::Codec {
                array: self.dir.clone(),
                key: "(zarrs read)".into(),
                message: e.to_string(),
            })?
            .into_fixed()
            .map_err(|e| StoreError::Codec {
                array: self.dir.clone(),
                key: "(zarrs read)".into(),
                message: e.to_string(),
            })?;
        let bbox_shape: Vec<u64> = bbox.iter().map(|r| r.end - r.start).collect();
        let spans: Vec<ChunkSpan> = window
            .dims
            .iter()
            .map(|r| ChunkSpan {
                chunk: 0,
                first: 0,
                count: r.len(),
                out_first: 0,
            })
            .collect();
        let mut steps = [1u64; MAX_DIMS];
        for (d, r) in window.dims.iter().enumerate() {
            steps[d] = r.step;
        }
        let (src, dst) = (strides(&bbox_shape), strides(&window.shape()));
        let placement = Placement {
            src_strides: &src,
            dst_strides: &dst,
            steps: &steps,
            ndim: nd,
            elem: self.dtype.size(),
        };
        // SAFETY: `out` has the window's size (checked by the caller) and
        // `bytes` the bounding box's.
        unsafe { placement.copy(&spans, &bytes, out.as_mut_ptr()) };
        Ok(())
    }

    fn shard(&self, path: &ShardedPath, indices: &[u64]) -> Result<Arc<ShardFile>> {
        if let Some(s) = self
            .shards
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(indices)
        {
            return Ok(s.clone());
        }
        let key = self.array.chunk_key(indices);
        let shard = Arc::new(ShardFile::open(
            &self.dir,
            &self.dir.join(key.as_str()),
            key.as_str(),
            &path.layout,
        )?);
        let mut cache = self.shards.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= MAX_CACHED_SHARDS {
            cache.clear();
        }
        cache.insert(indices.to_vec(), shard.clone());
        Ok(shard)
    }

    /// The engine's path: plan the inner chunks the window touches, hand
    /// their byte ranges to the kernel a group at a time, and copy each
    /// chunk's selected elements straight into `out` on the worker threads.
    fn read_sharded(
        &self,
        path: &ShardedPath,
        window: &Window,
        out: &mut [u8],
        options: &ReadOptions,
    ) -> Result<()> {
        let nd = self.shape.len();
        let elem = self.dtype.size();
        let cps = &path.layout.chunks_per_shard;
        // Per dimension: the spans over inner chunks, and for each span the
        // slot of its shard among the touched shards and its position inside it.
        let spans: Vec<Vec<ChunkSpan>> = (0..nd)
            .map(|d| chunk_spans(&window.dims[d], path.inner_shape[d]))
            .collect();
        let mut touched: Vec<Vec<u64>> = Vec::with_capacity(nd); // shard indices per dim
        let mut slot_of: Vec<Vec<(u64, u64)>> = Vec::with_capacity(nd); // (shard slot, inner pos)
        for d in 0..nd {
            let mut shards_d: Vec<u64> = Vec::new();
            let mut slots = Vec::with_capacity(spans[d].len());
            for s in &spans[d] {
                let shard = s.chunk / cps[d];
                if shards_d.last() != Some(&shard) {
                    shards_d.push(shard);
                }
                slots.push(((shards_d.len() - 1) as u64, s.chunk % cps[d]));
            }
            touched.push(shards_d);
            slot_of.push(slots);
        }
        // Open the touched shards (in parallel: each reads and checks an index).
        let touched_shape: Vec<u64> = touched.iter().map(|t| t.len() as u64).collect();
        let n_shards: u64 = touched_shape.iter().product();
        let shards: Vec<Arc<ShardFile>> = (0..n_shards)
            .into_par_iter()
            .map(|i| {
                let idx = unravel(i, &touched_shape);
                let indices: Vec<u64> = (0..nd).map(|d| touched[d][idx[d] as usize]).collect();
                self.shard(path, &indices)
            })
            .collect::<Result<_>>()?;

        let span_counts: Vec<u64> = spans.iter().map(|s| s.len() as u64).collect();
        let n_tasks: u64 = span_counts.iter().product();
        let touched_strides = strides(&touched_shape);
        let inner_strides = strides(cps);
        let locate = |t: u64| -> (usize, usize, [ChunkSpan; MAX_DIMS]) {
            let idx = unravel(t, &span_counts);
            let mut shard_slot = 0u64;
            let mut inner = 0u64;
            let mut task_spans = [ChunkSpan {
                chunk: 0,
                first: 0,
                count: 0,
                out_first: 0,
            }; MAX_DIMS];
            for d in 0..nd {
                let i = idx[d] as usize;
                let (slot, pos) = slot_of[d][i];
                shard_slot += slot * touched_strides[d];
                inner += pos * inner_strides[d];
                task_spans[d] = spans[d][i];
            }
            (shard_slot as usize, inner as usize, task_spans)
        };

        let mut steps = [1u64; MAX_DIMS];
        for (d, r) in window.dims.iter().enumerate() {
            steps[d] = r.step;
        }
        let chunk_strides = strides(&path.inner_shape);
        let out_strides = strides(&window.shape());
        let placement = Placement {
            src_strides: &chunk_strides,
            dst_strides: &out_strides,
            steps: &steps,
            ndim: nd,
            elem,
        };
        let chunk_bytes = path.inner_shape.iter().product::<u64>() as usize * elem;
        let raw_partial = matches!(path.decode, InnerDecode::Raw { .. }) && !options.verify;

        // Byte range each task needs: the whole chunk, or for an unverified
        // raw chunk only the span between its first and last selected element.
        let range_of = |t: u64| -> Option<(usize, u64, u64)> {
            let (slot, inner, task_spans) = locate(t);
            let (offset, nbytes) = shards[slot].range(inner)?;
            if raw_partial {
                let (lo, hi) = selected_extent(&task_spans[..nd], &steps, &chunk_strides);
                Some((slot, offset + lo * elem as u64, (hi - lo + 1) * elem as u64))
            } else {
                Some((slot, offset, nbytes))
            }
        };
        // Prefetching pays for cold data and costs a system call per range
        // for warm data, so probe a few ranges first.
        let probes = [0, n_tasks / 2, n_tasks - 1];
        let warm = probes
            .iter()
            .filter_map(|&t| range_of(t))
            .all(|(slot, offset, len)| shards[slot].is_resident(offset, len));
        let threads = options.parallelism.threads.max(1) as u64;
        // Each worker keeps `lookahead` tasks' ranges requested ahead of the
        // one it copies, so about `in_flight` requests are outstanding.
        let lookahead = (options.parallelism.in_flight as u64).div_ceil(threads);
        let piece = n_tasks.div_ceil(threads * 4).max(1);
        let out_ptr = SendPtr(out.as_mut_ptr());
        (0..n_tasks.div_ceil(piece))
            .into_par_iter()
            .try_for_each(|p| {
                let (first, last) = (p * piece, ((p + 1) * piece).min(n_tasks));
                let mut prefetch = Prefetcher::default();
                let mut requested = first;
                for t in first..last {
                    if !warm {
                        while requested < last && requested <= t + lookahead {
                            if let Some(range) = range_of(requested) {
                                prefetch.add(range, &shards);
                            }
                            requested += 1;
                        }
                        prefetch.flush(&shards);
                    }
                    let (slot, inner, task_spans) = locate(t);
                    self.read_task(
                        path,
                        &shards[slot],
                        inner,
                        &task_spans[..nd],
                        &placement,
                        chunk_bytes,
                        options.verify,
                        out_ptr.get(),
                    )?;
                }
                Ok(())
            })
    }

    /// Copy one inner chunk's selected elements into the output.
    #[allow(clippy::too_many_arguments)]
    fn read_task(
        &self,
        path: &ShardedPath,
        shard: &ShardFile,
        inner: usize,
        task_spans: &[ChunkSpan],
        placement: &Placement<'_>,
        chunk_bytes: usize,
        verify: bool,
        dst: *mut u8,
    ) -> Result<()> {
        let Some(bytes) = shard.chunk(inner) else {
            // SAFETY: tasks cover disjoint parts of the output.
            unsafe { placement.fill(task_spans, &self.fill, dst) };
            return Ok(());
        };
        match &path.decode {
            InnerDecode::Raw { crc } => {
                let data = if *crc {
                    let Some(split) = bytes.len().checked_sub(4) else {
                        return Err(self.corrupt(shard, inner, "chunk shorter than its checksum"));
                    };
                    if verify {
                        self.check_crc(shard, inner, &bytes[..split], &bytes[split..])?;
                    }
                    &bytes[..split]
                } else {
                    bytes
                };
                if data.len() != chunk_bytes {
                    return Err(self.corrupt(
                        shard,
                        inner,
                        &format!("chunk holds {} bytes, expected {chunk_bytes}", data.len()),
                    ));
                }
                // SAFETY: disjoint output parts; `data` is a whole chunk.
                unsafe { placement.copy(task_spans, data, dst) };
            }
            InnerDecode::Chain(chain) => {
                let decoded = self.decode_chain(chain, path, shard, inner, bytes, verify)?;
                if decoded.len() != chunk_bytes {
                    return Err(self.corrupt(shard, inner, "decoded chunk has the wrong size"));
                }
                // SAFETY: as above.
                unsafe { placement.copy(task_spans, &decoded, dst) };
            }
        }
        Ok(())
    }

    fn decode_chain<'a>(
        &self,
        chain: &CodecChain,
        path: &ShardedPath,
        shard: &ShardFile,
        inner: usize,
        bytes: &'a [u8],
        verify: bool,
    ) -> Result<Cow<'a, [u8]>> {
        use zarrs::array::ArrayToBytesCodecTraits;
        let shape: Vec<NonZeroU64> = path
            .inner_shape
            .iter()
            .map(|&c| NonZeroU64::new(c).expect("positive"))
            .collect();
        let options = CodecOptions::default()
            .with_validate_checksums(verify)
            .with_concurrent_target(1);
        chain
            .decode(
                Cow::Borrowed(bytes),
                &shape,
                self.array.data_type(),
                self.array.fill_value(),
                &options,
            )
            .and_then(|b| Ok(b.into_fixed()?))
            .map_err(|e| {
                let message = e.to_string();
                if message.to_lowercase().contains("checksum") {
                    StoreError::Checksum {
                        array: self.dir.clone(),
                        key: inner_key(shard, inner),
                        what: "inner chunk".into(),
                        stored: 0,
                        computed: 0,
                    }
                    .into()
                } else {
                    StoreError::Codec {
                        array: self.dir.clone(),
                        key: inner_key(shard, inner),
                        message,
                    }
                    .into()
                }
            })
    }

    fn check_crc(&self, shard: &ShardFile, inner: usize, data: &[u8], stored: &[u8]) -> Result<()> {
        let stored = u32::from_le_bytes(stored.try_into().expect("4 bytes"));
        let computed = crc32c::crc32c(data);
        if stored == computed {
            Ok(())
        } else {
            Err(StoreError::Checksum {
                array: self.dir.clone(),
                key: inner_key(shard, inner),
                what: "inner chunk".into(),
                stored,
                computed,
            }
            .into())
        }
    }

    fn corrupt(&self, shard: &ShardFile, inner: usize, message: &str) -> Error {
        StoreError::Corrupt {
            array: self.dir.clone(),
            key: inner_key(shard, inner),
            message: message.into(),
        }
        .into()
    }
}

fn inner_key(shard: &ShardFile, inner: usize) -> String {
    format!("{} (inner chunk {inner})", shard.key)
}

/// C-order multi-index of a linear index.
fn unravel(mut i: u64, shape: &[u64]) -> [u64; MAX_DIMS] {
    let mut idx = [0u64; MAX_DIMS];
    for d in (0..shape.len()).rev() {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    idx
}

/// First and last element offsets (in elements, within the chunk) that a
/// task's selection touches.
fn selected_extent(
    spans: &[ChunkSpan],
    steps: &[u64; MAX_DIMS],
    chunk_strides: &[u64; MAX_DIMS],
) -> (u64, u64) {
    let mut lo = 0;
    let mut hi = 0;
    for (d, s) in spans.iter().enumerate() {
        lo += s.first * chunk_strides[d];
        hi += (s.first + (s.count - 1) * steps[d]) * chunk_strides[d];
    }
    (lo, hi)
}

/// Ranges closer than this are requested as one: the kernel then issues
/// fewer, larger reads, which every device serves faster.
const COALESCE_GAP: u64 = 64 * 1024;

/// Merges neighbouring byte ranges of a shard before asking the kernel for them.
#[derive(Default)]
struct Prefetcher {
    pending: Option<(usize, u64, u64)>,
}

impl Prefetcher {
    fn add(&mut self, (slot, offset, len): (usize, u64, u64), shards: &[Arc<ShardFile>]) {
        if let Some((s, o, l)) = &mut self.pending {
            if *s == slot && offset >= *o && offset <= *o + *l + COALESCE_GAP {
                *l = (*l).max(offset + len - *o);
                return;
            }
        }
        self.flush(shards);
        self.pending = Some((slot, offset, len));
    }

    fn flush(&mut self, shards: &[Arc<ShardFile>]) {
        if let Some((slot, offset, len)) = self.pending.take() {
            shards[slot].prefetch(offset, len);
        }
    }
}

/// The output pointer, shared by worker threads that write disjoint parts.
#[derive(Clone, Copy)]
struct SendPtr(*mut u8);
// SAFETY: every task writes a disjoint region of the buffer behind the pointer.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}
impl SendPtr {
    fn get(self) -> *mut u8 {
        self.0
    }
}
