//! Building a shard in memory in its final byte layout, so that an ingest
//! decodes samples straight into the place they will have on disk: inner
//! chunks in C order, each followed by its crc32c, then the index. Raw
//! chunks need no further copy; compressed ones are encoded chunk by chunk.

use std::{borrow::Cow, num::NonZeroU64};

use zarrs::array::{ArrayBytes, ArrayToBytesCodecTraits, CodecOptions};

use super::{
    checksum::crc32c, shard_codecs::InnerCodecs, write_atomic_aligned, zstd_chunk, AlignedBuffer,
    Durability, StoreError, ZarrArray,
};
use crate::{
    compress::ChunkErrors,
    error::Result,
    window::{copy_block, unravel},
};

/// Bytes reserved for a shard's identity block (its names are short).
const IDENTITY_ROOM: usize = 256;

/// Marks an absent inner chunk in a shard index.
const ABSENT: u64 = u64::MAX;

/// What the chunks of a new [`ShardBuilder`] hold before the caller fills them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefill {
    /// The fill value, everywhere: for a caller that may leave elements unwritten.
    FillValue,
    /// The fill value only in chunks that cross the array's edge; the others
    /// hold stale bytes, for a caller that writes every element inside the
    /// array (which then costs no pass over the shard beforehand).
    EdgeChunks,
}

/// One shard under construction.
pub struct ShardBuilder {
    indices: Vec<u64>,
    inner_shape: Vec<u64>,
    chunks_per_shard: Vec<u64>,
    chunk_bytes: usize,
    /// Where each inner chunk's elements start in `data`; `None` for chunks
    /// wholly outside the array (they are left out of the shard).
    slots: Vec<Option<usize>>,
    data: AlignedBuffer,
}

impl ShardBuilder {
    /// An empty shard (every chunk the fill value) at `indices` of an array
    /// of `shape`, with `cps` inner chunks of `inner` per shard, elements of
    /// `fill.len()` bytes, and `gap` bytes after each chunk for its checksum.
    pub fn new(
        indices: &[u64],
        shape: &[u64],
        inner: &[u64],
        cps: &[u64],
        fill: &[u8],
        gap: usize,
    ) -> Self {
        Self::in_buffer(
            indices,
            [shape, inner, cps],
            fill,
            gap,
            AlignedBuffer::default(),
            Prefill::FillValue,
        )
    }

    /// [`Self::new`] in `data` (emptied first), prefilled as `prefill` says.
    fn in_buffer(
        indices: &[u64],
        [shape, inner, cps]: [&[u64]; 3],
        fill: &[u8],
        gap: usize,
        mut data: AlignedBuffer,
        prefill: Prefill,
    ) -> Self {
        let elems = inner.iter().product::<u64>() as usize;
        let chunk_bytes = elems * fill.len();
        let n: u64 = cps.iter().product();
        let mut slots = Vec::with_capacity(n as usize);
        let mut edge = Vec::with_capacity(n as usize);
        let mut next = 0usize;
        for i in 0..n {
            let pos = unravel(i, cps);
            let origin = |d: usize| (indices[d] * cps[d] + pos[d]) * inner[d];
            let inside = (0..inner.len()).all(|d| origin(d) < shape[d]);
            edge.push((0..inner.len()).any(|d| origin(d) + inner[d] > shape[d]));
            slots.push(inside.then(|| {
                let at = next;
                next += chunk_bytes + gap;
                at
            }));
        }
        // Room for the identity block and the index too, so finishing the
        // shard never reallocates (and copies) it.
        data.clear();
        data.reserve(next + IDENTITY_ROOM + slots.len() * 16 + 4);
        data.resize_stale(next);
        let template = fill.repeat(elems);
        for (slot, edge) in slots.iter().zip(edge) {
            if let Some(at) = *slot {
                if edge || prefill == Prefill::FillValue {
                    data[at..at + chunk_bytes].copy_from_slice(&template);
                }
            }
        }
        ShardBuilder {
            indices: indices.to_vec(),
            inner_shape: inner.to_vec(),
            chunks_per_shard: cps.to_vec(),
            chunk_bytes,
            slots,
            data,
        }
    }

    /// The elements of every inner chunk inside the array, in C order of the chunks.
    pub fn chunks(&self) -> impl Iterator<Item = &[u8]> {
        self.slots
            .iter()
            .flatten()
            .map(|&at| &self.data[at..at + self.chunk_bytes])
    }

    /// The shard's indices in the array's grid of shards.
    pub fn indices(&self) -> &[u64] {
        &self.indices
    }

    /// The elements of inner chunk `i` (C order of the chunks), if inside the array.
    pub fn chunk(&self, i: usize) -> Option<&[u8]> {
        let start = self.slots[i]?;
        Some(&self.data[start..start + self.chunk_bytes])
    }

    /// Set every inner chunk from `data`: native-endian C-order elements of
    /// the whole shard's shape.
    pub fn fill_from(&mut self, data: &[u8]) {
        let nd = self.inner_shape.len();
        let elem = self.chunk_bytes / self.inner_shape.iter().product::<u64>().max(1) as usize;
        let shard_shape: Vec<u64> = (0..nd)
            .map(|d| self.inner_shape[d] * self.chunks_per_shard[d])
            .collect();
        for (i, slot) in self.slots.iter().enumerate() {
            let Some(at) = *slot else { continue };
            let pos = unravel(i as u64, &self.chunks_per_shard);
            let corner: Vec<u64> = (0..nd).map(|d| pos[d] * self.inner_shape[d]).collect();
            copy_block(
                data,
                &shard_shape,
                &corner,
                &mut self.data[at..at + self.chunk_bytes],
                &self.inner_shape,
                &self.inner_shape,
                elem,
            );
        }
    }

    /// Inner chunk shape.
    pub fn inner_shape(&self) -> &[u64] {
        &self.inner_shape
    }

    /// Inner chunks per shard along each dimension.
    pub fn chunks_per_shard(&self) -> &[u64] {
        &self.chunks_per_shard
    }

    /// The elements (native-endian, C order) of inner chunk `i`, pre-filled
    /// with the fill value; `None` if the chunk lies outside the array.
    pub fn chunk_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        let start = self.slots[i]?;
        Some(&mut self.data[start..start + self.chunk_bytes])
    }
}

impl ZarrArray {
    /// Start building the shard at `indices`, in a buffer from the array's pool.
    pub fn shard_builder(&self, indices: &[u64], prefill: Prefill) -> Result<ShardBuilder> {
        let sharded = self
            .sharded
            .as_ref()
            .ok_or_else(|| StoreError::Unsupported {
                path: self.dir.clone(),
                what:
                    "building shards of an array that is not sharded with a known chunk codec chain"
                        .into(),
            })?;
        let gap = match sharded.codecs {
            InnerCodecs::Raw { crc: true } => 4,
            _ => 0,
        };
        let sides = [
            &self.shape[..],
            &sharded.inner_shape,
            &sharded.layout.chunks_per_shard,
        ];
        let chunks: u64 = sharded.layout.chunks_per_shard.iter().product();
        let bytes = sharded.inner_shape.iter().product::<u64>() as usize * self.fill.len() + gap;
        let buffer = self
            .buffers
            .take(chunks as usize * (bytes + 16) + IDENTITY_ROOM + 4);
        Ok(ShardBuilder::in_buffer(
            indices, sides, &self.fill, gap, buffer, prefill,
        ))
    }

    /// Finish the shard (checksums, compression, index) and write it
    /// atomically. For lossy codecs, each chunk is decoded again and
    /// compared with what was written: the errors are returned.
    pub fn write_shard(&self, builder: ShardBuilder) -> Result<Option<ChunkErrors>> {
        let indices = builder.indices.clone();
        let (mut shard, errors) = self.encode_shard(builder)?;
        write_atomic_aligned(&self.chunk_path(&indices), &mut shard, Durability::Cached)?;
        self.buffers.give(shard);
        self.forget_shard(&indices);
        Ok(errors)
    }

    /// The shard's bytes, finished as [`Self::write_shard`] writes them,
    /// and their errors for lossy codecs.
    pub fn encode_shard(
        &self,
        mut builder: ShardBuilder,
    ) -> Result<(AlignedBuffer, Option<ChunkErrors>)> {
        let sharded = self
            .sharded
            .as_ref()
            .expect("a builder exists only for sharded arrays");
        let key = self.array.chunk_key(&builder.indices);
        let mut index: Vec<u8> = Vec::with_capacity(builder.slots.len() * 16 + 4);
        let mut entry = |offset: u64, nbytes: u64| {
            index.extend_from_slice(&offset.to_le_bytes());
            index.extend_from_slice(&nbytes.to_le_bytes());
        };
        let mut errors: Option<ChunkErrors> = None;
        let mut shard = match &sharded.codecs {
            InnerCodecs::Raw { crc } => {
                let mut data = std::mem::take(&mut builder.data);
                let gap = if *crc { 4 } else { 0 };
                for slot in &builder.slots {
                    match *slot {
                        Some(at) => {
                            if *crc {
                                let sum = crc32c(&data[at..at + builder.chunk_bytes]);
                                data[at + builder.chunk_bytes..at + builder.chunk_bytes + 4]
                                    .copy_from_slice(&sum.to_le_bytes());
                            }
                            entry(at as u64, (builder.chunk_bytes + gap) as u64);
                        }
                        None => entry(ABSENT, ABSENT),
                    }
                }
                data
            }
            InnerCodecs::Zstd {
                level,
                checksum,
                crc,
            } => {
                let mut out = self
                    .buffers
                    .take(builder.data.len() + IDENTITY_ROOM + builder.slots.len() * 16 + 4);
                for slot in &builder.slots {
                    match *slot {
                        Some(at) => {
                            let start = out.len();
                            zstd_chunk::compress_into(
                                &builder.data[at..at + builder.chunk_bytes],
                                *level,
                                *checksum,
                                &mut out,
                            )
                            .map_err(|message| StoreError::Codec {
                                array: self.dir.clone(),
                                key: key.as_str().to_string(),
                                message,
                            })?;
                            if *crc {
                                let sum = crc32c(&out[start..]);
                                out.extend_from_slice(&sum.to_le_bytes());
                            }
                            entry(start as u64, (out.len() - start) as u64);
                        }
                        None => entry(ABSENT, ABSENT),
                    }
                }
                out
            }
            InnerCodecs::Chain(chain) => {
                let shape: Vec<NonZeroU64> = builder
                    .inner_shape
                    .iter()
                    .map(|&c| NonZeroU64::new(c).expect("chunk sides are positive"))
                    .collect();
                let options = CodecOptions::default().with_concurrent_target(1);
                let mut out = self.buffers.take(builder.data.len() / 2);
                let mut measured = sharded.lossy.then(ChunkErrors::default);
                for (i, slot) in builder.slots.iter().enumerate() {
                    match *slot {
                        Some(at) => {
                            let chunk = &builder.data[at..at + builder.chunk_bytes];
                            let encoded = chain
                                .encode(
                                    ArrayBytes::new_flen(Cow::Borrowed(chunk)),
                                    &shape,
                                    self.array.data_type(),
                                    self.array.fill_value(),
                                    &options,
                                )
                                .map_err(|e| StoreError::Codec {
                                    array: self.dir.clone(),
                                    key: key.as_str().to_string(),
                                    message: e.to_string(),
                                })?;
                            if let Some(errors) = measured.as_mut() {
                                let pos = unravel(i as u64, &builder.chunks_per_shard);
                                let sides: Vec<u64> = (0..self.shape.len())
                                    .map(|d| {
                                        let origin = (builder.indices[d]
                                            * builder.chunks_per_shard[d]
                                            + pos[d])
                                            * builder.inner_shape[d];
                                        builder.inner_shape[d].min(self.shape[d] - origin)
                                    })
                                    .collect();
                                let stats = self.encoding_error(
                                    chain,
                                    &encoded,
                                    chunk,
                                    &shape,
                                    &sides,
                                    key.as_str(),
                                )?;
                                errors.add(&format!("{} (inner chunk {i})", key.as_str()), &stats);
                            }
                            entry(out.len() as u64, encoded.len() as u64);
                            out.extend_from_slice(&encoded);
                        }
                        None => entry(ABSENT, ABSENT),
                    }
                }
                errors = measured;
                out
            }
        };
        // The chunks as built, if they were encoded into another buffer.
        self.buffers.give(std::mem::take(&mut builder.data));
        if !sharded.layout.index_at_end {
            return Err(StoreError::Unsupported {
                path: self.dir.clone(),
                what: "writing shards with the index at the start".into(),
            }
            .into());
        }
        if sharded.layout.index_crc {
            let sum = crc32c(&index);
            index.extend_from_slice(&sum.to_le_bytes());
        }
        if let Some(identity) = self.shard_identity(key.as_str()) {
            shard.extend_from_slice(&identity.encode());
        }
        shard.extend_from_slice(&index);
        Ok((shard, errors))
    }
}
