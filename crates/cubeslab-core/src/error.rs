//! The engine's error type: one enum that wraps each layer's own.

use std::path::PathBuf;

use crate::{segy::SegyError, store::StoreError, window::SelectionError};

/// Every error the engine returns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A SEG-Y file is malformed or unsupported.
    #[error(transparent)]
    Segy(#[from] SegyError),
    /// A store is missing, incomplete, corrupt or cannot be written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A read or write window does not fit the array or the buffer.
    #[error(transparent)]
    Selection(#[from] SelectionError),
    /// An operating-system error on a named file.
    #[error("{path}: {source}")]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The caller asked the work to stop.
    #[error("interrupted")]
    Interrupted,
}

/// A coarse classification of [`Error`], used to pick the Python exception class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Malformed or unsupported input data (SEG-Y, metadata).
    InvalidInput,
    /// The survey geometry cannot be built from the trace headers.
    Geometry,
    /// A store or file that should exist does not.
    NotFound,
    /// A store that should not exist does.
    AlreadyExists,
    /// A store whose ingest did not finish.
    Incomplete,
    /// A store another live process is writing.
    Busy,
    /// A store replaced by another process while it was open.
    Changed,
    /// Stored bytes fail their checksum or are structurally damaged.
    Corrupt,
    /// A selection outside the array.
    Selection,
    /// An operating-system I/O failure.
    Io,
    /// The work was stopped on request.
    Interrupted,
}

impl Error {
    /// Classify the error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Segy(e) => e.kind(),
            Error::Store(e) => e.kind(),
            Error::Selection(_) => ErrorKind::Selection,
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                ErrorKind::NotFound
            }
            Error::Io { .. } => ErrorKind::Io,
            Error::Interrupted => ErrorKind::Interrupted,
        }
    }

    /// Wrap an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// The engine's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
