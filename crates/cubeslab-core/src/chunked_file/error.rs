//! Errors of arrays read from another program's chunked file: each names
//! the file, the dataset and what is wrong.

use std::path::PathBuf;

use crate::{error::PartError, ErrorKind};

/// What can be wrong with a chunked file or its description.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChunkedFileError {
    /// The description handed in does not describe a readable array.
    #[error("{path}: dataset {dataset}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The dataset (or variable) in it.
        dataset: String,
        /// What is wrong.
        message: String,
    },
    /// A filter of the dataset's pipeline that this reader does not decode.
    #[error("{path}: dataset {dataset}: filter {id} ({name}) is not one cubeslab decodes (it reads deflate, shuffle, fletcher32, zstd, lz4 and blosc); h5py can read it, so ingest the file, which reads through h5py")]
    UnsupportedFilter {
        /// The file.
        path: PathBuf,
        /// The dataset.
        dataset: String,
        /// The HDF5 filter identifier.
        id: u32,
        /// Its registered name, if known.
        name: String,
    },
    /// A chunk lies (partly) past the end of the file.
    #[error("{path}: dataset {dataset}: chunk {chunk:?} is stored at bytes {offset}..{end}, past the end of the {len}-byte file (truncated?)")]
    Truncated {
        /// The file.
        path: PathBuf,
        /// The dataset.
        dataset: String,
        /// The chunk's position in the chunk grid.
        chunk: Vec<u64>,
        /// Where the chunk starts.
        offset: u64,
        /// Where it ends.
        end: u64,
        /// The file's length.
        len: u64,
    },
    /// A chunk's bytes do not decode, or fail their checksum.
    #[error("{path}: dataset {dataset}: chunk {chunk:?} at byte {offset}: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The dataset.
        dataset: String,
        /// The chunk's position in the chunk grid.
        chunk: Vec<u64>,
        /// Where the chunk starts.
        offset: u64,
        /// What failed.
        message: String,
    },
    /// The file changed length while it was open.
    #[error("{path}: the file was cut short while dataset {dataset} was read from it")]
    CutShort {
        /// The file.
        path: PathBuf,
        /// The dataset.
        dataset: String,
    },
}

impl PartError for ChunkedFileError {
    fn kind(&self) -> ErrorKind {
        match self {
            ChunkedFileError::Invalid { .. } | ChunkedFileError::UnsupportedFilter { .. } => {
                ErrorKind::InvalidInput
            }
            ChunkedFileError::Truncated { .. }
            | ChunkedFileError::Corrupt { .. }
            | ChunkedFileError::CutShort { .. } => ErrorKind::Corrupt,
        }
    }
}

impl From<ChunkedFileError> for crate::Error {
    fn from(e: ChunkedFileError) -> Self {
        crate::Error::Part(Box::new(e))
    }
}
