//! Arrays filled from rows of a binary file (dense, or sparse and binned).

use std::path::PathBuf;

use cubeslab_core::{
    config::Parallelism,
    dtype::DType,
    progress::Progress as CoreProgress,
    rows::{self, BinnedRows, Bins, FileRows, RecordNames, RowSums},
    store::ZarrArray as CoreArray,
};
use pyo3::{buffer::PyBuffer, prelude::*};

use crate::{
    errors::{engine, invalid_input},
    Progress,
};

fn fill(
    py: Python<'_>,
    target: PathBuf,
    source: FileRows,
    memory_limit: u64,
    threads: Option<usize>,
    progress: Option<&Progress>,
) -> PyResult<RowSums> {
    let progress = progress.map_or_else(CoreProgress::default, |p| p.inner.clone());
    engine(py, || {
        rows::fill_from_rows(
            &CoreArray::open(&target)?,
            &source,
            Parallelism::resolve(threads, None),
            memory_limit,
            &progress,
        )
    })
}

/// Fill the (sharded) array `target` with rows of the file `source`: the
/// row of cell `i` (C order over the leading dimensions) at byte
/// `offsets[i]`, or none where that is 2**64 - 1. Returns each cell's row
/// sum and each column's sum over the rows.
#[pyfunction]
#[pyo3(signature = (target, source, offsets, little_endian, memory_limit, threads=None, progress=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn fill_from_rows(
    py: Python<'_>,
    target: PathBuf,
    source: PathBuf,
    offsets: PyBuffer<u64>,
    little_endian: bool,
    memory_limit: u64,
    threads: Option<usize>,
    progress: Option<&Progress>,
) -> PyResult<(Vec<f64>, Vec<f64>)> {
    let rows = FileRows {
        path: source,
        offsets: offsets.to_vec(py)?,
        little_endian,
        binned: None,
    };
    let sums = fill(py, target, rows, memory_limit, threads, progress)?;
    Ok((sums.rows, sums.columns))
}

/// Fill the float array `target` with sparse rows of the little-endian file
/// `source`, binned: cell `i` has `lengths[i]` keys (`key_type`) at byte
/// `keys[i]` and as many values (`value_type`) at `values[i]` (none where
/// that is 2**64 - 1), record number `records[i]`. `bins`: ("Da", low,
/// width) or ("ppm", low, ln ratio); `names`: (describing file, a record's
/// name, its keys' name) for messages. Returns the row sums, the column
/// sums, the pairs outside the bins and those merged into a filled bin.
#[pyfunction]
#[pyo3(signature = (target, source, values, keys, lengths, records, key_type, value_type, bins, names, memory_limit, threads=None, progress=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn fill_from_binned_rows(
    py: Python<'_>,
    target: PathBuf,
    source: PathBuf,
    values: PyBuffer<u64>,
    keys: PyBuffer<u64>,
    lengths: PyBuffer<u64>,
    records: PyBuffer<u64>,
    key_type: &str,
    value_type: &str,
    bins: (String, f64, f64, f64),
    names: (PathBuf, String, String),
    memory_limit: u64,
    threads: Option<usize>,
    progress: Option<&Progress>,
) -> PyResult<(Vec<f64>, Vec<f64>, u64, u64)> {
    let dtype = |name: &str| {
        DType::from_name(name).ok_or_else(|| invalid_input(format!("unsupported type {name}")))
    };
    let bins = match bins {
        (unit, low, width, high) if unit == "Da" => Bins::Linear { low, width, high },
        (unit, low, ratio, high) if unit == "ppm" => Bins::Geometric { low, ratio, high },
        (unit, ..) => return Err(invalid_input(format!("bins in {unit}: give Da or ppm"))),
    };
    let rows = FileRows {
        path: source,
        offsets: values.to_vec(py)?,
        little_endian: true,
        binned: Some(BinnedRows {
            keys: keys.to_vec(py)?,
            lengths: lengths.to_vec(py)?,
            records: records.to_vec(py)?,
            key_type: dtype(key_type)?,
            value_type: dtype(value_type)?,
            bins,
            names: RecordNames {
                file: names.0,
                record: names.1,
                keys: names.2,
            },
        }),
    };
    let sums = fill(py, target, rows, memory_limit, threads, progress)?;
    Ok((
        sums.rows,
        sums.columns,
        sums.counts.outside,
        sums.counts.merged,
    ))
}
