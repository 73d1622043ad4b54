//! Window writes into an existing array, through a write-back cache of
//! decoded chunks bounded in bytes (the SEP buffers library's memory limit).
//!
//! The unit of caching is the array's chunk: for a sharded array its shard,
//! the unit its files are replaced in. A write that covers a whole chunk
//! starts it from nothing; a partial one reads the chunk first. Reads see
//! the cache. The least recently used chunks are evicted past the bound,
//! dirty ones written back whole (a file renamed into place, or one object
//! put), so a crash leaves every chunk either as it was or as it was
//! written.
//!
//! Two writers may share a store: a chunk is written back only if the
//! version there is still the one this writer read (or found absent),
//! checked and replaced as one step (under a lock on the chunk, or by a
//! conditional put); otherwise the write-back is refused with
//! `StoreError::Conflict`, never silently merged. Where the chunks live is
//! a [`ChunkStorage`].

mod copy;
mod local;
mod storage;

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, Ordering},
        Mutex,
    },
};

use serde::Serialize;
use serde_json::Value;

use rayon::prelude::*;

use copy::{for_each_combination, scatter};
pub use local::LocalChunks;
pub use storage::{ChunkStorage, Stamp};

use crate::{
    compress::{ChunkErrors, Compression},
    config::{max_threads, Parallelism},
    error::Result,
    store::{ReadOptions, StoreError, ZarrArray},
    window::{chunk_spans, strides, ChunkSpan, Placement, Window, MAX_DIMS},
};

/// The write-back cache's bound unless the caller gives one.
pub const DEFAULT_CACHE_BYTES: u64 = 512 << 20;

/// What a write-back cache did, for `cache_info()`.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct CacheInfo {
    /// Chunk lookups that found the chunk cached.
    pub hits: u64,
    /// Lookups that did not (the chunk was read, or started empty).
    pub misses: u64,
    /// Chunks dropped to stay within the bound.
    pub evictions: u64,
    /// Chunks written back (by eviction or flush).
    pub flushes: u64,
    /// Bytes of the chunks held now.
    pub bytes: u64,
    /// Bytes of the chunks held now with writes not yet on disk.
    pub dirty_bytes: u64,
    /// The bound.
    pub limit: u64,
}

struct Cached {
    /// The chunk's elements, C order, its full (unclipped) shape.
    data: Vec<u8>,
    dirty: bool,
    stamp: Stamp,
    last_use: u64,
}

#[derive(Default)]
struct Chunks {
    held: HashMap<Vec<u64>, Cached>,
    clock: u64,
    info: CacheInfo,
}

/// An array open for writing.
pub struct ArrayWriter {
    storage: Box<dyn ChunkStorage>,
    /// The error of the lossy chunks written back, not yet recorded.
    rewrites: Mutex<ChunkErrors>,
    chunks: Mutex<Chunks>,
    limit: u64,
    /// Chunks are compressed lossily: never decoded to be encoded again.
    lossy: bool,
    /// Whether the writes since the last flush are counted in the array's
    /// [`DATA_VERSION`] already.
    versioned: AtomicBool,
}

/// Windows of at least this many bytes are copied into their chunks on all threads.
const PARALLEL_WRITE_BYTES: usize = 1 << 20;

/// The attribute (inside `cubeslab`) counting the flushes that changed an
/// array's data: what derived arrays (overview levels) record they were
/// made from, so that a later write shows them stale.
pub const DATA_VERSION: &str = "data_version";

/// Start counting the array at `path`'s data version (at 0) if it is not
/// counted yet; returns the version now. Writes count it from then on.
pub fn track_data_version(path: &Path) -> Result<u64> {
    let mut version = 0;
    local::update_metadata(path, &mut |metadata| {
        if let Some(counted) = metadata["attributes"]["cubeslab"][DATA_VERSION].as_u64() {
            version = counted;
            return false;
        }
        metadata["attributes"]["cubeslab"][DATA_VERSION] = serde_json::json!(0);
        true
    })?;
    Ok(version)
}

impl ArrayWriter {
    /// Open the array at `path` for window writes, holding at most `limit`
    /// bytes of decoded chunks (at least one chunk, whatever the bound).
    pub fn open(path: &Path, limit: u64) -> Result<Self> {
        Ok(Self::on(Box::new(LocalChunks::open(path)?), limit))
    }

    /// Write to the array that `storage` holds, through a cache of at most
    /// `limit` bytes.
    pub fn on(storage: Box<dyn ChunkStorage>, limit: u64) -> Self {
        let array = storage.array();
        let metadata = array.metadata();
        let chain = if array.inner_chunk_shape().is_some() {
            metadata.pointer("/codecs/0/configuration/codecs")
        } else {
            metadata.get("codecs")
        };
        let lossy = chain
            .and_then(Value::as_array)
            .and_then(|codecs| Compression::from_codecs(codecs))
            .is_some_and(|c| c.is_lossy());
        // A write-back builds its shard and may encode it into a second
        // buffer; kept for the next ones (within an eighth of the cache),
        // they are not freed into, and held by, every thread's allocator.
        let chunk_bytes = array.chunk_shape().iter().product::<u64>() * array.dtype().size() as u64;
        array.recycle_buffers((2 * max_threads() as u64 * chunk_bytes).min(limit / 8) as usize);
        Self {
            storage,
            rewrites: Mutex::new(ChunkErrors::default()),
            chunks: Mutex::new(Chunks::default()),
            limit,
            lossy,
            versioned: AtomicBool::new(false),
        }
    }

    /// The array written to: its geometry and codecs (its data may live
    /// elsewhere; read it through [`Self::read_into`]).
    pub fn array(&self) -> &ZarrArray {
        self.storage.array()
    }

    /// The name of the array written to, for messages.
    pub fn name(&self) -> PathBuf {
        self.storage.metadata_name()
    }

    fn chunk_bytes(&self) -> usize {
        self.array().chunk_shape().iter().product::<u64>() as usize * self.array().dtype().size()
    }

    /// Write `data` (native-endian C-order elements of the window's shape)
    /// into `window`.
    pub fn write(&self, window: &Window, data: &[u8]) -> Result<()> {
        let elem = self.array().dtype().size();
        if window.check_buffer(self.array().shape(), elem, data.len())? == 0 {
            return Ok(());
        }
        let chunk = self.array().chunk_shape().to_vec();
        let per_dim = spans_by_dim(window, &chunk);
        let window_strides = strides(&window.shape());
        let chunk_strides = strides(&chunk);
        let mut chunks = self.chunks.lock().unwrap_or_else(|p| p.into_inner());
        let mut touched: Vec<(Vec<ChunkSpan>, bool)> = Vec::new();
        for_each_combination(&per_dim, |spans| {
            let whole = spans.iter().zip(&window.dims).zip(&chunk).enumerate().all(
                |(d, ((s, range), &c))| {
                    let side = c.min(self.array().shape()[d] - s.chunk * c);
                    s.first == 0 && s.count == side && (range.step == 1 || s.count == 1)
                },
            );
            touched.push((spans.to_vec(), whole));
            Ok(())
        })?;
        if self.lossy {
            // A lossy chunk decoded and encoded again would add a second error to the values
            // this write leaves alone, past the bound the store records.
            if let Some((spans, _)) = touched.iter().find(|(spans, whole)| {
                !whole
                    && !chunks
                        .held
                        .contains_key(&spans.iter().map(|s| s.chunk).collect::<Vec<_>>())
            }) {
                let indices: Vec<u64> = spans.iter().map(|s| s.chunk).collect();
                return Err(StoreError::Unsupported {
                    path: self.storage.chunk_name(&indices),
                    what: format!(
                        "a write to part of a chunk of a lossily compressed array: its other values \
                         would be compressed a second time, adding to their error past the bound the \
                         store records; write whole chunks ({:?}), or use a lossless store",
                        chunk
                    ),
                }
                .into());
            }
        }
        // Every chunk the window touches, cached (read first where the
        // window covers part of it), then taken out to be written into.
        // (None leaves the cache before all are in, so a failed read loses nothing.)
        for (spans, whole) in &touched {
            let indices: Vec<u64> = spans.iter().map(|s| s.chunk).collect();
            self.get(&mut chunks, &indices, !whole)?;
        }
        let mut targets: Vec<(&[ChunkSpan], Vec<u64>, Cached)> = touched
            .iter()
            .map(|(spans, _)| {
                let indices: Vec<u64> = spans.iter().map(|s| s.chunk).collect();
                let cached = chunks.held.remove(&indices).expect("cached just above");
                (spans.as_slice(), indices, cached)
            })
            .collect();
        let fill = |(spans, _, cached): &mut (&[ChunkSpan], Vec<u64>, Cached)| {
            scatter(
                spans,
                data,
                &window_strides,
                &mut cached.data,
                &chunk_strides,
                &window.dims,
                elem,
            )
        };
        // A plane across many chunks puts each element on a cache line of
        // its own: the chunks are filled on all threads.
        if targets.len() > 1 && data.len() >= PARALLEL_WRITE_BYTES {
            Parallelism::default()
                .pool()
                .install(|| targets.par_iter_mut().for_each(fill));
        } else {
            targets.iter_mut().for_each(fill);
        }
        for (_, indices, mut cached) in targets {
            if !cached.dirty {
                cached.dirty = true;
                chunks.info.dirty_bytes += self.chunk_bytes() as u64;
            }
            chunks.held.insert(indices, cached);
        }
        self.evict(&mut chunks)
    }

    /// The cached chunk at `indices`, read from disk first if `read` (else
    /// started empty: the caller overwrites all of it).
    fn get<'a>(
        &self,
        chunks: &'a mut Chunks,
        indices: &[u64],
        read: bool,
    ) -> Result<&'a mut Cached> {
        chunks.clock += 1;
        let clock = chunks.clock;
        if chunks.held.contains_key(indices) {
            chunks.info.hits += 1;
        } else {
            chunks.info.misses += 1;
            let stamp = self.storage.stamp(indices)?;
            // A chunk absent from an array that does not record a generation
            // is the fill value (in one that does, reading it is an error).
            let absent = stamp == Stamp::Absent && self.array().generation().is_none();
            let data = if read && !absent {
                self.read_chunk(indices)?
            } else {
                self.array()
                    .fill_bytes()
                    .repeat(self.chunk_bytes() / self.array().dtype().size())
            };
            chunks.info.bytes += data.len() as u64;
            chunks.held.insert(
                indices.to_vec(),
                Cached {
                    data,
                    dirty: false,
                    stamp,
                    last_use: clock,
                },
            );
        }
        let cached = chunks.held.get_mut(indices).expect("inserted above");
        cached.last_use = clock;
        Ok(cached)
    }

    /// The chunk at `indices` as stored, in its full shape (edge chunks
    /// padded with the fill value).
    fn read_chunk(&self, indices: &[u64]) -> Result<Vec<u8>> {
        let chunk = self.array().chunk_shape();
        let region = Window::of_chunk(indices, chunk, self.array().shape());
        let clipped = region.shape();
        let elem = self.array().dtype().size();
        let mut part = vec![0u8; region.num_elements() as usize * elem];
        self.storage
            .read_into(&region, &mut part, &ReadOptions::default())?;
        if clipped.as_slice() == chunk {
            return Ok(part);
        }
        let mut full = self.array().fill_bytes().repeat(self.chunk_bytes() / elem);
        let spans: Vec<ChunkSpan> = clipped
            .iter()
            .map(|&n| ChunkSpan {
                chunk: 0,
                first: 0,
                count: n,
                out_first: 0,
            })
            .collect();
        let (src, dst, steps) = (strides(&clipped), strides(chunk), [1u64; MAX_DIMS]);
        let placement = Placement {
            src_strides: &src,
            dst_strides: &dst,
            steps: &steps,
            ndim: chunk.len(),
            elem,
        };
        // SAFETY: `full` holds a whole chunk, which contains the clipped region.
        unsafe { placement.copy(&spans, &part, full.as_mut_ptr()) };
        Ok(full)
    }

    /// Past the bound, evict least recently used chunks down
    /// to seven eighths of it, writing the dirty ones back in parallel. A
    /// chunk whose write-back fails stays cached, dirty.
    fn evict(&self, chunks: &mut Chunks) -> Result<()> {
        if chunks.info.bytes <= self.limit || chunks.held.len() <= 1 {
            return Ok(());
        }
        let mut order: Vec<(u64, Vec<u64>)> = chunks
            .held
            .iter()
            .map(|(k, c)| (c.last_use, k.clone()))
            .collect();
        order.sort_unstable();
        let low_water = self.limit - self.limit / 8;
        let mut bytes = chunks.info.bytes;
        let mut victims = Vec::new();
        for (_, key) in order {
            if bytes <= low_water || chunks.held.len() <= 1 {
                break;
            }
            let cached = chunks.held.remove(&key).expect("listed above");
            bytes -= cached.data.len() as u64;
            victims.push((key, cached));
        }
        let results = self.write_back_all(victims.iter().filter(|(_, c)| c.dirty));
        let mut failure = None;
        let mut failed = Vec::new();
        for ((key, _), result) in victims.iter().filter(|(_, c)| c.dirty).zip(results) {
            match result {
                Ok(_) => chunks.info.flushes += 1,
                Err(error) => {
                    failed.push(key.clone());
                    failure.get_or_insert(error);
                }
            }
        }
        for (key, cached) in victims {
            if failed.contains(&key) {
                chunks.held.insert(key, cached);
                continue;
            }
            chunks.info.bytes -= cached.data.len() as u64;
            chunks.info.evictions += 1;
            if cached.dirty {
                chunks.info.dirty_bytes -= cached.data.len() as u64;
            }
        }
        failure.map_or(Ok(()), Err)
    }

    /// Write chunks back in parallel; one result per chunk, in order.
    fn write_back_all<'a>(
        &self,
        dirty: impl Iterator<Item = &'a (Vec<u64>, Cached)>,
    ) -> Vec<Result<Stamp>> {
        let dirty: Vec<&(Vec<u64>, Cached)> = dirty.collect();
        if dirty.is_empty() {
            return Vec::new();
        }
        // Counted before any chunk changes, so that a crash midway still shows the change.
        if let Err(error) = self.count_data_version() {
            let mut results = vec![Err(error)];
            results.extend(dirty[1..].iter().map(|_| {
                Err(StoreError::Metadata {
                    path: self.storage.metadata_name(),
                    message: "chunk not written: its data version could not be counted".into(),
                }
                .into())
            }));
            return results;
        }
        if dirty.len() <= 1 {
            return dirty.iter().map(|(k, c)| self.write_back(k, c)).collect();
        }
        // Write-backs mostly wait on the device: as many at once as a call may
        // have threads, so that it sees a deep queue (with a thread per core,
        // chunk-order writes ran 25-35 % slower here).
        Parallelism::resolve(Some(max_threads()), None)
            .pool()
            .install(|| {
                dirty
                    .par_iter()
                    .map(|(k, c)| self.write_back(k, c))
                    .collect()
            })
    }

    /// Write one chunk back, only over the version it was read from; the
    /// version written.
    fn write_back(&self, indices: &[u64], cached: &Cached) -> Result<Stamp> {
        let (stamp, errors) = self
            .storage
            .replace_chunk(indices, &cached.data, &cached.stamp)?;
        if let Some(errors) = errors {
            self.rewrites
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .merge(&errors);
        }
        Ok(stamp)
    }

    /// Add one to the array's [`DATA_VERSION`], once per flush that writes.
    fn count_data_version(&self) -> Result<()> {
        if self.versioned.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let counted = self.storage.update_metadata(&mut |metadata| {
            // Counted only for an array something was derived from (track_data_version).
            let Some(version) = metadata["attributes"]["cubeslab"][DATA_VERSION].as_u64() else {
                return false;
            };
            metadata["attributes"]["cubeslab"][DATA_VERSION] = serde_json::json!(version + 1);
            true
        });
        if counted.is_err() {
            self.versioned.store(false, Ordering::SeqCst);
        }
        counted
    }

    /// Record in the array's attributes (`cubeslab.rewrites`) the error of
    /// the lossy chunks written back since the last record, merged with
    /// what earlier writers recorded: what `info` reports besides the
    /// ingest's error.
    fn record_rewrites(&self) -> Result<()> {
        let errors = std::mem::take(&mut *self.rewrites.lock().unwrap_or_else(|p| p.into_inner()));
        if errors.chunks == 0 {
            return Ok(());
        }
        self.storage
            .update_metadata(&mut |metadata| merge_rewrites(metadata, &errors))
    }

    /// Write every dirty chunk back, in parallel; the chunks stay cached, clean.
    pub fn flush(&self) -> Result<()> {
        let mut chunks = self.chunks.lock().unwrap_or_else(|p| p.into_inner());
        let mut dirty: Vec<(Vec<u64>, Cached)> = Vec::new();
        let keys: Vec<Vec<u64>> = chunks
            .held
            .iter()
            .filter(|(_, c)| c.dirty)
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            let cached = chunks.held.remove(&key).expect("listed above");
            dirty.push((key, cached));
        }
        dirty.sort_by(|a, b| a.0.cmp(&b.0));
        let results = self.write_back_all(dirty.iter());
        let mut failure = None;
        let results_ok = results.iter().all(Result::is_ok);
        for ((key, mut cached), result) in dirty.into_iter().zip(results) {
            match result {
                Ok(stamp) => {
                    cached.dirty = false;
                    cached.stamp = stamp;
                    chunks.info.dirty_bytes -= cached.data.len() as u64;
                    chunks.info.flushes += 1;
                }
                Err(error) => {
                    failure.get_or_insert(error);
                }
            }
            chunks.held.insert(key, cached);
        }
        if results_ok {
            self.record_rewrites()?;
            self.versioned.store(false, Ordering::SeqCst);
        }
        failure.map_or(Ok(()), Err)
    }

    /// Read `window` into `out`, the cache's writes included.
    pub fn read_into(&self, window: &Window, out: &mut [u8], options: &ReadOptions) -> Result<()> {
        let chunks = self.chunks.lock().unwrap_or_else(|p| p.into_inner());
        self.storage.read_into(window, out, options)?;
        if !chunks.held.values().any(|c| c.dirty) {
            return Ok(());
        }
        let chunk = self.array().chunk_shape().to_vec();
        let per_dim = spans_by_dim(window, &chunk);
        let steps = {
            let mut s = [1u64; MAX_DIMS];
            for (d, r) in window.dims.iter().enumerate() {
                s[d] = r.step;
            }
            s
        };
        let (src, dst) = (strides(&chunk), strides(&window.shape()));
        let placement = Placement {
            src_strides: &src,
            dst_strides: &dst,
            steps: &steps,
            ndim: chunk.len(),
            elem: self.array().dtype().size(),
        };
        for_each_combination(&per_dim, |spans| -> Result<()> {
            let indices: Vec<u64> = spans.iter().map(|s| s.chunk).collect();
            if let Some(cached) = chunks.held.get(&indices).filter(|c| c.dirty) {
                // SAFETY: the spans lie inside the chunk and the window, and
                // `out` holds the whole window (checked by the read above).
                unsafe { placement.copy(spans, &cached.data, out.as_mut_ptr()) };
            }
            Ok(())
        })
    }

    /// What the cache did so far.
    pub fn cache_info(&self) -> CacheInfo {
        let chunks = self.chunks.lock().unwrap_or_else(|p| p.into_inner());
        CacheInfo {
            limit: self.limit,
            ..chunks.info
        }
    }
}

/// Per dimension, the chunks a window touches and its part of each.
fn spans_by_dim(window: &Window, chunk: &[u64]) -> Vec<Vec<ChunkSpan>> {
    window
        .dims
        .iter()
        .zip(chunk)
        .map(|(range, &c)| chunk_spans(range, c))
        .collect()
}

impl Drop for ArrayWriter {
    /// A writer dropped with changes still cached writes them: nothing is
    /// lost because a caller forgot `flush`. An error here has no caller to
    /// go to, so it is printed.
    fn drop(&mut self) {
        if let Err(error) = self.flush() {
            eprintln!(
                "cubeslab: writing the cached changes of {} failed: {error}",
                self.name().display()
            );
        }
    }
}

/// Record in the array in `dir` the error of lossy chunks written outside a
/// writer (shards built whole), as the writer records its write-backs.
pub(crate) fn record_lossy_writes(dir: &Path, errors: &ChunkErrors) -> Result<()> {
    local::update_metadata(dir, &mut |metadata| merge_rewrites(metadata, errors))
}

/// Merge `errors` into the record of rewritten lossy chunks in `metadata`
/// (`attributes.cubeslab.rewrites`); always a change.
fn merge_rewrites(metadata: &mut Value, errors: &ChunkErrors) -> bool {
    let record = &mut metadata["attributes"]["cubeslab"]["rewrites"];
    let earlier_chunks = record["chunks"].as_u64().unwrap_or(0);
    let earlier_max = record["max_abs_error"].as_f64().unwrap_or(0.0);
    let max_abs = errors.total.max_abs_error.max(earlier_max);
    let mut merged = serde_json::json!({
        "chunks": earlier_chunks + errors.chunks,
        "max_abs_error": max_abs,
    });
    let new_worst = errors.worst_snr.as_ref().filter(|(db, _)| db.is_finite());
    let keep_earlier = match (new_worst, record["worst_chunk_snr"]["snr_db"].as_f64()) {
        (Some((db, _)), Some(earlier)) => earlier <= *db,
        (None, _) => true,
        (Some(_), None) => false,
    };
    merged["worst_chunk_snr"] = match new_worst {
        Some((db, key)) if !keep_earlier => serde_json::json!({"chunk": key, "snr_db": db}),
        _ => record["worst_chunk_snr"].clone(),
    };
    *record = merged;
    true
}
