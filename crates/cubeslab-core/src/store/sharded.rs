//! The engine's own read path for sharded arrays whose inner chunks it can
//! place directly: recognise the codec chain, plan the inner chunks a window
//! touches, prefetch their byte ranges when cold, and copy each chunk's
//! selected elements straight into the caller's buffer on the worker threads.

use std::{
    borrow::Cow,
    num::NonZeroU64,
    sync::{Arc, OnceLock},
};

use zarrs::array::{CodecChain, CodecOptions};

use super::{
    checksum::crc32c,
    shard::ShardFile,
    shard_codecs::{InnerCodecs, Sharding},
    task_order::{Task, TaskOrder},
    zstd_chunk, ReadOptions, StoreError, ZarrArray,
};
use crate::{
    error::Result,
    read_ahead::Prefetcher,
    share::SendPtr,
    window::{selected_extent, strides, ChunkSpan, Placement, Window},
    Error,
};

impl ZarrArray {
    /// The engine's path: plan the inner chunks the window touches, hand
    /// their byte ranges to the kernel a group at a time, and copy each
    /// chunk's selected elements straight into `out` on the worker threads.
    pub(super) fn read_sharded(
        &self,
        sharding: &Sharding,
        window: &Window,
        out: &mut [u8],
        options: &ReadOptions,
    ) -> Result<()> {
        let nd = self.shape.len();
        let elem = self.dtype.size();
        let cps = &sharding.layout.chunks_per_shard;
        let order = TaskOrder::new(&self.shape, window, &sharding.inner_shape, cps);
        let n_tasks = order.n_tasks();
        let chunk_bytes = sharding.inner_shape.iter().product::<u64>() as usize * elem;
        // Small reads stay on the calling thread: waking the workers costs
        // more than their help saves. So do reads with one thread
        // (`Parallelism::on_caller`). Unverified raw chunks are only read
        // where selected; every other chunk is checked or decoded whole.
        let raw_partial = matches!(sharding.codecs, InnerCodecs::Raw { .. }) && !options.verify;
        let work = if raw_partial {
            window.num_elements() * elem as u64
        } else {
            n_tasks * chunk_bytes as u64
        };
        let serial = work <= SERIAL_BYTES || options.parallelism.on_caller();

        let shards = self.touched_shards(sharding, &order, serial, options)?;

        let steps = window.steps();
        let chunk_strides = strides(&sharding.inner_shape);
        let out_strides = strides(&window.shape());
        let placement = Placement {
            src_strides: &chunk_strides,
            dst_strides: &out_strides,
            steps: &steps,
            ndim: nd,
            elem,
        };

        // Byte range each task needs: the whole chunk, or for an unverified
        // raw chunk only the span between its first and last selected element.
        let range_of = |t: u64| -> Option<(usize, u64, u64)> {
            let Task { slot, inner, spans } = order.locate(t);
            let (offset, nbytes) = shards[slot].range(inner)?;
            if raw_partial {
                let (lo, hi) = selected_extent(&spans[..nd], &steps, &chunk_strides);
                Some((slot, offset + lo * elem as u64, (hi - lo + 1) * elem as u64))
            } else {
                Some((slot, offset, nbytes))
            }
        };
        // Prefetching pays for cold data and costs a system call per range
        // for warm data, so probe a few ranges first.
        let probes = [0, n_tasks / 2, n_tasks - 1];
        let warm = probes
            .iter()
            .filter_map(|&t| range_of(t))
            .all(|(slot, offset, len)| shards[slot].is_resident(offset, len));
        let threads = options.parallelism.threads.max(1) as u64;
        // Each worker keeps its share of `in_flight` merged requests
        // outstanding ahead of the chunk it copies.
        let outstanding = options
            .parallelism
            .in_flight
            .div_ceil(threads as usize)
            .max(1);
        let piece = n_tasks.div_ceil(threads * pieces_per_thread(warm)).max(1);
        // Raw chunks with a crc32c are checked a group ahead of their copy
        // (see `CHECK_AHEAD_BYTES`); every other chunk is handled whole, one
        // at a time.
        let group = (CHECK_AHEAD_BYTES / chunk_bytes).max(1);
        let check_ahead = matches!(sharding.codecs, InnerCodecs::Raw { crc: true })
            && options.verify
            && group > 1;
        let out_ptr = SendPtr(out.as_mut_ptr());
        let copy = |task: &Task| {
            self.read_task(
                sharding,
                &shards[task.slot],
                task.inner,
                &task.spans[..nd],
                &placement,
                chunk_bytes,
                options.verify && !check_ahead,
                out_ptr.get(),
            )
        };
        let run_piece = |p: u64| -> Result<()> {
            let (first, last) = (p * piece, ((p + 1) * piece).min(n_tasks));
            let mut ahead = Prefetcher::new(first, last, outstanding);
            let mut copier = order.tasks(first..last);
            if !check_ahead {
                while let Some((t, task)) = copier.advance() {
                    if !warm {
                        ahead.advance(t, &range_of, &|slot, offset, len| {
                            shards[slot].prefetch(offset, len)
                        });
                    }
                    copy(task)?;
                }
                return Ok(());
            }
            // A second cursor over the same run of chunks: the checker goes
            // up to a group ahead (and hands cold ranges to the kernel), the
            // copier follows.
            let mut checker = order.tasks(first..last);
            loop {
                let mut n = 0;
                while n < group {
                    let Some((t, &Task { slot, inner, .. })) = checker.advance() else {
                        break;
                    };
                    if !warm {
                        ahead.advance(t, &range_of, &|slot, offset, len| {
                            shards[slot].prefetch(offset, len)
                        });
                    }
                    self.check_raw(&shards[slot], inner)?;
                    n += 1;
                }
                if n == 0 {
                    return Ok(());
                }
                for _ in 0..n {
                    let (_, task) = copier.advance().expect("the copier follows the checker");
                    copy(task)?;
                }
            }
        };
        let pieces = n_tasks.div_ceil(piece);
        let copied = if serial {
            (0..pieces).try_for_each(run_piece)
        } else {
            options.parallelism.share(pieces, &run_piece)
        };
        // A shard cut short meanwhile was read as zeros: that is the error,
        // whatever else failed, and the handle forgets the shard.
        for (slot, shard) in shards.iter().enumerate() {
            if let Err(error) = shard.check_intact(&self.dir, copied.is_err()) {
                self.forget_shard(&order.shard_indices(slot as u64));
                return Err(error);
            }
        }
        copied
    }

    /// The shards a read touches, by slot. Those this handle holds open cost
    /// a lookup; the rest are opened, in parallel when there are several
    /// (each reads and checks an index) by the calling thread and the
    /// workers (`Parallelism::share`). So a read of open shards wakes the
    /// workers once, not twice (a sleeping worker takes tens of microseconds
    /// to start).
    fn touched_shards(
        &self,
        sharding: &Sharding,
        order: &TaskOrder,
        serial: bool,
        options: &ReadOptions,
    ) -> Result<Vec<Arc<ShardFile>>> {
        let held: Vec<Option<Arc<ShardFile>>> = (0..order.n_shards())
            .map(|slot| self.held_shard(&order.shard_indices(slot)))
            .collect();
        let missing: Vec<u64> = (0..order.n_shards())
            .filter(|&slot| held[slot as usize].is_none())
            .collect();
        let open = |&slot: &u64| {
            let whole = order.covers_most_of(slot);
            self.open_new_shard(sharding, &order.shard_indices(slot), whole)
        };
        let opened: Vec<Arc<ShardFile>> = if serial {
            missing.iter().map(open).collect::<Result<_>>()?
        } else {
            let slots: Vec<OnceLock<Arc<ShardFile>>> =
                missing.iter().map(|_| OnceLock::new()).collect();
            options.parallelism.share(missing.len() as u64, &|i| {
                let shard = open(&missing[i as usize])?;
                let _ = slots[i as usize].set(shard);
                Ok(())
            })?;
            slots
                .into_iter()
                .map(|slot| slot.into_inner().expect("each missing shard was opened"))
                .collect()
        };
        // The opened shards fill the empty slots in order.
        let mut opened = opened.into_iter();
        Ok(held
            .into_iter()
            .map(|shard| shard.unwrap_or_else(|| opened.next().expect("one per missing slot")))
            .collect())
    }

    /// Copy one inner chunk's selected elements into the output.
    #[allow(clippy::too_many_arguments)]
    fn read_task(
        &self,
        sharding: &Sharding,
        shard: &ShardFile,
        inner: usize,
        task_spans: &[ChunkSpan],
        placement: &Placement<'_>,
        chunk_bytes: usize,
        verify: bool,
        dst: *mut u8,
    ) -> Result<()> {
        let Some(bytes) = shard.chunk(inner) else {
            // SAFETY: tasks cover disjoint parts of the output.
            unsafe { placement.fill(task_spans, &self.fill, dst) };
            return Ok(());
        };
        match &sharding.codecs {
            InnerCodecs::Raw { crc } => {
                let data = self.checked(shard, inner, bytes, *crc, verify)?;
                if data.len() != chunk_bytes {
                    return Err(self.corrupt(
                        shard,
                        inner,
                        &format!("chunk holds {} bytes, expected {chunk_bytes}", data.len()),
                    ));
                }
                // SAFETY: disjoint output parts; `data` is a whole chunk.
                unsafe { placement.copy(task_spans, data, dst) };
            }
            // A chunk the cache will not keep is decoded into the thread's
            // scratch buffer: no allocation per chunk.
            InnerCodecs::Zstd { crc, .. } if !self.decoded.keeps(chunk_bytes) => {
                let frame = self.checked(shard, inner, bytes, *crc, verify)?;
                zstd_chunk::with_decompressed(frame, chunk_bytes, |data| {
                    // SAFETY: disjoint output parts; `data` is a whole chunk.
                    unsafe { placement.copy(task_spans, data, dst) }
                })
                .map_err(|message| self.codec_error(shard, inner, message))?;
            }
            InnerCodecs::Zstd { .. } | InnerCodecs::Chain(_) => {
                let id = (shard.id, inner);
                let data = match self.decoded.get(id) {
                    Some(data) => data,
                    None => {
                        let data = Arc::new(self.decode(
                            sharding,
                            shard,
                            inner,
                            bytes,
                            chunk_bytes,
                            verify,
                        )?);
                        self.decoded.insert(id, data.clone());
                        data
                    }
                };
                // SAFETY: disjoint output parts; `data` is a whole chunk.
                unsafe { placement.copy(task_spans, &data, dst) };
            }
        }
        Ok(())
    }

    /// Check a raw chunk's crc32c, if it is stored.
    fn check_raw(&self, shard: &ShardFile, inner: usize) -> Result<()> {
        match shard.chunk(inner) {
            Some(bytes) => self.checked(shard, inner, bytes, true, true).map(|_| ()),
            None => Ok(()),
        }
    }

    /// Decode a compressed chunk whole (checking its crc32c if `verify`).
    fn decode(
        &self,
        sharding: &Sharding,
        shard: &ShardFile,
        inner: usize,
        bytes: &[u8],
        chunk_bytes: usize,
        verify: bool,
    ) -> Result<Vec<u8>> {
        let decoded = match &sharding.codecs {
            InnerCodecs::Zstd { crc, .. } => {
                let frame = self.checked(shard, inner, bytes, *crc, verify)?;
                zstd_chunk::with_decompressed(frame, chunk_bytes, <[u8]>::to_vec)
                    .map_err(|message| self.codec_error(shard, inner, message))?
            }
            InnerCodecs::Chain(chain) => self
                .decode_chain(chain, sharding, shard, inner, bytes, verify)?
                .into_owned(),
            InnerCodecs::Raw { .. } => unreachable!("raw chunks are not decoded"),
        };
        if decoded.len() != chunk_bytes {
            return Err(self.corrupt(shard, inner, "decoded chunk has the wrong size"));
        }
        Ok(decoded)
    }

    fn decode_chain<'a>(
        &self,
        chain: &CodecChain,
        sharding: &Sharding,
        shard: &ShardFile,
        inner: usize,
        bytes: &'a [u8],
        verify: bool,
    ) -> Result<Cow<'a, [u8]>> {
        use zarrs::array::ArrayToBytesCodecTraits;
        let chunk_bytes = sharding.inner_shape.iter().product::<u64>() as usize * self.dtype.size();
        sharding
            .outer
            .check(bytes, chunk_bytes)
            .map_err(|message| self.corrupt(shard, inner, &message))?;
        let shape: Vec<NonZeroU64> = sharding
            .inner_shape
            .iter()
            .map(|&c| NonZeroU64::new(c).expect("positive"))
            .collect();
        let options = CodecOptions::default()
            .with_validate_checksums(verify)
            .with_concurrent_target(1);
        chain
            .decode(
                Cow::Borrowed(bytes),
                &shape,
                self.array.data_type(),
                self.array.fill_value(),
                &options,
            )
            .and_then(|b| Ok(b.into_fixed()?))
            .map_err(|e| {
                let message = e.to_string();
                if message.to_lowercase().contains("checksum") {
                    StoreError::Checksum {
                        array: self.dir.clone(),
                        key: inner_key(shard, inner),
                        what: "inner chunk".into(),
                        stored: 0,
                        computed: 0,
                    }
                    .into()
                } else {
                    StoreError::Codec {
                        array: self.dir.clone(),
                        key: inner_key(shard, inner),
                        message,
                    }
                    .into()
                }
            })
    }

    /// The chunk's bytes without their trailing crc32c, checked if `verify`.
    fn checked<'a>(
        &self,
        shard: &ShardFile,
        inner: usize,
        bytes: &'a [u8],
        crc: bool,
        verify: bool,
    ) -> Result<&'a [u8]> {
        if !crc {
            return Ok(bytes);
        }
        let Some(split) = bytes.len().checked_sub(4) else {
            return Err(self.corrupt(shard, inner, "chunk shorter than its checksum"));
        };
        if verify {
            self.check_crc(shard, inner, &bytes[..split], &bytes[split..])?;
        }
        Ok(&bytes[..split])
    }

    fn codec_error(&self, shard: &ShardFile, inner: usize, message: String) -> Error {
        StoreError::Codec {
            array: self.dir.clone(),
            key: inner_key(shard, inner),
            message,
        }
        .into()
    }

    fn check_crc(&self, shard: &ShardFile, inner: usize, data: &[u8], stored: &[u8]) -> Result<()> {
        let stored = u32::from_le_bytes(stored.try_into().expect("4 bytes"));
        let computed = crc32c(data);
        if stored == computed {
            Ok(())
        } else {
            Err(StoreError::Checksum {
                array: self.dir.clone(),
                key: inner_key(shard, inner),
                what: "inner chunk".into(),
                stored,
                computed,
            }
            .into())
        }
    }

    fn corrupt(&self, shard: &ShardFile, inner: usize, message: &str) -> Error {
        StoreError::Corrupt {
            array: self.dir.clone(),
            key: inner_key(shard, inner),
            message: message.into(),
        }
        .into()
    }
}

fn inner_key(shard: &ShardFile, inner: usize) -> String {
    format!("{} (inner chunk {inner})", shard.key)
}

/// How many runs of chunks each worker gets. Warm, four: the runs even out
/// uneven work. Cold, one: a worker's read-ahead never reaches past its
/// own run, so one long run keeps its requests in flight from start to end
/// (with several, a run whose chunks merge into one request would wait for
/// it alone).
pub const fn pieces_per_thread(warm: bool) -> u64 {
    if warm {
        4
    } else {
        1
    }
}

/// Bytes of raw chunks a worker checks before it copies from them: the
/// scattered writes of a thin plane's copy stall the check's stream through
/// the chunks, so a group is checked first and copied while it sits in the
/// core's L2 cache (docs/reads.md has the measurement). Larger chunks go
/// one by one.
pub const CHECK_AHEAD_BYTES: usize = 512 << 10;

/// Reads whose chunks hold at most this many bytes run on the calling
/// thread alone (a trace, a small box): a worker arrives too late to save
/// anything on them (docs/reads.md).
pub const SERIAL_BYTES: u64 = 256 << 10;
