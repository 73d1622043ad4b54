//! Zarr v3 groups: the node that holds a survey's arrays and attributes, and
//! the completion state an ingest records in it.

use std::{
    fs,
    path::{Path, PathBuf},
};

use serde_json::{json, Map, Value};

use super::{write_json_atomic, Durability, StoreError};
use crate::{error::Result, Error};

/// Where cubeslab keeps its own bookkeeping inside a group's attributes.
pub const CUBESLAB_ATTR: &str = "cubeslab";

/// Whether a store may be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreState {
    /// Written by a cubeslab ingest that finished.
    Complete,
    /// Written by a cubeslab ingest that has not finished (or crashed).
    Incomplete(String),
    /// Written by another tool (MDIO, zarr-python, ...): taken as it is.
    Foreign,
}

/// A Zarr v3 group on disk.
#[derive(Debug, Clone)]
pub struct Group {
    /// Directory of the group.
    pub path: PathBuf,
    /// The group's attributes.
    pub attributes: Map<String, Value>,
}

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
        .find(|p| super::staging_path(p).join("zarr.json").is_file())?;
    Some(StoreError::Unfinished {
        path: store.to_path_buf(),
        staging: super::staging_path(store),
    })
}

impl Group {
    /// Open the group at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let meta = read_metadata(&path)?;
        if meta.get("node_type").and_then(Value::as_str) != Some("group") {
            return Err(StoreError::Metadata {
                path: path.join("zarr.json"),
                message: format!(
                    "node_type is {}, expected \"group\"",
                    meta.get("node_type").unwrap_or(&Value::Null)
                ),
            }
            .into());
        }
        let attributes = meta
            .get("attributes")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        Ok(Self { path, attributes })
    }

    /// Write (atomically) a group's `zarr.json` with these attributes.
    pub fn write(
        path: &Path,
        attributes: &Map<String, Value>,
        durability: Durability,
    ) -> Result<()> {
        write_json_atomic(
            &path.join("zarr.json"),
            &json!({"zarr_format": 3, "node_type": "group", "attributes": attributes}),
            durability,
        )
    }

    /// The completion state recorded by cubeslab.
    pub fn state(&self) -> StoreState {
        match self
            .attributes
            .get(CUBESLAB_ATTR)
            .and_then(|c| c.get("state"))
            .and_then(Value::as_str)
        {
            None => StoreState::Foreign,
            Some("complete") => StoreState::Complete,
            Some(other) => StoreState::Incomplete(other.to_string()),
        }
    }

    /// Fail unless the store may be read.
    pub fn require_readable(&self) -> Result<()> {
        match self.state() {
            StoreState::Incomplete(state) => Err(StoreError::Incomplete {
                path: self.path.clone(),
                state,
            }
            .into()),
            _ => Ok(()),
        }
    }
}
