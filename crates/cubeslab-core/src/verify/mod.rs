//! `cubeslab verify`: re-read every chunk of a store with checksums on, and
//! report what is damaged, missing or unfinished — optionally, how far the
//! stored samples are from a SEG-Y source ([`against`]).
//!
//! Each shard is read whole first (one call, the fast path); only a shard
//! that fails is read again chunk by chunk, so that every bad chunk is
//! named, not just the first.

pub mod against;
mod remote;

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde_json::{json, Value};

use crate::{
    config::Parallelism,
    error::Result,
    store::{read_metadata, ReadOptions, StoreContents, StoreState, ZarrArray},
    window::{unravel, DimRange, Window},
};

pub use against::{compare_with_segy, Comparison};
pub use remote::check_remote_store;

/// What checking one array found.
#[derive(Debug, Clone, Default)]
pub struct ArrayCheck {
    /// Array path relative to the store.
    pub name: String,
    /// Grid cells (shard files, or chunk files when unsharded) in the array.
    pub shards: u64,
    /// Shard files read back in full.
    pub shards_read: u64,
    /// Keys of absent shard files (they read as the fill value).
    pub absent: Vec<String>,
    /// `(key, message)` of every chunk or shard that failed to read.
    pub bad: Vec<(String, String)>,
}

impl ArrayCheck {
    /// As JSON (absent keys summarised).
    pub fn to_json(&self) -> Value {
        json!({
            "shards": self.shards,
            "shards_read": self.shards_read,
            "absent_shards": self.absent.len(),
            "absent_examples": self.absent.iter().take(5).collect::<Vec<_>>(),
            "bad": self.bad.iter().map(|(k, m)| json!({"chunk": k, "error": m})).collect::<Vec<_>>(),
        })
    }
}

/// Read every shard of `array` back with checksums on (never off: that is
/// the point) and name every chunk that fails.
pub fn check_array(array: &ZarrArray, name: &str, parallelism: Parallelism) -> ArrayCheck {
    let grid = array.chunk_grid_shape();
    let n: u64 = grid.iter().product();
    let shape = array.shape();
    let shard = array.chunk_shape();
    // Shards are read one per worker, each on a single thread.
    let one = ReadOptions {
        parallelism: Parallelism::resolve(Some(1), Some(parallelism.in_flight)),
        verify: true,
    };
    let elem = array.dtype().size();
    // Per shard: its key if absent, and its bad chunks.
    type Found = (Option<String>, Vec<(String, String)>);
    let results: Vec<Found> = parallelism.pool().install(|| {
        (0..n)
            .into_par_iter()
            .map(|i| {
                let indices = unravel(i, &grid)[..grid.len()].to_vec();
                let path = array.chunk_path(&indices);
                let key = relative_key(array.path(), &path);
                if !path.is_file() {
                    // A zero-dimensional array with no chunk holds attributes
                    // only (the SEG-Y file headers, MDIO's too): nothing absent.
                    let holder = shape.is_empty();
                    return (if holder { None } else { Some(key) }, Vec::new());
                }
                let window = Window::of_chunk(&indices, shard, shape);
                let mut buffer = vec![0u8; window.num_elements() as usize * elem];
                match array.read_into(&window, &mut buffer, &one) {
                    Ok(()) => (None, Vec::new()),
                    Err(error) => (None, bad_chunks(array, &window, &key, error, &one)),
                }
            })
            .collect()
    });
    let mut check = ArrayCheck {
        name: name.to_string(),
        shards: n,
        ..Default::default()
    };
    for (absent, bad) in results {
        match absent {
            Some(key) => check.absent.push(key),
            None if shape.is_empty() && !array.chunk_path(&[]).is_file() => {}
            None => check.shards_read += 1,
        }
        check.bad.extend(bad);
    }
    check
}

/// The failing chunks of a shard that failed to read as a whole: each inner
/// chunk read on its own (or the shard's own error, if it has no inner chunks
/// or fails before any chunk, as a bad index does).
fn bad_chunks(
    array: &ZarrArray,
    shard_window: &Window,
    key: &str,
    shard_error: crate::Error,
    options: &ReadOptions,
) -> Vec<(String, String)> {
    let Some(inner) = array.inner_chunk_shape() else {
        return vec![(key.to_string(), shard_error.to_string())];
    };
    let elem = array.dtype().size();
    let origin: Vec<u64> = shard_window.dims.iter().map(|r| r.start).collect();
    let extent = shard_window.shape();
    let per: Vec<u64> = extent
        .iter()
        .zip(inner)
        .map(|(e, c)| e.div_ceil(*c))
        .collect();
    let cps: Vec<u64> = array
        .chunk_shape()
        .iter()
        .zip(inner)
        .map(|(s, c)| s / c)
        .collect();
    let mut bad = Vec::new();
    for j in 0..per.iter().product::<u64>() {
        let pos = unravel(j, &per);
        let dims = (0..per.len())
            .map(|d| {
                let start = origin[d] + pos[d] * inner[d];
                DimRange::new(start, (start + inner[d]).min(origin[d] + extent[d]))
            })
            .collect();
        let window = Window { dims };
        let mut buffer = vec![0u8; window.num_elements() as usize * elem];
        if let Err(error) = array.read_into(&window, &mut buffer, options) {
            let mut flat = 0u64;
            for d in 0..per.len() {
                flat = flat * cps[d] + pos[d];
            }
            bad.push((format!("{key} (inner chunk {flat})"), error.to_string()));
        }
    }
    if bad.is_empty() {
        bad.push((key.to_string(), shard_error.to_string()));
    }
    bad
}

fn relative_key(array_dir: &Path, path: &Path) -> String {
    path.strip_prefix(array_dir)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// What checking a store found.
#[derive(Debug, Clone)]
pub struct StoreCheck {
    /// The store.
    pub path: PathBuf,
    /// Its recorded completion state.
    pub state: StoreState,
    /// Each array, in path order.
    pub arrays: Vec<ArrayCheck>,
    /// Arrays that could not be opened: (name, message).
    pub unreadable: Vec<(String, String)>,
    /// Temporary files an interrupted write left behind.
    pub leftovers: Vec<String>,
}

impl StoreCheck {
    /// Whether nothing is wrong.
    pub fn ok(&self) -> bool {
        // A store cubeslab marked complete has every shard of its arrays
        // written; one missing reads as fill values, so it is a loss. In a
        // foreign store an absent chunk is the Zarr way to say "fill value".
        let complete = matches!(self.state, StoreState::Complete);
        !matches!(self.state, StoreState::Incomplete(_))
            && self.unreadable.is_empty()
            && self
                .arrays
                .iter()
                .all(|a| a.bad.is_empty() && (!complete || a.absent.is_empty()))
    }

    /// As JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "store": self.path.display().to_string(),
            "state": match &self.state {
                StoreState::Complete => crate::store::COMPLETE.to_string(),
                StoreState::Created => crate::store::CREATED.to_string(),
                StoreState::Incomplete(s) => format!("incomplete ({s})"),
                StoreState::Foreign => "foreign".to_string(),
            },
            "ok": self.ok(),
            "arrays": self.arrays.iter().map(|a| (a.name.clone(), a.to_json())).collect::<serde_json::Map<_, _>>(),
            "unreadable": self.unreadable.iter().map(|(n, m)| json!({"array": n, "error": m})).collect::<Vec<_>>(),
            "leftovers": self.leftovers,
        })
    }
}

/// Check every array of the store at `path` (a group, or a lone array).
pub fn check_store(path: &Path, parallelism: Parallelism) -> Result<StoreCheck> {
    let meta = read_metadata(path)?;
    // A lone array records its state in its own attributes, as a group does.
    let state = StoreContents::of_node(path, &meta).state;
    let mut check = StoreCheck {
        path: path.to_path_buf(),
        state,
        arrays: Vec::new(),
        unreadable: Vec::new(),
        leftovers: Vec::new(),
    };
    let mut arrays = Vec::new();
    walk(path, path, &mut arrays, &mut check.leftovers);
    arrays.sort();
    for dir in arrays {
        let name = relative_key(path, &dir);
        let name = if name.is_empty() { ".".into() } else { name };
        if read_metadata(&dir).is_ok_and(|m| crate::store::is_text(&m)) {
            check.arrays.push(check_text(&dir, name));
            continue;
        }
        match ZarrArray::open(&dir) {
            Ok(array) => check.arrays.push(check_array(&array, &name, parallelism)),
            Err(error) => check.unreadable.push((name, error.to_string())),
        }
    }
    Ok(check)
}

/// A text array (an axis's labels), read whole: every chunk decoded.
fn check_text(dir: &Path, name: String) -> ArrayCheck {
    let cells = read_metadata(dir)
        .ok()
        .and_then(|m| {
            let shape = m["shape"]
                .as_array()?
                .iter()
                .map(Value::as_u64)
                .collect::<Option<Vec<_>>>()?;
            let chunk = m
                .pointer("/chunk_grid/configuration/chunk_shape")?
                .as_array()?;
            let chunk = chunk
                .iter()
                .map(Value::as_u64)
                .collect::<Option<Vec<_>>>()?;
            Some(
                shape
                    .iter()
                    .zip(&chunk)
                    .map(|(n, c)| n.div_ceil((*c).max(1)))
                    .product(),
            )
        })
        .unwrap_or(1);
    let bad = match crate::store::read_text(dir) {
        Ok(_) => Vec::new(),
        Err(error) => vec![(name.clone(), error.to_string())],
    };
    ArrayCheck {
        name,
        shards: cells,
        shards_read: if bad.is_empty() { cells } else { 0 },
        absent: Vec::new(),
        bad,
    }
}

/// Arrays under `dir` (its `zarr.json` says `node_type: array`), and
/// temporary files left by interrupted writes.
fn walk(root: &Path, dir: &Path, arrays: &mut Vec<PathBuf>, leftovers: &mut Vec<String>) {
    match read_metadata(dir) {
        Ok(meta) if meta["node_type"] == "array" => {
            arrays.push(dir.to_path_buf());
            find_leftovers(root, dir, leftovers);
            return;
        }
        Ok(_) => {}
        Err(_) if dir != root => {
            // A folder without metadata is not a node; a broken zarr.json is
            // reported when the array is opened.
            if dir.join("zarr.json").exists() {
                arrays.push(dir.to_path_buf());
            }
            return;
        }
        Err(_) => {}
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let p = entry.path();
        if p.is_dir() {
            walk(root, &p, arrays, leftovers);
        } else if is_leftover(&p) {
            leftovers.push(relative_key(root, &p));
        }
    }
}

fn find_leftovers(root: &Path, dir: &Path, leftovers: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let p = entry.path();
        if p.is_dir() {
            find_leftovers(root, &p, leftovers);
        } else if is_leftover(&p) {
            leftovers.push(relative_key(root, &p));
        }
    }
}

fn is_leftover(p: &Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(".tmp") || n.contains(".tmp."))
}
