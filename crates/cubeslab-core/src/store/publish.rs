//! Publishing a store only when it is complete. Every ingest writes its
//! store under a staging name beside the target (a hidden sibling), and
//! moves it into place once complete:
//! - a new store by one rename, so an unfinished store never sits where
//!   readers (cubeslab, zarr-python, xarray) look for one;
//! - over an existing store (`--overwrite`) by one atomic
//!   `renameat2(RENAME_EXCHANGE)`, so there is no moment where nothing is
//!   readable, then the old one is deleted.
//!
//! A run that stops leaves the target as it was and the staging folder to
//! be resumed, or replaced by a new run with `--overwrite`.

use std::{
    ffi::CString,
    fs,
    os::unix::ffi::OsStrExt,
    path::{Path, PathBuf},
};

use super::{
    lock::{live_holder, LOCK_FILE, WRITE_LOCK_FILE},
    Durability, StoreError, StoreLock,
};
use crate::{error::Result, Error};

/// A store being written at `staging`, to be published at `target`.
#[derive(Debug)]
pub struct Publication {
    /// Where the store will be.
    pub target: PathBuf,
    /// Where it is written meanwhile.
    pub staging: PathBuf,
    /// The lock of the store it replaces, if any: no other writer replaces
    /// that one meanwhile.
    old: Option<StoreLock>,
    /// The staging folder's lock: another run for the same target cannot
    /// clear or mix into it. Released once the store is in place.
    staging_lock: Option<StoreLock>,
}

/// The staging folder of the store at `target`: a hidden sibling.
pub fn staging_path(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    target.with_file_name(format!(".{name}.cubeslab-new"))
}

impl Publication {
    /// Begin writing a store for `target`. An existing store there is
    /// replaced only with `overwrite`, and only if its folder holds nothing
    /// that is not the store's own (nothing of the user's is ever deleted);
    /// its lock is taken. An empty folder may be replaced too. A staging
    /// folder a stopped run left is removed first.
    pub fn begin(target: &Path, overwrite: bool) -> Result<Self> {
        let old = if target.exists() {
            // An empty folder holds nothing to lose: a user may make it first, as for `create`.
            if !overwrite && !is_empty_dir(target) {
                return Err(StoreError::AlreadyExists {
                    path: target.to_path_buf(),
                }
                .into());
            }
            if let Some(pid) = live_holder(target) {
                return Err(StoreError::Busy {
                    path: target.to_path_buf(),
                    pid,
                }
                .into());
            }
            if target.join("zarr.json").is_file() {
                if let Some(foreign) = first_foreign_entry(target)? {
                    return Err(StoreError::ForeignFiles {
                        path: target.to_path_buf(),
                        file: foreign,
                    }
                    .into());
                }
                Some(StoreLock::acquire(target)?)
            } else if is_empty_dir(target) {
                None
            } else {
                return Err(StoreError::NotAStore {
                    path: target.to_path_buf(),
                }
                .into());
            }
        } else {
            None
        };
        let staging = staging_path(target);
        if staging.exists() && !overwrite {
            return Err(StoreError::Unfinished {
                path: target.to_path_buf(),
                staging,
            }
            .into());
        }
        Self::clear_stale(&staging)?;
        // Named by the store asked for: the staging folder beside it is an internal name.
        fs::create_dir_all(&staging).map_err(|e| Error::io(target, e))?;
        Ok(Self {
            target: target.to_path_buf(),
            staging_lock: Some(StoreLock::acquire(&staging)?),
            staging,
            old,
        })
    }

    /// Continue a stopped run for `target`: its staging folder is kept.
    pub fn resume(target: &Path) -> Result<Self> {
        let old = if target.join("zarr.json").is_file() {
            Some(StoreLock::acquire(target)?)
        } else {
            None
        };
        let staging = staging_path(target);
        Ok(Self {
            target: target.to_path_buf(),
            staging_lock: Some(StoreLock::acquire(&staging)?),
            staging,
            old,
        })
    }

    fn clear_stale(staging: &Path) -> Result<()> {
        if !staging.exists() {
            return Ok(());
        }
        if let Some(pid) = live_holder(staging) {
            return Err(StoreError::Busy {
                path: staging.to_path_buf(),
                pid,
            }
            .into());
        }
        if let Some(foreign) = first_foreign_entry(staging)? {
            return Err(StoreError::ForeignFiles {
                path: staging.to_path_buf(),
                file: foreign,
            }
            .into());
        }
        fs::remove_dir_all(staging).map_err(|e| Error::io(staging, e))
    }

    /// Move the complete store into place: renamed, or swapped with the
    /// store it replaces, which is then deleted. With `Synced`, the folder
    /// holding both is flushed after the move, so it survives a power cut.
    pub fn commit(mut self, durability: Durability) -> Result<()> {
        let replacing = self.old.is_some();
        if replacing {
            exchange(&self.staging, &self.target)?;
        } else {
            if is_empty_dir(&self.target) {
                fs::remove_dir(&self.target).map_err(|e| Error::io(&self.target, e))?;
            }
            rename_new(&self.staging, &self.target)?;
        }
        // Both locks moved with their folders: held through the move (no
        // other run clears the staging folder meanwhile), released where
        // they are now, once the old store is gone.
        if let Some(lock) = self.staging_lock.as_mut() {
            lock.moved_to(&self.target);
        }
        if let Some(lock) = self.old.as_mut() {
            lock.moved_to(&self.staging);
        }
        if durability == Durability::Synced {
            let parent = self.target.parent().unwrap_or(Path::new("."));
            let dir = fs::File::open(parent).map_err(|e| Error::io(parent, e))?;
            dir.sync_all().map_err(|e| Error::io(parent, e))?;
        }
        if replacing {
            // The old store now sits at the staging name, its lock inside it.
            fs::remove_dir_all(&self.staging).map_err(|e| Error::io(&self.staging, e))?;
        }
        Ok(())
    }
}

pub(crate) fn is_empty_dir(path: &Path) -> bool {
    path.is_dir() && fs::read_dir(path).is_ok_and(|mut d| d.next().is_none())
}

/// `renameat2(from, to, flags)`.
fn renameat2(from: &Path, to: &Path, flags: libc::c_uint) -> std::io::Result<()> {
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).expect("paths hold no NUL");
    let (a, b) = (c(from), c(to));
    // SAFETY: both are valid NUL-terminated paths for the call's duration.
    let done = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            flags,
        )
    };
    if done == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Rename `new` to `target`, refusing to replace anything that appeared
/// there meanwhile.
fn rename_new(new: &Path, target: &Path) -> Result<()> {
    let Err(error) = renameat2(new, target, libc::RENAME_NOREPLACE) else {
        return Ok(());
    };
    match error.raw_os_error() {
        Some(libc::EEXIST) => Err(StoreError::AlreadyExists {
            path: target.to_path_buf(),
        }
        .into()),
        // Filesystems without the flag: check, then rename.
        Some(libc::EINVAL) | Some(libc::ENOSYS) if !target.exists() => {
            fs::rename(new, target).map_err(|e| Error::io(target, e))
        }
        _ => Err(Error::io(target, error)),
    }
}

/// Swap two paths atomically; where the filesystem cannot, move the old
/// one aside first (a crash between the two renames leaves both on disk).
fn exchange(new: &Path, old: &Path) -> Result<()> {
    let Err(error) = renameat2(new, old, libc::RENAME_EXCHANGE) else {
        return Ok(());
    };
    if !matches!(
        error.raw_os_error(),
        Some(libc::EINVAL) | Some(libc::ENOSYS)
    ) {
        return Err(Error::io(old, error));
    }
    let aside = old.with_file_name(format!(
        "{}.cubeslab-old",
        old.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    fs::rename(old, &aside).map_err(|e| Error::io(old, e))?;
    fs::rename(new, old).map_err(|e| Error::io(new, e))?;
    fs::rename(&aside, new).map_err(|e| Error::io(&aside, e))
}

/// The first entry under `dir` that is not a Zarr store's own (node
/// metadata, chunk folders and files named by chunk keys, cubeslab's lock
/// and temporary files), if any.
pub fn first_foreign_entry(dir: &Path) -> Result<Option<PathBuf>> {
    for entry in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let kind = entry.file_type().map_err(|e| Error::io(&path, e))?;
        let chunk_key = !name.is_empty() && name.chars().all(|c| c.is_ascii_digit() || c == '.');
        let ours = if kind.is_dir() {
            name == "c" || chunk_key || path.join("zarr.json").is_file()
        } else {
            name == "zarr.json"
                || name == LOCK_FILE
                || name == WRITE_LOCK_FILE
                || chunk_key
                || name.ends_with(".tmp")
        };
        if !ours {
            return Ok(Some(path));
        }
        if kind.is_dir() {
            if let Some(found) = first_foreign_entry(&path)? {
                return Ok(Some(found));
            }
        }
    }
    Ok(None)
}
