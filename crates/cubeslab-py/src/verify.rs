//! `cubeslab verify`: checksums of every chunk, and a store against its
//! source; codec trials for the compression benchmark.

use std::{collections::BTreeMap, path::PathBuf};

use cubeslab_core::{
    compress::{tune, Compression, ErrorStats, Sample},
    config::Parallelism,
    dtype::DType,
    remote::Location,
    verify::{check_remote_store, check_store, compare_with_segy},
};
use pyo3::{buffer::PyBuffer, prelude::*};

use crate::{bytes_of, errors::engine, options::IngestOptions};

/// Re-read every chunk of the store with checksums; the findings as JSON.
#[pyfunction]
#[pyo3(signature = (store, threads=None, in_flight=None, storage_options=None))]
pub fn verify_store(
    py: Python<'_>,
    store: &str,
    threads: Option<usize>,
    in_flight: Option<usize>,
    storage_options: Option<BTreeMap<String, String>>,
) -> PyResult<String> {
    let parallelism = Parallelism::resolve(threads, in_flight);
    let location = engine(py, || Ok(Location::parse(store)?))?;
    let options = storage_options.unwrap_or_default();
    let check = engine(py, || match &location {
        Location::Local(path) => check_store(path, parallelism),
        Location::S3(url) => check_remote_store(url, &options, parallelism),
    })?;
    Ok(check.to_json().to_string())
}

/// Compare the store's amplitudes with the SEG-Y file's samples; the errors
/// as JSON. `options`: byte order, header bytes, threads and memory_limit are used.
#[pyfunction]
pub fn compare_with_source(
    py: Python<'_>,
    store: PathBuf,
    source: PathBuf,
    options: &IngestOptions,
) -> PyResult<String> {
    let o = &options.engine;
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

/// Error statistics of stored values against their source's, counted slab
/// by slab (the measures of compress/metrics.rs): what `verify --against`
/// reports for a source read in Python (HDF5, NetCDF, FITS, SEPlib, .npy).
#[pyclass]
#[derive(Default)]
pub struct ErrorTally {
    stats: ErrorStats,
}

#[pymethods]
impl ErrorTally {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// Count `stored` values (elements of `stored_type`, native endian)
    /// against as many `original` ones (of `original_type`).
    fn add(
        &mut self,
        py: Python<'_>,
        original: PyBuffer<u8>,
        original_type: &str,
        stored: PyBuffer<u8>,
        stored_type: &str,
    ) -> PyResult<()> {
        let dtype = |name: &str| {
            DType::from_name(name)
                .ok_or_else(|| crate::errors::invalid_input(format!("unsupported dtype {name}")))
        };
        let (original_type, stored_type) = (dtype(original_type)?, dtype(stored_type)?);
        let (original, stored) = (
            bytes_of(&original, "original")?,
            bytes_of(&stored, "stored")?,
        );
        if original.len() / original_type.size() != stored.len() / stored_type.size() {
            return Err(crate::errors::invalid_input(
                "the original and stored values differ in number",
            ));
        }
        let counted =
            py.detach(|| ErrorStats::of_mixed(original, original_type, stored, stored_type));
        self.stats.merge(&counted);
        Ok(())
    }

    /// The statistics so far as JSON (infinities as null).
    fn to_json(&self) -> String {
        self.stats.to_json().to_string()
    }
}

/// Compress and decompress `chunks` (C-order chunks of `chunk_shape` and
/// `dtype`, back to back) with the `--compress` name `name` on one thread:
/// ratio, error and per-core speeds as JSON. Targets are tuned on the
/// chunks first.
#[pyfunction]
pub fn codec_trial(
    py: Python<'_>,
    name: &str,
    chunks: PyBuffer<u8>,
    chunk_shape: Vec<u64>,
    dtype: &str,
) -> PyResult<String> {
    let compression = Compression::parse(name).map_err(crate::errors::invalid_input)?;
    let dtype = DType::from_name(dtype)
        .ok_or_else(|| crate::errors::invalid_input(format!("unsupported dtype {dtype}")))?;
    let bytes = chunks.to_vec(py)?;
    let chunk_bytes = chunk_shape.iter().product::<u64>() as usize * dtype.size();
    if chunk_bytes == 0 || bytes.len() % chunk_bytes != 0 {
        return Err(crate::errors::invalid_input(
            "chunks must be whole chunks of chunk_shape",
        ));
    }
    let sample = Sample {
        chunk_shape,
        dtype,
        chunks: bytes.chunks(chunk_bytes).map(<[u8]>::to_vec).collect(),
    };
    let one = Parallelism::resolve(Some(1), None);
    let result = py.detach(|| one.pool().install(|| tune(&compression, &sample)));
    let t = result.map_err(crate::errors::invalid_input)?;
    let mut out = t.error.to_json();
    out["codec"] = t.compression.name().into();
    out["ratio"] = t.ratio.into();
    out["encode_seconds"] = t.encode_seconds.into();
    out["decode_seconds"] = t.decode_seconds.into();
    out["bytes"] = (bytes.len() as u64).into();
    Ok(out.to_string())
}
