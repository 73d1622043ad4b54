//! Survey geometry from a parallel scan of the trace headers: the sorted
//! inline, crossline (and offset) numbers, and which trace fills each cell.
//! Traces may come in any order; cells no trace fills are recorded as missing.

use rayon::prelude::*;

use super::{fields::header_field, outliers, SegyError, SegyFile, TRACE_HEADER_LEN};
use crate::{config::Parallelism, error::Result, progress::Progress};

/// Bytes of consecutive traces a scan task reads.
const SCAN_BLOCK_BYTES: u64 = 4 << 20;

/// Most traces [`Geometry::guess_trace_shape`] reads looking for the first inline's end.
const GUESS_TRACES: u64 = 1 << 16;

/// Whether a 4-byte key at 1-based `byte` lies inside the trace header.
fn key_fits(byte: usize) -> bool {
    byte >= 1 && byte + 3 <= TRACE_HEADER_LEN
}

/// Marks a grid cell that no trace fills.
pub const MISSING: u64 = u64::MAX;

/// Where the geometry keys live in each trace header (1-based bytes, 4-byte integers).
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// Inline number position (default 189).
    pub inline_byte: usize,
    /// Crossline number position (default 193).
    pub crossline_byte: usize,
    /// Offset position (default 37); used as a 4th dimension only when
    /// (inline, crossline) pairs repeat with different offsets.
    pub offset_byte: usize,
}

impl Default for ScanOptions {
    fn default() -> Self {
        Self {
            inline_byte: 189,
            crossline_byte: 193,
            offset_byte: 37,
        }
    }
}

/// The regular grid the traces fill.
#[derive(Debug, Clone)]
pub struct Geometry {
    /// Sorted distinct inline numbers.
    pub inlines: Vec<i64>,
    /// Sorted distinct crossline numbers.
    pub crosslines: Vec<i64>,
    /// Sorted distinct offsets, for pre-stack data.
    pub offsets: Option<Vec<i64>>,
    /// Trace index for each cell in C order over (inline, crossline[, offset]);
    /// [`MISSING`] where no trace is.
    pub trace_of_cell: Vec<u64>,
    /// Number of traces placed.
    pub live: u64,
    /// Trace order in the file: "inline", "crossline" or "unsorted".
    pub sorting: &'static str,
    /// What the user should know about the headers (outlier numbers).
    pub warnings: Vec<String>,
}

/// Outlier inline or crossline numbers (see [`outliers`]): a warning naming
/// their traces, or an error when the rows and columns that the far ones
/// (damaged headers, not lines between the survey's) add are mostly empty
/// cells, at least [`OUTLIER_EMPTY_SHARE`] of the grid.
fn check_outliers(
    keys: &[[i64; 3]],
    inlines: &[i64],
    crosslines: &[i64],
    options: &ScanOptions,
) -> std::result::Result<Vec<String>, String> {
    let found = [
        (
            "inline",
            options.inline_byte,
            outliers::find(keys.iter().map(|k| k[0]), inlines),
        ),
        (
            "crossline",
            options.crossline_byte,
            outliers::find(keys.iter().map(|k| k[1]), crosslines),
        ),
    ];
    if found.iter().all(|(_, _, o)| o.is_empty()) {
        return Ok(Vec::new());
    }
    let describe = |name: &str, byte: usize, list: &[outliers::Outlier]| -> String {
        let shown: Vec<String> = list
            .iter()
            .take(5)
            .map(|o| {
                let traces: Vec<String> = o.traces.iter().take(3).map(u64::to_string).collect();
                format!("{} (trace {})", o.value, traces.join(", "))
            })
            .collect();
        let more = if list.len() > 5 {
            format!(" and {} more", list.len() - 5)
        } else {
            String::new()
        };
        format!(
            "{} {name} number(s) at byte {byte} lie off the survey's: {}{more}",
            list.len(),
            shown.join(", ")
        )
    };
    let messages: Vec<String> = found
        .iter()
        .filter(|(_, _, o)| !o.is_empty())
        .map(|(name, byte, o)| describe(name, *byte, o))
        .collect();
    let far = |list: &[outliers::Outlier]| list.iter().filter(|o| o.far).count();
    let cells = inlines.len() as u64 * crosslines.len() as u64;
    let kept =
        (inlines.len() - far(&found[0].2)) as u64 * (crosslines.len() - far(&found[1].2)) as u64;
    let odd_traces: u64 = found
        .iter()
        .flat_map(|(_, _, o)| o.iter().filter(|x| x.far).map(|x| x.traces.len() as u64))
        .sum();
    let empty_added = (cells - kept).saturating_sub(odd_traces);
    if empty_added as f64 >= OUTLIER_EMPTY_SHARE * cells as f64 {
        return Err(format!(
            "{}: they would add {empty_added} empty cells to the grid ({:.0}% of it). Their trace headers are \
             probably damaged; repair or remove those traces",
            messages.join("; "),
            100.0 * empty_added as f64 / cells as f64
        ));
    }
    Ok(messages
        .into_iter()
        .map(|m| format!("{m}; their traces are ingested, in rows or columns of their own"))
        .collect())
}

/// Outliers that add at least this share of the grid as empty cells are refused.
const OUTLIER_EMPTY_SHARE: f64 = 0.05;

impl Geometry {
    /// Shape of the trace grid: (inlines, crosslines[, offsets]).
    pub fn trace_shape(&self) -> Vec<u64> {
        let mut s = vec![self.inlines.len() as u64, self.crosslines.len() as u64];
        if let Some(o) = &self.offsets {
            s.push(o.len() as u64);
        }
        s
    }

    /// Cells with no trace.
    pub fn missing(&self) -> u64 {
        self.trace_of_cell.len() as u64 - self.live
    }

    /// The trace grid (inlines, crosslines) of a survey sorted by inline
    /// with every trace present, from its first inline and its trace count;
    /// `None` when the first traces do not look like one (repeated pairs:
    /// offsets). A guess, for work that can start before [`Self::scan`]
    /// and be checked against it.
    pub fn guess_trace_shape(file: &SegyFile, options: &ScanOptions) -> Option<Vec<u64>> {
        if !key_fits(options.inline_byte) || !key_fits(options.crossline_byte) {
            return None;
        }
        let endian = file.endian();
        let mut header = [0u8; TRACE_HEADER_LEN];
        let mut key = |i: u64| -> Option<(i64, i64)> {
            file.read_at(&mut header, file.trace_offset(i)).ok()?;
            Some((
                header_field(&header, options.inline_byte, 4, endian),
                header_field(&header, options.crossline_byte, 4, endian),
            ))
        };
        let (inline, crossline) = key(0)?;
        let mut per_inline = 1;
        while per_inline < file.traces.min(GUESS_TRACES) {
            let (il, xl) = key(per_inline)?;
            if il != inline {
                break;
            }
            if xl == crossline {
                return None;
            }
            per_inline += 1;
        }
        let whole = per_inline >= 2
            && per_inline < file.traces.min(GUESS_TRACES)
            && file.traces.is_multiple_of(per_inline);
        whole.then(|| vec![file.traces / per_inline, per_inline])
    }

    /// Scan every trace header of `file`; `progress` counts the traces and
    /// may stop the scan.
    pub fn scan(
        file: &SegyFile,
        options: &ScanOptions,
        parallelism: Parallelism,
        progress: &Progress,
    ) -> Result<Self> {
        let endian = file.endian();
        let positions = [
            options.inline_byte,
            options.crossline_byte,
            options.offset_byte,
        ];
        for (name, &byte) in ["inline", "crossline", "offset"].iter().zip(&positions) {
            if !key_fits(byte) {
                return Err(SegyError::Geometry {
                    path: file.path().to_path_buf(),
                    message: format!(
                        "{name} byte position {byte} is outside the 240-byte trace header"
                    ),
                }
                .into());
            }
        }
        // Headers are read from the mapped file: only the pages holding
        // them are touched, and nothing is copied (reading whole blocks of
        // traces copied every sample too).
        let mapped = match file.traces {
            0 => None, // nothing to map (and a mapping cannot be empty)
            _ => Some(file.map_traces()?),
        };
        let first_count = mapped
            .as_ref()
            .map_or(0, |m| sample_count(file, m.traces(0, 1)));
        let per_block = (SCAN_BLOCK_BYTES / file.trace_len).clamp(1, file.traces.max(1));
        let blocks = file.traces.div_ceil(per_block);
        let keyed: Vec<Vec<[i64; 3]>> = parallelism.pool().install(|| {
            (0..blocks)
                .into_par_iter()
                .map(|b| {
                    progress.check()?;
                    let first = b * per_block;
                    let count = per_block.min(file.traces - first);
                    let block = mapped
                        .as_ref()
                        .expect("blocks exist only where traces do")
                        .traces(first, count);
                    let mut keys = Vec::with_capacity(count as usize);
                    for (i, trace) in block.chunks_exact(file.trace_len as usize).enumerate() {
                        check_sample_count(file, first + i as u64, trace, first_count)?;
                        keys.push(positions.map(|p| header_field(trace, p, 4, endian)));
                    }
                    progress.add(count);
                    Ok(keys)
                })
                .collect::<Result<_>>()
        })?;
        if let Some(mapped) = &mapped {
            mapped.check()?;
        }
        let keys: Vec<[i64; 3]> = keyed.into_iter().flatten().collect();
        Self::from_keys(file, &keys, options)
    }

    fn from_keys(file: &SegyFile, keys: &[[i64; 3]], options: &ScanOptions) -> Result<Self> {
        let path = file.path().to_path_buf();
        let fail = |message: String| -> crate::Error {
            SegyError::Geometry {
                path: path.clone(),
                message,
            }
            .into()
        };
        let distinct = |k: usize| {
            let mut v: Vec<i64> = keys.iter().map(|key| key[k]).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let (inlines, crosslines, all_offsets) = (distinct(0), distinct(1), distinct(2));
        let bytes = format!("bytes {}/{}", options.inline_byte, options.crossline_byte);
        let warnings = check_outliers(keys, &inlines, &crosslines, options).map_err(fail)?;
        if keys.len() > 1 && inlines.len() == 1 && crosslines.len() == 1 {
            return Err(fail(format!(
                "all {} traces have inline {} and crossline {} ({bytes}): these headers hold no 3D geometry. \
                 Check the byte locations (--inline-byte/--crossline-byte; 189/193 is the standard, 9/21 and 221/225 are common); \
                 unstructured data such as shot gathers is not supported yet",
                keys.len(), inlines[0], crosslines[0]
            )));
        }
        // Do (inline, crossline) pairs repeat? Then offsets make the 4th dimension.
        let mut pairs: Vec<(i64, i64, usize)> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k[0], k[1], i))
            .collect();
        pairs.sort_unstable();
        let repeated = pairs
            .windows(2)
            .find(|w| w[0].0 == w[1].0 && w[0].1 == w[1].1);
        let offsets = match repeated {
            Some(_) if all_offsets.len() > 1 => Some(all_offsets),
            Some(w) => {
                return Err(fail(format!(
                    "traces {} and {} both have inline {} and crossline {} ({bytes}) and the same offset (byte {}): \
                     duplicate traces. Check the byte locations, or remove the duplicates",
                    w[0].2, w[1].2, w[0].0, w[0].1, options.offset_byte
                )))
            }
            None => None,
        };
        let n_off = offsets.as_ref().map_or(1, Vec::len);
        let cells = (inlines.len() as u128) * (crosslines.len() as u128) * n_off as u128;
        let traces = keys.len() as u128;
        if cells > 10 * traces {
            return Err(fail(format!(
                "{} traces would fill only {:.3}% of a {} x {} grid of inlines x crosslines{} ({bytes}): \
                 the inline/crossline byte locations are probably wrong (--inline-byte/--crossline-byte)",
                traces,
                100.0 * traces as f64 / cells as f64,
                inlines.len(),
                crosslines.len(),
                if n_off > 1 { format!(" x {n_off} offsets") } else { String::new() },
            )));
        }
        let mut trace_of_cell = vec![MISSING; cells as usize];
        let position = |v: &[i64], x: i64| {
            v.binary_search(&x)
                .expect("key is among the distinct values")
        };
        let mut previous_cell: Option<usize> = None;
        let (mut inline_sorted, mut crossline_sorted) = (true, true);
        for (i, k) in keys.iter().enumerate() {
            let il = position(&inlines, k[0]);
            let xl = position(&crosslines, k[1]);
            let off = offsets.as_ref().map_or(0, |o| position(o, k[2]));
            let cell = (il * crosslines.len() + xl) * n_off + off;
            if trace_of_cell[cell] != MISSING {
                return Err(fail(format!(
                    "traces {} and {i} both have inline {}, crossline {}{} ({bytes}): duplicate traces",
                    trace_of_cell[cell],
                    k[0],
                    k[1],
                    if n_off > 1 { format!(", offset {}", k[2]) } else { String::new() },
                )));
            }
            trace_of_cell[cell] = i as u64;
            if let Some(p) = previous_cell {
                inline_sorted &= cell > p;
                let t = |c: usize| {
                    let (ilx, o) = (c / n_off, c % n_off);
                    ((ilx % crosslines.len()) * inlines.len() + ilx / crosslines.len()) * n_off + o
                };
                crossline_sorted &= t(cell) > t(p);
            }
            previous_cell = Some(cell);
        }
        let sorting = if inline_sorted {
            "inline"
        } else if crossline_sorted {
            "crossline"
        } else {
            "unsorted"
        };
        Ok(Self {
            inlines,
            crosslines,
            offsets,
            trace_of_cell,
            live: keys.len() as u64,
            sorting,
            warnings,
        })
    }
}

/// A trace's sample count as its header gives it (byte 115).
fn sample_count(file: &SegyFile, trace: &[u8]) -> u64 {
    (header_field(trace, 115, 2, file.binary.endian) as u16) as u64
}

/// Refuse a trace whose header gives another sample count (byte 115) than
/// the first trace's and the file's traces hold: traces of varying length
/// would be read shifted, every one after it garbage. A count the same in
/// every trace is not checked against the file (cut-down surveys keep their
/// original headers), and zero (unset) agrees.
fn check_sample_count(file: &SegyFile, index: u64, trace: &[u8], first: u64) -> Result<()> {
    let said = sample_count(file, trace);
    if said == 0 || said == first || said == file.samples as u64 {
        return Ok(());
    }
    Err(SegyError::Geometry {
        path: file.path().to_path_buf(),
        message: format!(
            "trace {index} (at byte {}) says it holds {said} samples (trace header byte 115); the file's \
             traces hold {}: traces of varying length are not supported (or that header is damaged)",
            file.data_start + index * file.trace_len,
            file.samples
        ),
    }
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segy::SegyOptions;

    /// A SEG-Y file of IEEE float traces of 4 samples with these (inline, crossline, offset) keys.
    fn segy_file(dir: &std::path::Path, keys: &[(i32, i32, i32)]) -> SegyFile {
        let mut bytes = vec![b' '; 3200];
        let mut binary = vec![0u8; 400];
        binary[16..18].copy_from_slice(&4000u16.to_be_bytes()); // interval (byte 3217)
        binary[20..22].copy_from_slice(&4u16.to_be_bytes()); // samples (byte 3221)
        binary[24..26].copy_from_slice(&5u16.to_be_bytes()); // IEEE float (byte 3225)
        bytes.extend(binary);
        for &(il, xl, off) in keys {
            let mut header = [0u8; TRACE_HEADER_LEN];
            header[36..40].copy_from_slice(&off.to_be_bytes());
            header[114..116].copy_from_slice(&4u16.to_be_bytes());
            header[116..118].copy_from_slice(&4000u16.to_be_bytes());
            header[188..192].copy_from_slice(&il.to_be_bytes());
            header[192..196].copy_from_slice(&xl.to_be_bytes());
            bytes.extend(header);
            bytes.extend([0u8; 16]);
        }
        let path = dir.join(format!("f{}.sgy", keys.len()));
        std::fs::write(&path, bytes).unwrap();
        SegyFile::open(&path, &SegyOptions::default()).unwrap()
    }

    #[test]
    fn the_guessed_grid_is_the_scanned_one_or_none() {
        let dir = tempfile::tempdir().unwrap();
        let grid = |inlines: i32, crosslines: i32, offsets: i32| -> Vec<(i32, i32, i32)> {
            let mut keys = Vec::new();
            for il in 0..inlines {
                for xl in 0..crosslines {
                    for off in 0..offsets {
                        keys.push((10 + il, 100 + 2 * xl, off));
                    }
                }
            }
            keys
        };
        let options = ScanOptions::default();
        let full = segy_file(dir.path(), &grid(3, 5, 1));
        let scanned = Geometry::scan(
            &full,
            &options,
            Parallelism::resolve(Some(2), None),
            &Progress::default(),
        )
        .unwrap();
        assert_eq!(
            Geometry::guess_trace_shape(&full, &options),
            Some(scanned.trace_shape())
        );
        // Offsets repeat each pair; one trace missing leaves no whole grid.
        let offsets = segy_file(dir.path(), &grid(3, 5, 2));
        assert_eq!(Geometry::guess_trace_shape(&offsets, &options), None);
        let mut short = grid(3, 5, 1);
        short.pop();
        let short = segy_file(dir.path(), &short);
        assert_eq!(Geometry::guess_trace_shape(&short, &options), None);
        let bad = ScanOptions {
            inline_byte: 239,
            ..options
        };
        assert_eq!(Geometry::guess_trace_shape(&full, &bad), None);
    }
}
