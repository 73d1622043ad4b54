//! Codec chains: a [`Compression`] as the Zarr v3 codecs that write it,
//! and a chain read back as the compression it stands for.

use serde_json::{json, Value};

use super::{BloscCompressor, Compression, Shuffle, ZfpMode};
use crate::dtype::DType;

impl Compression {
    /// The chunk codecs for elements of `dtype`, as Zarr v3 JSON, up to (not
    /// including) the crc32c every chunk gets. Targets must be tuned first.
    pub fn codecs(&self, dtype: DType) -> Result<Vec<Value>, String> {
        self.check_dtype(dtype)?;
        let bytes = json!({"name": "bytes", "configuration": {"endian": "little"}});
        Ok(match self {
            Compression::None => vec![bytes],
            Compression::Zstd { level } => vec![bytes, zstd(*level)],
            Compression::Gzip { level } => {
                vec![
                    bytes,
                    json!({"name": "gzip", "configuration": {"level": level}}),
                ]
            }
            Compression::Blosc {
                cname,
                level,
                shuffle,
            } => vec![
                bytes,
                json!({"name": "blosc", "configuration": {
                    "cname": match cname { BloscCompressor::Lz4 => "lz4", BloscCompressor::Zstd => "zstd" },
                    "clevel": level,
                    "shuffle": match shuffle { Shuffle::None => "noshuffle", Shuffle::Byte => "shuffle", Shuffle::Bit => "bitshuffle" },
                    "typesize": dtype.size(),
                    "blocksize": 0,
                }}),
            ],
            Compression::BitRound {
                keepbits,
                zstd_level,
            } => {
                // The name numcodecs registers, so zarr-python reads it too.
                let bitround =
                    json!({"name": "numcodecs.bitround", "configuration": {"keepbits": keepbits}});
                vec![bitround, bytes, zstd(*zstd_level)]
            }
            // numcodecs' zfpy (a zfp stream with its header), which zarr-python
            // and xarray read too; only expert mode, which zfpy lacks, is
            // written with zarrs' own zfp codec.
            Compression::Zfp(mode) => match *mode {
                ZfpMode::Accuracy { tolerance } => {
                    vec![zfpy(json!({"mode": ZFPY_ACCURACY, "tolerance": tolerance}))]
                }
                ZfpMode::Precision { precision } => {
                    vec![zfpy(
                        json!({"mode": ZFPY_PRECISION, "precision": precision}),
                    )]
                }
                ZfpMode::Rate { rate } => vec![zfpy(json!({"mode": ZFPY_RATE, "rate": rate}))],
                ZfpMode::Reversible => vec![zfpy(json!({"mode": ZFPY_REVERSIBLE}))],
                ZfpMode::Expert {
                    minbits,
                    maxbits,
                    maxprec,
                    minexp,
                } => vec![json!({"name": "zfp", "configuration": {"mode": "expert",
                    "minbits": minbits, "maxbits": maxbits, "maxprec": maxprec, "minexp": minexp}})],
                ZfpMode::Snr { .. } | ZfpMode::MaxError(_) => {
                    return Err(format!(
                        "{} is a target: tune it on the data first",
                        self.name()
                    ))
                }
            },
        })
    }
}

impl Compression {
    /// The compression a chunk codec chain (as [`Compression::codecs`]
    /// writes it, with or without the trailing crc32c) stands for; `None`
    /// for chains cubeslab does not write.
    pub fn from_codecs(codecs: &[Value]) -> Option<Self> {
        let name = |c: &Value| {
            c.get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let conf = |c: &Value, key: &str| c.pointer(&format!("/configuration/{key}")).cloned();
        let chain: Vec<&Value> = codecs.iter().filter(|c| name(c) != "crc32c").collect();
        let names: Vec<String> = chain.iter().map(|c| name(c)).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let int = |c: &Value, key: &str| conf(c, key).and_then(|v| v.as_i64());
        Some(match names.as_slice() {
            ["bytes"] => Compression::None,
            ["bytes", "zstd"] => Compression::Zstd {
                level: int(chain[1], "level")? as i32,
            },
            ["bytes", "gzip"] => Compression::Gzip {
                level: int(chain[1], "level")? as u32,
            },
            ["bytes", "blosc"] => {
                let c = chain[1];
                Compression::Blosc {
                    cname: match conf(c, "cname")?.as_str()? {
                        "lz4" => BloscCompressor::Lz4,
                        "zstd" => BloscCompressor::Zstd,
                        _ => return None,
                    },
                    level: int(c, "clevel")? as u32,
                    shuffle: match conf(c, "shuffle")?.as_str()? {
                        "noshuffle" => Shuffle::None,
                        "shuffle" => Shuffle::Byte,
                        "bitshuffle" => Shuffle::Bit,
                        _ => return None,
                    },
                }
            }
            ["numcodecs.bitround" | "bitround", "bytes", "zstd"] => Compression::BitRound {
                keepbits: int(chain[0], "keepbits")? as u32,
                zstd_level: int(chain[2], "level")? as i32,
            },
            ["numcodecs.zfpy"] => {
                let c = chain[0];
                let f = |key: &str| conf(c, key).and_then(|v| v.as_f64());
                Compression::Zfp(match int(c, "mode")? {
                    ZFPY_ACCURACY => ZfpMode::Accuracy {
                        tolerance: f("tolerance")?,
                    },
                    ZFPY_PRECISION => ZfpMode::Precision {
                        precision: int(c, "precision")? as u32,
                    },
                    ZFPY_RATE => ZfpMode::Rate { rate: f("rate")? },
                    ZFPY_REVERSIBLE => ZfpMode::Reversible,
                    _ => return None,
                })
            }
            ["zfp"] => {
                let c = chain[0];
                let f = |key: &str| conf(c, key).and_then(|v| v.as_f64());
                Compression::Zfp(match conf(c, "mode")?.as_str()? {
                    "fixed_accuracy" => ZfpMode::Accuracy {
                        tolerance: f("tolerance")?,
                    },
                    "fixed_precision" => ZfpMode::Precision {
                        precision: int(c, "precision")? as u32,
                    },
                    "fixed_rate" => ZfpMode::Rate { rate: f("rate")? },
                    "reversible" => ZfpMode::Reversible,
                    "expert" => ZfpMode::Expert {
                        minbits: int(c, "minbits")? as u32,
                        maxbits: int(c, "maxbits")? as u32,
                        maxprec: int(c, "maxprec")? as u32,
                        minexp: int(c, "minexp")? as i32,
                    },
                    _ => return None,
                })
            }
            _ => return None,
        })
    }
}

/// numcodecs' zfpy `mode` numbers (zfp's `zfp_mode` values).
const ZFPY_RATE: i64 = 2;
const ZFPY_PRECISION: i64 = 3;
const ZFPY_ACCURACY: i64 = 4;
const ZFPY_REVERSIBLE: i64 = 5;

fn zfpy(configuration: Value) -> Value {
    json!({"name": "numcodecs.zfpy", "configuration": configuration})
}

fn zstd(level: i32) -> Value {
    json!({"name": "zstd", "configuration": {"level": level, "checksum": false}})
}
