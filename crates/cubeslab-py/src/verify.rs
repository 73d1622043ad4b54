//! `cubeslab verify`: checksums of every chunk, and a store against its source.

use std::path::PathBuf;

use cubeslab_core::verify::{check_store, compare_with_segy};
use pyo3::prelude::*;

use crate::{errors::engine, options};

/// Re-read every chunk of the store with checksums; the findings as JSON.
/// `options`: `threads`, `in_flight`.
#[pyfunction]
pub fn verify_store(py: Python<'_>, store: PathBuf, options: &str) -> PyResult<String> {
    let parallelism = options::ingest_options(options)?.parallelism;
    let check = engine(py, || check_store(&store, parallelism))?;
    Ok(check.to_json().to_string())
}

/// Compare the store's amplitudes with the SEG-Y file's samples; the errors
/// as JSON. `options`: as for ingest (byte order, header bytes, threads, memory_limit).
#[pyfunction]
pub fn compare_with_source(
    py: Python<'_>,
    store: PathBuf,
    source: PathBuf,
    options: &str,
) -> PyResult<String> {
    let o = options::ingest_options(options)?;
    let comparison = engine(py, || {
        compare_with_segy(
            &store,
            &source,
            &o.segy,
            &o.scan,
            o.parallelism,
            o.memory_limit,
        )
    })?;
    Ok(comparison.to_json().to_string())
}
