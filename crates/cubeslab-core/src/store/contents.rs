//! What a store holds, as a reader opens it: its state, its attributes, the
//! array reads go to and that array's orientation copies. The attribute
//! names that say so are defined here, for the writers too.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::{
    group::{CUBESLAB_ATTR, MAIN_ARRAY_ATTR},
    read_metadata, recorded_generation, Group, StoreError, StoreState,
};
use crate::error::Result;

/// The main array of a group that does not name one (MDIO v1 stores).
pub const MAIN_ARRAY_FALLBACK: &str = "amplitude";
/// Where, inside the group's `cubeslab` attributes, the orientation copies
/// are listed: `{access: {"array": name, ...}}`.
pub const VIEWS_ATTR: &str = "views";
/// The key of a copy's array name in its entry.
pub const VIEW_ARRAY_KEY: &str = "array";

/// A store (a group, or a lone array) as a reader sees it.
#[derive(Debug, Clone)]
pub struct StoreContents {
    /// The store's folder.
    pub path: PathBuf,
    /// Whether the store is a group (or a lone array).
    pub is_group: bool,
    /// Whether it may be read.
    pub state: StoreState,
    /// The group's attributes (empty for a lone array).
    pub attributes: Map<String, Value>,
    /// The array reads go to.
    pub main: PathBuf,
    /// The main array's orientation copies.
    pub copies: Vec<PathBuf>,
}

impl StoreContents {
    /// Read what the store at `path` holds, whatever its state. A group of
    /// another tool that names no main array and has none called
    /// [`MAIN_ARRAY_FALLBACK`] reads its one data array (xarray's layout:
    /// the others are coordinates), or is refused naming its arrays.
    pub fn read(path: &Path) -> Result<Self> {
        let mut contents = Self::of_node(path, &read_metadata(path)?);
        if contents.is_group
            && contents.state == StoreState::Foreign
            && declared_main(&contents.attributes).is_none()
            && !contents.main.join("zarr.json").is_file()
        {
            contents.main = path.join(sole_data_array(path)?);
        }
        Ok(contents)
    }

    /// What a store holds, from its root node's `zarr.json` (`node`), with
    /// its arrays named under `path` (a folder, or a URL).
    pub fn of_node(path: &Path, node: &Value) -> Self {
        if node.get("node_type").and_then(Value::as_str) != Some("group") {
            return Self {
                path: path.to_path_buf(),
                is_group: false,
                state: node
                    .get("attributes")
                    .and_then(Value::as_object)
                    .map_or(StoreState::Foreign, StoreState::recorded_in),
                attributes: Map::new(),
                main: path.to_path_buf(),
                copies: Vec::new(),
            };
        }
        let group = Group {
            path: path.to_path_buf(),
            attributes: node
                .get("attributes")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
        };
        let main = declared_main(&group.attributes).unwrap_or(MAIN_ARRAY_FALLBACK);
        let copies = group
            .attributes
            .get(CUBESLAB_ATTR)
            .and_then(|c| c.get(VIEWS_ATTR))
            .and_then(Value::as_object)
            .map(|views| {
                views
                    .values()
                    .filter_map(|v| v.get(VIEW_ARRAY_KEY).and_then(Value::as_str))
                    .map(|name| path.join(name))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            path: path.to_path_buf(),
            is_group: true,
            state: group.state(),
            main: path.join(main),
            copies,
            attributes: group.attributes,
        }
    }

    /// What the store at `path` holds, refused unless it may be read: an
    /// ingest that did not finish, or a main array from another generation
    /// than the group (the store was swapped while being opened).
    pub fn open_to_read(path: &Path) -> Result<Self> {
        let contents = Self::read(path)?;
        contents.check_readable(|| read_metadata(&contents.main))?;
        Ok(contents)
    }

    /// Fail unless the store may be read: not an ingest that did not finish,
    /// and a main array (its `zarr.json` from `main_node`) of the group's
    /// generation.
    pub fn check_readable(&self, main_node: impl FnOnce() -> Result<Value>) -> Result<()> {
        if let StoreState::Incomplete(state) = &self.state {
            return Err(StoreError::Incomplete {
                path: self.path.clone(),
                state: state.clone(),
            }
            .into());
        }
        if self.is_group {
            let main_generation = main_node()?
                .get("attributes")
                .and_then(Value::as_object)
                .and_then(recorded_generation);
            if main_generation != recorded_generation(&self.attributes) {
                return Err(StoreError::Changed {
                    path: self.path.clone(),
                }
                .into());
            }
        }
        Ok(())
    }

    /// The state as words: `complete`, the incomplete state's name, or
    /// [`super::FOREIGN`].
    pub fn state_name(&self) -> String {
        match &self.state {
            StoreState::Complete => super::group::COMPLETE.into(),
            StoreState::Created => super::group::CREATED.into(),
            StoreState::Incomplete(state) => state.clone(),
            StoreState::Foreign => super::group::FOREIGN.into(),
        }
    }

    /// The contents as JSON, for a caller in another language.
    pub fn to_json(&self) -> Value {
        json!({
            "path": self.path,
            "node_type": if self.is_group { "group" } else { "array" },
            "state": self.state_name(),
            "attributes": self.attributes,
            "main": self.main,
            "copies": self.copies,
        })
    }
}

/// The main array a group's attributes name (MDIO's `defaultVariableName`).
fn declared_main(attributes: &Map<String, Value>) -> Option<&str> {
    attributes
        .get("attributes")
        .and_then(|a| a.get(MAIN_ARRAY_ATTR))
        .and_then(Value::as_str)
}

/// The one array of the group at `path` that is not a coordinate: a 1-D
/// array named as its own dimension, one another array lists in its
/// `coordinates` attribute (as xarray writes them), or text labels.
fn sole_data_array(path: &Path) -> Result<String> {
    let entries = std::fs::read_dir(path).map_err(|e| crate::error::Error::io(path, e))?;
    let mut arrays: Vec<(String, Value)> = Vec::new();
    let mut members: Vec<String> = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(node) = read_metadata(&entry.path()) else {
            continue; // not a node of this group
        };
        members.push(name.clone());
        if node.get("node_type").and_then(Value::as_str) == Some("array") {
            arrays.push((name, node));
        }
    }
    members.sort();
    arrays.sort_by(|a, b| a.0.cmp(&b.0));
    let listed: std::collections::HashSet<&str> = arrays
        .iter()
        .filter_map(|(_, node)| node.pointer("/attributes/coordinates")?.as_str())
        .flat_map(str::split_whitespace)
        .collect();
    let is_coordinate = |(name, node): &(String, Value)| {
        listed.contains(name.as_str())
            || super::is_text(node)
            || node
                .get("dimension_names")
                .and_then(Value::as_array)
                .is_some_and(|dims| dims.len() == 1 && dims[0].as_str() == Some(name))
    };
    let data: Vec<&String> = arrays
        .iter()
        .filter(|a| !is_coordinate(a))
        .map(|(name, _)| name)
        .collect();
    match data.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(StoreError::NoDataArray {
            path: path.to_path_buf(),
            members: if members.is_empty() {
                "none".into()
            } else {
                members.join(", ")
            },
        }
        .into()),
        _ => Err(StoreError::NoMainArray {
            path: path.to_path_buf(),
            arrays: data
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }
        .into()),
    }
}
