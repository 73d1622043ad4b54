//! The array class the Python package reads and writes through: a Zarr v3
//! array in a folder or on object storage, with the orientation copies its
//! reads may go to, or open for window writes.

use std::{collections::BTreeMap, path::PathBuf};

use cubeslab_core::{
    config::Parallelism,
    dtype::DType,
    error::Result as CoreResult,
    handle::ArrayHandle,
    plan::DeviceProfile,
    remote::{RemoteVolume, StorageOptions},
    store::{ArraySpec, ReadOptions, ZarrArray as CoreArray},
    writer::ArrayWriter,
};
use pyo3::{buffer::PyBuffer, prelude::*};
use serde_json::Value;

use crate::{bytes_of, errors::engine, into_buffer, options, remote::s3_url, window};

/// Where the array is: a folder's handle or an object store's.
enum Opened {
    Local(ArrayHandle),
    Remote(RemoteVolume),
}

impl Opened {
    fn shape(&self) -> &[u64] {
        match self {
            Self::Local(h) => h.volume().shape(),
            Self::Remote(v) => v.volume().shape(),
        }
    }

    fn dtype(&self) -> DType {
        match self {
            Self::Local(h) => h.volume().dtype(),
            Self::Remote(v) => v.volume().dtype(),
        }
    }

    fn chunk_shape(&self) -> &[u64] {
        match self {
            Self::Local(h) => h.volume().chunk_shape(),
            Self::Remote(v) => v.volume().chunk_shape(),
        }
    }

    fn inner_chunk_shape(&self) -> Option<&[u64]> {
        match self {
            Self::Local(h) => h.volume().inner_chunk_shape(),
            Self::Remote(v) => v.volume().inner_chunk_shape(),
        }
    }

    fn metadata(&self) -> &Value {
        match self {
            Self::Local(h) => h.volume().metadata(),
            Self::Remote(v) => v.volume().metadata(),
        }
    }

    fn writer(&self) -> CoreResult<&ArrayWriter> {
        match self {
            Self::Local(h) => h.writer(),
            Self::Remote(v) => v.writer(),
        }
    }
}

/// An open Zarr v3 array, with the orientation copies its reads may go to.
#[pyclass(frozen)]
pub struct ZarrArray {
    inner: Opened,
}

#[pymethods]
impl ZarrArray {
    /// Open `path` for reading, with `copies` of it in other layouts; each
    /// read goes to the one predicted fastest on `profile` (JSON text;
    /// default the typical machine) with these read settings. With `cache`
    /// (bytes), open it for window writes through a write-back cache.
    #[new]
    #[pyo3(signature = (path, copies=Vec::new(), profile=None, threads=None, in_flight=None, verify=true, cache=None))]
    #[allow(clippy::too_many_arguments)]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        copies: Vec<PathBuf>,
        profile: Option<&str>,
        threads: Option<usize>,
        in_flight: Option<usize>,
        verify: bool,
        cache: Option<u64>,
    ) -> PyResult<Self> {
        let inner = match cache {
            Some(limit) => engine(py, || ArrayHandle::open_for_writing(&path, limit))?,
            None => {
                let profile = options::device_profile(profile)?;
                let options = ReadOptions {
                    parallelism: Parallelism::resolve(threads, in_flight),
                    verify,
                };
                engine(py, || ArrayHandle::open(&path, &copies, profile, &options))?
            }
        };
        Ok(Self {
            inner: Opened::Local(inner),
        })
    }

    /// Open the array at `url` (`s3://bucket/key`) as `open` does a folder's
    /// (the copies are URLs; routes are costed for the typical machine).
    #[staticmethod]
    #[pyo3(signature = (url, storage_options=None, cache=None, copies=Vec::new(), threads=None, in_flight=None, verify=true))]
    #[allow(clippy::too_many_arguments)]
    fn remote(
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
        let options: StorageOptions = storage_options.unwrap_or_default();
        let inner = match cache {
            Some(limit) => engine(py, || RemoteVolume::open_for_writing(&url, &options, limit))?,
            None => {
                let copies = copies
                    .iter()
                    .map(|c| s3_url(py, c))
                    .collect::<PyResult<Vec<_>>>()?;
                let read = ReadOptions {
                    parallelism: Parallelism::resolve_remote(threads, in_flight),
                    verify,
                };
                engine(py, || {
                    RemoteVolume::open(&url, &copies, &options, DeviceProfile::typical(), &read)
                })?
            }
        };
        Ok(Self {
            inner: Opened::Remote(inner),
        })
    }

    /// Create an array from a JSON spec.
    #[staticmethod]
    fn create(py: Python<'_>, path: PathBuf, spec: &str) -> PyResult<()> {
        let spec: ArraySpec = options::array_spec(spec)?;
        engine(py, || CoreArray::create(&path, &spec).map(drop))
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
        engine(py, || match &self.inner {
            Opened::Local(h) => h.route(&window),
            Opened::Remote(v) => v.route(&window),
        })
    }

    #[getter]
    fn shape(&self) -> Vec<u64> {
        self.inner.shape().to_vec()
    }

    #[getter]
    fn dtype(&self) -> &'static str {
        self.inner.dtype().name()
    }

    #[getter]
    fn chunk_shape(&self) -> Vec<u64> {
        self.inner.chunk_shape().to_vec()
    }

    #[getter]
    fn inner_chunk_shape(&self) -> Option<Vec<u64>> {
        self.inner.inner_chunk_shape().map(<[u64]>::to_vec)
    }

    #[getter]
    fn metadata_json(&self) -> String {
        self.inner.metadata().to_string()
    }

    /// Read the window (start, stop, step per dimension) into `out`, a
    /// writable C-contiguous buffer of bytes (`ndarray.view(np.uint8)`).
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
        into_buffer(py, &out, |slice| match &self.inner {
            Opened::Local(h) => {
                h.read_into(&window, slice, &read_options(threads, in_flight, verify))
            }
            Opened::Remote(v) => {
                let options = ReadOptions {
                    parallelism: Parallelism::resolve_remote(threads, in_flight),
                    verify,
                };
                v.read_into(&window, slice, &options)
            }
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
        let slice = bytes_of(&data, "data")?;
        let window = window(&starts, &stops, &steps)?;
        engine(py, move || self.inner.writer()?.write(&window, slice))
    }

    /// Write every cached change to the store.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        engine(py, || self.inner.writer()?.flush())
    }

    /// Drop the shards another process replaced since this handle read them
    /// (of an array in a folder); whether any was.
    fn forget_replaced_shards(&self, py: Python<'_>) -> PyResult<bool> {
        engine(py, || match &self.inner {
            Opened::Local(handle) => handle.forget_replaced_shards(),
            // Reads fetch shards afresh; a writer's clean chunks may be old.
            Opened::Remote(volume) => volume
                .writer()
                .map_or(Ok(false), ArrayWriter::forget_replaced),
        })
    }

    /// The write-back cache's counts as JSON (`hits`, `misses`,
    /// `evictions`, `flushes`, `bytes`, `dirty_bytes`, `limit`).
    fn cache_info(&self, py: Python<'_>) -> PyResult<String> {
        let info = engine(py, || Ok(self.inner.writer()?.cache_info()))?;
        Ok(serde_json::to_string(&info).expect("counts serialise"))
    }

    /// Write the whole array from a C-contiguous buffer of its bytes (an
    /// array in a folder, without copies).
    #[pyo3(signature = (data, threads=None))]
    fn write_array(
        &self,
        py: Python<'_>,
        data: PyBuffer<u8>,
        threads: Option<usize>,
    ) -> PyResult<()> {
        let slice = bytes_of(&data, "data")?;
        let Opened::Local(handle) = &self.inner else {
            return Err(crate::errors::invalid_input(
                "an array on object storage is written through window writes",
            ));
        };
        if handle.arrays().len() > 1 {
            return Err(crate::errors::invalid_input(
                "this array has orientation copies, which a write would leave behind; write the store anew",
            ));
        }
        let parallelism = Parallelism::resolve(threads, None);
        engine(py, move || handle.write_whole(slice, parallelism))
    }
}

/// A read's settings from the keyword arguments every `read_into` takes.
pub(crate) fn read_options(
    threads: Option<usize>,
    in_flight: Option<usize>,
    verify: bool,
) -> ReadOptions {
    ReadOptions {
        parallelism: Parallelism::resolve(threads, in_flight),
        verify,
    }
}
