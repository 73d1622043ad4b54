//! Window writes into an existing array, through a write-back cache of
//! decoded chunks bounded in bytes (the SEP buffers library's memory limit).
//!
//! The unit of caching is the array's chunk: for a sharded array its shard,
//! the unit its files are replaced in. A write that covers a whole chunk
//! starts it from nothing; a partial one reads the chunk first (a run of
//! planes across the chunks' fastest axis is held back and copied in
//! together, `staging.rs`). Reads see the cache. The least recently used
//! chunks are evicted past the bound, dirty ones written back whole (a file
//! renamed into place, or one object put), so a crash leaves every chunk
//! either as it was or as it was written.
//!
//! Two writers may share a store: a chunk is written back only if the
//! version there is still the one this writer read (or found absent),
//! checked and replaced as one step (under a lock on the chunk, or by a
//! conditional put); otherwise the write-back is refused with
//! `StoreError::Conflict`, never silently merged. Where the chunks live is
//! a [`ChunkStorage`].

mod local;
mod rewrites;
mod staging;
mod storage;
mod write_back;

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::Mutex,
};

use serde::Serialize;
use serde_json::Value;

use rayon::prelude::*;

pub use local::LocalChunks;
use rewrites::merge_rewrites;
pub(crate) use rewrites::record_lossy_writes;
use staging::Staged;
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
    /// Planes written and not yet copied into their chunks (which are held,
    /// and counted dirty, meanwhile).
    staged: Option<Staged>,
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
        let mut chunks = self.chunks.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(run) = chunks.staged.as_mut().filter(|run| run.continues(window)) {
            run.push(data);
            if run.is_full() {
                self.apply_staged(&mut chunks)?;
            }
            return Ok(());
        }
        self.apply_staged(&mut chunks)?;
        let run = (!self.lossy)
            .then(|| {
                let array = self.array();
                Staged::start(
                    window,
                    data,
                    array.chunk_shape(),
                    array.shape(),
                    elem,
                    self.limit / 8,
                )
            })
            .flatten();
        let Some(run) = run else {
            return self.place(&mut chunks, window, data, &strides(&window.shape()));
        };
        // The run's chunks are read now, so that this call reports what
        // fails; held dirty until the run is copied in.
        for indices in self.claim(&mut chunks, window)? {
            self.mark_dirty(&mut chunks, &indices);
        }
        chunks.info.bytes += run.reserved();
        chunks.staged = Some(run);
        self.evict(&mut chunks)
    }

    /// Copy the planes held back into their chunks.
    fn apply_staged(&self, chunks: &mut Chunks) -> Result<()> {
        let Some(run) = chunks.staged.take() else {
            return Ok(());
        };
        chunks.info.bytes -= run.reserved();
        let (window, data, block_strides) = run.into_block();
        self.place(chunks, &window, &data, &block_strides)
    }

    /// Every chunk `window` touches, cached (read first where the window
    /// covers only part of it); their grid indices.
    fn claim(&self, chunks: &mut Chunks, window: &Window) -> Result<Vec<Vec<u64>>> {
        let chunk = self.array().chunk_shape().to_vec();
        let per_dim = spans_by_dim(window, &chunk);
        let mut touched: Vec<(Vec<u64>, bool)> = Vec::new();
        for_each_combination(&per_dim, |spans| {
            let whole = spans.iter().zip(&window.dims).zip(&chunk).enumerate().all(
                |(d, ((s, range), &c))| {
                    let side = c.min(self.array().shape()[d] - s.chunk * c);
                    s.first == 0 && s.count == side && (range.step == 1 || s.count == 1)
                },
            );
            touched.push((spans.iter().map(|s| s.chunk).collect(), whole));
            Ok(())
        })?;
        if self.lossy {
            // A lossy chunk decoded and encoded again would add a second error to the values
            // this write leaves alone, past the bound the store records. One never written
            // holds the fill value, and one held in the cache has not been encoded yet.
            for (indices, whole) in &touched {
                if *whole || chunks.held.contains_key(indices) || self.never_written(indices)? {
                    continue;
                }
                return Err(StoreError::Unsupported {
                    path: self.storage.chunk_name(indices),
                    what: format!(
                        "a write to part of a shard of a lossily compressed array, written before: \
                         its other values would be compressed a second time, adding to their error \
                         past the bound the store records; write whole shards ({:?}, the unit a \
                         write encodes), or parts of shards not yet written, or use a lossless store",
                        chunk
                    ),
                }
                .into());
            }
        }
        // (None leaves the cache before all are in, so a failed read loses nothing.)
        for (indices, whole) in &touched {
            self.get(chunks, indices, !whole)?;
        }
        Ok(touched.into_iter().map(|(indices, _)| indices).collect())
    }

    /// Whether the chunk at `indices` was never written: absent, in an array
    /// that does not record a generation, so that it holds the fill value.
    fn never_written(&self, indices: &[u64]) -> Result<bool> {
        Ok(self.holds_fill(&self.storage.stamp(indices)?))
    }

    /// Whether a chunk of this stamp holds the fill value (in an array that
    /// records a generation, an absent chunk is an error to read).
    fn holds_fill(&self, stamp: &Stamp) -> bool {
        *stamp == Stamp::Absent && self.array().generation().is_none()
    }

    fn mark_dirty(&self, chunks: &mut Chunks, indices: &[u64]) {
        let cached = chunks.held.get_mut(indices).expect("claimed");
        if !cached.dirty {
            cached.dirty = true;
            chunks.info.dirty_bytes += cached.data.len() as u64;
        }
    }

    /// Copy `data` (elements of `window` at `window_strides`) into the
    /// chunks it touches, then keep the cache within its bound.
    fn place(
        &self,
        chunks: &mut Chunks,
        window: &Window,
        data: &[u8],
        window_strides: &[u64; MAX_DIMS],
    ) -> Result<()> {
        let chunk = self.array().chunk_shape().to_vec();
        let chunk_strides = strides(&chunk);
        let steps = window.steps();
        let placement = Placement {
            src_strides: &chunk_strides,
            dst_strides: window_strides,
            steps: &steps,
            ndim: chunk.len(),
            elem: self.array().dtype().size(),
        };
        let per_dim = spans_by_dim(window, &chunk);
        self.claim(chunks, window)?;
        let mut targets: Vec<(Vec<ChunkSpan>, Vec<u64>, Cached)> = Vec::new();
        for_each_combination(&per_dim, |spans| {
            let indices: Vec<u64> = spans.iter().map(|s| s.chunk).collect();
            let cached = chunks.held.remove(&indices).expect("claimed just above");
            targets.push((spans.to_vec(), indices, cached));
            Ok(())
        })?;
        let fill = |(spans, _, cached): &mut (Vec<ChunkSpan>, Vec<u64>, Cached)| {
            placement.copy_back(spans, data, &mut cached.data)
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
        for (_, indices, cached) in targets {
            chunks.held.insert(indices.clone(), cached);
            self.mark_dirty(chunks, &indices);
        }
        self.evict(chunks)
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
            let absent = self.holds_fill(&stamp);
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

    /// Read `window` into `out`, the cache's writes included.
    pub fn read_into(&self, window: &Window, out: &mut [u8], options: &ReadOptions) -> Result<()> {
        let mut chunks = self.chunks.lock().unwrap_or_else(|p| p.into_inner());
        self.apply_staged(&mut chunks)?;
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

    /// Drop the clean chunks another writer has replaced since this one
    /// read them, and what the array holds of such shards, so that reads
    /// and partial writes see the new versions; whether any was replaced.
    /// A dirty chunk stays: its write-back is refused as a conflict.
    pub fn forget_replaced(&self) -> Result<bool> {
        let mut chunks = self.chunks.lock().unwrap_or_else(|p| p.into_inner());
        let clean: Vec<(Vec<u64>, Stamp)> = chunks
            .held
            .iter()
            .filter(|(_, c)| !c.dirty)
            .map(|(k, c)| (k.clone(), c.stamp.clone()))
            .collect();
        let mut replaced = false;
        for (key, stamp) in clean {
            if self.storage.stamp(&key)? != stamp {
                let cached = chunks.held.remove(&key).expect("listed above");
                chunks.info.bytes -= cached.data.len() as u64;
                replaced = true;
            }
        }
        Ok(self.array().forget_replaced_shards() || replaced)
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

/// Call `f` with every combination of one span per dimension.
fn for_each_combination(
    per_dim: &[Vec<ChunkSpan>],
    mut f: impl FnMut(&[ChunkSpan]) -> Result<()>,
) -> Result<()> {
    if per_dim.iter().any(Vec::is_empty) {
        return Ok(());
    }
    let mut at = vec![0usize; per_dim.len()];
    let mut spans: Vec<ChunkSpan> = per_dim.iter().map(|s| s[0]).collect();
    loop {
        f(&spans)?;
        let mut d = per_dim.len();
        loop {
            if d == 0 {
                return Ok(());
            }
            d -= 1;
            at[d] += 1;
            if at[d] < per_dim[d].len() {
                spans[d] = per_dim[d][at[d]];
                break;
            }
            at[d] = 0;
            spans[d] = per_dim[d][0];
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
        match self.flush() {
            // The array's folder is gone (an ingest that failed removes its
            // staging folder): there is nothing left to write to.
            Err(error) if error.kind() == crate::error::ErrorKind::NotFound => {}
            Err(error) => eprintln!(
                "cubeslab: writing the cached changes of {} failed: {error}",
                self.name().parent().unwrap_or(&self.name()).display()
            ),
            Ok(()) => {}
        }
    }
}
