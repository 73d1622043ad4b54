//! Where one row of a block goes in the block's shards: the column of
//! inner chunks it crosses and its offset inside each, and the copy of its
//! elements there, one run per chunk.

use std::ops::Range;

use crate::{
    store::ShardBuilder,
    window::{copy_run, strides, unravel},
};

/// The shards of one column task, seen as rows to place.
pub(crate) struct RowPlacement {
    block_shape: Vec<u64>,
    inner: Vec<u64>,
    chunks_per_shard: Vec<u64>,
    chunk_strides: [u64; 8],
    elem_strides: [u64; 8],
    /// Elements in a whole row, and in a shard along it.
    row_len: u64,
    shard_len: u64,
    elem: usize,
}

impl RowPlacement {
    /// For shards of `shard` shape (leading dimensions, then the row) in an
    /// array whose rows hold `row_len` elements of `elem` bytes, built by
    /// `builder` (any one of the task's).
    pub fn new(shard: &[u64], row_len: u64, elem: usize, builder: &ShardBuilder) -> Self {
        let inner = builder.inner_shape().to_vec();
        let chunks_per_shard = builder.chunks_per_shard().to_vec();
        let lead = shard.len() - 1;
        Self {
            block_shape: shard[..lead].to_vec(),
            chunk_strides: strides(&chunks_per_shard),
            elem_strides: strides(&inner),
            inner,
            chunks_per_shard,
            row_len,
            shard_len: shard[lead],
            elem,
        }
    }

    /// Copy `row` into `shards` (those at `z_shards` along the row): the
    /// elements from `row_start` on of the row at `local` (its C-order
    /// index in the block).
    pub fn place(
        &self,
        shards: &mut [ShardBuilder],
        z_shards: Range<u64>,
        local: u64,
        row: &[u8],
        row_start: u64,
    ) {
        let lead = self.block_shape.len();
        let (inner, elem) = (&self.inner, self.elem);
        let at = unravel(local, &self.block_shape);
        let (mut chunk_base, mut elem_base) = (0u64, 0u64);
        for d in 0..lead {
            chunk_base += at[d] / inner[d] * self.chunk_strides[d];
            elem_base += at[d] % inner[d] * self.elem_strides[d];
        }
        for (j, z) in z_shards.enumerate() {
            for kz in 0..self.chunks_per_shard[lead] {
                let z0 = z * self.shard_len + kz * inner[lead];
                if z0 >= self.row_len {
                    break;
                }
                let n = ((z0 + inner[lead]).min(self.row_len) - z0) as usize * elem;
                if let Some(chunk) = shards[j].chunk_mut((chunk_base + kz) as usize) {
                    let from = (z0 - row_start) as usize * elem;
                    copy_run(row, from, chunk, elem_base as usize * elem, n);
                }
            }
        }
    }
}
