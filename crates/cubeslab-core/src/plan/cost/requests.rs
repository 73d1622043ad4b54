//! Requests as the read path's prefetcher merges them, for the cost model.

use crate::read_ahead::{COALESCE_GAP, MAX_REQUEST};

/// Requests as the read path's prefetcher issues them: byte ranges of one
/// shard merged while they lie within `COALESCE_GAP` of each other, up to
/// `MAX_REQUEST`; each worker's run of chunks starts a new one.
#[derive(Default)]
pub(super) struct Requests {
    /// The request being merged into: (shard, start, length).
    open: Option<(u64, u64, u64)>,
    sizes: Vec<u64>,
}

impl Requests {
    /// Close the open request (a worker's run of chunks ends).
    pub fn cut(&mut self) {
        if let Some((_, _, len)) = self.open.take() {
            self.sizes.push(len);
        }
    }

    /// Add `len` bytes at `offset` of `shard`.
    pub fn add(&mut self, shard: u64, offset: u64, len: u64) {
        self.open = match self.open.take() {
            Some((id, o, l))
                if id == shard
                    && offset >= o
                    && offset <= o + l + COALESCE_GAP
                    && l < MAX_REQUEST =>
            {
                Some((id, o, l.max(offset + len - o)))
            }
            Some((_, _, l)) => {
                self.sizes.push(l);
                Some((shard, offset, len))
            }
            None => Some((shard, offset, len)),
        };
    }

    /// The sizes of every request.
    pub fn finish(mut self) -> Vec<u64> {
        self.cut();
        self.sizes
    }
}
