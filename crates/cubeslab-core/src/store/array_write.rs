//! Writing a Zarr v3 array: whole chunks (shards) encoded and written
//! atomically, and a whole array from one buffer, chunks in parallel.

use std::{borrow::Cow, num::NonZeroU64};

use rayon::prelude::*;
use zarrs::array::{ArrayBytes, ArrayToBytesCodecTraits, CodecChain, CodecOptions};

use super::{write_atomic_aligned, AlignedBuffer, Durability, Prefill, StoreError, ZarrArray};
use crate::{
    compress::{ChunkErrors, ErrorStats},
    config::Parallelism,
    error::Result,
    window::{strides, unravel, ChunkSpan, Placement, SelectionError, MAX_DIMS},
    Error,
};

impl ZarrArray {
    /// Encode one whole chunk (shard) from native-endian C-order bytes of the
    /// full chunk shape and write it atomically. For a lossily compressed
    /// array, the error of what was written.
    pub fn write_chunk(&self, indices: &[u64], data: &[u8]) -> Result<Option<ChunkErrors>> {
        let (mut encoded, errors) = self.encode_chunk(indices, data)?;
        write_atomic_aligned(&self.chunk_path(indices), &mut encoded, Durability::Cached)?;
        self.buffers.give(encoded);
        self.forget_shard(indices);
        Ok(errors)
    }

    /// The bytes of the chunk (shard) at `indices` holding `data`
    /// (native-endian C-order bytes of the full chunk shape), as
    /// [`Self::write_chunk`] would store them, and their error for a
    /// lossily compressed array.
    pub fn encode_chunk(
        &self,
        indices: &[u64],
        data: &[u8],
    ) -> Result<(AlignedBuffer, Option<ChunkErrors>)> {
        let key = self.array.chunk_key(indices);
        let codec_error = |message: String| -> Error {
            StoreError::Codec {
                array: self.dir.clone(),
                key: key.as_str().to_string(),
                message,
            }
            .into()
        };
        let chunk_shape: Vec<NonZeroU64> = self
            .chunk_shape
            .iter()
            .map(|&c| NonZeroU64::new(c).expect("chunk sides are positive"))
            .collect();
        let expected = self.chunk_shape.iter().product::<u64>() as usize * self.dtype.size();
        if data.len() != expected {
            return Err(SelectionError::BufferSize {
                expected,
                got: data.len(),
            }
            .into());
        }
        if self.sharded.is_some() {
            // The engine writes its shards itself (with their identity).
            let mut builder = self.shard_builder(indices, Prefill::EdgeChunks)?;
            builder.fill_from(data);
            return self.encode_shard(builder);
        }
        let options = CodecOptions::default().with_concurrent_target(1);
        let encoded = self
            .array
            .codecs()
            .encode(
                ArrayBytes::new_flen(Cow::Borrowed(data)),
                &chunk_shape,
                self.array.data_type(),
                self.array.fill_value(),
                &options,
            )
            .map_err(|e| codec_error(e.to_string()))?;
        // A lossy chunk is decoded again: its error is recorded, as a shard's chunks' are.
        let errors = if self.lossy_chunks {
            let sides: Vec<u64> = (0..self.shape.len())
                .map(|d| self.chunk_shape[d].min(self.shape[d] - indices[d] * self.chunk_shape[d]))
                .collect();
            let chain = self.array.codecs();
            let stats =
                self.encoding_error(&chain, &encoded, data, &chunk_shape, &sides, key.as_str())?;
            let mut errors = ChunkErrors::default();
            errors.add(key.as_str(), &stats);
            Some(errors)
        } else {
            None
        };
        let mut bytes = self.buffers.take(encoded.len());
        bytes.extend_from_slice(&encoded);
        Ok((bytes, errors))
    }

    /// The error of a lossily encoded chunk: `encoded` decoded with `chain`
    /// and set beside `chunk` (of `shape`), over its part inside the array
    /// (`sides`).
    pub(super) fn encoding_error(
        &self,
        chain: &CodecChain,
        encoded: &[u8],
        chunk: &[u8],
        shape: &[NonZeroU64],
        sides: &[u64],
        key: &str,
    ) -> Result<ErrorStats> {
        let options = CodecOptions::default().with_concurrent_target(1);
        let decoded = chain
            .decode(
                Cow::Borrowed(encoded),
                shape,
                self.array.data_type(),
                self.array.fill_value(),
                &options,
            )
            .and_then(|b| Ok(b.into_fixed()?))
            .map_err(|e| StoreError::Codec {
                array: self.dir.clone(),
                key: key.to_string(),
                message: e.to_string(),
            })?;
        let full: Vec<u64> = shape.iter().map(|n| n.get()).collect();
        let stats = ErrorStats::of_chunk_corner(chunk, &decoded, self.dtype, &full, sides);
        if !stats.max_abs_error.is_finite() {
            // ZFP codes blocks of numbers: NaN or infinity comes back as another value.
            return Err(StoreError::Unsupported {
                path: self.dir.join(key),
                what:
                    "NaN or infinite values under lossy compression, which decodes them as other \
                       numbers; store them with a lossless codec (zstd), or replace them first"
                        .into(),
            }
            .into());
        }
        Ok(stats)
    }

    /// Write the whole array from `data` (native-endian C-order bytes of
    /// the array's shape), every chunk encoded and written in parallel; for
    /// a lossily compressed array, the error of what was written.
    pub fn write_array(
        &self,
        data: &[u8],
        parallelism: Parallelism,
    ) -> Result<Option<ChunkErrors>> {
        let elem = self.dtype.size();
        let expected = self.shape.iter().product::<u64>() as usize * elem;
        if data.len() != expected {
            return Err(SelectionError::BufferSize {
                expected,
                got: data.len(),
            }
            .into());
        }
        if self.shape.is_empty() {
            // A 0-d array: one element, one chunk, nothing to place.
            return self.write_chunk(&[], data);
        }
        let grid = self.chunk_grid_shape();
        let n_chunks: u64 = grid.iter().product();
        let nd = self.shape.len();
        let chunk_elems = self.chunk_shape.iter().product::<u64>() as usize;
        let (src, dst, steps) = (
            strides(&self.shape),
            strides(&self.chunk_shape),
            [1u64; MAX_DIMS],
        );
        let placement = Placement {
            src_strides: &src,
            dst_strides: &dst,
            steps: &steps,
            ndim: nd,
            elem,
        };
        let write_one = |c: u64| -> Result<Option<ChunkErrors>> {
            let idx = unravel(c, &grid);
            let spans: Vec<ChunkSpan> = (0..nd)
                .map(|d| {
                    let start = idx[d] * self.chunk_shape[d];
                    ChunkSpan {
                        chunk: 0,
                        first: start,
                        count: self.chunk_shape[d].min(self.shape[d] - start),
                        out_first: 0,
                    }
                })
                .collect();
            let mut chunk = self.fill.repeat(chunk_elems);
            // SAFETY: `chunk` holds a whole chunk; the spans lie inside `data`.
            unsafe { placement.copy(&spans, data, chunk.as_mut_ptr()) };
            self.write_chunk(&idx[..nd], &chunk)
        };
        let merged = |a: Option<ChunkErrors>, b: Option<ChunkErrors>| match (a, b) {
            (Some(mut a), Some(b)) => {
                a.merge(&b);
                Some(a)
            }
            (a, b) => a.or(b),
        };
        if parallelism.on_caller() {
            return (0..n_chunks)
                .map(write_one)
                .try_fold(None, |a, b| Ok(merged(a, b?)));
        }
        parallelism.pool().install(|| {
            (0..n_chunks)
                .into_par_iter()
                .map(write_one)
                .try_reduce(|| None, |a, b| Ok(merged(a, b)))
        })
    }
}
