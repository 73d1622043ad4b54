//! Turning an error target in user terms (`zfp:snr=40`, `zfp:max-error=0.5%`)
//! into ZFP parameters, by compressing a sample of the data's own chunks.
//!
//! * **max-error**: ZFP's fixed-accuracy mode bounds every value's error by
//!   its tolerance, which ZFP rounds down to a power of two. The bound is
//!   checked on the sample and halved in the rare case ZFP overshoots.
//! * **snr**: the error a tolerance gives moves in steps of about 6 dB (one
//!   bit plane), too coarse for a target. So: the coarsest power-of-two
//!   tolerance that reaches the target, then a cap on the bits per block
//!   (ZFP's expert mode), bisected until the SNR lands just above the
//!   target. The cap spends bits only where the tolerance alone would
//!   overshoot. Fixed rate (the smallest rate reaching the target) is tried
//!   too: on data of even amplitude it needs fewer bits. Whichever
//!   compresses the sample most is kept, save that a tolerance or rate that
//!   meets the target nearly as well wins over expert mode: numcodecs'
//!   zfpy, which zarr-python and xarray read, has no expert mode.

use std::{borrow::Cow, num::NonZeroU64};

use rayon::prelude::*;
use serde_json::Value;
use zarrs::{
    array::{ArrayBytes, ArrayToBytesCodecTraits, CodecChain, CodecOptions, DataType, FillValue},
    metadata::v3::MetadataV3,
};

use super::{Compression, ErrorStats, ZfpMode};
use crate::dtype::DType;

/// Decibels above the target the tuned SNR aims for: the sample stands in
/// for the whole volume, so leave a little room.
pub const SNR_MARGIN_DB: f64 = 0.15;

/// An SNR target is met when the store's SNR is at most this far above it.
const SNR_NEAR_DB: f64 = 0.9;

/// The share of compression ratio given up to keep a store in a ZFP mode
/// other tools read, rather than expert mode.
const ZFPY_RATIO_GIVE: f64 = 0.05;

/// Chunks of the data to tune on.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Shape of every chunk.
    pub chunk_shape: Vec<u64>,
    /// Element type.
    pub dtype: DType,
    /// Each chunk's elements, native endian, C order.
    pub chunks: Vec<Vec<u8>>,
}

/// How a compression does on a sample.
#[derive(Debug, Clone)]
pub struct Trial {
    /// The compression tried.
    pub compression: Compression,
    /// Decoded against original, over the whole sample.
    pub error: ErrorStats,
    /// Largest absolute error in any one chunk equals `error.max_abs_error`;
    /// the lowest SNR of a chunk, dB.
    pub worst_chunk_snr_db: f64,
    /// Original bytes over encoded bytes.
    pub ratio: f64,
    /// Seconds spent encoding, summed over the chunks (CPU time on one core).
    pub encode_seconds: f64,
    /// Seconds spent decoding, summed over the chunks.
    pub decode_seconds: f64,
}

/// Compress and decompress every chunk of `sample` with `compression`.
pub fn trial(compression: &Compression, sample: &Sample) -> Result<Trial, String> {
    let codecs = compression.codecs(sample.dtype)?;
    let metas: Vec<MetadataV3> =
        serde_json::from_value(Value::Array(codecs)).map_err(|e| e.to_string())?;
    let chain = CodecChain::from_metadata(&metas).map_err(|e| e.to_string())?;
    let shape: Vec<NonZeroU64> = sample
        .chunk_shape
        .iter()
        .map(|&n| NonZeroU64::new(n).ok_or("chunk sides must be positive"))
        .collect::<Result<_, _>>()?;
    let data_type = data_type(sample.dtype);
    let fill = FillValue::new(vec![0u8; sample.dtype.size()]);
    let options = CodecOptions::default().with_concurrent_target(1);
    let per_chunk: Vec<(ErrorStats, usize, f64, f64)> = sample
        .chunks
        .par_iter()
        .map(|chunk| {
            let started = std::time::Instant::now();
            let encoded = chain
                .encode(
                    ArrayBytes::new_flen(Cow::Borrowed(chunk.as_slice())),
                    &shape,
                    &data_type,
                    &fill,
                    &options,
                )
                .map_err(|e| e.to_string())?;
            let size = encoded.len();
            let encoded_at = std::time::Instant::now();
            let decoded = chain
                .decode(encoded, &shape, &data_type, &fill, &options)
                .and_then(|b| Ok(b.into_fixed()?))
                .map_err(|e| e.to_string())?;
            let decode = encoded_at.elapsed().as_secs_f64();
            let encode = (encoded_at - started).as_secs_f64();
            Ok((
                ErrorStats::of_bytes(chunk, &decoded, sample.dtype),
                size,
                encode,
                decode,
            ))
        })
        .collect::<Result<_, String>>()?;
    let mut error = ErrorStats::default();
    let mut encoded = 0usize;
    let mut worst = f64::INFINITY;
    let (mut encode_seconds, mut decode_seconds) = (0.0, 0.0);
    for (stats, size, encode, decode) in &per_chunk {
        error.merge(stats);
        encoded += size;
        worst = worst.min(stats.snr_db());
        encode_seconds += encode;
        decode_seconds += decode;
    }
    let original: usize = sample.chunks.iter().map(Vec::len).sum();
    Ok(Trial {
        compression: compression.clone(),
        error,
        worst_chunk_snr_db: worst,
        ratio: original as f64 / encoded.max(1) as f64,
        encode_seconds,
        decode_seconds,
    })
}

/// Resolve a target (`zfp:snr=`, `zfp:max-error=`) to concrete ZFP
/// parameters on `sample`; any other compression is returned as it is,
/// with its trial on the sample.
pub fn tune(target: &Compression, sample: &Sample) -> Result<Trial, String> {
    let Compression::Zfp(mode) = target else {
        return trial(target, sample);
    };
    if sample.chunks.is_empty() {
        return Err("no data to tune the compression on".into());
    }
    let rms = sample_rms(sample);
    if rms == 0.0 || !rms.is_finite() {
        // All zeros (or not finite): any tolerance is exact; ZFP's lossless mode is the safe pick.
        return trial(&Compression::Zfp(ZfpMode::Reversible), sample);
    }
    match *mode {
        ZfpMode::MaxError(bound) => {
            let limit = bound.absolute(rms);
            let mut tolerance = limit;
            for _ in 0..16 {
                let t = trial(&accuracy(tolerance), sample)?;
                if t.error.max_abs_error <= limit {
                    return Ok(t);
                }
                tolerance /= 2.0;
            }
            Err(format!(
                "zfp could not keep the error within {limit} on the sample"
            ))
        }
        ZfpMode::Snr { db } => tune_snr(db, rms, sample),
        _ => trial(target, sample),
    }
}

fn accuracy(tolerance: f64) -> Compression {
    Compression::Zfp(ZfpMode::Accuracy { tolerance })
}

fn tune_snr(db: f64, rms: f64, sample: &Sample) -> Result<Trial, String> {
    let aim = db + SNR_MARGIN_DB;
    // Tolerances 2^e: the largest e whose SNR reaches the aim. At e above
    // the data's magnitude nothing survives; 60 bit planes below it, float
    // data is exact.
    let top = rms.log2().ceil() as i32 + 4;
    let (mut lo, mut hi) = (top - 60, top); // SNR(lo) >= aim assumed, SNR(hi) < aim
    let mut best = trial(&accuracy(2f64.powi(lo)), sample)?;
    if best.error.snr_db() < aim {
        return Ok(best); // the data is as exact as ZFP gets it
    }
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        let t = trial(&accuracy(2f64.powi(mid)), sample)?;
        if t.error.snr_db() >= aim {
            lo = mid;
            best = t;
        } else {
            hi = mid;
        }
    }
    if best.error.snr_db() <= aim + 0.5 {
        return Ok(best);
    }
    // Cap the bits per block at tolerance 2^lo until the SNR comes down to the aim.
    let dims = sample
        .chunk_shape
        .iter()
        .filter(|&&n| n > 1)
        .count()
        .clamp(1, 4) as u32;
    let values_per_block = 4u32.pow(dims);
    let elem_bits = 8 * sample.dtype.size() as u32;
    let expert = |maxbits: u32| {
        Compression::Zfp(ZfpMode::Expert {
            minbits: 1,
            maxbits,
            maxprec: 64,
            minexp: lo,
        })
    };
    let (mut few, mut many) = (1u32, values_per_block * (elem_bits + 1) + 64);
    let mut capped: Option<Trial> = None;
    while many - few > 1 {
        let mid = few + (many - few) / 2;
        let t = trial(&expert(mid), sample)?;
        if t.error.snr_db() >= aim {
            many = mid;
            capped = Some(t);
        } else {
            few = mid;
        }
    }
    // Fixed rate spends the same bits on every block: on data whose
    // amplitude varies little it reaches an SNR in fewer bits. The smallest
    // rate reaching the aim, to a sixteenth of a bit.
    let (mut low, mut high) = (0.0f64, elem_bits as f64);
    let mut rated: Option<Trial> = None;
    while high - low > 1.0 / 16.0 {
        let mid = (low + high) / 2.0;
        let t = trial(&Compression::Zfp(ZfpMode::Rate { rate: mid }), sample)?;
        if t.error.snr_db() >= aim {
            high = mid;
            rated = Some(t);
        } else {
            low = mid;
        }
    }
    // Whichever compresses the sample most, except that a mode numcodecs'
    // zfpy has (tolerance, rate: zarr-python and xarray read the store) is
    // kept over expert mode when it lands as near the target and compresses
    // within ZFPY_RATIO_GIVE of it.
    let most = |candidates: Vec<Trial>| {
        candidates
            .into_iter()
            .reduce(|a, b| if b.ratio > a.ratio { b } else { a })
    };
    let near = |t: &Trial| t.error.snr_db() <= db + SNR_NEAR_DB;
    let readable = most(
        [Some(best.clone()), rated.clone()]
            .into_iter()
            .flatten()
            .filter(near)
            .collect(),
    );
    let any = most([Some(best), capped, rated].into_iter().flatten().collect())
        .expect("a tolerance trial");
    Ok(match readable {
        Some(r) if r.ratio >= any.ratio * (1.0 - ZFPY_RATIO_GIVE) => r,
        _ => any,
    })
}

fn sample_rms(sample: &Sample) -> f64 {
    let mut s = ErrorStats::default();
    for chunk in &sample.chunks {
        s.merge(&ErrorStats::of_bytes(chunk, chunk, sample.dtype));
    }
    s.rms_signal()
}

fn data_type(dtype: DType) -> DataType {
    use zarrs::array::data_type as dt;
    match dtype {
        DType::Bool => dt::bool(),
        DType::Int8 => dt::int8(),
        DType::Int16 => dt::int16(),
        DType::Int32 => dt::int32(),
        DType::Int64 => dt::int64(),
        DType::UInt8 => dt::uint8(),
        DType::UInt16 => dt::uint16(),
        DType::UInt32 => dt::uint32(),
        DType::UInt64 => dt::uint64(),
        DType::Float32 => dt::float32(),
        DType::Float64 => dt::float64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compress::ErrorBound;

    /// Band-limited "seismic": sums of sines, amplitude decaying with depth.
    fn sample() -> Sample {
        let shape = [16u64, 16, 64];
        let chunks = (0..8)
            .map(|c| {
                let mut out = Vec::new();
                for i in 0..16 {
                    for j in 0..16 {
                        for k in 0..64 {
                            let t = k as f32 + 64.0 * c as f32;
                            let v = (t * 0.21 + i as f32 * 0.05).sin() * 1000.0 / (1.0 + t / 200.0)
                                + (t * 0.057 - j as f32 * 0.03).cos() * 300.0;
                            out.extend_from_slice(&v.to_ne_bytes());
                        }
                    }
                }
                out
            })
            .collect();
        Sample {
            chunk_shape: shape.to_vec(),
            dtype: DType::Float32,
            chunks,
        }
    }

    #[test]
    fn snr_targets_land_within_a_decibel() {
        let s = sample();
        for db in [20.0, 40.0, 60.0] {
            let t = tune(&Compression::Zfp(ZfpMode::Snr { db }), &s).unwrap();
            let got = t.error.snr_db();
            assert!(
                got >= db && got <= db + 1.0,
                "target {db} dB, got {got} ({:?})",
                t.compression
            );
            assert!(t.ratio > 1.0);
            assert!(!t.compression.needs_tuning());
        }
    }

    #[test]
    fn max_error_bounds_every_value() {
        let s = sample();
        for bound in [
            ErrorBound::Absolute(0.5),
            ErrorBound::OfRms(0.005),
            ErrorBound::OfRms(0.1),
        ] {
            let t = tune(&Compression::Zfp(ZfpMode::MaxError(bound)), &s).unwrap();
            let limit = bound.absolute(sample_rms(&s));
            assert!(
                t.error.max_abs_error <= limit,
                "{bound:?}: {} > {limit}",
                t.error.max_abs_error
            );
            assert!(t.error.max_abs_error > 0.0);
        }
    }

    #[test]
    fn lossless_trials_are_exact() {
        let s = sample();
        for name in [
            "zstd:3",
            "gzip:1",
            "blosc-lz4",
            "blosc-zstd:5,shuffle=bit",
            "zfp:reversible",
        ] {
            let t = trial(&Compression::parse(name).unwrap(), &s).unwrap();
            assert_eq!(t.error.max_abs_error, 0.0, "{name}");
        }
    }
}
