//! Fetching a source file (a SEG-Y, an imzML and its `.ibd`, ...) from
//! object storage to a local file, streamed, so that an ingest reads it as
//! it reads any file.

use std::{io::Write, path::Path};

use futures::StreamExt;
use object_store::{path::Path as Key, ObjectStoreExt};

use super::{
    client::{block_on, connect},
    RemoteError, S3Url, StorageOptions,
};
use crate::{error::Result, Error};

/// Copy the object at `url` to the file `to` (created or replaced); its
/// size in bytes.
pub fn download(url: &S3Url, options: &StorageOptions, to: &Path) -> Result<u64> {
    let client = connect(url, options)?;
    let failed = |e| Error::from(RemoteError::from_client(&url.to_string(), "download", e));
    let mut file = std::fs::File::create(to).map_err(|e| Error::io(to, e))?;
    block_on(async {
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
    })
}
