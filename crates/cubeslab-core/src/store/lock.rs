//! One writer per store: an ingest holds `.cubeslab.lock` (its pid and host)
//! inside the store while it writes. Another ingest, even with overwrite,
//! refuses a store whose lock is held by a live process; a lock left by a
//! process that died is stale and taken over.

use std::{
    fs,
    path::{Path, PathBuf},
};

use serde_json::{json, Value};

use super::StoreError;
use crate::{error::Result, Error};

/// The file in a store (or its staging folder) that its writer holds.
pub const LOCK_FILE: &str = ".cubeslab.lock";
/// The file in an array whose byte ranges lock its chunks while window
/// writers replace them (see the `writer` module).
pub const WRITE_LOCK_FILE: &str = ".cubeslab-write.lock";

/// A held store lock; released when dropped.
#[derive(Debug)]
pub struct StoreLock {
    path: PathBuf,
}

fn host() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// The pid holding the lock of `store`, if a live process on this host does.
pub fn live_holder(store: &Path) -> Option<u32> {
    let text = fs::read_to_string(store.join(LOCK_FILE)).ok()?;
    let holder: Value = serde_json::from_str(&text).ok()?;
    let pid = holder.get("pid")?.as_u64()? as u32;
    if holder.get("host").and_then(Value::as_str) != Some(host().as_str()) {
        // Another machine's writer (a shared filesystem): assume it is alive.
        return Some(pid);
    }
    (process_alive(pid) && pid != std::process::id()).then_some(pid)
}

/// Whether process `pid` runs on this host (one of another user's counts).
pub fn process_alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    let status = unsafe { libc::kill(pid as libc::pid_t, 0) };
    status == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

impl StoreLock {
    /// Take the lock of `store` (a directory that exists).
    pub fn acquire(store: &Path) -> Result<Self> {
        if let Some(pid) = live_holder(store) {
            return Err(StoreError::Busy {
                path: store.to_path_buf(),
                pid,
            }
            .into());
        }
        let path = store.join(LOCK_FILE);
        let _ = fs::remove_file(&path); // stale, if any
                                        // Written whole under a name of its own, then linked into place: no
                                        // other process ever reads a lock without its holder in it (and takes
                                        // it for a stale one).
        let whole = store.join(format!("{LOCK_FILE}.{}.tmp", std::process::id()));
        fs::write(&whole, holder().to_string()).map_err(|e| Error::io(&whole, e))?;
        let linked = fs::hard_link(&whole, &path);
        let _ = fs::remove_file(&whole);
        linked.map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                // Another writer took it between the check and here.
                StoreError::Busy {
                    path: store.to_path_buf(),
                    pid: live_holder(store).unwrap_or(0),
                }
                .into()
            } else {
                Error::io(&path, e)
            }
        })?;
        Ok(Self { path })
    }

    /// The folder holding the lock was renamed to `folder`: the lock is
    /// released there.
    pub fn moved_to(&mut self, folder: &Path) {
        self.path = folder.join(LOCK_FILE);
    }
}

/// This process's entry in a lock file.
fn holder() -> Value {
    json!({"pid": std::process::id(), "host": host()})
}

impl Drop for StoreLock {
    fn drop(&mut self) {
        // Only our own: a folder removed and made again may hold another's.
        let ours = fs::read_to_string(&self.path)
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .is_some_and(|held| held == holder());
        if ours {
            let _ = fs::remove_file(&self.path);
        }
    }
}
