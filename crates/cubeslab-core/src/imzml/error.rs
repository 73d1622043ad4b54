//! Errors of the imzML layer: each names the file and the element.

use std::path::PathBuf;

use crate::{error::PartError, ErrorKind};

/// What can be wrong with an imzML file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImzmlError {
    /// The file is not there.
    #[error("{path}: no such file")]
    Missing {
        /// The file.
        path: PathBuf,
    },
    /// The XML is not well formed.
    #[error("{path}: not well-formed XML: {detail}")]
    NotXml {
        /// The file.
        path: PathBuf,
        /// The parser's message, with the byte offset.
        detail: String,
    },
    /// Well-formed XML, but not an imzML file this reader takes.
    #[error("{path}: {what}")]
    NotImzml {
        /// The file.
        path: PathBuf,
        /// What is missing or wrong.
        what: String,
    },
    /// One spectrum's description is wrong.
    #[error("{path}: spectrum {index} ({id}): {what}")]
    Spectrum {
        /// The file.
        path: PathBuf,
        /// Its number in file order, from 0.
        index: usize,
        /// Its `id` attribute.
        id: String,
        /// What is wrong.
        what: String,
    },
}

impl From<ImzmlError> for crate::Error {
    fn from(error: ImzmlError) -> Self {
        crate::Error::Part(Box::new(error))
    }
}

impl PartError for ImzmlError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidInput
    }
}
