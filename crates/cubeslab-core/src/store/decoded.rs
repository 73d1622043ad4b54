//! Decoded chunks of compressed arrays, kept in memory (bounded) for reads
//! that come back to them.
//!
//! A compressed chunk must be decoded whole even when a read wants one
//! slice of it, and decoding (ZFP at a few hundred MB/s per core) costs far
//! more than the copy. Neighbouring planes share chunks — stepping through
//! inlines crosses a chunk boundary only every chunk-depth inlines — so an
//! interactive reader decodes each chunk once instead of once per plane.
//! Raw chunks are not kept: the page cache already holds them.

use std::sync::{Arc, Mutex};

use lru::LruCache;

/// Default bound on the decoded bytes one open array keeps.
pub const DEFAULT_DECODED_CACHE_BYTES: usize = 256 << 20;

/// The bound: `CUBESLAB_DECODED_CACHE_MB` if set, else the default.
pub fn decoded_cache_bytes() -> usize {
    std::env::var("CUBESLAB_DECODED_CACHE_MB")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .map_or(DEFAULT_DECODED_CACHE_BYTES, |mb| mb << 20)
}

/// Which chunk: the shard's position in the grid (C order) and the inner chunk's in the shard.
pub(super) type ChunkId = (u64, usize);

/// Least recently used decoded chunks, up to a byte bound.
pub(super) struct DecodedCache {
    limit: usize,
    state: Mutex<State>,
}

struct State {
    chunks: LruCache<ChunkId, Arc<Vec<u8>>>,
    bytes: usize,
}

impl DecodedCache {
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            state: Mutex::new(State {
                chunks: LruCache::unbounded(),
                bytes: 0,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, id: ChunkId) -> Option<Arc<Vec<u8>>> {
        if self.limit == 0 {
            return None;
        }
        self.state().chunks.get(&id).cloned()
    }

    /// Whether a chunk of `len` decoded bytes would be kept: not past a
    /// quarter of the bound (it would push out everything else).
    pub fn keeps(&self, len: usize) -> bool {
        len <= self.limit / 4
    }

    /// Keep `data` if [`DecodedCache::keeps`] its size.
    pub fn insert(&self, id: ChunkId, data: Arc<Vec<u8>>) {
        if !self.keeps(data.len()) {
            return;
        }
        let mut s = self.state();
        s.bytes += data.len();
        if let Some(old) = s.chunks.put(id, data) {
            s.bytes -= old.len();
        }
        while s.bytes > self.limit {
            match s.chunks.pop_lru() {
                Some((_, old)) => s.bytes -= old.len(),
                None => break,
            }
        }
    }

    /// Drop every chunk of the shard `shard` (it was rewritten).
    pub fn forget_shard(&self, shard: u64) {
        let mut s = self.state();
        let gone: Vec<ChunkId> = s
            .chunks
            .iter()
            .map(|(k, _)| *k)
            .filter(|k| k.0 == shard)
            .collect();
        for k in gone {
            if let Some(old) = s.chunks.pop(&k) {
                s.bytes -= old.len();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_most_recent_chunks_within_the_bound() {
        let cache = DecodedCache::new(4000);
        for i in 0..10 {
            cache.insert((0, i), Arc::new(vec![i as u8; 1000]));
        }
        // The last four fit; the first six were pushed out.
        assert!(cache.get((0, 5)).is_none());
        assert_eq!(cache.get((0, 6)).unwrap()[0], 6);
        assert_eq!(cache.state().bytes, 4000);
        cache.insert((1, 0), Arc::new(vec![0; 1000]));
        assert!(
            cache.get((0, 7)).is_none(),
            "least recently used goes first"
        );
        cache.forget_shard(0);
        assert_eq!(cache.state().bytes, 1000);
        assert!(cache.get((1, 0)).is_some());
        cache.insert((2, 0), Arc::new(vec![0; 1001])); // over a quarter of the bound: not kept
        assert!(cache.get((2, 0)).is_none());
    }
}
