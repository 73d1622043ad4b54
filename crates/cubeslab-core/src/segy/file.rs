//! An open SEG-Y file: its file headers parsed and checked, its trace layout
//! known, and positioned reads of headers and traces.

use memmap2::{Advice, Mmap, MmapOptions};
use std::{
    fs::File,
    os::unix::fs::FileExt,
    path::{Path, PathBuf},
};

use super::{
    binary::BinaryHeader,
    fields::{header_field, Endian},
    sample::{SampleFormat, VALID_CODES},
    text::{decode_text, TextEncoding},
    SegyError,
};
use crate::{error::Result, store::Watched, Error};

/// Bytes in a trace header.
pub const TRACE_HEADER_LEN: usize = 240;
const TEXT_LEN: u64 = 3200;
const FILE_HEADER_LEN: u64 = 3600;

/// How to read a SEG-Y file where its headers do not say (or say wrongly).
#[derive(Debug, Clone, Default)]
pub struct SegyOptions {
    /// Byte order; `None` detects it from the binary header.
    pub endian: Option<Endian>,
    /// Ingest the whole traces of a file whose last trace is cut short.
    pub allow_truncated: bool,
    /// Sample interval in microseconds, for files whose headers lack it.
    pub sample_interval_us: Option<f64>,
}

/// An open SEG-Y file.
#[derive(Debug)]
pub struct SegyFile {
    path: PathBuf,
    file: File,
    /// File length in bytes.
    pub len: u64,
    /// The textual header followed by any extended textual headers, as stored.
    pub text_raw: Vec<u8>,
    /// Character set of the textual header.
    pub text_encoding: TextEncoding,
    /// The binary header.
    pub binary: BinaryHeader,
    /// Sample format.
    pub format: SampleFormat,
    /// Samples per trace.
    pub samples: usize,
    /// Sample interval in microseconds (or depth units x 1000).
    pub interval_us: f64,
    /// First sample's time in ms (delay recording time, scaled), from trace 0.
    pub first_sample_ms: f64,
    /// Byte offset of the first trace.
    pub data_start: u64,
    /// Bytes per trace, header included.
    pub trace_len: u64,
    /// Number of whole traces.
    pub traces: u64,
    /// Things a user should know that did not stop the read.
    pub warnings: Vec<String>,
}

impl SegyFile {
    /// Open and check a SEG-Y file: its file headers, then where its
    /// traces start, how many samples each holds, and the sample interval.
    pub fn open(path: impl AsRef<Path>, options: &SegyOptions) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        // Checked before opening: opening a named pipe waits for a writer.
        let kind = std::fs::metadata(&path).map_err(|e| Error::io(&path, e))?;
        if !kind.is_file() {
            return Err(SegyError::Unsupported {
                path,
                what:
                    "not a regular file (a pipe, a device or a folder); SEG-Y is read from files, \
                       in parallel and more than once"
                        .into(),
            }
            .into());
        }
        let file = File::open(&path).map_err(|e| Error::io(&path, e))?;
        let len = file.metadata().map_err(|e| Error::io(&path, e))?.len();
        if len < FILE_HEADER_LEN {
            return Err(SegyError::TooShort { path, len }.into());
        }
        let opening = Opening {
            file: &file,
            path: &path,
            len,
        };
        let mut head = vec![0u8; FILE_HEADER_LEN as usize];
        file.read_exact_at(&mut head, 0)
            .map_err(|e| Error::io(&path, e))?;
        let (binary, format) = opening.binary_header(&head, options)?;
        let extensions = binary.int(3507, 2);
        if binary.revision().0 >= 2 && extensions != 0 {
            return Err(SegyError::Unsupported {
                path,
                what: format!(
                    "{extensions} extended trace headers per trace (byte 3507, SEG-Y revision 2); cubeslab \
                     reads traces with the standard 240-byte header only"
                ),
            }
            .into());
        }
        let mut warnings = Vec::new();
        if format == SampleFormat::FixedPointGain {
            warnings.push("sample format 4 (obsolete fixed point with gain) is read as 4-byte IEEE float, as segyio does".into());
        }
        let (data_start, text_raw) = opening.textual_headers(&binary, &head)?;
        let text_encoding = TextEncoding::detect(&text_raw[..TEXT_LEN as usize]);
        let first_header = opening.first_trace_header(data_start)?;
        let samples = opening.samples_per_trace(
            &binary,
            format,
            data_start,
            &first_header,
            options,
            &mut warnings,
        )?;
        let trace_len = TRACE_HEADER_LEN as u64 + samples * format.bytes() as u64;
        let traces = (len - data_start) / trace_len;
        if traces == 0 {
            return Err(SegyError::Geometry {
                path,
                message: "the file holds no traces".into(),
            }
            .into());
        }
        let interval_us = opening.sample_interval(&binary, &first_header, options)?;
        // Delay recording time (byte 109) scaled by byte 215, as segyio does.
        let endian = binary.endian;
        let delay = header_field(&first_header, 109, 2, endian) as f64;
        let scalar = header_field(&first_header, 215, 2, endian);
        let first_sample_ms = apply_scalar(delay, scalar);

        Ok(Self {
            path,
            file,
            len,
            text_raw,
            text_encoding,
            binary,
            format,
            samples: samples as usize,
            interval_us,
            first_sample_ms,
            data_start,
            trace_len,
            traces,
            warnings,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Byte order.
    pub fn endian(&self) -> Endian {
        self.binary.endian
    }

    /// Byte offset of trace `i`.
    pub fn trace_offset(&self, i: u64) -> u64 {
        self.data_start + i * self.trace_len
    }

    /// Read `buf.len()` bytes at `offset`, naming the offset on failure.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.file.read_exact_at(buf, offset).map_err(|e| {
            Error::io(
                &self.path,
                std::io::Error::new(
                    e.kind(),
                    format!("reading {} bytes at byte offset {offset}: {e}", buf.len()),
                ),
            )
        })
    }

    /// The traces mapped into memory, for reading many headers without
    /// copying the samples between them.
    pub fn map_traces(&self) -> Result<MappedTraces<'_>> {
        let len = self.traces * self.trace_len;
        // SAFETY: the file is only read. Another program cutting it short
        // meanwhile is caught (`Watched`) and reported by `MappedTraces::check`.
        let map = unsafe {
            MmapOptions::new()
                .offset(self.data_start)
                .len(len as usize)
                .map(&self.file)
        }
        .map_err(|e| Error::io(&self.path, e))?;
        let watched = Watched::new(map.as_ptr(), map.len());
        Ok(MappedTraces {
            file: self,
            watched,
            map,
        })
    }

    /// The textual header (first 3200 bytes) as text.
    pub fn text(&self) -> String {
        decode_text(&self.text_raw[..TEXT_LEN as usize], self.text_encoding)
    }

    /// Sample times (or depths) in ms: first sample plus the interval.
    pub fn sample_axis(&self) -> Vec<f64> {
        (0..self.samples)
            .map(|i| self.first_sample_ms + i as f64 * self.interval_us / 1000.0)
            .collect()
    }
}

/// How many times the bytes asked for [`MappedTraces::traces`] asks the kernel to read.
const READ_AHEAD: usize = 4;

/// The traces of a [`SegyFile`], mapped.
pub struct MappedTraces<'a> {
    file: &'a SegyFile,
    // Unregistered before the mapping goes (fields drop in this order).
    watched: Watched,
    map: Mmap,
}

impl MappedTraces<'_> {
    /// The bytes of traces `first..first + count`, asking the kernel to
    /// read them and as many after them ahead: a cold file is then read in
    /// large requests, several at once.
    pub fn traces(&self, first: u64, count: u64) -> &[u8] {
        let len = self.file.trace_len as usize;
        let (start, n) = (first as usize * len, count as usize * len);
        let ahead = (READ_AHEAD * n).min(self.map.len() - start);
        let _ = self.map.advise_range(Advice::WillNeed, start, ahead);
        &self.map[start..start + n]
    }

    /// Fail if the file was cut short while mapped: the bytes read past its
    /// new end were zeros, not the file's.
    pub fn check(&self) -> Result<()> {
        if self.watched.cut_short() {
            return Err(Error::io(
                &self.file.path,
                std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the file was cut short while its trace headers were read",
                ),
            ));
        }
        Ok(())
    }
}

/// What the steps of [`SegyFile::open`] share: the file, its path and length.
struct Opening<'a> {
    file: &'a File,
    path: &'a Path,
    len: u64,
}

impl Opening<'_> {
    fn invalid(
        &self,
        byte: u64,
        field: &'static str,
        value: i64,
        expected: String,
        hint: &str,
    ) -> Error {
        SegyError::InvalidField {
            path: self.path.to_path_buf(),
            byte,
            field,
            value,
            expected,
            hint: hint.to_string(),
        }
        .into()
    }

    /// The binary header (its byte order detected unless given) and the sample format it names.
    fn binary_header(
        &self,
        head: &[u8],
        options: &SegyOptions,
    ) -> Result<(BinaryHeader, SampleFormat)> {
        let bin_raw = head[TEXT_LEN as usize..].to_vec();
        let endian = match options.endian {
            Some(e) => e,
            None => detect_endian(&bin_raw).ok_or_else(|| {
                self.invalid(
                    3225,
                    "data sample format code",
                    header_field(&bin_raw, 25, 2, Endian::Big),
                    format!("{VALID_CODES} (read big endian; little endian gives {})", header_field(&bin_raw, 25, 2, Endian::Little)),
                    "; if this is Seismic Unix data (no file headers) it is not supported yet; otherwise set the byte order (--endian)",
                )
            })?,
        };
        let binary = BinaryHeader {
            raw: bin_raw,
            endian,
        };
        let code = binary.int(3225, 2);
        let format = SampleFormat::from_code(code).ok_or_else(|| {
            self.invalid(
                3225,
                "data sample format code",
                code,
                VALID_CODES.into(),
                "",
            )
        })?;
        Ok((binary, format))
    }

    /// Where the traces start, and the textual header with any extended
    /// ones (their count checked against the file size before anything is
    /// allocated for them).
    fn textual_headers(&self, binary: &BinaryHeader, head: &[u8]) -> Result<(u64, Vec<u8>)> {
        let len = self.len;
        let count: u64 = match binary.int(3505, 2) {
            n if n >= 0 => {
                let n = n as u64;
                if FILE_HEADER_LEN + n * TEXT_LEN > len {
                    return Err(self.invalid(
                        3505,
                        "number of extended textual headers",
                        n as i64,
                        format!(
                            "at most {} for a {len}-byte file",
                            (len - FILE_HEADER_LEN) / TEXT_LEN
                        ),
                        "",
                    ));
                }
                n
            }
            -1 => count_variable_stanzas(self.file, self.path, len)?,
            n => {
                return Err(self.invalid(
                    3505,
                    "number of extended textual headers",
                    n,
                    "-1 or a count >= 0".into(),
                    "",
                ))
            }
        };
        let mut text_raw = head[..TEXT_LEN as usize].to_vec();
        if count > 0 {
            let mut ext = vec![0u8; (count * TEXT_LEN) as usize];
            self.file
                .read_exact_at(&mut ext, FILE_HEADER_LEN)
                .map_err(|e| Error::io(self.path, e))?;
            text_raw.extend_from_slice(&ext);
        }
        Ok((FILE_HEADER_LEN + count * TEXT_LEN, text_raw))
    }

    /// The first trace's header (zeros if the file has none).
    fn first_trace_header(&self, data_start: u64) -> Result<[u8; TRACE_HEADER_LEN]> {
        let mut header = [0u8; TRACE_HEADER_LEN];
        if self.len >= data_start + TRACE_HEADER_LEN as u64 {
            self.file
                .read_exact_at(&mut header, data_start)
                .map_err(|e| Error::io(self.path, e))?;
        }
        Ok(header)
    }

    /// Samples per trace: the binary header's count, else the first trace
    /// header's; the one that divides the file into whole traces wins.
    fn samples_per_trace(
        &self,
        binary: &BinaryHeader,
        format: SampleFormat,
        data_start: u64,
        first_header: &[u8; TRACE_HEADER_LEN],
        options: &SegyOptions,
        warnings: &mut Vec<String>,
    ) -> Result<u64> {
        let (file, len, endian) = (self.file, self.len, binary.endian);
        let mut bin_samples = binary.u16(3221);
        if bin_samples == 0 && binary.revision().0 >= 2 {
            bin_samples = binary.int(3269, 4).max(0) as u64;
        }
        let trace_samples = (header_field(first_header, 115, 2, endian) as u16) as u64;
        let bps = format.bytes() as u64;
        // A count fits if the file divides into whole traces of it and the
        // second trace's header (byte 115) agrees, or leaves the field unset.
        let second_trace_samples = |ns: u64| -> Option<u64> {
            let mut h = [0u8; TRACE_HEADER_LEN];
            let at = data_start + TRACE_HEADER_LEN as u64 + ns * bps;
            (at + TRACE_HEADER_LEN as u64 <= len && file.read_exact_at(&mut h, at).is_ok())
                .then(|| (header_field(&h, 115, 2, endian) as u16) as u64)
        };
        let divides = |ns: u64| {
            ns > 0 && (len - data_start).is_multiple_of(TRACE_HEADER_LEN as u64 + ns * bps)
        };
        let agrees = |ns: u64| second_trace_samples(ns).is_none_or(|next| next == ns || next == 0);
        let disagree = |used: u64| {
            format!(
                "samples per trace: the binary header (byte 3221) says {bin_samples}, the first trace header \
                 (byte 115) says {trace_samples}; using {used}, which divides the file into whole traces"
            )
        };
        if divides(bin_samples) && agrees(bin_samples) {
            return Ok(bin_samples);
        }
        if divides(trace_samples) && agrees(trace_samples) {
            if bin_samples != 0 {
                warnings.push(disagree(trace_samples));
            }
            return Ok(trace_samples);
        }
        for ns in [bin_samples, trace_samples] {
            if divides(ns) {
                warnings.push(disagree(ns));
                return Ok(ns);
            }
        }
        if bin_samples == 0 && trace_samples == 0 {
            return Err(self.invalid(
                3221,
                "samples per trace",
                0,
                "a positive count (here and at trace header byte 115)".into(),
                "",
            ));
        }
        let ns = if bin_samples > 0 {
            bin_samples
        } else {
            trace_samples
        };
        let trace_len = TRACE_HEADER_LEN as u64 + ns * bps;
        let whole = (len - data_start) / trace_len;
        if !options.allow_truncated || whole == 0 {
            return Err(SegyError::Truncated {
                path: self.path.to_path_buf(),
                file_len: len,
                data_start,
                data_bytes: len - data_start,
                trace_len,
                samples: ns,
                sample_bytes: bps,
                last_trace: whole,
                hint: if whole == 0 {
                    ". No whole trace is left; check samples per trace (bytes 3221 and 115) and the sample format (byte 3225)".into()
                } else {
                    format!(". Pass allow_truncated (--allow-truncated) to ingest the {whole} whole traces")
                },
            }
            .into());
        }
        warnings.push(format!(
            "last trace is cut short at byte {len}; ingesting the {whole} whole traces (allow_truncated)"
        ));
        Ok(ns)
    }

    /// Sample interval: the binary header's, else the trace header's, else the option's.
    fn sample_interval(
        &self,
        binary: &BinaryHeader,
        first_header: &[u8; TRACE_HEADER_LEN],
        options: &SegyOptions,
    ) -> Result<f64> {
        // Revision 2 makes both fields unsigned (intervals of 32768 us and
        // more); before it they are two's complement, and negative is wrong.
        let mut bin_interval = binary.int(3217, 2);
        let mut trace_interval = header_field(first_header, 117, 2, binary.endian);
        if binary.revision().0 >= 2 {
            bin_interval = bin_interval as u16 as i64;
            trace_interval = trace_interval as u16 as i64;
        }
        match options.sample_interval_us {
            Some(v) if v.is_finite() && v > 0.0 => Ok(v),
            Some(v) => Err(SegyError::Option {
                path: self.path.to_path_buf(),
                message: format!(
                    "sample_interval_us (--sample-interval) is {v}; it must be a positive number of microseconds"
                ),
            }
            .into()),
            None if bin_interval > 0 => Ok(bin_interval as f64),
            None if trace_interval > 0 => Ok(trace_interval as f64),
            None => Err(self.invalid(
                3217,
                "sample interval",
                bin_interval,
                format!("a positive number of microseconds (trace header byte 117 has {trace_interval})"),
                "; pass the interval (--sample-interval)",
            )),
        }
    }
}

/// Apply a SEG-Y scalar: positive multiplies, negative divides, zero is one.
pub fn apply_scalar(value: f64, scalar: i64) -> f64 {
    match scalar {
        0 => value,
        s if s > 0 => value * s as f64,
        s => value / (-s) as f64,
    }
}

/// Decide the byte order from the binary header: the rev 2 integer constant
/// 0x01020304 if present, else whichever order gives a valid format code.
fn detect_endian(bin: &[u8]) -> Option<Endian> {
    match header_field(bin, 97, 4, Endian::Big) {
        0x0102_0304 => return Some(Endian::Big),
        0x0403_0201 => return Some(Endian::Little),
        _ => {}
    }
    let valid = |e| SampleFormat::from_code(header_field(bin, 25, 2, e)).is_some();
    if valid(Endian::Big) {
        Some(Endian::Big)
    } else if valid(Endian::Little) {
        Some(Endian::Little)
    } else {
        None
    }
}

/// Rev 2 "variable" extended headers: count 3200-byte stanzas up to and
/// including the one that holds `((SEG: EndText))`, never past the file end.
fn count_variable_stanzas(file: &File, path: &Path, len: u64) -> Result<u64> {
    let mut block = vec![0u8; TEXT_LEN as usize];
    let mut n = 0u64;
    while FILE_HEADER_LEN + (n + 1) * TEXT_LEN <= len {
        file.read_exact_at(&mut block, FILE_HEADER_LEN + n * TEXT_LEN)
            .map_err(|e| Error::io(path, e))?;
        n += 1;
        let text = decode_text(&block, TextEncoding::detect(&block)).to_ascii_lowercase();
        if text.contains("((seg: endtext))") || text.contains("((seg:endtext))") {
            return Ok(n);
        }
    }
    Err(SegyError::InvalidField {
        path: path.to_path_buf(),
        byte: 3505,
        field: "number of extended textual headers",
        value: -1,
        expected: "a ((SEG: EndText)) stanza to end the variable-length headers".into(),
        hint: String::new(),
    }
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_sign_extend() {
        let buf = [0xff, 0xfe, 0x00, 0x10];
        assert_eq!(header_field(&buf, 1, 2, Endian::Big), -2);
        assert_eq!(header_field(&buf, 3, 2, Endian::Big), 16);
        assert_eq!(header_field(&buf, 3, 2, Endian::Little), 4096);
        assert_eq!(header_field(&buf, 1, 4, Endian::Big), -131056);
    }

    #[test]
    fn scalars() {
        assert_eq!(apply_scalar(10000.0, -10), 1000.0);
        assert_eq!(apply_scalar(5.0, 100), 500.0);
        assert_eq!(apply_scalar(5.0, 0), 5.0);
    }
}
