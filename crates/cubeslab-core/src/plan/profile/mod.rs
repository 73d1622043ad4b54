//! A device profile: what the storage under a store and the cores reading it
//! can do. Measured once by [`super::measure`], saved as JSON, and read by
//! the cost model. Rates are bytes per second; times are seconds.

use serde::{Deserialize, Serialize};

/// Format version written into every profile. 2: checksums by `crc-fast`
/// (rates measured with the `crc32c` crate before are stale), and the
/// crc32c rate measured over working sets as well as the chunk-start cost.
pub const PROFILE_FORMAT: u32 = 2;

/// Everything the cost model needs to know about a machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceProfile {
    /// [`PROFILE_FORMAT`] when written.
    pub format: u32,
    /// Directory measured (its filesystem is the one profiled).
    pub path: String,
    /// Worker threads the rates below were measured with (all busy at once).
    pub threads: usize,
    /// Read throughput against request size and requests in flight.
    pub io: IoTable,
    /// Memory work per thread, with every thread busy.
    pub memory: MemoryRates,
    /// The engine's fixed costs.
    pub engine: EngineCosts,
    /// Decode and encode speed of each codec on representative data.
    pub codecs: Vec<CodecRate>,
}

/// Read throughput of the device, per request size and queue depth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IoTable {
    /// Request sizes in bytes, ascending.
    pub sizes: Vec<u64>,
    /// Requests in flight, ascending.
    pub depths: Vec<u64>,
    /// Throughput reading uncached data: `cold[size][depth]`, bytes/s; the
    /// monotone envelope of `cold_measured` (see [`IoTable::envelope`]).
    pub cold: Vec<Vec<f64>>,
    /// The cold throughput as measured, before the envelope.
    #[serde(default)]
    pub cold_measured: Vec<Vec<f64>>,
    /// Throughput reading data in the page cache: `warm[size][depth]`, bytes/s.
    pub warm: Vec<Vec<f64>>,
}

impl IoTable {
    /// Cold throughput for requests of `size` bytes with `depth` in
    /// flight, interpolated in log size and log depth (clamped at the edges).
    pub fn cold_rate(&self, size: f64, depth: f64) -> f64 {
        interpolate(&self.sizes, &self.depths, &self.cold, size, depth)
    }

    /// A device serves more requests in flight, or larger requests, at
    /// least as fast as fewer or smaller ones; a measured dip is noise (on a
    /// virtual disk, other tenants). The envelope: the running maximum along
    /// depth, then along size.
    pub fn envelope(table: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let mut out = table.to_vec();
        for row in out.iter_mut() {
            for j in 1..row.len() {
                row[j] = row[j].max(row[j - 1]);
            }
        }
        for i in 1..out.len() {
            for j in 0..out[i].len() {
                out[i][j] = out[i][j].max(out[i - 1][j]);
            }
        }
        out
    }

    /// The best cold throughput measured: the device's sequential bandwidth.
    pub fn sequential_rate(&self) -> f64 {
        self.cold.iter().flatten().copied().fold(0.0, f64::max)
    }
}

fn interpolate(sizes: &[u64], depths: &[u64], table: &[Vec<f64>], size: f64, depth: f64) -> f64 {
    // Position of `x` on an ascending axis, in log2 units: (index, fraction).
    // Logarithms only of the bracketing pair: the optimizer interpolates
    // millions of times, and log2 of the whole axis on each call was a
    // fifth of its time.
    fn locate(axis: &[u64], x: f64) -> (usize, f64) {
        let x = x.max(1.0);
        if axis.len() == 1 || x <= axis[0] as f64 {
            return (0, 0.0);
        }
        for i in 0..axis.len() - 1 {
            let (low, high) = (axis[i] as f64, axis[i + 1] as f64);
            if x <= high {
                let lx = x.log2();
                return (i, (lx - low.log2()) / (high.log2() - low.log2()));
            }
        }
        (axis.len() - 2, 1.0)
    }
    let (i, fi) = locate(sizes, size);
    let (j, fj) = locate(depths, depth);
    let at = |a: usize, b: usize| -> f64 {
        let a = a.min(table.len() - 1);
        let b = b.min(table[a].len() - 1);
        table[a][b].max(1.0).ln()
    };
    // Bilinear in log-rate.
    let low = at(i, j) * (1.0 - fj) + at(i, j + 1) * fj;
    let high = at(i + 1, j) * (1.0 - fj) + at(i + 1, j + 1) * fj;
    (low * (1.0 - fi) + high * fi).exp()
}

/// Per-thread memory rates, measured with every thread busy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryRates {
    /// Contiguous copy, bytes/s.
    pub copy: f64,
    /// Contiguous copy out of a chunk the CPU's caches hold (just checked
    /// or decoded whole) into an output of a few MiB that a previous read
    /// left mapped, bytes/s: several times `copy`, whose source and
    /// destination both stream through memory. Profiles measured before it
    /// was added lack it: such copies then run at `copy`, as they did.
    #[serde(default)]
    pub copy_from_cache: Option<f64>,
    /// crc32c over a buffer, bytes/s.
    pub crc: f64,
    /// First touch of a freshly mapped page-cache file (page faults), bytes/s.
    pub fault: f64,
    /// First write to freshly allocated memory (page faults and zeroing:
    /// a new output array), bytes/s.
    #[serde(default = "first_write_default")]
    pub first_write: f64,
    /// Extra time (s) to check a chunk that does not start where the chunk
    /// checked before it ended: its first cache lines come from memory
    /// before the hardware prefetcher has picked up the stream (crc32c of
    /// 8 KiB pieces out of order against in order). Older profiles lack it.
    #[serde(default)]
    pub crc_chunk_start: f64,
    /// The same extra time for chunks of other sizes, from memory, bytes
    /// ascending (it grows with the chunk). Older profiles lack it: every
    /// chunk's start then costs `crc_chunk_start`.
    #[serde(default)]
    pub crc_chunk_start_by_size: Vec<ChunkStart>,
    /// crc32c over working sets of several sizes, each checked again and
    /// again as a warm read checks the chunks the read before it left:
    /// bytes ascending. Rates rise and starts get cheaper as much of the
    /// set as the CPU's caches keep.
    #[serde(default)]
    pub crc_within: Vec<WorkingSet>,
}

/// What checking chunks costs when a read checks `bytes` in all, over and over.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WorkingSet {
    /// Bytes checked, over all threads.
    pub bytes: u64,
    /// crc32c of chunks in order, bytes/s per thread.
    pub crc: f64,
    /// Extra seconds to start a chunk away from the last one.
    pub chunk_start: f64,
}

/// The extra time to start checking a chunk of `bytes` out of order.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ChunkStart {
    /// Chunk size.
    pub bytes: u64,
    /// Extra seconds, from memory.
    pub seconds: f64,
}

/// Point by point, the median of curves measured at the same sizes (those
/// at other sizes, from another version, are left out).
fn median_curve<'a>(curves: impl Iterator<Item = &'a Vec<WorkingSet>> + Clone) -> Vec<WorkingSet> {
    let Some(longest) = curves.clone().max_by_key(|c| c.len()) else {
        return Vec::new();
    };
    let sizes: Vec<u64> = longest.iter().map(|p| p.bytes).collect();
    let alike = || {
        curves
            .clone()
            .filter(|c| c.iter().map(|p| p.bytes).eq(sizes.iter().copied()))
    };
    (0..sizes.len())
        .map(|i| WorkingSet {
            bytes: sizes[i],
            crc: median(alike().map(|c| c[i].crc)),
            chunk_start: median(alike().map(|c| c[i].chunk_start)),
        })
        .collect()
}

/// Size by size, the median of start costs measured at the same sizes.
fn median_starts<'a>(sets: impl Iterator<Item = &'a Vec<ChunkStart>> + Clone) -> Vec<ChunkStart> {
    let Some(longest) = sets.clone().max_by_key(|s| s.len()) else {
        return Vec::new();
    };
    longest
        .iter()
        .enumerate()
        .map(|(i, point)| ChunkStart {
            bytes: point.bytes,
            seconds: median(
                sets.clone()
                    .filter_map(|s| s.get(i).filter(|p| p.bytes == point.bytes))
                    .map(|p| p.seconds),
            ),
        })
        .collect()
}

/// The median of the values present, if any are.
fn of_some(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let present: Vec<f64> = values.flatten().collect();
    (!present.is_empty()).then(|| median(present.into_iter()))
}

fn first_write_default() -> f64 {
    4e9
}

/// The median of `values` (the upper one of an even count); NaN if empty.
pub(super) fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

impl MemoryRates {
    /// Each rate's median over several measurements.
    pub fn median(samples: &[MemoryRates]) -> MemoryRates {
        let of = |f: fn(&MemoryRates) -> f64| median(samples.iter().map(f));
        MemoryRates {
            copy: of(|m| m.copy),
            copy_from_cache: of_some(samples.iter().map(|m| m.copy_from_cache)),
            crc: of(|m| m.crc),
            fault: of(|m| m.fault),
            first_write: of(|m| m.first_write),
            crc_chunk_start: of(|m| m.crc_chunk_start),
            crc_chunk_start_by_size: median_starts(
                samples.iter().map(|m| &m.crc_chunk_start_by_size),
            ),
            crc_within: median_curve(samples.iter().map(|m| &m.crc_within)),
        }
    }

    /// How many times the start of a chunk of `chunk_bytes` costs what the
    /// start of an 8 KiB one does (the size `crc_chunk_start` and the
    /// working sets are measured at): interpolated in log(bytes) between
    /// the sizes measured, the nearest one's outside them; 1 without them.
    pub fn chunk_start_scale(&self, chunk_bytes: u64) -> f64 {
        let sizes = &self.crc_chunk_start_by_size;
        if sizes.is_empty() || self.crc_chunk_start <= 0.0 {
            return 1.0;
        }
        // The sizes measured with the 8 KiB start in its place among them;
        // no allocation (the optimizer asks this for every layout it tries).
        const MEASURED: u64 = 8 << 10;
        let at = |s: &ChunkStart| (s.bytes, s.seconds);
        let points = (sizes.iter().filter(|s| s.bytes < MEASURED).map(at))
            .chain([(MEASURED, self.crc_chunk_start)])
            .chain(sizes.iter().filter(|s| s.bytes > MEASURED).map(at));
        let largest = sizes.last().filter(|s| s.bytes > MEASURED);
        let largest = largest.map_or(self.crc_chunk_start, |s| s.seconds);
        let seconds = log_linear(points, chunk_bytes).unwrap_or(largest);
        (seconds / self.crc_chunk_start).max(0.0)
    }

    /// crc32c rate (bytes/s per thread) when a read checks `bytes` in all,
    /// as a warm read repeating the one before it.
    pub fn crc_within(&self, bytes: u64) -> f64 {
        1.0 / self.along_working_sets(bytes, |w| 1.0 / w.crc, 1.0 / self.crc)
    }

    /// Extra time to start a checked chunk away from the last one when a
    /// read checks `bytes` in all, as a warm read repeating the one before it.
    pub fn chunk_start_within(&self, bytes: u64) -> f64 {
        self.along_working_sets(bytes, |w| w.chunk_start, self.crc_chunk_start)
    }

    /// `value` of the working sets at `bytes`: interpolated in log(bytes)
    /// between the measured sizes, the smallest's below them, and
    /// `from_memory` past the largest or without any.
    fn along_working_sets(
        &self,
        bytes: u64,
        value: impl Fn(&WorkingSet) -> f64,
        from_memory: f64,
    ) -> f64 {
        let points = self.crc_within.iter().map(|w| (w.bytes, value(w)));
        log_linear(points, bytes).unwrap_or(from_memory)
    }
}

/// The value at `bytes` of `(bytes, value)` points, bytes ascending:
/// interpolated in log(bytes) between two points, the first point's below
/// them; `None` past the last point or without any.
fn log_linear(mut points: impl Iterator<Item = (u64, f64)>, bytes: u64) -> Option<f64> {
    let (mut b0, mut v0) = points.next()?;
    if bytes <= b0 {
        return Some(v0);
    }
    for (b1, v1) in points {
        if bytes <= b1 {
            let f = (bytes as f64 / b0 as f64).ln() / (b1 as f64 / b0 as f64).ln();
            return Some(v0 + (v1 - v0) * f);
        }
        (b0, v0) = (b1, v1);
    }
    None
}

impl EngineCosts {
    /// Each cost's median over several measurements.
    pub fn median(samples: &[EngineCosts]) -> EngineCosts {
        let of = |f: fn(&EngineCosts) -> f64| median(samples.iter().map(f));
        EngineCosts {
            call: of(|e| e.call),
            helper_arrival: of(|e| e.helper_arrival),
            task: of(|e| e.task),
            run: of(|e| e.run),
            strided_element: of(|e| e.strided_element),
            strided_element_dense: of_some(samples.iter().map(|e| e.strided_element_dense)),
            strided_element_cached: of_some(samples.iter().map(|e| e.strided_element_cached)),
            scattered_store: of_some(samples.iter().map(|e| e.scattered_store)),
            shard_open: of(|e| e.shard_open),
            parallel_efficiency: of(|e| e.parallel_efficiency),
        }
    }
}

/// The engine's fixed costs, measured on a small store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineCosts {
    /// One read call done on the calling thread: planning and return (s).
    pub call: f64,
    /// How long after a read hands out its pieces a sleeping worker starts
    /// on one (s); the calling thread works alone meanwhile. Profiles
    /// measured before it was added carry `handoff`, the time to hand a
    /// read to the workers and back, which stands in for it.
    #[serde(alias = "handoff")]
    pub helper_arrival: f64,
    /// One inner chunk: locate, look up, dispatch (s).
    pub task: f64,
    /// One run of the copy (an innermost loop) (s).
    pub run: f64,
    /// One element copied with a stride of a cache line or more (s).
    pub strided_element: f64,
    /// One element copied with a stride of 8 bytes, so that neighbours share
    /// cache lines (s). Strides between 8 and 64 bytes cost in proportion.
    /// Profiles measured before it was added lack it: every stride then
    /// costs `strided_element`, as it did.
    #[serde(default)]
    pub strided_element_dense: Option<f64>,
    /// One element copied, at any stride, out of a chunk the CPU caches
    /// hold because it was just checked or decoded whole (s). Profiles
    /// measured before it was added lack it: such elements then cost as
    /// [`EngineCosts::strided`] says, as they did.
    #[serde(default)]
    pub strided_element_cached: Option<f64>,
    /// Extra time to write a copied element to an output element a page
    /// (4 KiB) or more from the last one written, as when a chunk's run lies
    /// across the output's rows (s); output strides below a page cost in
    /// proportion, the share of elements that land on a new page. Profiles
    /// measured before it was added lack it: no extra time, as before.
    #[serde(default)]
    pub scattered_store: Option<f64>,
    /// Opening a shard not yet open: map it and check its index (s), besides reading it.
    pub shard_open: f64,
    /// Speed-up of the worker threads over one thread in the steps above
    /// (measured on one thread), divided by their number: below 1 where the
    /// threads share caches, or cores with the rest of the machine.
    /// Profiles measured before it was added scaled perfectly in the model,
    /// so that is their value.
    #[serde(default = "perfect_scaling")]
    pub parallel_efficiency: f64,
}

fn perfect_scaling() -> f64 {
    1.0
}

/// How fast a codec runs on representative data, on one core.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodecRate {
    /// The name `--compress` takes (`zstd:1`, `blosc-lz4`, ...).
    pub name: String,
    /// Decoded bytes / encoded bytes.
    pub ratio: f64,
    /// Decoded bytes per second, one core.
    pub decode: f64,
    /// Decoded bytes per second, one core.
    pub encode: f64,
}

/// Bytes in a memory page: an element written this far or farther from the
/// last one lands on a new page, which [`EngineCosts::scattered`] charges.
const PAGE: f64 = 4096.0;

impl EngineCosts {
    /// Cost of copying one element whose neighbours lie `stride` bytes apart:
    /// from the dense rate at 8 bytes up to the full rate at a cache line.
    pub fn strided(&self, stride: u64) -> f64 {
        let Some(dense) = self.strided_element_dense else {
            return self.strided_element;
        };
        let share = ((stride as f64 - 8.0) / 56.0).clamp(0.0, 1.0);
        dense + (self.strided_element - dense).max(0.0) * share
    }

    /// Extra cost of writing one copied element `out_stride` bytes from the
    /// last: a new page of the output for every `PAGE / out_stride` elements.
    pub fn scattered(&self, out_stride: u64) -> f64 {
        let share = (out_stride as f64 / PAGE).min(1.0);
        self.scattered_store.unwrap_or(0.0) * share
    }
}

impl DeviceProfile {
    /// Read a profile from its JSON text.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let profile: Self = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if profile.format != PROFILE_FORMAT {
            return Err(format!(
                "profile format {} is not {PROFILE_FORMAT}; measure again with `cubeslab profile`",
                profile.format
            ));
        }
        let io = &profile.io;
        let square = |t: &Vec<Vec<f64>>| {
            t.len() == io.sizes.len()
                && t.iter()
                    .all(|r| r.len() == io.depths.len() && r.iter().all(|v| *v > 0.0))
        };
        if io.sizes.is_empty() || io.depths.is_empty() || !square(&io.cold) || !square(&io.warm) {
            return Err("profile io table is not sizes x depths of positive rates".into());
        }
        Ok(profile)
    }

    /// The profile as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a profile serialises")
    }

    /// The rates of the codec named `name`, if measured.
    pub fn codec(&self, name: &str) -> Option<&CodecRate> {
        self.codecs.iter().find(|c| c.name == name)
    }

    /// A stand-in when no profile has been measured: a 2-core VM on an
    /// NVMe-backed virtual disk, the machine cubeslab is developed on
    /// (rounded from `cubeslab profile` there). Plans made with it are
    /// sound on most SSDs; measure for the best.
    pub fn typical() -> Self {
        let sizes: Vec<u64> = (0..7).map(|i| 4096u64 << (2 * i)).collect(); // 4 KiB .. 16 MiB
        let depths: Vec<u64> = (0..7).map(|i| 1u64 << i).collect(); // 1 .. 64
                                                                    // IOPS at QD1 ~ 12k (80 us), scaling with depth up to ~60k for
                                                                    // small requests; sequential bandwidth ~2 GB/s.
        let cold: Vec<Vec<f64>> = sizes
            .iter()
            .map(|&s| {
                depths
                    .iter()
                    .map(|&d| {
                        let latency = 80e-6 + s as f64 / 2.0e9;
                        let rate = s as f64 * d as f64 / latency;
                        rate.min(60_000.0 * s as f64).min(2.0e9)
                    })
                    .collect()
            })
            .collect();
        let warm = sizes
            .iter()
            .map(|&s| depths.iter().map(|_| (s as f64 / 2e-6).min(8e9)).collect())
            .collect();
        Self {
            format: PROFILE_FORMAT,
            path: String::new(),
            threads: 2,
            io: IoTable {
                sizes,
                depths,
                cold_measured: cold.clone(),
                cold,
                warm,
            },
            memory: MemoryRates {
                copy: 8e9,
                copy_from_cache: Some(40e9),
                crc: 18e9,
                fault: 6e9,
                first_write: 4e9,
                crc_chunk_start: 0.3e-6,
                crc_chunk_start_by_size: Vec::new(),
                crc_within: vec![
                    WorkingSet {
                        bytes: 4 << 20,
                        crc: 45e9,
                        chunk_start: 0.05e-6,
                    },
                    WorkingSet {
                        bytes: 32 << 20,
                        crc: 20e9,
                        chunk_start: 0.3e-6,
                    },
                ],
            },
            engine: EngineCosts {
                call: 10e-6,
                helper_arrival: 40e-6,
                task: 60e-9,
                run: 15e-9,
                strided_element: 1.5e-9,
                strided_element_dense: Some(0.5e-9),
                strided_element_cached: Some(0.4e-9),
                scattered_store: Some(4e-9),
                shard_open: 15e-6,
                parallel_efficiency: 0.8,
            },
            codecs: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests;
