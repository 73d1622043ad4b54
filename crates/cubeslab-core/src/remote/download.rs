//! Fetching from object storage to local files, streamed: a source file (a
//! SEG-Y, an imzML and its `.ibd`, ...), so that an ingest reads it as it
//! reads any file, or a whole store, for the exports that write from one.

use std::{io::Write, path::Path, sync::Arc};

use futures::{StreamExt, TryStreamExt};
use object_store::{ObjectStore, ObjectStoreExt};

use super::{
    client::{block_on, connect},
    store_objects, RemoteError, S3Url, StorageOptions,
};

/// Objects fetched at once by [`download_store`].
const OBJECTS_IN_FLIGHT: usize = 16;
use crate::{error::Result, Error};

/// An object copied to a local file.
#[derive(Debug, Clone)]
pub struct Downloaded {
    /// Its size in bytes.
    pub bytes: u64,
    /// Its version as the server tells it: the ETag, else its time and size.
    pub version: String,
}

/// Copy the object at `url` to the file `to` (created or replaced); a
/// bucket or a folder is refused ([`S3Url::file_only`]).
pub fn download(url: &S3Url, options: &StorageOptions, to: &Path) -> Result<Downloaded> {
    url.file_only(&url.to_string())?;
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
                fetch(&client, &object, &path).await.map(|d| d.bytes)
            }
        }))
        .buffer_unordered(OBJECTS_IN_FLIGHT)
        .try_collect(),
    )?;
    Ok(sizes.iter().sum())
}

/// Stream the object at `url` into the file `to`.
async fn fetch(client: &Arc<dyn ObjectStore>, url: &S3Url, to: &Path) -> Result<Downloaded> {
    let failed = |e| Error::from(RemoteError::from_client(&url.to_string(), "download", e));
    let mut file = std::fs::File::create(to).map_err(|e| Error::io(to, e))?;
    let got = client.get(&url.object_key()?).await.map_err(failed)?;
    let version = match &got.meta.e_tag {
        Some(tag) => tag.clone(),
        None => format!("{} {}", got.meta.last_modified.to_rfc3339(), got.meta.size),
    };
    let mut stream = got.into_stream();
    let mut size = 0u64;
    while let Some(piece) = stream.next().await {
        let piece = piece.map_err(failed)?;
        file.write_all(&piece).map_err(|e| Error::io(to, e))?;
        size += piece.len() as u64;
    }
    Ok(Downloaded {
        bytes: size,
        version,
    })
}
