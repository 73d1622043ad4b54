//! Fetching from object storage to local files, streamed: a source file (a
//! SEG-Y, an imzML and its `.ibd`, ...), so that an ingest reads it as it
//! reads any file, or a whole store, for the exports that write from one.

use std::{io::Write, path::Path, sync::Arc};

use futures::{StreamExt, TryStreamExt};
use object_store::{path::Path as Key, ObjectStore, ObjectStoreExt};

use super::{
    client::{block_on, connect},
    store_objects, RemoteError, S3Url, StorageOptions,
};

/// Objects fetched at once by [`download_store`].
const OBJECTS_IN_FLIGHT: usize = 16;
use crate::{error::Result, Error};

/// Copy the object at `url` to the file `to` (created or replaced); its
/// size in bytes.
pub fn download(url: &S3Url, options: &StorageOptions, to: &Path) -> Result<u64> {
    let client = connect(url, options)?;
    block_on(fetch(&client, url, to))
}

/// Copy every object of the store at `url` into the folder `to` (created),
/// under the same names; the bytes copied.
pub fn download_store(url: &S3Url, options: &StorageOptions, to: &Path) -> Result<u64> {
    let client = connect(url, options)?;
    let objects = store_objects(url, options)?;
    let sizes: Vec<u64> = block_on(
        futures::stream::iter(objects.into_iter().map(|(name, _)| {
            let (client, object, path) = (client.clone(), url.join(&name), to.join(&name));
            async move {
                if let Some(folder) = path.parent() {
                    std::fs::create_dir_all(folder).map_err(|e| Error::io(folder, e))?;
                }
                fetch(&client, &object, &path).await
            }
        }))
        .buffer_unordered(OBJECTS_IN_FLIGHT)
        .try_collect(),
    )?;
    Ok(sizes.iter().sum())
}

/// Stream the object at `url` into the file `to`.
async fn fetch(client: &Arc<dyn ObjectStore>, url: &S3Url, to: &Path) -> Result<u64> {
    let failed = |e| Error::from(RemoteError::from_client(&url.to_string(), "download", e));
    let mut file = std::fs::File::create(to).map_err(|e| Error::io(to, e))?;
    let mut stream = client
        .get(&Key::from(url.key.as_str()))
        .await
        .map_err(failed)?
        .into_stream();
    let mut size = 0u64;
    while let Some(piece) = stream.next().await {
        let piece = piece.map_err(failed)?;
        file.write_all(&piece).map_err(|e| Error::io(to, e))?;
        size += piece.len() as u64;
    }
    Ok(size)
}
