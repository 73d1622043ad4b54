//! A store against its SEG-Y source: every shard rebuilt from the source as
//! the ingest built it, read back from the store, and compared chunk by
//! chunk — maximum absolute error, RMS error, SNR and PSNR for the volume,
//! and the worst chunk.

use std::path::Path;

use serde_json::{json, Value};

use crate::{
    compress::ChunkErrors,
    config::Parallelism,
    error::Result,
    ingest::{compare_with_source, Reference, AMPLITUDE},
    progress::Progress,
    segy::{Geometry, ScanOptions, SegyFile, SegyOptions},
    store::{StoreError, ZarrArray},
};

/// How far a store's amplitudes are from its source's samples.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// Per chunk, and for the volume.
    pub errors: ChunkErrors,
    /// Live traces compared.
    pub traces: u64,
}

impl Comparison {
    /// As JSON.
    pub fn to_json(&self) -> Value {
        let mut v = self.errors.to_json();
        v["traces"] = json!(self.traces);
        v
    }
}

/// Compare the amplitudes of the store at `store` with the samples of the
/// SEG-Y file at `source` (read with `segy` and `scan` as the ingest did).
pub fn compare_with_segy(
    store: &Path,
    source: &Path,
    segy: &SegyOptions,
    scan: &ScanOptions,
    parallelism: Parallelism,
    memory_limit: u64,
) -> Result<Comparison> {
    let amplitude = ZarrArray::open(store.join(AMPLITUDE))?;
    let source = SegyFile::open(source, segy)?;
    let geometry = Geometry::scan(&source, scan, parallelism, &Progress::default())?;
    let mut shape = geometry.trace_shape();
    shape.push(source.samples as u64);
    if shape != amplitude.shape() {
        return Err(StoreError::Unsupported {
            path: store.to_path_buf(),
            what: format!(
                "{} holds a survey of shape {shape:?}, the store's amplitudes are {:?}: not its source",
                source.path().display(),
                amplitude.shape()
            ),
        }
        .into());
    }
    let errors = compare_with_source(
        &amplitude,
        &source,
        &geometry,
        parallelism,
        memory_limit,
        Reference::Samples,
    )?;
    Ok(Comparison {
        errors,
        traces: geometry.live,
    })
}
