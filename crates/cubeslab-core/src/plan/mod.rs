//! The layout planner: a measured device model and a cost model choose
//! chunk and shard shapes.
//!
//! * [`profile`]: what a machine's storage and cores can do (JSON).
//! * [`measure`]: measuring a profile.
//! * [`access`]: the reads a layout serves (inline, time slice, spectra, ...).
//! * [`cost`]: the predicted time of any read under any layout.
//! * [`layout`]: chunk and shard shapes, shard rules, the Pyrus chunk-shape formula.
//! * [`candidates`]: the inner chunk shapes tried, within the size and padding bounds.
//! * [`optimize`]: the search for the layout whose slowest access is fastest.
//! * [`stored`]: an existing array as the model sees it.
//! * [`strategy`]: `--layout` names: `auto`, `cube:N`, `pyrus-formula`, shapes.

pub mod access;
mod best;
pub mod candidates;
pub mod cost;
pub mod layout;
pub mod measure;
pub mod optimize;
pub mod profile;
pub mod stored;
pub mod strategy;

pub use access::{Access, AccessMix};
pub use cost::{predict, predict_both, Cache, ChunkCodec, Prediction, ReadSetup, StoredArray};
pub use layout::{Layout, PyrusFormula};
pub use optimize::{CacheState, Evaluated, Planner, StateWeights, DEFAULT_STATE, DEFAULT_TOP};
pub use profile::DeviceProfile;
pub use stored::{dir_bytes, stored_array, stored_array_of};
pub use strategy::{Strategy, LAYOUT_NAMES};

use crate::compress::Compression;

/// How chunks compressed with `compress` (a `--compress` name; `None` or
/// `"none"` for raw) are costed: measured rates from the profile; for a
/// codec it did not measure, the mode's expected ratio and, for ZFP, the
/// decode rate of a measured ZFP setting.
pub fn chunk_codec(profile: &DeviceProfile, compress: Option<&str>) -> ChunkCodec {
    let compression = compress.and_then(|name| Compression::parse(name).ok());
    match compression {
        None | Some(Compression::None) => ChunkCodec::Raw { crc: true },
        Some(c) => match profile.codec(&c.name()) {
            Some(rate) => ChunkCodec::Compressed {
                ratio: rate.ratio,
                decode: rate.decode,
                crc: true,
            },
            None => {
                let zfp_decode = profile
                    .codecs
                    .iter()
                    .find(|r| r.name.starts_with("zfp:"))
                    .map(|r| r.decode);
                ChunkCodec::Compressed {
                    ratio: c.expected_ratio(),
                    decode: match c {
                        Compression::Zfp(_) => zfp_decode.unwrap_or(3.0e8),
                        _ => 1.0e9,
                    },
                    crc: true,
                }
            }
        },
    }
}
