//! `cubeslab verify` of a store on object storage: one listing finds its
//! arrays and which shards exist, then every shard is read back with
//! checksums on, as a local store's are.

use std::{collections::HashSet, path::PathBuf};

use serde_json::Value;

use super::{ArrayCheck, StoreCheck};
use crate::{
    config::Parallelism,
    error::Result,
    remote::{remote_node, store_keys, RemoteArray, S3Url, StorageOptions},
    store::{ReadOptions, StoreContents},
    window::{unravel, Window},
};

/// Check every array of the store at `url`.
pub fn check_remote_store(
    url: &S3Url,
    options: &StorageOptions,
    parallelism: Parallelism,
) -> Result<StoreCheck> {
    let root = remote_node(url, options)?;
    let state = StoreContents::of_node(&PathBuf::from(url.to_string()), &root).state;
    let keys: HashSet<String> = store_keys(url, options)?.into_iter().collect();
    let mut check = StoreCheck {
        path: PathBuf::from(url.to_string()),
        state,
        arrays: Vec::new(),
        unreadable: Vec::new(),
        leftovers: Vec::new(),
    };
    let mut nodes: Vec<&String> = keys.iter().filter(|k| k.ends_with("zarr.json")).collect();
    nodes.sort();
    for node in nodes {
        let name = node.trim_end_matches("zarr.json").trim_end_matches('/');
        let array_url = if name.is_empty() {
            url.clone()
        } else {
            url.join(name)
        };
        let document = remote_node(&array_url, options)?;
        if document.get("node_type").and_then(Value::as_str) != Some("array") {
            continue;
        }
        let name = if name.is_empty() { "." } else { name };
        match RemoteArray::open(&array_url, options) {
            Ok(array) => check
                .arrays
                .push(check_array(&array, name, &keys, parallelism)),
            Err(error) => check.unreadable.push((name.to_string(), error.to_string())),
        }
    }
    Ok(check)
}

fn check_array(
    array: &RemoteArray,
    name: &str,
    keys: &HashSet<String>,
    parallelism: Parallelism,
) -> ArrayCheck {
    let grid = array.chunk_grid_shape().to_vec();
    let n: u64 = grid.iter().product();
    let elem = array.dtype().size();
    let read = ReadOptions {
        parallelism,
        verify: true,
    };
    let mut check = ArrayCheck {
        name: name.to_string(),
        shards: n,
        ..Default::default()
    };
    for i in 0..n {
        let indices = unravel(i, &grid)[..grid.len()].to_vec();
        let key = array.chunk_key(&indices);
        let full = if name == "." {
            key.clone()
        } else {
            format!("{name}/{key}")
        };
        if !keys.contains(&full) {
            if !array.shape().is_empty() {
                check.absent.push(key);
            }
            continue;
        }
        let window = Window::of_chunk(&indices, array.chunk_shape(), array.shape());
        let mut buffer = vec![0u8; window.num_elements() as usize * elem];
        match array.read_into(&window, &mut buffer, &read) {
            Ok(()) => check.shards_read += 1,
            Err(error) => check.bad.push((key, error.to_string())),
        }
    }
    check
}
