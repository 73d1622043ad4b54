//! One shard file of a `sharding_indexed` array: memory-mapped once, its index
//! parsed and checked, then handing out the bytes of each inner chunk.
//!
//! Shard format (Zarr v3 sharding codec): inner chunks' encoded bytes, and an
//! index of `(offset, nbytes)` little-endian u64 pairs, one per inner chunk in
//! C order, `(2^64-1, 2^64-1)` for a chunk that is absent (all fill value),
//! followed by a crc32c of the index when the index codecs include `crc32c`.

use std::{fs::File, os::unix::fs::MetadataExt, path::Path};

use memmap2::{Advice, Mmap};

use super::{checksum::crc32c, identity::ShardIdentity, truncation::Watched, StoreError};
use crate::{
    error::Result,
    read_ahead::{self, will_need},
    Error,
};

/// How a shard's index is laid out.
#[derive(Debug, Clone)]
pub(crate) struct ShardLayout {
    /// Inner chunks per shard along each dimension.
    pub chunks_per_shard: Vec<u64>,
    /// Index after the chunks (`"end"`, the default) or before them.
    pub index_at_end: bool,
    /// Whether the index carries a crc32c.
    pub index_crc: bool,
}

impl ShardLayout {
    fn num_chunks(&self) -> usize {
        self.chunks_per_shard.iter().product::<u64>() as usize
    }

    fn index_bytes(&self) -> usize {
        self.num_chunks() * 16 + if self.index_crc { 4 } else { 0 }
    }
}

/// An open shard.
pub(crate) struct ShardFile {
    /// The shard's key (for messages).
    pub key: String,
    /// The shard's position in the array's grid of shards, C order.
    pub id: u64,
    /// Registered with the SIGBUS handler; declared before `map` so that it
    /// is unregistered before the mapping goes.
    watched: Option<Watched>,
    map: Option<Mmap>,
    /// `(offset, nbytes)` per inner chunk; `None` for absent chunks.
    index: Vec<Option<(u64, u64)>>,
    /// The inode of the file mapped; `None` if there was no file.
    pub inode: Option<u64>,
}

const ABSENT: u64 = u64::MAX;

/// Bytes before the index asked for with it: an identity block is shorter.
const IDENTITY_REACH: usize = 512;

/// Why the chunk ranges of `index` are not disjoint and inside `data`, if
/// they are not. Two entries sharing bytes would each pass their checksum
/// and hand one chunk's values out as another's. Written shards list
/// chunks in file order, so one pass settles it; other orders are sorted.
fn overlap(index: &[Option<(u64, u64)>], data: std::ops::Range<u64>) -> Option<String> {
    let check = |ranges: &mut dyn Iterator<Item = (usize, u64, u64)>| -> Result<(), String> {
        let mut previous: Option<(usize, u64)> = None;
        for (i, offset, nbytes) in ranges {
            if offset < data.start || offset + nbytes > data.end {
                return Err(format!(
                    "index entry {i} points at bytes {offset}..+{nbytes}, outside the chunk data ({}..{})",
                    data.start, data.end
                ));
            }
            if let Some((j, end)) = previous {
                if offset < end {
                    return Err(format!(
                        "index entries {j} and {i} share bytes from {offset}"
                    ));
                }
            }
            previous = Some((i, offset + nbytes));
        }
        Ok(())
    };
    let present = || {
        index
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.map(|(o, n)| (i, o, n)))
            .filter(|&(_, _, n)| n > 0)
    };
    match check(&mut present()) {
        Ok(()) => None,
        Err(first) => {
            let mut sorted: Vec<(usize, u64, u64)> = present().collect();
            sorted.sort_unstable_by_key(|&(_, o, _)| o);
            check(&mut sorted.into_iter())
                .err()
                .map(|e| if e.contains("outside") { first } else { e })
        }
    }
}

impl ShardFile {
    /// Open the shard at `path`. A missing file is a shard of absent chunks,
    /// unless the shard is `expected` to carry an identity (a complete
    /// cubeslab store wrote every shard); then the identity must match.
    /// `whole`: the read will use most of the shard, so every byte of it is
    /// requested now with the index, not after it.
    pub fn open(
        array: &Path,
        path: &Path,
        key: &str,
        id: u64,
        layout: &ShardLayout,
        expected: Option<&ShardIdentity>,
        whole: bool,
    ) -> Result<Self> {
        let corrupt = |message: String| -> Error {
            StoreError::Corrupt {
                array: array.to_path_buf(),
                key: key.to_string(),
                message,
            }
            .into()
        };
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && expected.is_some() => {
                return Err(StoreError::MissingShard {
                    array: array.to_path_buf(),
                    key: key.to_string(),
                }
                .into())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Self {
                    key: key.to_string(),
                    id,
                    watched: None,
                    map: None,
                    index: vec![None; layout.num_chunks()],
                    inode: None,
                })
            }
            Err(e) => return Err(Error::io(path, e)),
        };
        let stat = file.metadata().map_err(|e| Error::io(path, e))?;
        let len = stat.len();
        let index_len = layout.index_bytes();
        if len < index_len as u64 {
            return Err(corrupt(format!(
                "shard is {len} bytes, shorter than its {index_len}-byte index"
            )));
        }
        // SAFETY: cubeslab replaces shard files by rename, never rewrites them
        // in place, so the mapped bytes do not change under the reader. A file
        // cut short by another program is caught (see `truncation`).
        let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        let watched = Watched::new(map.as_ptr(), map.len());
        let index_start = if layout.index_at_end {
            map.len() - index_len
        } else {
            0
        };
        // Faults must not read around: the device's read-ahead window (often
        // megabytes) would turn every scattered chunk into a large read. The
        // reader asks the kernel for exactly the ranges it needs instead.
        let _ = map.advise(Advice::Random);
        // The identity block, if any, ends where the index starts: on its page.
        let head = if expected.is_some() {
            index_start.min(IDENTITY_REACH)
        } else {
            0
        };
        let _ = map.advise_range(Advice::WillNeed, index_start - head, index_len + head);
        if whole {
            // The index was asked for first, so it arrives first; the chunks
            // stream in while it is checked.
            will_need(&map, 0, map.len() as u64);
        }
        let raw = &map[index_start..index_start + index_len];
        let entries = &raw[..layout.num_chunks() * 16];
        if layout.index_crc {
            let stored = u32::from_le_bytes(raw[entries.len()..].try_into().expect("4 bytes"));
            let computed = crc32c(entries);
            if stored != computed {
                return Err(StoreError::Checksum {
                    array: array.to_path_buf(),
                    key: key.to_string(),
                    what: "shard index".into(),
                    stored,
                    computed,
                }
                .into());
            }
        }
        let mut index = Vec::with_capacity(layout.num_chunks());
        for (i, pair) in entries.chunks_exact(16).enumerate() {
            let offset = u64::from_le_bytes(pair[..8].try_into().expect("8 bytes"));
            let nbytes = u64::from_le_bytes(pair[8..].try_into().expect("8 bytes"));
            if offset == ABSENT && nbytes == ABSENT {
                index.push(None);
                continue;
            }
            match offset.checked_add(nbytes) {
                Some(end) if end <= len => index.push(Some((offset, nbytes))),
                _ => {
                    return Err(corrupt(format!(
                        "index entry {i} points at bytes {offset}..+{nbytes}, past the end of the {len}-byte shard"
                    )))
                }
            }
        }
        let data = if layout.index_at_end {
            0..index_start as u64
        } else {
            index_len as u64..len
        };
        if let Some(expected) = expected {
            let found = if layout.index_at_end {
                ShardIdentity::decode(&map, index_start)
            } else {
                Err("its index is at its start, where cubeslab writes no identity".into())
            };
            if let Some(message) = match found {
                Ok(found) => expected.mismatch(&found),
                Err(message) => Some(message),
            } {
                return Err(StoreError::Misplaced {
                    array: array.to_path_buf(),
                    key: key.to_string(),
                    message,
                }
                .into());
            }
        }
        if let Some(message) = overlap(&index, data) {
            return Err(corrupt(message));
        }
        let shard = Self {
            key: key.to_string(),
            id,
            watched: Some(watched),
            map: Some(map),
            index,
            inode: Some(stat.ino()),
        };
        shard.check_intact(array, false)?;
        Ok(shard)
    }

    /// Fail if another process cut the file short while it was mapped: the
    /// pages past its new end were read as zeros. With `look`, the file's
    /// size is checked too (a read that failed may have stopped at bytes
    /// past the new end but on its last page, which read as zeros without
    /// a fault).
    pub fn check_intact(&self, array: &Path, look: bool) -> Result<()> {
        let marked = self.watched.as_ref().is_some_and(Watched::cut_short);
        let shrunk = || {
            let mapped = self.map.as_ref().map_or(0, |m| m.len() as u64);
            std::fs::metadata(array.join(&self.key)).is_ok_and(|m| m.len() < mapped)
        };
        if marked || (look && shrunk()) {
            return Err(StoreError::Corrupt {
                array: array.to_path_buf(),
                key: self.key.clone(),
                message: "the shard file was cut short while it was being read (truncated by another process)".into(),
            }
            .into());
        }
        Ok(())
    }

    /// Byte range of inner chunk `i` in the file, if present.
    pub fn range(&self, i: usize) -> Option<(u64, u64)> {
        self.index[i]
    }

    /// Encoded bytes of inner chunk `i`, if present.
    pub fn chunk(&self, i: usize) -> Option<&[u8]> {
        let (offset, nbytes) = self.index[i]?;
        let map = self.map.as_ref()?;
        Some(&map[offset as usize..(offset + nbytes) as usize])
    }

    /// Ask the kernel to start reading `len` bytes at `offset` now, without
    /// waiting: this is how the engine keeps many requests in flight with few
    /// threads.
    pub fn prefetch(&self, offset: u64, len: u64) {
        if let Some(map) = &self.map {
            will_need(map, offset, len);
        }
    }

    /// Whether every page of the range is in the page cache (so reading it
    /// costs memory bandwidth only).
    pub fn is_resident(&self, offset: u64, len: u64) -> bool {
        self.map
            .as_ref()
            .is_none_or(|map| read_ahead::is_resident(map, offset, len))
    }
}
