//! What a store on object storage holds, read from its `zarr.json`
//! documents as a local store's are from its folders.

use std::{path::Path, sync::Arc};

use futures::TryStreamExt;
use object_store::{ObjectStore, ObjectStoreExt};
use serde_json::Value;

use super::{
    client::{block_on, connect},
    RemoteError, S3Url, StorageOptions,
};
use crate::{
    error::Result,
    store::{StoreContents, StoreError},
};

/// Fetch and parse the JSON document at `url`.
pub(super) fn get_json(
    client: &Arc<dyn ObjectStore>,
    url: &S3Url,
    operation: &str,
) -> Result<Value> {
    let key = url.object_key()?;
    let text = block_on(async { client.get(&key).await?.bytes().await })
        .map_err(|e| RemoteError::from_client(&url.to_string(), operation, e))?;
    crate::store::parse_metadata(&text).map_err(|e| {
        StoreError::Metadata {
            path: url.to_string().into(),
            message: format!("not valid JSON: {e}"),
        }
        .into()
    })
}

/// The `zarr.json` of the node at `url`.
pub fn remote_node(url: &S3Url, options: &StorageOptions) -> Result<Value> {
    let client = connect(url, options)?;
    get_json(&client, &url.join("zarr.json"), "open")
}

/// What the store at `url` holds (its arrays named by URL); with
/// `to_read`, refused unless it may be read.
pub fn remote_contents(
    url: &S3Url,
    options: &StorageOptions,
    to_read: bool,
) -> Result<StoreContents> {
    let client = connect(url, options)?;
    let node = get_json(&client, &url.join("zarr.json"), "open the store").map_err(|e| {
        // A store whose upload stopped has no root document yet.
        match e.part::<RemoteError>() {
            Some(RemoteError::NotFound { .. }) => RemoteError::NotFound {
                url: url.to_string(),
                operation:
                    "open the store (no zarr.json: no store, or one whose upload did not finish)"
                        .into(),
            }
            .into(),
            _ => e,
        }
    })?;
    let root = url.to_string();
    let contents = StoreContents::of_node(Path::new(root.trim_end_matches('/')), &node);
    if to_read {
        contents.check_readable(|| {
            let name = contents
                .main
                .file_name()
                .unwrap_or_default()
                .to_string_lossy();
            let main_url = url.join(&name);
            get_json(&client, &main_url.join("zarr.json"), "open the main array")
        })?;
    }
    Ok(contents)
}

/// The keys of every object under `url`, relative to it.
pub fn store_keys(url: &S3Url, options: &StorageOptions) -> Result<Vec<String>> {
    Ok(store_objects(url, options)?
        .into_iter()
        .map(|(key, _)| key)
        .collect())
}

/// Every object under `url`: its key, relative to `url`, and its size.
pub fn store_objects(url: &S3Url, options: &StorageOptions) -> Result<Vec<(String, u64)>> {
    let client = connect(url, options)?;
    let prefix = url.object_key()?;
    let found = block_on(client.list(Some(&prefix)).try_collect::<Vec<_>>())
        .map_err(|e| RemoteError::from_client(&url.to_string(), "list", e))?;
    Ok(found
        .into_iter()
        .filter_map(|meta| {
            let key = meta.location.to_string();
            let rest = key.strip_prefix(url.key.as_str())?.trim_start_matches('/');
            (!rest.is_empty()).then(|| (rest.to_string(), meta.size))
        })
        .collect())
}
