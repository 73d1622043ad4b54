//! The objects of one store, as zarrs reads them, without a HEAD request
//! before each read:
//! - a shard's index (the suffix of its object that zarrs asks for first) is
//!   fetched once per open array and kept, so a read of a shard already seen
//!   fetches only its chunks;
//! - zarrs asks for a shard's inner chunks all at once, one range each. The
//!   ranges that arrive together for one object are gathered into a batch,
//!   neighbours less than [`MERGE_GAP`] apart merged into requests of at
//!   most [`MOST_PER_REQUEST`] bytes, and those fetched [`IN_FLIGHT`] at a
//!   time: fewer, larger requests, as a client that knew the whole read
//!   would make.

use std::{
    collections::HashMap,
    num::NonZeroUsize,
    ops::Range,
    sync::{Arc, Mutex},
};

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
/// The most bytes one merged request fetches, so that a large span is
/// still fetched by several requests at once.
const MOST_PER_REQUEST: u64 = 4 << 20;
/// Requests of one batch in flight at once.
const IN_FLIGHT: usize = 32;

type Reply = tokio::sync::oneshot::Sender<Result<Bytes, String>>;
/// Ranges of one object waiting to be fetched, each with where its bytes go.
type Batch = Vec<(Range<u64>, Reply)>;

/// One store's objects (keys under `prefix`).
pub(super) struct StoreObjects {
    client: Arc<dyn ObjectStore>,
    prefix: String,
    indexes: Mutex<LruCache<(String, u64), Bytes>>,
    /// Ranges waiting to be fetched, by object.
    batches: Mutex<HashMap<String, Batch>>,
}

impl StoreObjects {
    pub fn new(client: Arc<dyn ObjectStore>, prefix: &str) -> Self {
        Self {
            client,
            prefix: prefix.trim_matches('/').to_string(),
            indexes: Mutex::new(LruCache::new(
                NonZeroUsize::new(KEPT_INDEXES).expect("not zero"),
            )),
            batches: Mutex::new(HashMap::new()),
        }
    }

    fn path(&self, key: &StoreKey) -> Key {
        self.path_of(key.as_str())
    }

    fn path_of(&self, key: &str) -> Key {
        if self.prefix.is_empty() {
            Key::from(key)
        } else {
            Key::from(format!("{}/{key}", self.prefix))
        }
    }

    /// Drop the kept index of the object at `key` (relative to the array).
    pub fn forget(&self, key: &str) {
        let path = self.path_of(key).to_string();
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
                Some(last)
                    if range.start <= last.end + MERGE_GAP
                        && range.end.max(last.end) - last.start <= MOST_PER_REQUEST =>
                {
                    last.end = last.end.max(range.end);
                }
                _ => spans.push(range.clone()),
            }
        }
        let fetched: Vec<_> = stream::iter(spans.iter().cloned())
            .map(|span| self.get_range(path, GetRange::Bounded(span)))
            .buffered(IN_FLIGHT)
            .collect()
            .await;
        for (range, reply) in batch {
            // The last span starting at or before the range holds it.
            let i = spans.partition_point(|s| s.start <= range.start) - 1;
            let answer = match &fetched[i] {
                Ok(bytes) => {
                    let at = (range.start - spans[i].start) as usize;
                    let end = at + (range.end - range.start) as usize;
                    if end <= bytes.len() {
                        Ok(bytes.slice(at..end))
                    } else {
                        Err(format!(
                            "{path}: the server sent {} bytes of a range",
                            bytes.len()
                        ))
                    }
                }
                Err(e) => Err(e.to_string()),
            };
            let _ = reply.send(answer);
        }
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
        let path = self.path(key);
        let mut out = Vec::new();
        for range in byte_ranges {
            let bytes = match range {
                ByteRange::FromStart(offset, Some(length)) => {
                    out.push(self.batched(&path, offset..offset + length).await);
                    continue;
                }
                ByteRange::FromStart(offset, None) => {
                    self.get_range(&path, GetRange::Offset(offset)).await
                }
                ByteRange::Suffix(length) => self.suffix(&path, length).await,
            };
            match bytes {
                Ok(bytes) => out.push(Ok(bytes)),
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => out.push(Err(storage_error(e))),
            }
        }
        Ok(Some(stream::iter(out).boxed()))
    }

    async fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        match self.client.head(&self.path(key)).await {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(storage_error(e)),
        }
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}
