//! Arrays kept in another program's file, read as they are: an HDF5
//! dataset or a NetCDF 4 variable, chunked or contiguous. The caller (the
//! Python side, through h5py) reads the file's chunk index once and hands
//! it over; from then on reads go straight to the file's bytes — chunks
//! handed to the kernel ahead of the workers, decoded in parallel, their
//! selected elements copied into the output — with no ingest and no copy
//! of the file (the parallel HDF5 reader of the Pyrus study,
//! docs/references.md).
//!
//! * [`filters`]: the HDF5 filter pipeline, undone.
//! * `read`: a window read in parallel.

mod error;
pub mod filters;
mod read;

use std::{fs::File, path::PathBuf};

use memmap2::{Advice, Mmap};

pub use error::ChunkedFileError;
use filters::{Filter, Pipeline};

use crate::{dtype::DType, error::Result, store::Watched, window::MAX_DIMS, Error};

/// Bytes a contiguous dataset's rows are grouped into per task, so that
/// its reads run in parallel like a chunked dataset's.
const CONTIGUOUS_TASK_BYTES: u64 = 1 << 20;

/// Where the array's elements are in the file.
#[derive(Debug, Clone)]
pub enum Storage {
    /// In one run from `offset`, C order.
    Contiguous {
        /// Where the first element is.
        offset: u64,
    },
    /// In chunks of `shape` (edge chunks stored whole), each somewhere in
    /// the file; chunks absent from `chunks` hold the fill value.
    Chunked {
        /// Elements per chunk along each dimension.
        shape: Vec<u64>,
        /// The chunk index: every stored chunk.
        chunks: Vec<StoredChunk>,
        /// The filter pipeline, as HDF5 identifiers and client data, in the
        /// order applied on writing.
        filters: Vec<(u32, Vec<u32>, String)>,
    },
}

/// One stored chunk, as the file's chunk index gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredChunk {
    /// Index of its first element along each dimension.
    pub origin: Vec<u64>,
    /// Where its bytes start in the file.
    pub offset: u64,
    /// How many bytes are stored.
    pub size: u64,
    /// Bit `i` set: filter `i` was skipped for this chunk.
    pub filter_mask: u32,
}

/// What the caller found out about the dataset.
#[derive(Debug, Clone)]
pub struct ChunkedFileSpec {
    /// The file.
    pub path: PathBuf,
    /// The dataset's (or variable's) name, for messages.
    pub dataset: String,
    /// Elements along each dimension.
    pub shape: Vec<u64>,
    /// The element type.
    pub dtype: DType,
    /// Whether the file stores elements big-endian.
    pub big_endian: bool,
    /// One element's bytes, in the file's byte order: the value of chunks
    /// never written.
    pub fill_value: Vec<u8>,
    /// Where the elements are.
    pub storage: Storage,
}

/// Where one chunk of the grid is, if it is stored.
#[derive(Debug, Clone, Copy)]
struct Place {
    offset: u64,
    size: u64,
    mask: u32,
}

/// An open dataset: the file mapped, the chunk index checked.
pub struct ChunkedFile {
    path: PathBuf,
    dataset: String,
    shape: Vec<u64>,
    dtype: DType,
    swap: bool,
    fill: Vec<u8>,
    chunk_shape: Vec<u64>,
    pipeline: Pipeline,
    /// Per chunk of the grid, C order.
    places: Vec<Option<Place>>,
    /// Declared before `map`: unregistered before the unmap.
    watched: Watched,
    map: Mmap,
    file: File,
}

impl std::fmt::Debug for ChunkedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkedFile")
            .field("path", &self.path)
            .field("dataset", &self.dataset)
            .field("shape", &self.shape)
            .field("chunk_shape", &self.chunk_shape)
            .finish_non_exhaustive()
    }
}

impl ChunkedFile {
    /// Map the file and check the description against it: every chunk on
    /// the grid and inside the file, every filter one this reader undoes.
    pub fn open(spec: ChunkedFileSpec) -> Result<Self> {
        let invalid = |message: String| -> Error {
            ChunkedFileError::Invalid {
                path: spec.path.clone(),
                dataset: spec.dataset.clone(),
                message,
            }
            .into()
        };
        let nd = spec.shape.len();
        if nd == 0 || nd > MAX_DIMS {
            return Err(invalid(format!(
                "{nd} dimensions; cubeslab reads 1 to {MAX_DIMS}"
            )));
        }
        let elem = spec.dtype.size();
        if spec.fill_value.len() != elem {
            return Err(invalid(format!(
                "a fill value of {} bytes for {}-byte elements",
                spec.fill_value.len(),
                elem
            )));
        }
        let file = File::open(&spec.path).map_err(|e| Error::io(&spec.path, e))?;
        let len = file.metadata().map_err(|e| Error::io(&spec.path, e))?.len();
        let truncated = |chunk: Vec<u64>, offset: u64, size: u64| -> Error {
            ChunkedFileError::Truncated {
                path: spec.path.clone(),
                dataset: spec.dataset.clone(),
                chunk,
                offset,
                end: offset + size,
                len,
            }
            .into()
        };
        let (chunk_shape, pipeline, places) = match &spec.storage {
            Storage::Contiguous { offset } => {
                let row: u64 = spec.shape[1..].iter().product::<u64>() * elem as u64;
                let rows = (CONTIGUOUS_TASK_BYTES / row.max(1)).clamp(1, spec.shape[0].max(1));
                let mut chunk_shape = spec.shape.clone();
                chunk_shape[0] = rows;
                let total = spec.shape[0] * row;
                if offset + total > len {
                    return Err(truncated(vec![0; nd], *offset, total));
                }
                let places = (0..spec.shape[0].div_ceil(rows))
                    .map(|i| {
                        let first = i * rows * row;
                        Some(Place {
                            offset: offset + first,
                            size: (rows * row).min(total - first),
                            mask: 0,
                        })
                    })
                    .collect();
                (chunk_shape, Pipeline::default(), places)
            }
            Storage::Chunked {
                shape,
                chunks,
                filters,
            } => {
                if shape.len() != nd || shape.contains(&0) {
                    return Err(invalid(format!(
                        "chunk shape {shape:?} does not fit the shape {:?}",
                        spec.shape
                    )));
                }
                let mut pipeline = Vec::new();
                for (id, values, name) in filters {
                    let Some(filter) = Filter::from_hdf5(*id, values, elem) else {
                        return Err(ChunkedFileError::UnsupportedFilter {
                            path: spec.path.clone(),
                            dataset: spec.dataset.clone(),
                            id: *id,
                            name: if name.is_empty() {
                                "unnamed".into()
                            } else {
                                name.clone()
                            },
                        }
                        .into());
                    };
                    pipeline.push(filter);
                }
                let pipeline = Pipeline::new(pipeline);
                let grid: Vec<u64> = (0..nd).map(|d| spec.shape[d].div_ceil(shape[d])).collect();
                let n: u64 = grid.iter().product();
                let mut places = vec![None; n as usize];
                let chunk_bytes = shape.iter().product::<u64>() * elem as u64;
                for chunk in chunks {
                    let mut at = 0u64;
                    let mut position = Vec::with_capacity(nd);
                    for d in 0..nd {
                        let o = chunk.origin.get(d).copied().unwrap_or(u64::MAX);
                        if o % shape[d] != 0 || o >= spec.shape[d].max(1) {
                            return Err(invalid(format!(
                                "the chunk index lists a chunk at {:?}, not on the {shape:?} grid of {:?}",
                                chunk.origin, spec.shape
                            )));
                        }
                        position.push(o / shape[d]);
                        at = at * grid[d] + o / shape[d];
                    }
                    if chunk.offset + chunk.size > len {
                        return Err(truncated(position, chunk.offset, chunk.size));
                    }
                    if pipeline.passes_through(chunk.filter_mask) && chunk.size != chunk_bytes {
                        return Err(ChunkedFileError::Corrupt {
                            path: spec.path.clone(),
                            dataset: spec.dataset.clone(),
                            chunk: position,
                            offset: chunk.offset,
                            message: format!(
                                "stored unfiltered in {} bytes; the chunk holds {chunk_bytes}",
                                chunk.size
                            ),
                        }
                        .into());
                    }
                    places[at as usize] = Some(Place {
                        offset: chunk.offset,
                        size: chunk.size,
                        mask: chunk.filter_mask,
                    });
                }
                (shape.clone(), pipeline, places)
            }
        };
        // SAFETY: the file is only read. Another program rewriting it in
        // place is caught when it cuts the file short (`Watched`); changed
        // bytes of the same length are that program's responsibility, as
        // for any reader of the file.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::io(&spec.path, e))?;
        // Faults must not read around: the reader asks for the ranges it needs.
        let _ = map.advise(Advice::Random);
        let watched = Watched::new(map.as_ptr(), map.len());
        Ok(Self {
            path: spec.path,
            dataset: spec.dataset,
            shape: spec.shape,
            dtype: spec.dtype,
            swap: spec.big_endian != cfg!(target_endian = "big") && elem > 1,
            fill: spec.fill_value,
            chunk_shape,
            pipeline,
            places,
            watched,
            map,
            file,
        })
    }

    /// Elements along each dimension.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// The element type (values are returned in native byte order).
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The chunk shape reads work in: the file's, or for a contiguous
    /// dataset the rows grouped per task.
    pub fn chunk_shape(&self) -> &[u64] {
        &self.chunk_shape
    }

    /// The file.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// How many chunks of the grid are stored.
    pub fn stored_chunks(&self) -> usize {
        self.places.iter().flatten().count()
    }
}
