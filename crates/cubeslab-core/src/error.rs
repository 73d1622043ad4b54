//! The engine's error type: the errors every part shares (an I/O error on a
//! named file, a selection that does not fit, a stop request), and each
//! part's own typed error (the store's, a source format's) behind
//! [`PartError`], so that this module depends on none of them.

use std::path::PathBuf;

use crate::window::SelectionError;

/// A part's own error type (`StoreError`, `SegyError`, ...): it says which
/// kind it is, and converts into [`Error`] with `?`.
pub trait PartError: std::error::Error + Send + Sync + 'static {
    /// Its classification.
    fn kind(&self) -> ErrorKind;
}

/// Every error the engine returns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A part's own error: a store missing, incomplete or corrupt; a source
    /// file malformed; ... ([`Error::part`] gives the typed value).
    #[error("{0}")]
    Part(Box<dyn PartError>),
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

impl ErrorKind {
    /// Every kind.
    pub const ALL: [ErrorKind; 11] = [
        ErrorKind::InvalidInput,
        ErrorKind::Geometry,
        ErrorKind::NotFound,
        ErrorKind::AlreadyExists,
        ErrorKind::Incomplete,
        ErrorKind::Busy,
        ErrorKind::Changed,
        ErrorKind::Corrupt,
        ErrorKind::Selection,
        ErrorKind::Io,
        ErrorKind::Interrupted,
    ];
}

impl Error {
    /// Classify the error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Part(e) => e.kind(),
            Error::Selection(_) => ErrorKind::Selection,
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                ErrorKind::NotFound
            }
            Error::Io { .. } => ErrorKind::Io,
            Error::Interrupted => ErrorKind::Interrupted,
        }
    }

    /// The part's own error, if it is one of type `E`.
    pub fn part<E: PartError>(&self) -> Option<&E> {
        match self {
            Error::Part(e) => (e.as_ref() as &dyn std::error::Error).downcast_ref::<E>(),
            _ => None,
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
