//! Writers of one array in any process: which file a cached chunk came
//! from, and the lock a write-back holds on its chunk.

use std::{
    fs::{self, File},
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use crate::error::Result;

/// Which file a chunk was read from: written back only over the same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stamp {
    Absent,
    File { inode: u64, mtime_ns: i64, len: u64 },
}

impl Stamp {
    pub(super) fn of(path: &Path) -> Self {
        match fs::metadata(path) {
            Ok(m) => Stamp::File {
                inode: m.ino(),
                mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
                len: m.len(),
            },
            Err(_) => Stamp::Absent,
        }
    }
}

/// An exclusive lock on one chunk of an array, shared by every writer of
/// it in any process: an open-file-description byte-range lock on byte
/// `id` of a lock file in the array, held while the chunk is checked and
/// replaced.
pub(super) struct ChunkLock {
    _file: File,
}

impl ChunkLock {
    pub(super) fn take(array: &Path, id: u64) -> Result<Self> {
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
