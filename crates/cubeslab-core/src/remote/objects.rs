//! The objects of one store, as zarrs reads them, without a HEAD request
//! before each read:
//! - a shard's index (the suffix of its object that zarrs asks for first) is
//!   fetched once per open array and kept, so a read of a shard already seen
//!   fetches only its chunks;
//! - zarrs asks for a shard's inner chunks all at once, one range each. The
//!   ranges that arrive together for one object are gathered into a batch,
//!   neighbours less than [`MERGE_GAP`] apart merged, and the merged spans
//!   cut into requests of one size (see [`request_bytes`]), fetched
//!   [`IN_FLIGHT`] at a time: fewer requests, as a client that knew the
//!   whole read would make, but enough running side by side (a read of
//!   many shards has that already; one of a single shard is cut up).

use std::{
    collections::HashMap,
    num::NonZeroUsize,
    ops::Range,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
};

use crate::store::{ShardIdentity, StoreError, MAX_IDENTITY_BLOCK};
use futures::{stream, StreamExt};
use lru::LruCache;
use object_store::{path::Path as Key, GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use zarrs::storage::{
    byte_range::{ByteRange, ByteRangeIterator},
    AsyncMaybeBytesIterator, AsyncReadableStorageTraits, Bytes, StorageError, StoreKey,
};

/// Shard indexes kept per open array.
const KEPT_INDEXES: usize = 4096;
/// Ranges less than this apart are fetched in one request: on the local
/// server measured here a request costs about as much as 100 KiB of data.
const MERGE_GAP: u64 = 128 << 10;
/// The bounds of one request's size. One response streams at a fraction of
/// what the server gives many at once (on the local server measured here
/// about 80 of 250 MB/s, as on S3), so a batch is cut into requests of
/// its bytes over [`STREAMS`], within these.
const LEAST_PER_REQUEST: u64 = 256 << 10;
const MOST_PER_REQUEST: u64 = 4 << 20;
/// Requests that all the batches fetched at once are cut into, where their
/// sizes allow.
const STREAMS: u64 = 8;
/// Reads of a whole object that another writer keeps replacing.
const MAX_REREADS: usize = 4;
/// Bytes asked for past a whole object's expected size: its index and
/// identity block, or a shard a little larger than the last one.
const EXPECTED_SLACK: u64 = 64 << 10;
/// Requests of one batch in flight at once.
const IN_FLIGHT: usize = 32;

type Reply = tokio::sync::oneshot::Sender<Result<Bytes, String>>;
/// Ranges of one object waiting to be fetched, each with where its bytes go.
type Batch = Vec<(Range<u64>, Reply)>;

/// What an array's shards must say of themselves: a store that records a
/// generation wrote each one with its identity (`store/identity.rs`).
pub(super) struct ExpectedShards {
    /// The array's name (the last segment of its key), for the identity.
    pub array: String,
    pub generation: u64,
    /// The length of a shard's index, at its end: a whole shard's identity
    /// block ends where it starts.
    pub index_bytes: Option<u64>,
}

/// One store's objects (keys under `prefix`).
pub(super) struct StoreObjects {
    client: Arc<dyn ObjectStore>,
    prefix: String,
    indexes: Mutex<LruCache<(String, u64), Bytes>>,
    /// Ranges waiting to be fetched, by object.
    batches: Mutex<HashMap<String, Batch>>,
    /// Batches being fetched now.
    fetching: AtomicU64,
    /// The expected size of a whole object (a shard): at first the size of
    /// its elements, then the size of the last one read.
    whole_size: AtomicU64,
    expected: Option<ExpectedShards>,
    /// The first shard found missing or misplaced: the error a read reports
    /// (zarrs passes storage errors on as text).
    refused: Mutex<Option<StoreError>>,
}

impl StoreObjects {
    /// The objects under `prefix`, shards of about `shard_bytes` each.
    pub fn new(
        client: Arc<dyn ObjectStore>,
        prefix: &str,
        shard_bytes: u64,
        expected: Option<ExpectedShards>,
    ) -> Self {
        Self {
            expected,
            refused: Mutex::new(None),
            whole_size: AtomicU64::new(shard_bytes),
            client,
            prefix: prefix.trim_matches('/').to_string(),
            indexes: Mutex::new(LruCache::new(
                NonZeroUsize::new(KEPT_INDEXES).expect("not zero"),
            )),
            batches: Mutex::new(HashMap::new()),
            fetching: AtomicU64::new(0),
        }
    }

    fn path(&self, key: &StoreKey) -> Result<Key, StorageError> {
        Key::parse(self.key_of(key.as_str())).map_err(|e| StorageError::Other(e.to_string()))
    }

    /// The object's key, exactly as written (see [`S3Url::object_key`]).
    fn key_of(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}/{key}", self.prefix)
        }
    }

    /// `bytes` fetched for `range` of the shard at `key`, its identity
    /// checked where they hold it: an index fetched with the block before it
    /// (given without), or a whole shard.
    fn checked(&self, key: &str, range: ByteRange, bytes: Bytes) -> Result<Bytes, StorageError> {
        let Some(expected) = &self.expected else {
            return Ok(bytes);
        };
        match range {
            ByteRange::Suffix(length) => {
                let end = bytes.len().saturating_sub(length as usize);
                self.check_identity(key, &bytes, end)?;
                Ok(bytes.slice(end..))
            }
            ByteRange::FromStart(0, None) => {
                if let Some(index) = expected.index_bytes {
                    let end = bytes.len().saturating_sub(index as usize);
                    self.check_identity(key, &bytes, end)?;
                }
                Ok(bytes)
            }
            _ => Ok(bytes),
        }
    }

    /// The shard found missing or misplaced since the last call, if any.
    pub fn take_refusal(&self) -> Option<StoreError> {
        self.refused.lock().expect("no panic holds it").take()
    }

    /// Refuse a shard: kept for the read to report, and passed to zarrs.
    fn refuse(&self, error: StoreError) -> StorageError {
        let text = error.to_string();
        self.refused
            .lock()
            .expect("no panic holds it")
            .get_or_insert(error);
        StorageError::Other(text)
    }

    /// The shard at `key` whose identity block ends at `end` of `bytes`,
    /// checked against what the array expects.
    fn check_identity(&self, key: &str, bytes: &[u8], end: usize) -> Result<(), StorageError> {
        let Some(expected) = &self.expected else {
            return Ok(());
        };
        let wanted = ShardIdentity {
            generation: expected.generation,
            array: expected.array.clone(),
            key: key.to_string(),
        };
        let problem = match ShardIdentity::decode(bytes, end) {
            Ok(found) => wanted.mismatch(&found),
            Err(message) => Some(message),
        };
        match problem {
            None => Ok(()),
            Some(message) => Err(self.refuse(StoreError::Misplaced {
                array: self.key_of("").trim_end_matches('/').into(),
                key: key.to_string(),
                message,
            })),
        }
    }

    /// Drop the kept index of the object at `key` (relative to the array).
    pub fn forget(&self, key: &str) {
        let path = self.key_of(key);
        let mut indexes = self.indexes.lock().expect("no panic holds it");
        let kept: Vec<(String, u64)> = indexes
            .iter()
            .map(|(id, _)| id.clone())
            .filter(|(p, _)| *p == path)
            .collect();
        for id in kept {
            indexes.pop(&id);
        }
    }

    async fn get_range(&self, path: &Key, range: GetRange) -> object_store::Result<Bytes> {
        let options = GetOptions {
            range: Some(range),
            ..Default::default()
        };
        self.client.get_opts(path, options).await?.bytes().await
    }

    /// The last `length` bytes of the object (a shard's index), kept.
    async fn suffix(&self, path: &Key, length: u64) -> object_store::Result<Bytes> {
        let id = (path.to_string(), length);
        if let Some(bytes) = self.indexes.lock().expect("no panic holds it").get(&id) {
            return Ok(bytes.clone());
        }
        let bytes = self.get_range(path, GetRange::Suffix(length)).await?;
        self.indexes
            .lock()
            .expect("no panic holds it")
            .put(id, bytes.clone());
        Ok(bytes)
    }

    /// The last `length` bytes of the object, or all of it if it is
    /// shorter (a shard's index and the identity block before it), kept.
    async fn index_and_block(&self, path: &Key, length: u64) -> object_store::Result<Bytes> {
        match self.suffix(path, length).await {
            Err(error) if !matches!(error, object_store::Error::NotFound { .. }) => {
                // Some servers (s3s-fs) fail a suffix longer than the object, which
                // S3 answers with the whole object: a shard that small is fetched whole.
                let whole = self.rest_of(path, 0).await?;
                let id = (path.to_string(), length);
                self.indexes
                    .lock()
                    .expect("no panic holds it")
                    .put(id, whole.clone());
                Ok(whole)
            }
            found => found,
        }
    }

    /// The object at `path` from `offset` to its end (a whole shard, which
    /// zarrs asks for when a read covers one), in requests that run side by
    /// side, as a batch's are (one response streams slower than several,
    /// most of all cold). Its size is not known before a reply says it, so
    /// the requests cover the size expected; those past the end fail and
    /// are left out, and what lies past the expected size is fetched
    /// after. Every part must come from one version of the object (its
    /// entity tag, `If-Match` for the parts after), else it is read again:
    /// a shard replaced meanwhile is never read as parts of two versions.
    async fn rest_of(&self, path: &Key, offset: u64) -> object_store::Result<Bytes> {
        let mut tries = 0;
        loop {
            tries += 1;
            let expected = (self.whole_size.load(Ordering::Relaxed) + EXPECTED_SLACK)
                .saturating_sub(offset)
                .max(LEAST_PER_REQUEST);
            let first = self.pieces(path, offset..offset + expected, None).await;
            let Some(Ok((size, e_tag, _))) = first.first() else {
                return Err(first.into_iter().next().map_or_else(
                    || object_store::Error::Generic {
                        store: "S3",
                        source: "no request was made".into(),
                    },
                    |f| f.expect_err("the first part failed"),
                ));
            };
            let (size, e_tag) = (*size, e_tag.clone());
            self.whole_size.store(size, Ordering::Relaxed);
            let mut parts = Vec::new();
            let mut changed = false;
            for part in first {
                match part {
                    Ok((_, tag, bytes)) => {
                        changed |= tag != e_tag;
                        parts.push(bytes);
                    }
                    // Past the object's end: nothing there.
                    Err(_)
                        if parts.iter().map(Bytes::len).sum::<usize>() as u64 >= size - offset => {}
                    Err(e) => return Err(e),
                }
            }
            let got = offset + parts.iter().map(Bytes::len).sum::<usize>() as u64;
            if got < size && !changed {
                for part in self.pieces(path, got..size, e_tag.clone()).await {
                    match part {
                        Ok((_, _, bytes)) => parts.push(bytes),
                        Err(object_store::Error::Precondition { .. }) => changed = true,
                        Err(e) => return Err(e),
                    }
                }
            }
            if changed && tries < MAX_REREADS {
                continue;
            }
            return Ok(Bytes::from(parts.concat()));
        }
    }

    /// The bytes `range` of the object at `path`, in requests run side by
    /// side (of [`request_bytes`]), as that version (`if_match`) if given:
    /// per request, the object's size and entity tag, and its bytes.
    async fn pieces(
        &self,
        path: &Key,
        range: Range<u64>,
        if_match: Option<String>,
    ) -> Vec<object_store::Result<(u64, Option<String>, Bytes)>> {
        let counted = Fetching::count(&self.fetching);
        let step = request_bytes(range.end - range.start, counted.now);
        stream::iter((range.start..range.end).step_by(step as usize))
            .map(|a| {
                let options = GetOptions {
                    range: Some(GetRange::Bounded(a..(a + step).min(range.end))),
                    if_match: if_match.clone(),
                    ..Default::default()
                };
                async move {
                    let got = self.client.get_opts(path, options).await?;
                    let (size, e_tag) = (got.meta.size, got.meta.e_tag.clone());
                    Ok((size, e_tag, got.bytes().await?))
                }
            })
            .buffered(IN_FLIGHT)
            .collect()
            .await
    }

    /// The bytes `range` of the object at `path`, fetched with the other
    /// ranges of it asked for at the same time.
    async fn batched(&self, path: &Key, range: Range<u64>) -> Result<Bytes, StorageError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let leads = {
            let mut batches = self.batches.lock().expect("no panic holds it");
            let batch = batches.entry(path.to_string()).or_default();
            batch.push((range, reply));
            batch.len() == 1
        };
        if leads {
            // The other ranges of this read are asked for before this task
            // runs again: they join the batch.
            tokio::task::yield_now().await;
            let batch = self
                .batches
                .lock()
                .expect("no panic holds it")
                .remove(&path.to_string())
                .unwrap_or_default();
            self.fetch_batch(path, batch).await;
        }
        match answer.await {
            Ok(result) => result.map_err(StorageError::Other),
            Err(_) => Err(StorageError::Other("the batch's fetch was dropped".into())),
        }
    }

    async fn fetch_batch(&self, path: &Key, mut batch: Batch) {
        batch.sort_by_key(|(r, _)| r.start);
        let mut spans: Vec<Range<u64>> = Vec::new();
        for (range, _) in &batch {
            match spans.last_mut() {
                Some(last) if range.start <= last.end + MERGE_GAP => {
                    last.end = last.end.max(range.end);
                }
                _ => spans.push(range.clone()),
            }
        }
        let total: u64 = spans.iter().map(|s| s.end - s.start).sum();
        let counted = Fetching::count(&self.fetching);
        let size = request_bytes(total, counted.now);
        let pieces: Vec<Range<u64>> = spans
            .iter()
            .flat_map(|s| {
                (s.start..s.end)
                    .step_by(size as usize)
                    .map(move |a| a..(a + size).min(s.end))
            })
            .collect();
        let fetched: Vec<_> = stream::iter(pieces.iter().cloned())
            .map(|piece| self.get_range(path, GetRange::Bounded(piece)))
            .buffered(IN_FLIGHT)
            .collect()
            .await;
        drop(counted);
        for (range, reply) in batch {
            let _ = reply.send(assemble(path, &range, &pieces, &fetched));
        }
    }
}

/// One batch counted among those being fetched while it lives.
struct Fetching<'a> {
    counter: &'a AtomicU64,
    /// Batches being fetched when this one was counted, itself included.
    now: u64,
}

impl<'a> Fetching<'a> {
    fn count(counter: &'a AtomicU64) -> Self {
        let now = counter.fetch_add(1, Ordering::Relaxed) + 1;
        Self { counter, now }
    }
}

impl Drop for Fetching<'_> {
    fn drop(&mut self) {
        self.counter.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The size of each request a batch of `total` bytes is cut into, while
/// `batches` batches (this one included) are fetched at once.
fn request_bytes(total: u64, batches: u64) -> u64 {
    let streams = (STREAMS / batches).max(1);
    (total / streams).clamp(LEAST_PER_REQUEST, MOST_PER_REQUEST)
}

/// The bytes of `range` from the `pieces` fetched (in order, those of one
/// span adjoining), which hold it.
fn assemble(
    path: &Key,
    range: &Range<u64>,
    pieces: &[Range<u64>],
    fetched: &[object_store::Result<Bytes>],
) -> Result<Bytes, String> {
    let first = pieces.partition_point(|p| p.end <= range.start);
    let mut parts = Vec::new();
    let mut at = range.start;
    for (piece, bytes) in pieces[first..].iter().zip(&fetched[first..]) {
        if at >= range.end {
            break;
        }
        let bytes = bytes.as_ref().map_err(|e| e.to_string())?;
        if piece.start > at {
            return Err(format!("{path}: a range no request fetched"));
        }
        let (from, to) = (
            (at - piece.start) as usize,
            (range.end.min(piece.end) - piece.start) as usize,
        );
        if to > bytes.len() {
            return Err(format!(
                "{path}: the server sent {} bytes of a range",
                bytes.len()
            ));
        }
        parts.push(bytes.slice(from..to));
        at = piece.start + to as u64;
    }
    if at < range.end {
        return Err(format!("{path}: a range no request fetched"));
    }
    match parts.len() {
        1 => Ok(parts.pop().expect("one part")),
        _ => Ok(Bytes::from(parts.concat())),
    }
}

fn storage_error(error: object_store::Error) -> StorageError {
    StorageError::Other(error.to_string())
}

#[async_trait::async_trait]
impl AsyncReadableStorageTraits for StoreObjects {
    async fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<AsyncMaybeBytesIterator<'a>, StorageError> {
        let path = self.path(key)?;
        let checked = self.expected.is_some();
        // A shard's identity block lies just before its index: fetched with it.
        let block = MAX_IDENTITY_BLOCK as u64;
        let mut out = Vec::new();
        for range in byte_ranges {
            let bytes = match range {
                ByteRange::FromStart(offset, Some(length)) => {
                    out.push(self.batched(&path, offset..offset + length).await);
                    continue;
                }
                ByteRange::FromStart(offset, None) => self.rest_of(&path, offset).await,
                ByteRange::Suffix(length) if checked => {
                    self.index_and_block(&path, length + block).await
                }
                ByteRange::Suffix(length) => self.suffix(&path, length).await,
            };
            match bytes {
                Ok(bytes) => out.push(self.checked(key.as_str(), range, bytes)),
                // A store that records a generation wrote every shard.
                Err(object_store::Error::NotFound { .. }) if checked => {
                    return Err(self.refuse(StoreError::MissingShard {
                        array: self.key_of("").trim_end_matches('/').into(),
                        key: key.to_string(),
                    }));
                }
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => out.push(Err(storage_error(e))),
            }
        }
        Ok(Some(stream::iter(out).boxed()))
    }

    async fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        match self.client.head(&self.path(key)?).await {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(storage_error(e)),
        }
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}
