//! Getting cached chunks to storage: evicting past the bound, and flushing,
//! each dirty chunk written back whole and in parallel.

use rayon::prelude::*;

use super::{merge_rewrites, ArrayWriter, Cached, Chunks, Stamp, DATA_VERSION};
use crate::{
    config::{max_threads, Parallelism},
    error::{Error, Result},
    store::{StoreError, STATS_V1},
};

/// Whether a chunk's write-back can never succeed: another writer replaced
/// the chunk after this one read it, or its values are ones the codec
/// cannot keep. Its change is refused once, and dropped, so that later
/// flushes (and the drop) do not report it again.
fn refused_for_good(error: &Error) -> bool {
    matches!(
        error.part::<StoreError>(),
        Some(StoreError::Conflict { .. } | StoreError::Unsupported { .. })
    )
}

impl ArrayWriter {
    /// Past the bound, evict least recently used chunks down
    /// to seven eighths of it, writing the dirty ones back in parallel. A
    /// chunk whose write-back fails stays cached, dirty, unless another
    /// writer replaced it: that change is refused for good.
    pub(super) fn evict(&self, chunks: &mut Chunks) -> Result<()> {
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
        let (results, counted) = self.write_back_all(victims.iter().filter(|(_, c)| c.dirty));
        let mut failure = None;
        let mut failed = Vec::new();
        for ((key, _), result) in victims.iter().filter(|(_, c)| c.dirty).zip(results) {
            match result {
                Ok(_) => chunks.info.flushes += 1,
                Err(error) => {
                    if !refused_for_good(&error) {
                        failed.push(key.clone());
                    }
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
        failure.map_or(counted, Err)
    }

    /// Write chunks back in parallel; one result per chunk, in order, and
    /// whether the data version was counted after them.
    fn write_back_all<'a>(
        &self,
        dirty: impl Iterator<Item = &'a (Vec<u64>, Cached)>,
    ) -> (Vec<Result<Stamp>>, Result<()>) {
        let dirty: Vec<&(Vec<u64>, Cached)> = dirty.collect();
        if dirty.is_empty() {
            return (Vec::new(), Ok(()));
        }
        // Counted before any chunk changes, so that a crash midway still shows
        // the change, and again after: levels made from the array while these
        // chunks were being written recorded the first count.
        if let Err(error) = self.count_data_version() {
            let mut results = vec![Err(error)];
            results.extend(dirty[1..].iter().map(|_| {
                Err(StoreError::Metadata {
                    path: self.storage.metadata_name(),
                    message: "chunk not written: its data version could not be counted".into(),
                }
                .into())
            }));
            return (results, Ok(()));
        }
        let results = if dirty.len() <= 1 {
            dirty.iter().map(|(k, c)| self.write_back(k, c)).collect()
        } else {
            // Write-backs mostly wait on the device: as many at once as a call
            // may have threads, so that it sees a deep queue (with a thread per
            // core, chunk-order writes ran 25-35 % slower here).
            Parallelism::resolve(Some(max_threads()), None)
                .pool()
                .install(|| {
                    dirty
                        .par_iter()
                        .map(|(k, c)| self.write_back(k, c))
                        .collect()
                })
        };
        (results, self.count_data_version())
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

    /// Add one to the array's [`DATA_VERSION`] (for a batch of write-backs),
    /// and drop the ingest's statistics of the data, which no longer hold.
    fn count_data_version(&self) -> Result<()> {
        self.storage.update_metadata(&mut |metadata| {
            let stale_stats = metadata["attributes"]
                .as_object_mut()
                .is_some_and(|attributes| attributes.remove(STATS_V1).is_some());
            // Counted only for an array something was derived from (track_data_version).
            let Some(version) = metadata["attributes"]["cubeslab"][DATA_VERSION].as_u64() else {
                return stale_stats;
            };
            metadata["attributes"]["cubeslab"][DATA_VERSION] = serde_json::json!(version + 1);
            true
        })
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
        self.apply_staged(&mut chunks)?;
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
        let (results, counted) = self.write_back_all(dirty.iter());
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
                    if refused_for_good(&error) {
                        chunks.info.bytes -= cached.data.len() as u64;
                        chunks.info.dirty_bytes -= cached.data.len() as u64;
                        failure.get_or_insert(error);
                        continue;
                    }
                    failure.get_or_insert(error);
                }
            }
            chunks.held.insert(key, cached);
        }
        if results_ok {
            self.record_rewrites()?;
        }
        failure.map_or(counted, Err)
    }
}
