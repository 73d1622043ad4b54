//! The cubeslab engine.
//!
//! An N-D generic core — Zarr v3 arrays in shards of small chunks, read in
//! parallel straight into the caller's buffer — with SEG-Y as one domain layer
//! on top. Nothing here knows about Python.
//!
//! * [`window`]: which elements a read selects, and how they map to chunks.
//! * [`store`]: Zarr v3 arrays on a filesystem: open, create, read, write.
//! * [`chunked_file`]: HDF5 and NetCDF 4 datasets read in place, in parallel, through their chunk index.
//! * [`compress`]: `--compress` names, codec chains, error metrics, ZFP tuning.
//! * [`segy`]: SEG-Y headers, sample formats and survey geometry.
//! * [`imzml`]: imzML indexes of mass-spectrometry imaging files (the spectra in the `.ibd`).
//! * [`rows`]: rows of a binary file (spectra, ...) into an array, in column tasks within a memory bound.
//! * [`ingest`]: SEG-Y → cube store, streaming within a memory bound.
//! * [`export`]: cube store → SEG-Y.
//! * [`remote`]: stores on S3-compatible object storage: locations, reads, uploads.
//! * [`destination`]: where an ingest's store goes, published on this machine or uploaded.
//! * [`plan`]: device profiles, the cost model and the layout optimizer.
//! * [`handle`]: an array as a caller holds it: with its orientation copies (each read routed to the
//!   fastest) or open for writing.
//! * [`writer`]: window writes through a memory-bounded write-back cache of chunks.
//! * [`verify`]: re-read every chunk with checksums; compare a store with its SEG-Y source.
//! * [`config`]: threads and requests in flight.
//! * [`read_ahead`]: byte ranges handed to the kernel ahead of the copy; page-cache residency.
//! * [`progress`]: a long job's phase and count, watched from another thread; the request to stop.
//! * `share`: a read's pieces shared by the calling thread and the pool's workers.
#![warn(missing_docs)]
// N-D index arithmetic reads best as loops over dimension numbers.
#![allow(clippy::needless_range_loop)]

pub mod chunked_file;
pub mod compress;
pub mod config;
pub mod destination;
pub mod dtype;
pub mod error;
pub mod export;
pub mod handle;
pub mod imzml;
pub mod ingest;
pub mod plan;
pub mod progress;
pub mod read_ahead;
pub mod remote;
pub mod route;
pub mod rows;
pub mod segy;
mod share;
pub mod store;
pub mod verify;
pub mod window;
pub mod writer;

pub use error::{Error, ErrorKind};
