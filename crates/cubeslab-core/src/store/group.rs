//! Zarr v3 groups: the node that holds a survey's arrays and attributes, and
//! the completion state an ingest records in it.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::{read_metadata, write_json_atomic, Durability, StoreError};
use crate::error::Result;

/// Where cubeslab keeps its own bookkeeping inside a group's attributes.
pub const CUBESLAB_ATTR: &str = "cubeslab";
/// The group attribute (MDIO's, under `attributes`) naming the main array.
pub const MAIN_ARRAY_ATTR: &str = "defaultVariableName";
/// The main array's attribute (MDIO's) holding the statistics of its data as
/// ingested; the first write that changes the data removes it.
pub const STATS_V1: &str = "statsV1";

/// Whether a store may be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreState {
    /// Written by a cubeslab ingest that finished.
    Complete,
    /// Made empty by cubeslab's `create` and filled by window writes: a
    /// chunk never written is absent and holds the fill value, as in Zarr.
    Created,
    /// Written by a cubeslab ingest that has not finished (or crashed).
    Incomplete(String),
    /// Written by another tool (MDIO, zarr-python, ...): taken as it is.
    Foreign,
}

/// The `cubeslab.state` of a store an ingest finished.
pub const COMPLETE: &str = "complete";
/// The `cubeslab.state` of a store `create` made.
pub const CREATED: &str = "created";
/// How a store's state reads when it records none: another tool made it,
/// or cubeslab's plain `Array` did.
pub const FOREIGN: &str = "foreign (not from a cubeslab ingest or create)";

impl StoreState {
    /// The state recorded in a store's root node's `attributes` (a group's,
    /// or a lone array's).
    pub fn recorded_in(attributes: &Map<String, Value>) -> Self {
        match attributes
            .get(CUBESLAB_ATTR)
            .and_then(|c| c.get("state"))
            .and_then(Value::as_str)
        {
            None => Self::Foreign,
            Some(COMPLETE) => Self::Complete,
            Some(CREATED) => Self::Created,
            Some(other) => Self::Incomplete(other.to_string()),
        }
    }
}

/// Record in the root node of the store at `path` (a group or a lone
/// array) that cubeslab wrote it whole: the last step before it is
/// published.
pub fn mark_complete(path: &Path) -> Result<()> {
    record_state(path, COMPLETE)
}

/// Record in the root node of the store at `path` that `create` made it.
pub fn mark_created(path: &Path) -> Result<()> {
    record_state(path, CREATED)
}

/// Record `state` as the root node's `cubeslab.state`, keeping the rest of
/// the node.
fn record_state(path: &Path, state: &str) -> Result<()> {
    let mut node = read_metadata(path)?;
    let attributes = node
        .as_object_mut()
        .ok_or_else(|| StoreError::Metadata {
            path: path.join("zarr.json"),
            message: "not a JSON object".into(),
        })?
        .entry("attributes")
        .or_insert_with(|| json!({}));
    match attributes.get_mut(CUBESLAB_ATTR) {
        Some(Value::Object(ours)) => {
            ours.insert("state".into(), json!(state));
        }
        _ => {
            attributes[CUBESLAB_ATTR] = json!({ "state": state });
        }
    }
    write_json_atomic(&path.join("zarr.json"), &node, Durability::Cached)
}

/// A Zarr v3 group on disk.
#[derive(Debug, Clone)]
pub struct Group {
    /// Directory of the group.
    pub path: PathBuf,
    /// The group's attributes.
    pub attributes: Map<String, Value>,
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

    /// Create a group at `path` (a folder holding no node yet) whose main
    /// array is `main` (named as MDIO names it, so readers find it; none for
    /// a group that only holds others' arrays), with `extra` attributes
    /// besides.
    pub fn create(path: &Path, main: Option<&str>, extra: &Map<String, Value>) -> Result<()> {
        if path.join("zarr.json").exists() {
            return Err(StoreError::AlreadyExists {
                path: path.to_path_buf(),
            }
            .into());
        }
        std::fs::create_dir_all(path).map_err(|e| crate::Error::io(path, e))?;
        let mut attributes = extra.clone();
        if let Some(main) = main {
            attributes.insert("attributes".into(), json!({ MAIN_ARRAY_ATTR: main }));
        }
        Self::write(path, &attributes, Durability::Cached)
    }

    /// Merge `extra` into the attributes of the group at `path` (objects
    /// merged key by key, so `cubeslab` entries add to those there; a null
    /// removes its key), and rewrite its `zarr.json` atomically.
    pub fn add_attributes(path: &Path, extra: &Map<String, Value>) -> Result<()> {
        let mut group = Self::open(path)?;
        merge_attributes(&mut group.attributes, extra, 2);
        Self::write(path, &group.attributes, Durability::Cached)
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
        StoreState::recorded_in(&self.attributes)
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

/// Merge `extra` into `attributes`, objects key by key down to `depth`
/// levels; a null removes its key.
fn merge_attributes(attributes: &mut Map<String, Value>, extra: &Map<String, Value>, depth: usize) {
    for (key, value) in extra {
        match (attributes.get_mut(key), value) {
            (_, Value::Null) => {
                attributes.remove(key);
            }
            (Some(Value::Object(have)), Value::Object(add)) if depth > 1 => {
                merge_attributes(have, add, depth - 1)
            }
            _ => {
                attributes.insert(key.clone(), value.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_attributes_add_key_by_key_and_a_null_removes() {
        let mut have =
            json!({"ome": {"v": 1}, "cubeslab": {"state": "complete", "pyramid": {"a": 1}}})
                .as_object()
                .unwrap()
                .clone();
        let extra = json!({"ome": null, "cubeslab": {"pyramid": null, "x": {"b": 2}}});
        merge_attributes(&mut have, extra.as_object().unwrap(), 2);
        assert_eq!(
            Value::Object(have),
            json!({"cubeslab": {"state": "complete", "x": {"b": 2}}})
        );
    }
}
