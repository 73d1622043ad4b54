//! Compression: `--compress` names and their codec chains, error metrics,
//! and tuning ZFP for an error target on a sample of the data.
//!
//! * [`name`]: the names (`zstd:3`, `zfp:snr=40`, ...) and the Zarr v3 codecs they stand for.
//! * [`metrics`]: maximum absolute error, RMS error, SNR, PSNR.
//! * [`tune`]: error targets → ZFP parameters, from trials on a sample.

pub mod catalogue;
pub mod metrics;
pub mod tune;

pub use catalogue::{
    BloscCompressor, Compression, ErrorBound, Shuffle, ZfpMode, COMPRESSION_NAMES,
};
pub use metrics::{ChunkErrors, ErrorStats};
pub use tune::{trial, tune, Sample, Trial};
