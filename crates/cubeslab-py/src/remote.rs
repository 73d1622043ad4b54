//! Bindings for stores named by a path or a URL: where a name points, what a
//! store holds, arrays on object storage, and publishing a store.

use std::{collections::BTreeMap, path::PathBuf};

use cubeslab_core::{
    config::Parallelism,
    destination::Destination,
    plan::DeviceProfile,
    remote::{
        download as core_download, download_store as core_download_store, open_writer,
        remote_contents, remote_node, stored_bytes as core_stored_bytes,
        upload_folder as core_upload_folder, Location, RemoteVolume, S3Url, StorageOptions,
    },
    store::{read_metadata, Durability, ReadOptions, StoreContents, StoreError},
    writer::ArrayWriter,
};
use pyo3::{buffer::PyBuffer, prelude::*};

use crate::{cache_info, errors::engine, into_buffer, window, write_window};

fn parse(py: Python<'_>, text: &str) -> PyResult<Location> {
    engine(py, || Ok(Location::parse(text)?))
}

/// `text` as an `s3://` URL; anything else is refused.
fn s3_url(py: Python<'_>, text: &str) -> PyResult<S3Url> {
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

/// Copy the object at `url` to the local file `to`; its size in bytes.
#[pyfunction]
#[pyo3(signature = (url, to, storage_options=None))]
pub fn download(
    py: Python<'_>,
    url: &str,
    to: PathBuf,
    storage_options: Option<BTreeMap<String, String>>,
) -> PyResult<u64> {
    on_s3(py, url, storage_options, |url, options| {
        core_download(url, options, &to)
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

/// An array of a store on object storage, with the orientation copies its
/// reads may go to; with a write-back cache, open for window writes too.
#[pyclass(frozen)]
pub struct RemoteArray {
    inner: RemoteVolume,
    writer: Option<ArrayWriter>,
}

impl RemoteArray {
    fn writer(&self) -> cubeslab_core::error::Result<&ArrayWriter> {
        self.writer.as_ref().ok_or_else(|| {
            StoreError::ReadOnly {
                path: self.inner.volume().url().to_string().into(),
            }
            .into()
        })
    }
}

#[pymethods]
impl RemoteArray {
    /// Open the array at `url` (`s3://bucket/key`) with `copies` of it in
    /// other layouts (URLs), each read going to the one predicted fastest
    /// for reads with these settings; with `cache` (bytes), for window
    /// writes through a write-back cache.
    #[new]
    #[pyo3(signature = (url, storage_options=None, cache=None, copies=Vec::new(), threads=None, in_flight=None, verify=true))]
    #[allow(clippy::too_many_arguments)]
    fn open(
        py: Python<'_>,
        url: &str,
        storage_options: Option<BTreeMap<String, String>>,
        cache: Option<u64>,
        copies: Vec<String>,
        threads: Option<usize>,
        in_flight: Option<usize>,
        verify: bool,
    ) -> PyResult<Self> {
        let url = s3_url(py, url)?;
        let copies = copies
            .iter()
            .map(|c| s3_url(py, c))
            .collect::<PyResult<Vec<_>>>()?;
        let options: StorageOptions = storage_options.unwrap_or_default();
        let writer = match cache {
            Some(limit) => Some(engine(py, || open_writer(&url, &options, limit))?),
            None => None,
        };
        let read = ReadOptions {
            parallelism: Parallelism::resolve_remote(threads, in_flight),
            verify,
        };
        Ok(Self {
            inner: engine(py, || {
                RemoteVolume::open(&url, &copies, &options, DeviceProfile::typical(), &read)
            })?,
            writer,
        })
    }

    /// Write `data` (C-contiguous bytes of the window's shape) into the
    /// window, through the write-back cache.
    fn write(
        &self,
        py: Python<'_>,
        starts: Vec<u64>,
        stops: Vec<u64>,
        steps: Vec<u64>,
        data: PyBuffer<u8>,
    ) -> PyResult<()> {
        write_window(py, &starts, &stops, &steps, &data, || self.writer())
    }

    /// Write every cached change to the store.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        engine(py, || self.writer()?.flush())
    }

    /// The write-back cache's counts as JSON.
    fn cache_info(&self, py: Python<'_>) -> PyResult<String> {
        cache_info(py, || self.writer())
    }

    /// Index of the array (0 the volume, then the copies) a read of the
    /// window goes to.
    fn route(
        &self,
        py: Python<'_>,
        starts: Vec<u64>,
        stops: Vec<u64>,
        steps: Vec<u64>,
    ) -> PyResult<usize> {
        let window = window(&starts, &stops, &steps)?;
        engine(py, || self.inner.route(&window))
    }

    #[getter]
    fn shape(&self) -> Vec<u64> {
        self.inner.volume().shape().to_vec()
    }

    #[getter]
    fn dtype(&self) -> &'static str {
        self.inner.volume().dtype().name()
    }

    #[getter]
    fn chunk_shape(&self) -> Vec<u64> {
        self.inner.volume().chunk_shape().to_vec()
    }

    #[getter]
    fn inner_chunk_shape(&self) -> Option<Vec<u64>> {
        self.inner.volume().inner_chunk_shape().map(<[u64]>::to_vec)
    }

    #[getter]
    fn metadata_json(&self) -> String {
        self.inner.volume().metadata().to_string()
    }

    /// Read the window (start, stop, step per dimension) into `out`, a
    /// writable C-contiguous buffer of bytes.
    #[pyo3(signature = (starts, stops, steps, out, threads=None, in_flight=None, verify=true))]
    #[allow(clippy::too_many_arguments)]
    fn read_into(
        &self,
        py: Python<'_>,
        starts: Vec<u64>,
        stops: Vec<u64>,
        steps: Vec<u64>,
        out: PyBuffer<u8>,
        threads: Option<usize>,
        in_flight: Option<usize>,
        verify: bool,
    ) -> PyResult<()> {
        let window = window(&starts, &stops, &steps)?;
        let options = ReadOptions {
            parallelism: Parallelism::resolve_remote(threads, in_flight),
            verify,
        };
        into_buffer(py, &out, |slice| match &self.writer {
            Some(writer) => writer.read_into(&window, slice, &options),
            None => self.inner.read_into(&window, slice, &options),
        })
    }
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
