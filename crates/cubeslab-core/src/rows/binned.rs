//! Sparse rows binned onto the row's positions: each cell's row is given
//! as pairs (a key, such as an m/z value, and a value, such as an
//! intensity), the keys sorted, and each value is added to the bin its key
//! falls in (an MSI processed-mode spectrum onto a shared m/z axis).

use std::{os::unix::fs::FileExt, path::PathBuf};

use crate::{
    dtype::{with_element_type, DType},
    error::{Error, PartError, Result},
    ErrorKind,
};

/// Bins along the row, `n` of them (the row's length), from `low` up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bins {
    /// Of `width` each: key k goes to bin floor((k - low) / width).
    Linear {
        /// Where bin 0 starts.
        low: f64,
        /// Each bin's width.
        width: f64,
        /// The largest key binned: beyond it a key is outside, though the
        /// last bin reaches further.
        high: f64,
    },
    /// Of a fixed relative width: key k goes to bin floor(ln(k / low) / ratio).
    Geometric {
        /// Where bin 0 starts (positive).
        low: f64,
        /// ln of one bin's end over its start.
        ratio: f64,
        /// The largest key binned.
        high: f64,
    },
}

impl Bins {
    /// The bin of `key` (any integer: outside 0..n is outside the bins).
    fn index(&self, key: f64) -> i64 {
        let (at, high) = match *self {
            Bins::Linear { low, width, high } => (((key - low) / width).floor(), high),
            Bins::Geometric { low, ratio, high } => (((key / low).ln() / ratio).floor(), high),
        };
        if at.is_finite() && key <= high {
            at as i64
        } else {
            i64::MIN
        }
    }
}

/// How messages name the file's records and their keys.
#[derive(Debug, Clone)]
pub struct RecordNames {
    /// The file describing the records (an imzML file for its `.ibd`).
    pub file: PathBuf,
    /// One record (`spectrum`).
    pub record: String,
    /// Its keys (`m/z array`).
    pub keys: String,
}

/// Where a file holds sparse rows: besides [`super::FileRows::offsets`]
/// (each cell's values), each cell's keys and its number of pairs.
#[derive(Debug, Clone)]
pub struct BinnedRows {
    /// Byte offset of each cell's keys (cells without a row: anything).
    pub keys: Vec<u64>,
    /// Pairs in each cell's row.
    pub lengths: Vec<u64>,
    /// Each cell's record number in the file, for messages.
    pub records: Vec<u64>,
    /// The keys' element type.
    pub key_type: DType,
    /// The values' element type.
    pub value_type: DType,
    /// The bins.
    pub bins: Bins,
    /// For messages.
    pub names: RecordNames,
}

/// Pairs whose key fell outside the bins, and pairs added to a bin that
/// already held one of the same row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BinCounts {
    /// Outside the bins.
    pub outside: u64,
    /// Merged into a filled bin.
    pub merged: u64,
}

/// What can be wrong with sparse rows.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BinnedRowsError {
    /// A row's keys go down somewhere.
    #[error("{file}: {record} {number}'s {keys} is not sorted (value {index}: {value} after {previous})")]
    Unsorted {
        /// The describing file.
        file: PathBuf,
        /// What a record is.
        record: String,
        /// Its number.
        number: u64,
        /// What its keys are.
        keys: String,
        /// The first key lower than the one before it.
        index: usize,
        /// Its value.
        value: f64,
        /// The one before.
        previous: f64,
    },
}

impl From<BinnedRowsError> for Error {
    fn from(error: BinnedRowsError) -> Self {
        Error::Part(Box::new(error))
    }
}

impl PartError for BinnedRowsError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidInput
    }
}

/// Little-endian elements of `dtype` as f64, into `out`.
fn decode(dtype: DType, bytes: &[u8], out: &mut Vec<f64>) {
    out.clear();
    with_element_type!(dtype, T => out.extend(
        bytes
            .chunks_exact(std::mem::size_of::<T>())
            .map(|b| T::from_le_bytes(b.try_into().unwrap()) as f64),
    ))
}

/// Bins one row at a time into a dense row, reusing its buffers.
pub(crate) struct Binner<'a> {
    file: &'a std::fs::File,
    path: &'a std::path::Path,
    rows: &'a BinnedRows,
    bytes: Vec<u8>,
    keys: Vec<f64>,
    values: Vec<f64>,
    /// The dense row in f64: zero except at `touched` between calls.
    dense: Vec<f64>,
    touched: Vec<usize>,
}

impl<'a> Binner<'a> {
    pub fn new(
        file: &'a std::fs::File,
        path: &'a std::path::Path,
        rows: &'a BinnedRows,
        row_len: u64,
    ) -> Self {
        Self {
            file,
            path,
            rows,
            bytes: Vec::new(),
            keys: Vec::new(),
            values: Vec::new(),
            dense: vec![0.0; row_len as usize],
            touched: Vec::new(),
        }
    }

    fn read(&mut self, dtype: DType, offset: u64, n: u64, keys: bool) -> Result<u64> {
        self.bytes.resize(n as usize * dtype.size(), 0);
        self.file
            .read_exact_at(&mut self.bytes, offset)
            .map_err(|e| {
                Error::io(
                    self.path,
                    std::io::Error::new(
                        e.kind(),
                        format!(
                            "reading {} bytes of a row at byte offset {offset}: {e}",
                            self.bytes.len()
                        ),
                    ),
                )
            })?;
        decode(
            dtype,
            &self.bytes,
            if keys {
                &mut self.keys
            } else {
                &mut self.values
            },
        );
        Ok(self.bytes.len() as u64)
    }

    /// Bin the row of `cell` (its values at `offset`); write its bins
    /// `part` (start..end) as `out_type` into `out`, add them to `columns`
    /// (indexed from `part.start`) and, if `counts`, count its pairs there.
    /// Returns the sum of those bins and the bytes read.
    #[allow(clippy::too_many_arguments)]
    pub fn row(
        &mut self,
        cell: u64,
        offset: u64,
        part: std::ops::Range<u64>,
        out_type: DType,
        out: &mut Vec<u8>,
        columns: &mut [f64],
        counts: Option<&mut BinCounts>,
    ) -> Result<(f64, u64)> {
        let rows = self.rows;
        let c = cell as usize;
        let n = rows.lengths[c];
        let mut read = self.read(rows.key_type, rows.keys[c], n, true)?;
        read += self.read(rows.value_type, offset, n, false)?;
        if let Some(i) = (1..self.keys.len()).find(|&i| self.keys[i] < self.keys[i - 1]) {
            return Err(BinnedRowsError::Unsorted {
                file: rows.names.file.clone(),
                record: rows.names.record.clone(),
                number: rows.records[c],
                keys: rows.names.keys.clone(),
                index: i,
                value: self.keys[i],
                previous: self.keys[i - 1],
            }
            .into());
        }
        let bins = self.dense.len() as i64;
        let (mut outside, mut merged, mut last) = (0u64, 0u64, i64::MIN);
        for (&key, &value) in self.keys.iter().zip(&self.values) {
            let b = rows.bins.index(key);
            if !(0..bins).contains(&b) {
                outside += 1;
                continue;
            }
            // Sorted keys give bins in order: a bin already filled is the last one.
            if b == last {
                merged += 1;
            } else {
                self.touched.push(b as usize);
            }
            last = b;
            self.dense[b as usize] += value;
        }
        if let Some(counts) = counts {
            counts.outside += outside;
            counts.merged += merged;
        }
        let (start, end) = (part.start as usize, part.end as usize);
        out.clear();
        match out_type {
            DType::Float32 => out.extend(
                self.dense[start..end]
                    .iter()
                    .flat_map(|&v| (v as f32).to_ne_bytes()),
            ),
            _ => out.extend(self.dense[start..end].iter().flat_map(|&v| v.to_ne_bytes())),
        }
        let mut sum = 0.0;
        for &b in &self.touched {
            if (start..end).contains(&b) {
                columns[b - start] += self.dense[b];
                sum += self.dense[b];
            }
            self.dense[b] = 0.0;
        }
        self.touched.clear();
        Ok((sum, read))
    }
}
