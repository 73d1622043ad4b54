//! `--compress` names and the Zarr v3 codec chains they stand for: the one
//! place both are defined.
//!
//! ```text
//! none
//! zstd[:LEVEL]                          zstd, level 1..22 (3)
//! gzip[:LEVEL]                          gzip, level 0..9 (5), for HDF5 parity
//! blosc-lz4[:LEVEL][,shuffle=S]         blosc with lz4, level 0..9 (5)
//! blosc-zstd[:LEVEL][,shuffle=S]        blosc with zstd; S = byte (default), bit, none
//! bitround:KEEPBITS[,zstd=LEVEL]        keep KEEPBITS mantissa bits, then zstd (3)
//! zfp:tolerance=T                       ZFP fixed accuracy: |error| <= T
//! zfp:precision=P                       ZFP fixed precision: P bit planes
//! zfp:rate=R                            ZFP fixed rate: R bits per value
//! zfp:reversible                        ZFP lossless
//! zfp:snr=DB                            ZFP tuned on the data for an SNR of DB decibels
//! zfp:max-error=E | zfp:max-error=E%    ZFP tuned so |error| <= E (or E % of the RMS amplitude)
//! ```

use serde_json::{json, Value};

use crate::dtype::DType;

/// How chunks are compressed.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)] // fields are the codec parameters the variants describe
pub enum Compression {
    /// Raw little-endian elements.
    None,
    /// zstd at a level.
    Zstd { level: i32 },
    /// gzip (deflate) at a level.
    Gzip { level: u32 },
    /// blosc with an inner compressor, level and shuffle.
    Blosc {
        cname: BloscCompressor,
        level: u32,
        shuffle: Shuffle,
    },
    /// Keep `keepbits` mantissa bits (floats only), then zstd.
    BitRound { keepbits: u32, zstd_level: i32 },
    /// ZFP, in one of its modes or with a target to tune for.
    Zfp(ZfpMode),
}

/// blosc's inner compressor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BloscCompressor {
    /// LZ4: fastest.
    Lz4,
    /// zstd inside blosc: smaller.
    Zstd,
}

/// blosc's pre-filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shuffle {
    /// None.
    None,
    /// Bytes of each element grouped by significance.
    Byte,
    /// Bits grouped by significance.
    Bit,
}

/// ZFP's modes, plus the targets cubeslab tunes a mode for.
#[derive(Debug, Clone, Copy, PartialEq)]
#[allow(missing_docs)] // fields are ZFP's own parameters
pub enum ZfpMode {
    /// Absolute error at most `tolerance` (ZFP rounds it down to a power of two).
    Accuracy { tolerance: f64 },
    /// `precision` bit planes per block.
    Precision { precision: u32 },
    /// `rate` bits per value.
    Rate { rate: f64 },
    /// Lossless.
    Reversible,
    /// ZFP's general parameters (what tuning for an SNR produces).
    Expert {
        minbits: u32,
        maxbits: u32,
        maxprec: u32,
        minexp: i32,
    },
    /// Target: a signal-to-noise ratio in dB (tuned on a sample; see `tune`).
    Snr { db: f64 },
    /// Target: a bound on the absolute error, or on its share of the RMS amplitude.
    MaxError(ErrorBound),
}

/// A bound on the absolute error of every value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ErrorBound {
    /// In the data's own units.
    Absolute(f64),
    /// A fraction of the data's RMS amplitude (`0.005` for `0.5%`).
    OfRms(f64),
}

impl ErrorBound {
    /// Parse `0.5` (absolute) or `0.5%` (of the RMS amplitude).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (number, relative) = match text.strip_suffix('%') {
            Some(n) => (n, true),
            None => (text, false),
        };
        let value: f64 = number
            .trim()
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v > 0.0)
            .ok_or_else(|| {
                format!("max-error must be a positive number or percentage, not {text:?}")
            })?;
        Ok(if relative {
            ErrorBound::OfRms(value / 100.0)
        } else {
            ErrorBound::Absolute(value)
        })
    }

    /// The bound in the data's units, for data of RMS amplitude `rms`.
    pub fn absolute(self, rms: f64) -> f64 {
        match self {
            ErrorBound::Absolute(v) => v,
            ErrorBound::OfRms(f) => f * rms,
        }
    }

    fn name(self) -> String {
        match self {
            ErrorBound::Absolute(v) => format!("{v}"),
            ErrorBound::OfRms(f) => format!("{}%", f * 100.0),
        }
    }
}

/// The names `--compress` takes, for messages and help.
pub const COMPRESSION_NAMES: &str =
    "none, zstd[:LEVEL], gzip[:LEVEL], blosc-lz4[:LEVEL][,shuffle=byte|bit|none], \
blosc-zstd[:LEVEL][,shuffle=...], bitround:KEEPBITS, zfp:tolerance=T, zfp:precision=P, zfp:rate=R, \
zfp:reversible, zfp:snr=DB, zfp:max-error=E[%]";

impl Compression {
    /// Parse a `--compress` name (see the module docs).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (name, rest) = text.split_once(':').unwrap_or((text, ""));
        let args = Args::parse(rest, text)?;
        let bad = |what: String| format!("{what} in compression {text:?}");
        let compression = match name {
            "" | "none" => Compression::None,
            "zstd" => Compression::Zstd {
                level: args.level(3, -7, 22).map_err(bad)?,
            },
            "gzip" => Compression::Gzip {
                level: args.level(5, 0, 9).map_err(bad)? as u32,
            },
            "blosc-lz4" | "blosc-zstd" => Compression::Blosc {
                cname: if name == "blosc-lz4" {
                    BloscCompressor::Lz4
                } else {
                    BloscCompressor::Zstd
                },
                level: args.level(5, 0, 9).map_err(bad)? as u32,
                shuffle: match args.get("shuffle").unwrap_or("byte") {
                    "byte" => Shuffle::Byte,
                    "bit" => Shuffle::Bit,
                    "none" => Shuffle::None,
                    other => {
                        return Err(bad(format!(
                            "shuffle must be byte, bit or none, not {other:?}"
                        )))
                    }
                },
            },
            "bitround" => Compression::BitRound {
                keepbits: args
                    .positional
                    .or(args.get("keepbits"))
                    .ok_or_else(|| {
                        bad("bitround needs the mantissa bits to keep (bitround:12)".into())
                    })?
                    .parse()
                    .ok()
                    .filter(|&k: &u32| k <= 52)
                    .ok_or_else(|| bad("keepbits must be an integer 0..52".into()))?,
                zstd_level: match args.get("zstd") {
                    None => 3,
                    Some(v) => v.parse().map_err(|_| bad(format!("zstd level {v:?}")))?,
                },
            },
            "zfp" => Compression::Zfp(zfp_mode(&args).map_err(bad)?),
            other => {
                return Err(format!(
                    "unknown compression {other:?} in {text:?}; choose one of: {COMPRESSION_NAMES}"
                ))
            }
        };
        args.check_used(&compression).map_err(bad)?;
        Ok(compression)
    }

    /// The canonical name, which [`Compression::parse`] reads back.
    pub fn name(&self) -> String {
        match self {
            Compression::None => "none".into(),
            Compression::Zstd { level } => format!("zstd:{level}"),
            Compression::Gzip { level } => format!("gzip:{level}"),
            Compression::Blosc {
                cname,
                level,
                shuffle,
            } => {
                let cname = match cname {
                    BloscCompressor::Lz4 => "lz4",
                    BloscCompressor::Zstd => "zstd",
                };
                let shuffle = match shuffle {
                    Shuffle::Byte => "",
                    Shuffle::Bit => ",shuffle=bit",
                    Shuffle::None => ",shuffle=none",
                };
                format!("blosc-{cname}:{level}{shuffle}")
            }
            Compression::BitRound {
                keepbits,
                zstd_level,
            } => format!("bitround:{keepbits},zstd={zstd_level}"),
            Compression::Zfp(mode) => match mode {
                ZfpMode::Accuracy { tolerance } => format!("zfp:tolerance={tolerance}"),
                ZfpMode::Precision { precision } => format!("zfp:precision={precision}"),
                ZfpMode::Rate { rate } => format!("zfp:rate={rate}"),
                ZfpMode::Reversible => "zfp:reversible".into(),
                ZfpMode::Expert {
                    minbits,
                    maxbits,
                    maxprec,
                    minexp,
                } => format!(
                    "zfp:minbits={minbits},maxbits={maxbits},maxprec={maxprec},minexp={minexp}"
                ),
                ZfpMode::Snr { db } => format!("zfp:snr={db}"),
                ZfpMode::MaxError(bound) => format!("zfp:max-error={}", bound.name()),
            },
        }
    }

    /// Whether decoded values may differ from the written ones.
    pub fn is_lossy(&self) -> bool {
        matches!(self, Compression::BitRound { .. })
            || matches!(self, Compression::Zfp(mode) if *mode != ZfpMode::Reversible)
    }

    /// Chunk sides should be multiples of this: ZFP codes blocks of 4 values
    /// along each dimension and pads partial ones.
    pub fn block_side(&self) -> u64 {
        match self {
            Compression::Zfp(_) => 4,
            _ => 1,
        }
    }

    /// A prior on the compression ratio of float32 seismic amplitudes, for
    /// planning before any data is seen: lossless codecs gain little on
    /// real-valued samples; ZFP spends about one bit per 6 dB of SNR.
    pub fn expected_ratio(&self) -> f64 {
        let bits = |b: f64| 32.0 / b.clamp(0.5, 32.0);
        match self {
            Compression::None => 1.0,
            Compression::Zstd { .. } | Compression::Gzip { .. } | Compression::Blosc { .. } => 1.2,
            Compression::BitRound { keepbits, .. } => bits(*keepbits as f64 + 9.0) * 1.2,
            Compression::Zfp(mode) => match *mode {
                ZfpMode::Rate { rate } => bits(rate),
                ZfpMode::Precision { precision } => bits(precision as f64),
                ZfpMode::Snr { db } => bits((db + 3.0) / 6.02),
                ZfpMode::Reversible => 1.3,
                ZfpMode::Accuracy { .. } | ZfpMode::MaxError(_) | ZfpMode::Expert { .. } => 4.0,
            },
        }
    }

    /// The fill value of an array of `dtype` stored with this compression:
    /// the type's own (NaN for floats), but 0 for ZFP, which has no NaN.
    pub fn fill_value(&self, dtype: DType) -> Value {
        match self {
            Compression::Zfp(_) if dtype.is_float() => json!(0.0),
            Compression::Zfp(_) => json!(0),
            _ => dtype.default_fill(),
        }
    }

    /// Whether this is a target that must be tuned on the data before use.
    pub fn needs_tuning(&self) -> bool {
        matches!(
            self,
            Compression::Zfp(ZfpMode::Snr { .. } | ZfpMode::MaxError(_))
        )
    }

    /// Whether `dtype` can be stored this way.
    pub fn check_dtype(&self, dtype: DType) -> Result<(), String> {
        let float = matches!(dtype, DType::Float32 | DType::Float64);
        match self {
            Compression::BitRound { .. } if !float => Err(format!(
                "bitround keeps mantissa bits of floats; {} has none (use zstd or zfp)",
                dtype.name()
            )),
            Compression::Zfp(_)
                if !matches!(
                    dtype,
                    DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64
                ) =>
            {
                Err(format!(
                    "zfp compresses float32, float64, int32 and int64, not {} (store as float32, or use zstd)",
                    dtype.name()
                ))
            }
            // ZFP has no accuracy mode for integers, and counts an integer's bit planes from the
            // type's top bit, so a precision short of it loses small values whole.
            Compression::Zfp(ZfpMode::Accuracy { .. } | ZfpMode::Precision { .. }) if !float => {
                Err(format!(
                    "zfp's tolerance and precision modes lose {}'s small values (zfp counts an integer's bits \
                     from the type's top); give zfp:rate=N or zfp:reversible, or store as float32",
                    dtype.name()
                ))
            }
            _ => Ok(()),
        }
    }
}

fn zfp_mode(args: &Args) -> Result<ZfpMode, String> {
    let number = |key: &str| -> Result<Option<f64>, String> {
        args.get(key)
            .map(|v| {
                v.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x > 0.0)
                    .ok_or_else(|| format!("{key} must be a positive number, not {v:?}"))
            })
            .transpose()
    };
    let integer = |key: &str| -> Result<Option<i64>, String> {
        args.get(key)
            .map(|v| {
                v.parse::<i64>()
                    .map_err(|_| format!("{key} must be an integer, not {v:?}"))
            })
            .transpose()
    };
    if args.positional == Some("reversible") {
        return Ok(ZfpMode::Reversible);
    }
    if let Some(tolerance) = number("tolerance")? {
        return Ok(ZfpMode::Accuracy { tolerance });
    }
    if let Some(precision) = integer("precision")? {
        if !(1..=64).contains(&precision) {
            return Err("precision must be 1..64 bit planes".into());
        }
        return Ok(ZfpMode::Precision {
            precision: precision as u32,
        });
    }
    if let Some(rate) = number("rate")? {
        if rate > 64.0 {
            return Err("rate must be at most 64 bits per value".into());
        }
        return Ok(ZfpMode::Rate { rate });
    }
    if let Some(db) = number("snr")? {
        return Ok(ZfpMode::Snr { db });
    }
    if let Some(text) = args.get("max-error") {
        return Ok(ZfpMode::MaxError(ErrorBound::parse(text)?));
    }
    if let (Some(minbits), Some(maxbits), Some(maxprec), Some(minexp)) = (
        integer("minbits")?,
        integer("maxbits")?,
        integer("maxprec")?,
        integer("minexp")?,
    ) {
        if minbits < 0 || maxbits < minbits || !(1..=64).contains(&maxprec) {
            return Err("expert mode needs 0 <= minbits <= maxbits and maxprec 1..64".into());
        }
        return Ok(ZfpMode::Expert {
            minbits: minbits as u32,
            maxbits: maxbits as u32,
            maxprec: maxprec as u32,
            minexp: minexp as i32,
        });
    }
    Err(
        "zfp needs a mode: tolerance=T, precision=P, rate=R, reversible, snr=DB or max-error=E[%]"
            .into(),
    )
}

/// `LEVEL,key=value,...` after a compression name.
struct Args<'a> {
    positional: Option<&'a str>,
    pairs: Vec<(&'a str, &'a str)>,
}

impl<'a> Args<'a> {
    fn parse(rest: &'a str, whole: &str) -> Result<Self, String> {
        let mut args = Args {
            positional: None,
            pairs: Vec::new(),
        };
        for item in rest.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match item.split_once('=') {
                Some((k, v)) => args.pairs.push((k.trim(), v.trim())),
                None if args.positional.is_none() => args.positional = Some(item),
                None => return Err(format!("unexpected {item:?} in compression {whole:?}")),
            }
        }
        Ok(args)
    }

    fn get(&self, key: &str) -> Option<&'a str> {
        self.pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    /// The level: positional or `level=`, within `lo..=hi`.
    fn level(&self, default: i32, lo: i32, hi: i32) -> Result<i32, String> {
        match self.positional.or(self.get("level")) {
            None => Ok(default),
            Some(v) => v
                .parse::<i32>()
                .ok()
                .filter(|l| (lo..=hi).contains(l))
                .ok_or_else(|| format!("level must be an integer {lo}..{hi}, not {v:?}")),
        }
    }

    /// Every key given must mean something for this compression.
    fn check_used(&self, compression: &Compression) -> Result<(), String> {
        let known: &[&str] = match compression {
            Compression::None => &[],
            Compression::Zstd { .. } | Compression::Gzip { .. } => &["level"],
            Compression::Blosc { .. } => &["level", "shuffle"],
            Compression::BitRound { .. } => &["keepbits", "zstd"],
            Compression::Zfp(_) => &[
                "tolerance",
                "precision",
                "rate",
                "snr",
                "max-error",
                "minbits",
                "maxbits",
                "maxprec",
                "minexp",
            ],
        };
        if let Some((k, _)) = self.pairs.iter().find(|(k, _)| !known.contains(k)) {
            return Err(format!("unknown option {k:?}"));
        }
        if matches!(compression, Compression::None) && self.positional.is_some() {
            return Err("none takes no options".into());
        }
        Ok(())
    }
}

mod chain;
#[cfg(test)]
mod tests;
