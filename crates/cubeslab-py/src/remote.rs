//! Bindings for stores named by a path or a URL: where a name points, what a
//! store holds, copying to and from object storage, and publishing a store.

use std::{collections::BTreeMap, path::PathBuf};

use cubeslab_core::{
    destination::Destination,
    remote::{
        download as core_download, download_store as core_download_store, remote_contents,
        remote_node, stored_bytes as core_stored_bytes, upload_folder as core_upload_folder,
        Location, S3Url, StorageOptions,
    },
    store::{read_metadata, Durability, StoreContents},
};
use pyo3::prelude::*;

use crate::errors::engine;

fn parse(py: Python<'_>, text: &str) -> PyResult<Location> {
    engine(py, || Ok(Location::parse(text)?))
}

/// `text` as an `s3://` URL; anything else is refused.
pub(crate) fn s3_url(py: Python<'_>, text: &str) -> PyResult<S3Url> {
    match parse(py, text)? {
        Location::S3(url) => Ok(url),
        Location::Local(_) => Err(crate::errors::invalid_input(format!(
            "{text}: not an object-storage URL"
        ))),
    }
}

/// Run `work` on the engine's side with `text` as an object-storage URL and
/// the connection's options.
fn on_s3<T: Send>(
    py: Python<'_>,
    text: &str,
    storage_options: Option<BTreeMap<String, String>>,
    work: impl FnOnce(&S3Url, &StorageOptions) -> cubeslab_core::error::Result<T> + Send,
) -> PyResult<T> {
    let url = s3_url(py, text)?;
    let options = storage_options.unwrap_or_default();
    engine(py, || work(&url, &options))
}

/// `("local", path)` or `("s3", url)` for a store or source name; a scheme
/// cubeslab does not support raises `InvalidInputError`.
#[pyfunction]
pub fn location(py: Python<'_>, text: &str) -> PyResult<(&'static str, String)> {
    Ok(match parse(py, text)? {
        Location::Local(path) => ("local", path.to_string_lossy().into_owned()),
        Location::S3(url) => ("s3", url.to_string()),
    })
}

/// A node's `zarr.json` as JSON text; a store still being written (under
/// its staging name) is an `IncompleteStoreError`, not a missing one.
#[pyfunction]
#[pyo3(signature = (path, storage_options=None))]
pub fn read_node(
    py: Python<'_>,
    path: &str,
    storage_options: Option<BTreeMap<String, String>>,
) -> PyResult<String> {
    let options = storage_options.unwrap_or_default();
    let node = match parse(py, path)? {
        Location::Local(path) => engine(py, || read_metadata(&path))?,
        Location::S3(url) => engine(py, || remote_node(&url, &options))?,
    };
    Ok(node.to_string())
}

/// What the store at `path` holds (state, attributes, main array, its
/// copies) as JSON; `to_read`: refused unless it may be read.
#[pyfunction]
#[pyo3(signature = (path, to_read=true, storage_options=None))]
pub fn store_contents(
    py: Python<'_>,
    path: &str,
    to_read: bool,
    storage_options: Option<BTreeMap<String, String>>,
) -> PyResult<String> {
    let options = storage_options.unwrap_or_default();
    let contents = match parse(py, path)? {
        Location::Local(path) => engine(py, || {
            if to_read {
                StoreContents::open_to_read(&path)
            } else {
                StoreContents::read(&path)
            }
        })?,
        Location::S3(url) => engine(py, || remote_contents(&url, &options, to_read))?,
    };
    Ok(contents.to_json().to_string())
}

/// The text array (an axis's labels) at `path`, a folder or an `s3://`
/// URL: its shape and values (C order).
#[pyfunction]
#[pyo3(signature = (path, storage_options=None))]
pub fn read_text_array(
    py: Python<'_>,
    path: &str,
    storage_options: Option<BTreeMap<String, String>>,
) -> PyResult<(Vec<u64>, Vec<String>)> {
    let options = storage_options.unwrap_or_default();
    match parse(py, path)? {
        Location::Local(path) => engine(py, || cubeslab_core::store::read_text(&path)),
        Location::S3(url) => engine(py, || {
            cubeslab_core::remote::read_remote_text(&url, &options)
        }),
    }
}

/// Bytes of every object under `url`.
#[pyfunction]
#[pyo3(signature = (url, storage_options=None))]
pub fn stored_bytes(
    py: Python<'_>,
    url: &str,
    storage_options: Option<BTreeMap<String, String>>,
) -> PyResult<u64> {
    on_s3(py, url, storage_options, core_stored_bytes)
}

/// Copy the object at `url` to the local file `to`; its size in bytes and
/// its version (the ETag, else its time and size).
#[pyfunction]
#[pyo3(signature = (url, to, storage_options=None))]
pub fn download(
    py: Python<'_>,
    url: &str,
    to: PathBuf,
    storage_options: Option<BTreeMap<String, String>>,
) -> PyResult<(u64, String)> {
    on_s3(py, url, storage_options, |parsed, options| {
        parsed.file_only(url)?;
        core_download(parsed, options, &to).map(|d| (d.bytes, d.version))
    })
}

/// Copy every object of the store at `url` into the folder `to`; the bytes copied.
#[pyfunction]
#[pyo3(signature = (url, to, storage_options=None))]
pub fn download_store(
    py: Python<'_>,
    url: &str,
    to: PathBuf,
    storage_options: Option<BTreeMap<String, String>>,
) -> PyResult<u64> {
    on_s3(py, url, storage_options, |url, options| {
        core_download_store(url, options, &to)
    })
}

/// Upload every file under `folder` but node documents to the same names
/// under `url`; the names uploaded.
#[pyfunction]
#[pyo3(signature = (folder, url, storage_options=None))]
pub fn upload_folder(
    py: Python<'_>,
    folder: PathBuf,
    url: &str,
    storage_options: Option<BTreeMap<String, String>>,
) -> PyResult<Vec<String>> {
    on_s3(py, url, storage_options, |url, options| {
        core_upload_folder(&folder, url, options)
    })
}

/// A store written in a staging folder and published only when complete:
/// moved into place, or uploaded with its completion last (see
/// `cubeslab_core::destination`).
#[pyclass]
pub struct Publication {
    inner: Option<Destination>,
}

#[pymethods]
impl Publication {
    /// Begin a store for `target` (a path or a URL); an existing one is
    /// replaced only with `overwrite`.
    #[new]
    #[pyo3(signature = (target, overwrite, storage_options=None))]
    fn begin(
        py: Python<'_>,
        target: &str,
        overwrite: bool,
        storage_options: Option<BTreeMap<String, String>>,
    ) -> PyResult<Self> {
        let location = parse(py, target)?;
        let options = storage_options.unwrap_or_default();
        Ok(Self {
            inner: Some(engine(py, || {
                Destination::begin(&location, &options, overwrite)
            })?),
        })
    }

    /// Where the store is written meanwhile.
    #[getter]
    fn staging(&self) -> PyResult<PathBuf> {
        self.inner
            .as_ref()
            .map(|p| p.staging().to_path_buf())
            .ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("already published"))
    }

    /// Publish the complete store (`durable`: flushed to the device first).
    fn commit(&mut self, py: Python<'_>, durable: bool) -> PyResult<()> {
        let publication = self
            .inner
            .take()
            .ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("already published"))?;
        engine(py, move || {
            let durability = if durable {
                cubeslab_core::store::sync_tree(publication.staging())?;
                Durability::Synced
            } else {
                Durability::Cached
            };
            publication.commit(durability)
        })
    }
}
