//! Replacing a store (`--overwrite`) without a moment where nothing is
//! readable: the new store is written beside the old one under a staging
//! name, and swapped into place (one atomic `renameat2(RENAME_EXCHANGE)`)
//! only once it is complete. Until then the old store stays as it was; a
//! run that stops leaves it untouched and the staging folder to be resumed
//! or replaced.

use std::{
    ffi::CString,
    fs,
    os::unix::ffi::OsStrExt,
    path::{Path, PathBuf},
};

use super::{lock::live_holder, Durability, StoreError, StoreLock};
use crate::{error::Result, Error};

/// A store being replaced: the old one locked at `target`, the new one
/// written at `staging`.
#[derive(Debug)]
pub struct Replacement {
    /// Where the store is, and will be.
    pub target: PathBuf,
    /// Where the new store is written meanwhile.
    pub staging: PathBuf,
    /// The old store's lock: no other writer replaces it meanwhile.
    _old: StoreLock,
}

/// The staging folder of a replacement of `target`: a hidden sibling.
pub fn staging_path(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    target.with_file_name(format!(".{name}.cubeslab-new"))
}

impl Replacement {
    /// Begin replacing the store at `target`: refuse a folder holding
    /// anything that is not the store's own (nothing of the user's is ever
    /// deleted), take the old store's lock, and make an empty staging folder
    /// (a staging folder a stopped replacement left is removed first).
    pub fn begin(target: &Path) -> Result<Self> {
        if let Some(pid) = live_holder(target) {
            return Err(StoreError::Busy {
                path: target.to_path_buf(),
                pid,
            }
            .into());
        }
        if !target.join("zarr.json").is_file() {
            return Err(StoreError::NotAStore {
                path: target.to_path_buf(),
            }
            .into());
        }
        if let Some(foreign) = first_foreign_entry(target)? {
            return Err(StoreError::ForeignFiles {
                path: target.to_path_buf(),
                file: foreign,
            }
            .into());
        }
        let old = StoreLock::acquire(target)?;
        let staging = staging_path(target);
        Self::clear_stale(&staging)?;
        fs::create_dir_all(&staging).map_err(|e| Error::io(&staging, e))?;
        Ok(Self {
            target: target.to_path_buf(),
            staging,
            _old: old,
        })
    }

    /// Continue a stopped replacement of `target`: its staging folder is kept.
    pub fn resume(target: &Path) -> Result<Self> {
        let old = StoreLock::acquire(target)?;
        Ok(Self {
            target: target.to_path_buf(),
            staging: staging_path(target),
            _old: old,
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

    /// Swap the complete new store into place and delete the old one. With
    /// `Synced`, the folder holding both is flushed after the swap, so the
    /// swap survives a power cut.
    pub fn commit(self, durability: Durability) -> Result<()> {
        exchange(&self.staging, &self.target)?;
        if durability == Durability::Synced {
            let parent = self.target.parent().unwrap_or(Path::new("."));
            let dir = fs::File::open(parent).map_err(|e| Error::io(parent, e))?;
            dir.sync_all().map_err(|e| Error::io(parent, e))?;
        }
        // The old store now sits at the staging name, its lock inside it.
        fs::remove_dir_all(&self.staging).map_err(|e| Error::io(&self.staging, e))
    }
}

/// Swap two paths atomically; where the filesystem cannot, move the old
/// one aside first (a crash between the two renames leaves both on disk).
fn exchange(new: &Path, old: &Path) -> Result<()> {
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).expect("paths hold no NUL");
    let (a, b) = (c(new), c(old));
    // SAFETY: both are valid NUL-terminated paths for the call's duration.
    let done = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if done == 0 {
        return Ok(());
    }
    let error = std::io::Error::last_os_error();
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
            name == "zarr.json" || name == ".cubeslab.lock" || chunk_key || name.ends_with(".tmp")
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
