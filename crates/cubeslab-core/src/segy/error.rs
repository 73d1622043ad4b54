//! Errors of the SEG-Y layer: each names the file and where in it.

use std::path::PathBuf;

use crate::{error::PartError, ErrorKind};

/// What can be wrong with a SEG-Y file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SegyError {
    /// The file cannot hold the 3600 bytes of file headers.
    #[error("{path}: file is {len} bytes, too short for a SEG-Y file (the textual and binary headers alone take 3600 bytes)")]
    TooShort {
        /// The file.
        path: PathBuf,
        /// Its length.
        len: u64,
    },
    /// A header field holds a value that cannot be right.
    #[error("{path}: {field} at byte {byte} is {value}; expected {expected}{hint}")]
    InvalidField {
        /// The file.
        path: PathBuf,
        /// 1-based byte position in the file.
        byte: u64,
        /// The field's name.
        field: &'static str,
        /// The value found.
        value: i64,
        /// What would be valid.
        expected: String,
        /// How to fix it, if known (starts with "; ").
        hint: String,
    },
    /// The trace data does not divide into whole traces.
    #[error("{path}: trace count inconsistent: {data_bytes} bytes of trace data after byte {data_start} is not a whole number of {trace_len}-byte traces (240-byte header + {samples} samples x {sample_bytes} bytes); the last trace, number {last_trace}, is cut at byte {file_len}{hint}")]
    Truncated {
        /// The file.
        path: PathBuf,
        /// File length.
        file_len: u64,
        /// Where trace data starts.
        data_start: u64,
        /// Bytes after `data_start`.
        data_bytes: u64,
        /// Bytes per trace.
        trace_len: u64,
        /// Samples per trace.
        samples: u64,
        /// Bytes per sample.
        sample_bytes: u64,
        /// Index of the cut trace (= number of whole traces).
        last_trace: u64,
        /// What the user can do (starts with ". ").
        hint: String,
    },
    /// The trace headers do not describe a regular survey.
    #[error("{path}: {message}")]
    Geometry {
        /// The file.
        path: PathBuf,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// An option given for reading the file cannot be right.
    #[error("{path}: {message}")]
    Option {
        /// The file.
        path: PathBuf,
        /// Which option, its value, and what it must be.
        message: String,
    },
    /// A sample format or layout the reader does not handle.
    #[error("{path}: unsupported: {what}")]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// What is not supported.
        what: String,
    },
}

impl From<SegyError> for crate::Error {
    fn from(error: SegyError) -> Self {
        crate::Error::Part(Box::new(error))
    }
}

impl PartError for SegyError {
    fn kind(&self) -> ErrorKind {
        match self {
            SegyError::Geometry { .. } => ErrorKind::Geometry,
            _ => ErrorKind::InvalidInput,
        }
    }
}
