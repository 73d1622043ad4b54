//! SEG-Y: textual, binary and trace headers, sample formats, and the survey
//! geometry that trace headers imply.
//!
//! Byte positions in this module are 1-based, as in the SEG-Y standard and
//! in segyio, so that error messages match what users read in the spec.

mod binary;
mod describe;
mod error;
mod fields;
mod file;
mod geometry;
mod outliers;
mod sample;
mod text;

pub use binary::{binary_header_fields, BinaryHeader};
pub use describe::describe;
pub use error::SegyError;
pub use fields::{header_field, Endian};
pub use file::{apply_scalar, MappedTraces, SegyFile, SegyOptions, TRACE_HEADER_LEN};
pub use geometry::{Geometry, ScanOptions, MISSING as MISSING_TRACE};
pub use sample::SampleFormat;
pub use text::{decode_text, TextEncoding};
