//! Crash-safe file writes: write a temporary sibling, then rename over the
//! final name, so a reader (or a later resume) sees the old file or the new
//! one, never half of one.

use std::{
    fs,
    io::Write,
    path::{Path, PathBuf},
};

use super::{
    aligned_buffer::AlignedBuffer,
    direct_write::{write_direct, write_direct_aligned, DIRECT_MIN_BYTES},
};
use crate::{error::Result, Error};

/// How far a write has gone when it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Into the page cache; the kernel writes it back in its own time. A
    /// crash of the process loses nothing, a power cut may.
    Cached,
    /// Onto the device: the file is flushed (fsync) before it is renamed
    /// into place, and its folder after, so a power cut leaves the old file
    /// or the new one.
    Synced,
}

/// Write `bytes` to `path` atomically, creating parent directories.
pub fn write_atomic(path: &Path, bytes: &[u8], durability: Durability) -> Result<()> {
    replace(path, durability, |tmp| {
        let direct = bytes.len() >= DIRECT_MIN_BYTES && write_direct(tmp, bytes)?;
        if !direct {
            fs::File::create(tmp)?.write_all(bytes)?;
        }
        Ok(())
    })
}

/// [`write_atomic`] of bytes in an aligned buffer, which a direct write
/// hands the device without copying them.
pub fn write_atomic_aligned(
    path: &Path,
    buffer: &mut AlignedBuffer,
    durability: Durability,
) -> Result<()> {
    replace(path, durability, |tmp| {
        let direct = buffer.len() >= DIRECT_MIN_BYTES && write_direct_aligned(tmp, buffer)?;
        if !direct {
            fs::File::create(tmp)?.write_all(buffer)?;
        }
        Ok(())
    })
}

/// Write a temporary sibling of `path` with `write`, then rename it over `path`.
fn replace(
    path: &Path,
    durability: Durability,
    write: impl FnOnce(&Path) -> std::io::Result<()>,
) -> Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let tmp = temporary_name(path);
    let written = || -> std::io::Result<()> {
        write(&tmp)?;
        if durability == Durability::Synced {
            // Direct writes reach the device, but the file's size and
            // blocks are metadata that only a flush makes durable.
            fs::File::open(&tmp)?.sync_all()?;
        }
        fs::rename(&tmp, path)
    };
    written().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        Error::io(path, e)
    })?;
    if durability == Durability::Synced {
        sync_path(dir)?;
    }
    Ok(())
}

/// Write a JSON document atomically, pretty-printed like other Zarr tools.
pub fn write_json_atomic(
    path: &Path,
    value: &serde_json::Value,
    durability: Durability,
) -> Result<()> {
    let text = serde_json::to_string_pretty(value).expect("JSON values always serialise");
    write_atomic(path, text.as_bytes(), durability)
}

/// Flush every file and folder under `root` (and `root` itself) to the
/// device. Folders are flushed after their contents, so the names written
/// by renames are on the device too.
pub fn sync_tree(root: &Path) -> Result<()> {
    let entries = fs::read_dir(root).map_err(|e| Error::io(root, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(root, e))?;
        let path = entry.path();
        let kind = entry.file_type().map_err(|e| Error::io(&path, e))?;
        if kind.is_dir() {
            sync_tree(&path)?;
        } else if kind.is_file() {
            sync_path(&path)?;
        }
    }
    sync_path(root)
}

/// fsync one file or folder.
fn sync_path(path: &Path) -> Result<()> {
    fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io(path, e))
}

fn temporary_name(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.tmp", std::process::id()));
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_synced_write_replaces_the_file_whole_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b.json");
        for durability in [Durability::Cached, Durability::Synced] {
            write_atomic(&path, b"first", durability).unwrap();
            write_atomic(&path, b"second", durability).unwrap();
            assert_eq!(fs::read(&path).unwrap(), b"second");
            let names: Vec<_> = fs::read_dir(path.parent().unwrap()).unwrap().collect();
            assert_eq!(names.len(), 1, "only b.json, no temporary file");
        }
        sync_tree(dir.path()).unwrap();
    }
}
