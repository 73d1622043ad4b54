//! An array in a local folder as a writer's [`ChunkStorage`]: a chunk is
//! replaced by a new file renamed over it, under a byte-range lock on that
//! chunk that every writer of the array in any process shares.

use std::{
    fs::{self, File},
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use serde_json::Value;

use super::storage::{ChunkStorage, Stamp};
use crate::{
    compress::ChunkErrors,
    error::Result,
    store::{read_metadata, write_json_atomic, Durability, ReadOptions, StoreError, ZarrArray},
    window::Window,
};

/// The byte of the lock file that stands for the array's metadata (chunk
/// ids stay far below it).
const METADATA_LOCK: u64 = i64::MAX as u64;

/// An array in a folder, open for writing.
pub struct LocalChunks {
    array: ZarrArray,
}

impl LocalChunks {
    /// Open the array in the folder `path` (refused as a read would be).
    pub fn open(path: &Path) -> Result<Self> {
        Ok(Self {
            array: ZarrArray::open_to_read(path)?,
        })
    }
}

fn file_stamp(path: &Path) -> Stamp {
    match fs::metadata(path) {
        Ok(m) => Stamp::File {
            inode: m.ino(),
            mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
            len: m.len(),
        },
        Err(_) => Stamp::Absent,
    }
}

impl ChunkStorage for LocalChunks {
    fn array(&self) -> &ZarrArray {
        &self.array
    }

    fn chunk_name(&self, indices: &[u64]) -> PathBuf {
        self.array.chunk_path(indices)
    }

    fn metadata_name(&self) -> PathBuf {
        self.array.path().join("zarr.json")
    }

    fn stamp(&self, indices: &[u64]) -> Result<Stamp> {
        let stamp = file_stamp(&self.array.chunk_path(indices));
        let inode = match stamp {
            Stamp::File { inode, .. } => Some(inode),
            _ => None,
        };
        // The read that follows must see this version, not a shard file this
        // handle opened before another writer replaced it.
        self.array.forget_shard_unless(indices, inode);
        Ok(stamp)
    }

    fn read_into(&self, window: &Window, out: &mut [u8], options: &ReadOptions) -> Result<()> {
        self.array.read_into(window, out, options)
    }

    fn replace_chunk(
        &self,
        indices: &[u64],
        data: &[u8],
        read: &Stamp,
    ) -> Result<(Stamp, Option<ChunkErrors>)> {
        let grid = self.array.chunk_grid_shape();
        let id = indices.iter().zip(&grid).fold(0, |id, (i, n)| id * n + i);
        let _lock = ChunkLock::take(self.array.path(), id)?;
        let path = self.array.chunk_path(indices);
        if &file_stamp(&path) != read {
            return Err(StoreError::Conflict { path }.into());
        }
        let errors = self.array.write_chunk(indices, data)?;
        Ok((file_stamp(&path), errors))
    }

    fn update_metadata(&self, change: &mut dyn FnMut(&mut Value) -> bool) -> Result<()> {
        update_metadata(self.array.path(), change)
    }
}

/// Change the `zarr.json` of the array in `dir` under the array's metadata
/// lock.
pub(super) fn update_metadata(
    dir: &Path,
    change: &mut dyn FnMut(&mut Value) -> bool,
) -> Result<()> {
    let _lock = ChunkLock::take(dir, METADATA_LOCK)?;
    let mut metadata = read_metadata(dir)?;
    if change(&mut metadata) {
        write_json_atomic(&dir.join("zarr.json"), &metadata, Durability::Cached)?;
    }
    Ok(())
}

/// An exclusive lock on one chunk of an array, shared by every writer of
/// it in any process: an open-file-description byte-range lock on byte
/// `id` of a lock file in the array, held while the chunk is checked and
/// replaced.
struct ChunkLock {
    _file: File,
}

impl ChunkLock {
    fn take(array: &Path, id: u64) -> Result<Self> {
        use std::os::fd::AsRawFd;
        let path: PathBuf = array.join(crate::store::WRITE_LOCK_FILE);
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| crate::Error::io(&path, e))?;
        // SAFETY: a zeroed flock is valid; the fields set below describe the range.
        let mut range: libc::flock = unsafe { std::mem::zeroed() };
        range.l_type = libc::F_WRLCK as libc::c_short;
        range.l_whence = libc::SEEK_SET as libc::c_short;
        range.l_start = id as libc::off_t;
        range.l_len = 1;
        // SAFETY: fcntl on a descriptor this function owns, with a valid flock.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLKW, &range) } != 0 {
            return Err(crate::Error::io(&path, std::io::Error::last_os_error()));
        }
        Ok(Self { _file: file })
    }
}
