//! Cube store → SEG-Y: the stored file headers and trace headers around the
//! stored samples, encoded in the source's sample format (or another), so
//! that the result reads back like the file that was ingested.

use std::{
    fs::File,
    io::{BufWriter, Write},
    path::Path,
};

use serde_json::Value;

use crate::{
    config::Parallelism,
    error::Result,
    ingest::{AMPLITUDE, FILE_HEADER, RAW_HEADERS, TRACE_MASK},
    segy::{Endian, SampleFormat, SegyError, TRACE_HEADER_LEN},
    store::{Group, ReadOptions, StoreError, ZarrArray},
    window::{DimRange, Window},
    Error,
};

/// How to export.
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// Sample format of the output; `None` keeps the source's.
    pub format: Option<SampleFormat>,
    /// Replace an existing output file.
    pub overwrite: bool,
    /// Threads for reading the store.
    pub parallelism: Parallelism,
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// What a SEG-Y export wrote, and what it could not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportedSegy {
    /// Traces written: the survey's live ones.
    pub traces: u64,
    /// Positions without a trace in the survey (`trace_mask` false) that
    /// hold values other than the fill value, written there since the
    /// ingest: SEG-Y has no trace header for them, so they are left out.
    pub left_out: u64,
    /// The first of those, as a position along each trace dimension.
    pub first_left_out: Option<Vec<u64>>,
}

/// Write the survey in `store` as a SEG-Y file at `output`: the live
/// traces, each with its stored header.
pub fn export_segy(store: &Path, output: &Path, options: &ExportOptions) -> Result<ExportedSegy> {
    Group::open(store)?.require_readable()?;
    if output.exists() && !options.overwrite {
        return Err(StoreError::AlreadyExists {
            path: output.to_path_buf(),
        }
        .into());
    }
    let header_array = ZarrArray::open(store.join(FILE_HEADER))?;
    let attrs = header_array
        .metadata()
        .get("attributes")
        .cloned()
        .unwrap_or(Value::Null);
    let missing = |what: &str| -> Error {
        StoreError::Metadata {
            path: store.join(FILE_HEADER).join("zarr.json"),
            message: format!("attribute {what} is missing or invalid"),
        }
        .into()
    };
    let text = attrs
        .get("rawTextHeaderHex")
        .and_then(Value::as_str)
        .and_then(unhex)
        .ok_or_else(|| missing("rawTextHeaderHex"))?;
    let mut binary = attrs
        .get("rawBinaryHeaderHex")
        .and_then(Value::as_str)
        .and_then(unhex)
        .filter(|b| b.len() == 400)
        .ok_or_else(|| missing("rawBinaryHeaderHex"))?;
    let endian = match attrs.get("endianness").and_then(Value::as_str) {
        Some("little") => Endian::Little,
        _ => Endian::Big,
    };
    let source_format = attrs
        .get("sampleFormat")
        .and_then(Value::as_i64)
        .and_then(SampleFormat::from_code)
        .ok_or_else(|| missing("sampleFormat"))?;
    let format = options.format.unwrap_or(source_format);

    let amplitude = ZarrArray::open(store.join(AMPLITUDE))?;
    let mask = ZarrArray::open(store.join(TRACE_MASK))?;
    let headers = ZarrArray::open(store.join(RAW_HEADERS))?;
    let shape = amplitude.shape().to_vec();
    let nt = shape.len() - 1;
    let ns = shape[nt] as usize;
    if ns > u16::MAX as usize {
        return Err(SegyError::Unsupported {
            path: output.to_path_buf(),
            what: format!("{ns} samples per trace (SEG-Y holds at most 65535)"),
        }
        .into());
    }
    // Patch the format code (byte 3225) and samples per trace (byte 3221).
    let put16 = |b: &mut [u8], v: u16| {
        b.copy_from_slice(&if endian == Endian::Big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        })
    };
    put16(&mut binary[24..26], format.code());
    put16(&mut binary[20..22], ns as u16);

    let read = ReadOptions {
        parallelism: options.parallelism,
        verify: true,
    };
    let live = mask.read_all(&read)?;
    let dtype = amplitude.dtype();
    let per_inline: usize = shape[1..nt].iter().product::<u64>() as usize;

    let mut bytes = Vec::new();
    // Textual header, binary header, then any extended textual headers.
    let split = text.len().min(3200);
    bytes.extend_from_slice(&text[..split]);
    bytes.extend_from_slice(&binary);
    bytes.extend_from_slice(&text[split..]);
    let tmp = output.with_extension("sgy.partial");
    let file = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
    let mut writer = BufWriter::with_capacity(8 << 20, file);
    let io = |e| Error::io(&tmp, e);
    writer.write_all(&bytes).map_err(io)?;
    let mut exported = ExportedSegy::default();
    let fill = amplitude.fill_bytes();
    let mut samples_out = vec![0u8; ns * format.bytes()];
    for il in 0..shape[0] {
        // One inline at a time bounds memory by one inline's traces.
        let mut dims: Vec<DimRange> = shape.iter().map(|&n| DimRange::new(0, n)).collect();
        dims[0] = DimRange::new(il, il + 1);
        let mut data = vec![0u8; per_inline * ns * dtype.size()];
        amplitude.read_into(&Window { dims: dims.clone() }, &mut data, &read)?;
        let mut header_dims = dims[..nt].to_vec();
        header_dims.push(DimRange::new(0, TRACE_HEADER_LEN as u64));
        let mut hdrs = vec![0u8; per_inline * TRACE_HEADER_LEN];
        headers.read_into(&Window { dims: header_dims }, &mut hdrs, &read)?;
        for cell in 0..per_inline {
            let trace = &data[cell * ns * dtype.size()..(cell + 1) * ns * dtype.size()];
            if live[il as usize * per_inline + cell] == 0 {
                if trace.chunks_exact(fill.len()).any(|sample| sample != fill) {
                    exported.left_out += 1;
                    exported
                        .first_left_out
                        .get_or_insert_with(|| trace_position(il, cell, &shape[1..nt]));
                }
                continue;
            }
            format.encode(endian, trace, dtype, &mut samples_out);
            writer
                .write_all(&hdrs[cell * TRACE_HEADER_LEN..(cell + 1) * TRACE_HEADER_LEN])
                .map_err(io)?;
            writer.write_all(&samples_out).map_err(io)?;
            exported.traces += 1;
        }
    }
    writer.flush().map_err(io)?;
    drop(writer);
    std::fs::rename(&tmp, output).map_err(|e| Error::io(output, e))?;
    Ok(exported)
}

/// The position along every trace dimension of the `cell`-th trace (C
/// order over the dimensions `inner`, after the first) of inline `il`.
fn trace_position(il: u64, cell: usize, inner: &[u64]) -> Vec<u64> {
    let mut position = vec![il];
    let mut rest = cell as u64;
    let mut tail: Vec<u64> = inner
        .iter()
        .rev()
        .map(|&n| {
            let at = rest % n;
            rest /= n;
            at
        })
        .collect();
    tail.reverse();
    position.extend(tail);
    position
}
