//! `ChunkedFileArray`: an HDF5 dataset or NetCDF 4 variable read in place
//! (core `chunked_file`), described by the Python side from h5py.

use std::path::PathBuf;

use cubeslab_core::{
    chunked_file::{ChunkedFile, ChunkedFileSpec, Storage, StoredChunk},
    dtype::DType,
};
use pyo3::{buffer::PyBuffer, prelude::*};

use crate::errors::{engine, invalid_input};

/// A dataset in another program's file, read through its chunk index.
#[pyclass(frozen)]
pub struct ChunkedFileArray {
    inner: ChunkedFile,
}

#[pymethods]
impl ChunkedFileArray {
    /// Open dataset `dataset` of `path`: `dtype` names the element type,
    /// `fill_value` is one element in the file's byte order. Contiguous
    /// data gives `offset`; chunked data gives `chunk_shape`, `filters`
    /// (HDF5 id, client values, name, in the order applied) and `chunks`, a
    /// uint64 buffer of one row per stored chunk: its origin along each
    /// dimension, then byte offset, stored size and filter mask.
    #[new]
    #[pyo3(signature = (path, dataset, shape, dtype, big_endian, fill_value, *, offset=None, chunk_shape=None, filters=Vec::new(), chunks=None))]
    #[allow(clippy::too_many_arguments)]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        dataset: String,
        shape: Vec<u64>,
        dtype: &str,
        big_endian: bool,
        fill_value: Vec<u8>,
        offset: Option<u64>,
        chunk_shape: Option<Vec<u64>>,
        filters: Vec<(u32, Vec<u32>, String)>,
        chunks: Option<PyBuffer<u64>>,
    ) -> PyResult<Self> {
        let dtype = DType::from_name(dtype)
            .ok_or_else(|| invalid_input(format!("{dataset}: unsupported type {dtype}")))?;
        let storage = match (offset, chunk_shape) {
            (Some(offset), None) => Storage::Contiguous { offset },
            (None, Some(shape_of_chunk)) => {
                let rows = match chunks {
                    Some(buffer) => buffer.to_vec(py)?,
                    None => Vec::new(),
                };
                let width = shape.len() + 3;
                if rows.len() % width != 0 {
                    return Err(invalid_input(format!(
                        "{dataset}: the chunk table's rows hold {width} numbers"
                    )));
                }
                let chunks = rows
                    .chunks_exact(width)
                    .map(|row| StoredChunk {
                        origin: row[..shape.len()].to_vec(),
                        offset: row[shape.len()],
                        size: row[shape.len() + 1],
                        filter_mask: row[shape.len() + 2] as u32,
                    })
                    .collect();
                Storage::Chunked {
                    shape: shape_of_chunk,
                    chunks,
                    filters,
                }
            }
            _ => {
                return Err(invalid_input(format!(
                    "{dataset}: give offset (contiguous) or chunk_shape (chunked)"
                )))
            }
        };
        let spec = ChunkedFileSpec {
            path,
            dataset,
            shape,
            dtype,
            big_endian,
            fill_value,
            storage,
        };
        Ok(Self {
            inner: engine(py, || ChunkedFile::open(spec))?,
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

    /// The chunk shape reads work in.
    #[getter]
    fn chunk_shape(&self) -> Vec<u64> {
        self.inner.chunk_shape().to_vec()
    }

    /// Always `None`: the file's chunks are not sharded.
    #[getter]
    fn inner_chunk_shape(&self) -> Option<Vec<u64>> {
        None
    }

    /// How many chunks are stored (the rest hold the fill value).
    #[getter]
    fn stored_chunks(&self) -> usize {
        self.inner.stored_chunks()
    }

    /// Read the window into `out`, as `ZarrArray.read_into`.
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
        let window = crate::window(&starts, &stops, &steps)?;
        let options = crate::array::read_options(threads, in_flight, verify);
        crate::into_buffer(py, &out, |slice| {
            self.inner.read_into(&window, slice, &options)
        })
    }
}
