//! Reading nodes' `zarr.json` documents, and the errors that name them.

use std::{fs, path::Path};

use serde_json::Value;

use super::{staging_path, StoreError};
use crate::{error::Result, Error};

/// Read and parse a `zarr.json` file.
pub fn read_metadata(dir: &Path) -> Result<Value> {
    let file = dir.join("zarr.json");
    let text = match fs::read(&file) {
        Ok(t) => t,
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.raw_os_error() == Some(libc::ENOTDIR) =>
        {
            return Err(unfinished(dir)
                .unwrap_or_else(|| StoreError::NotFound {
                    path: dir.to_path_buf(),
                })
                .into())
        }
        Err(e) => return Err(Error::io(&file, e)),
    };
    serde_json::from_slice(&text).map_err(|e| {
        StoreError::Metadata {
            path: file,
            message: format!("not valid JSON: {e}"),
        }
        .into()
    })
}

/// Why nothing is at `dir` if a store there, or the store holding it, is
/// still being written (or was stopped) under its staging name.
fn unfinished(dir: &Path) -> Option<StoreError> {
    let store = [Some(dir), dir.parent()]
        .into_iter()
        .flatten()
        .find(|p| staging_path(p).join("zarr.json").is_file())?;
    Some(StoreError::Unfinished {
        path: store.to_path_buf(),
        staging: staging_path(store),
    })
}

pub(super) fn metadata_error(dir: &Path, message: impl Into<String>) -> Error {
    StoreError::Metadata {
        path: dir.join("zarr.json"),
        message: message.into(),
    }
    .into()
}

pub(super) fn u64_list(v: Option<&Value>) -> Option<Vec<u64>> {
    v?.as_array()?.iter().map(Value::as_u64).collect()
}
