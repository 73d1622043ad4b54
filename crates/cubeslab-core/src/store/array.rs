//! A Zarr v3 array: open or create it, read any window into a caller's
//! buffer in parallel (writes: `array_write.rs`).

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use serde_json::Value;
use zarrs::{
    array::{Array, ArrayBytes, ArrayMetadata, ArrayMetadataV3, ArraySubset, CodecOptions},
    filesystem::FilesystemStore,
};

use super::{
    claims::Outer,
    decoded::{decoded_cache_bytes, DecodedCache},
    identity::{recorded_generation, ShardIdentity},
    metadata::{metadata_error, read_metadata, u64_list},
    shard::ShardFile,
    shard_codecs::Sharding,
    write_json_atomic, ArraySpec, BufferPool, Durability, StoreError,
};
use crate::{
    compress::Compression,
    config::Parallelism,
    dtype::DType,
    error::Result,
    window::{unravel, Window, MAX_DIMS},
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

/// An open Zarr v3 array.
pub struct ZarrArray {
    pub(super) dir: PathBuf,
    pub(super) array: Array<FilesystemStore>,
    pub(super) shape: Vec<u64>,
    pub(super) dtype: DType,
    pub(super) chunk_shape: Vec<u64>,
    pub(super) fill: Vec<u8>,
    metadata: Value,
    pub(super) sharded: Option<Sharding>,
    /// The compressor unsharded chunks start with (checked against bombs).
    outer: Outer,
    /// Whether unsharded chunks are compressed lossily (their writes are measured).
    pub(super) lossy_chunks: bool,
    pub(super) shards: Mutex<HashMap<Vec<u64>, Arc<ShardFile>>>,
    /// The generation of the store that wrote the array, if it recorded one:
    /// then every shard carries its identity, and every shard was written.
    generation: Option<u64>,
    /// The array's name in its store (its folder's name), for identities.
    name: String,
    /// Decoded chunks of compressed shards, for reads that come back to them.
    pub(super) decoded: DecodedCache,
    /// Shard buffers written and kept for the next shards built
    /// ([`Self::recycle_buffers`]).
    pub(super) buffers: BufferPool,
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
        // Built from the document as read here, which takes zarr-python's non-finite attribute words.
        let parsed: ArrayMetadataV3 = serde_json::from_value(metadata.clone())
            .map_err(|e| metadata_error(&dir, e.to_string()))?;
        let array = Array::new_with_metadata(Arc::new(store), "/", ArrayMetadata::V3(parsed))
            .map_err(|e| metadata_error(&dir, e.to_string()))?;
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
        let sharded = Sharding::from_metadata(&dir, &metadata, shape.len(), &chunk_shape)?;
        let codecs = metadata
            .get("codecs")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        let outer = Outer::of(codecs);
        let lossy_chunks = Compression::from_codecs(codecs).is_some_and(|c| c.is_lossy());
        let generation = metadata
            .get("attributes")
            .and_then(Value::as_object)
            .and_then(recorded_generation);
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(Self {
            dir,
            array,
            shape,
            dtype,
            chunk_shape,
            fill,
            metadata,
            sharded,
            outer,
            lossy_chunks,
            shards: Mutex::new(HashMap::new()),
            generation,
            name,
            decoded: DecodedCache::new(decoded_cache_bytes()),
            buffers: BufferPool::default(),
        })
    }

    /// Open the array in `dir` to read it: refused, as the store is, when
    /// the group holding it records an ingest that did not finish (its
    /// missing shards would read as fill values), or when the array and its
    /// group belong to different stores.
    pub fn open_to_read(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let group = dir
            .parent()
            .filter(|p| p.join("zarr.json").is_file())
            .and_then(|p| super::Group::open(p).ok());
        if let Some(group) = &group {
            group.require_readable()?;
        }
        let array = Self::open(dir)?;
        if let (Some(group), Some(mine)) = (&group, array.generation) {
            let theirs = recorded_generation(&group.attributes);
            if theirs.is_some_and(|g| g != mine) {
                // Read the group again: if it changed meanwhile, an overwrite
                // swapped the store between the two reads.
                let now = super::Group::open(&group.path)
                    .ok()
                    .and_then(|g| recorded_generation(&g.attributes));
                return Err(if now != theirs {
                    StoreError::Changed {
                        path: group.path.clone(),
                    }
                } else {
                    StoreError::Misplaced {
                        array: dir.to_path_buf(),
                        key: "zarr.json".into(),
                        message:
                            "the array belongs to another store than its group (it was copied here)"
                                .into(),
                    }
                }
                .into());
            }
        }
        Ok(array)
    }

    /// The generation of the store that wrote the array, if recorded.
    pub fn generation(&self) -> Option<u64> {
        self.generation
    }

    /// The identity a shard at `key` of this array carries, if the store
    /// that wrote the array gives shards one.
    pub(super) fn shard_identity(&self, key: &str) -> Option<ShardIdentity> {
        self.generation.map(|generation| ShardIdentity {
            generation,
            array: self.name.clone(),
            key: key.to_string(),
        })
    }

    /// Whether another store now sits where this array was opened (an
    /// overwrite swapped it in): its `zarr.json` records another generation.
    fn replaced(&self) -> bool {
        let now = read_metadata(&self.dir).ok().and_then(|m| {
            m.get("attributes")
                .and_then(Value::as_object)
                .and_then(recorded_generation)
        });
        now != self.generation
    }

    /// Create a new array in `dir` (which must not hold one), writing its metadata.
    pub fn create(dir: impl AsRef<Path>, spec: &ArraySpec) -> Result<Self> {
        let dir = dir.as_ref();
        spec.check()
            .map_err(|message| metadata_error(dir, message))?;
        let metadata = spec.metadata();
        // Let zarrs validate the document before anything is written.
        serde_json::from_value::<ArrayMetadata>(metadata.clone())
            .map_err(|e| metadata_error(dir, e.to_string()))?;
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        write_json_atomic(&dir.join("zarr.json"), &metadata, Durability::Cached)?;
        Self::open(dir)
    }

    /// Add `extra` to the attributes in the array's `zarr.json`, rewritten
    /// atomically (this handle keeps the metadata it was opened with).
    pub fn add_attributes(&self, extra: &serde_json::Map<String, Value>) -> Result<()> {
        let path = self.dir.join("zarr.json");
        let mut metadata = read_metadata(&self.dir)?;
        let attributes = metadata
            .as_object_mut()
            .ok_or_else(|| metadata_error(&self.dir, String::from("zarr.json is not an object")))?
            .entry("attributes")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(map) = attributes.as_object_mut() {
            map.extend(extra.clone());
        }
        write_json_atomic(&path, &metadata, Durability::Cached)
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

    /// Read `window` into `out` (native-endian C-order bytes of the window's shape).
    pub fn read_into(&self, window: &Window, out: &mut [u8], options: &ReadOptions) -> Result<()> {
        if window.check_buffer(&self.shape, self.dtype.size(), out.len())? == 0 {
            return Ok(());
        }
        match &self.sharded {
            // A 0-d array (one element) has nothing to plan: zarrs reads it.
            Some(sharding) if !self.shape.is_empty() => {
                self.read_sharded(sharding, window, out, options)
            }
            _ if options.parallelism.on_caller() => self.read_generic(window, out, options),
            _ => options
                .parallelism
                .pool()
                .install(|| self.read_generic(window, out, options)),
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
        let bbox = window.bounding_box();
        if self.sharded.is_none() && self.outer != Outer::Other {
            self.check_claims(&bbox)?;
        }
        let codec_options = CodecOptions::default()
            .with_validate_checksums(options.verify)
            // zarrs fans out into the current pool; a one-thread read stays on its thread.
            .with_concurrent_target(options.parallelism.threads);
        let codec_error = |e: String| StoreError::Codec {
            array: self.dir.clone(),
            key: "(zarrs read)".into(),
            message: e,
        };
        let bytes = self
            .array
            .retrieve_array_subset_opt::<ArrayBytes<'static>>(
                &ArraySubset::new_with_ranges(&bbox),
                &codec_options,
            )
            .map_err(|e| codec_error(e.to_string()))?
            .into_fixed()
            .map_err(|e| codec_error(e.to_string()))?;
        window.pick_from_box(&bytes, out, self.dtype.size());
        Ok(())
    }

    /// Refuse to decode any chunk of the box whose compressed header claims
    /// more bytes than a chunk holds (zarrs would allocate what it claims).
    fn check_claims(&self, bbox: &[std::ops::Range<u64>]) -> Result<()> {
        let first: Vec<u64> = bbox
            .iter()
            .zip(&self.chunk_shape)
            .map(|(r, c)| r.start / c)
            .collect();
        let count: Vec<u64> = bbox
            .iter()
            .zip(&self.chunk_shape)
            .zip(&first)
            .map(|((r, c), f)| (r.end - 1) / c + 1 - f)
            .collect();
        let limit = self.chunk_shape.iter().product::<u64>() as usize * self.dtype.size();
        for i in 0..count.iter().product::<u64>() {
            let at = unravel(i, &count);
            let indices: Vec<u64> = (0..first.len()).map(|d| first[d] + at[d]).collect();
            let path = self.chunk_path(&indices);
            let mut head = [0u8; 18];
            let n = match std::fs::File::open(&path) {
                Ok(mut f) => {
                    std::io::Read::read(&mut f, &mut head).map_err(|e| Error::io(&path, e))?
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io(&path, e)),
            };
            self.outer
                .check(&head[..n], limit)
                .map_err(|message| StoreError::Corrupt {
                    array: self.dir.clone(),
                    key: self.array.chunk_key(&indices).as_str().to_string(),
                    message,
                })?;
        }
        Ok(())
    }

    /// Keep up to `bytes` of the buffers of shards written, for the next
    /// shards built: for a writer that builds many (an ingest), within
    /// the memory it planned for them. 0, the default, keeps none.
    pub fn recycle_buffers(&self, bytes: usize) {
        self.buffers.set_limit(bytes);
    }

    /// Drop a cached open shard (after it was rewritten).
    pub(super) fn forget_shard(&self, indices: &[u64]) {
        self.shards
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(indices);
        self.decoded.forget_shard(self.shard_id(indices));
    }

    /// Drop the open shards that another process has replaced (or created,
    /// or removed) since this handle mapped them, with their decoded chunks,
    /// so that later reads see the files as they are now: one `stat` per
    /// shard held. Whether any was dropped.
    pub fn forget_replaced_shards(&self) -> bool {
        let held: Vec<(Vec<u64>, Option<u64>, String)> = self
            .shards
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(indices, shard)| (indices.clone(), shard.inode, shard.key.clone()))
            .collect();
        let mut replaced = false;
        for (indices, inode, key) in held {
            let now = std::fs::metadata(self.path().join(&key))
                .ok()
                .map(|m| std::os::unix::fs::MetadataExt::ino(&m));
            if now != inode {
                self.forget_shard(&indices);
                replaced = true;
            }
        }
        replaced
    }

    /// Drop what this handle holds of the shard at `indices` (its open file
    /// and decoded chunks) unless it is the file with `inode` (`None`: no
    /// file): a writer about to read the shard must see the version it
    /// stamped, not one another writer has replaced since this handle read it.
    pub(crate) fn forget_shard_unless(&self, indices: &[u64], inode: Option<u64>) {
        let current = self.held_shard(indices).is_some_and(|s| s.inode == inode);
        if !current {
            self.forget_shard(indices);
        }
    }

    /// A shard's position in the grid of shards, C order.
    fn shard_id(&self, indices: &[u64]) -> u64 {
        let grid = self.chunk_grid_shape();
        indices.iter().zip(&grid).fold(0, |id, (i, n)| id * n + i)
    }

    /// The shard at `indices` if this handle holds it open already.
    pub(super) fn held_shard(&self, indices: &[u64]) -> Option<Arc<ShardFile>> {
        self.shards
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(indices)
            .cloned()
    }

    /// Open the shard at `indices` from its file, and keep it open in this
    /// handle. A shard opened to be read `whole` has all its bytes requested
    /// at once; otherwise only its index.
    pub(super) fn open_new_shard(
        &self,
        sharding: &Sharding,
        indices: &[u64],
        whole: bool,
    ) -> Result<Arc<ShardFile>> {
        let key = self.array.chunk_key(indices);
        let expected = self.shard_identity(key.as_str());
        let shard = ShardFile::open(
            &self.dir,
            &self.dir.join(key.as_str()),
            key.as_str(),
            self.shard_id(indices),
            &sharding.layout,
            expected.as_ref(),
            whole,
        )
        .map_err(|error| match error.part::<StoreError>() {
            // A shard gone or foreign because the whole store was replaced is
            // not damage: say what happened.
            Some(StoreError::MissingShard { .. } | StoreError::Misplaced { .. })
                if self.replaced() =>
            {
                StoreError::Changed {
                    path: self.dir.clone(),
                }
                .into()
            }
            _ => error,
        })?;
        let shard = Arc::new(shard);
        let mut cache = self.shards.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= MAX_CACHED_SHARDS {
            cache.clear();
        }
        cache.insert(indices.to_vec(), shard.clone());
        Ok(shard)
    }
}
