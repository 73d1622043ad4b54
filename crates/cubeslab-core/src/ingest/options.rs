//! What an ingest takes: its options with their defaults, and a sentence
//! of help for each, which the command line and the Python API show.

use crate::{
    compress::{Compression, COMPRESSION_NAMES},
    config::Parallelism,
    dtype::DType,
    plan::{ChunkCodec, DeviceProfile, Strategy, LAYOUT_NAMES},
    remote::StorageOptions,
    segy::{ScanOptions, SegyOptions},
};

/// Default bound on the memory an ingest holds for trace and shard buffers.
pub const DEFAULT_MEMORY_LIMIT: u64 = 1 << 30;

/// The element type the amplitudes are stored as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmplitudeType {
    /// float32, the default: exact for the common formats, what tools expect.
    Float32,
    /// The type that holds the source's sample format exactly (int16 for format 3, ...).
    Native,
    /// A type the caller names.
    Given(DType),
}

/// How to ingest. Not `Debug`: it carries the storage credentials.
#[derive(Clone)]
pub struct IngestOptions {
    /// How to read the SEG-Y file.
    pub segy: SegyOptions,
    /// Where the geometry keys are.
    pub scan: ScanOptions,
    /// Element type of the amplitude array.
    pub dtype: AmplitudeType,
    /// How the chunk and shard shapes are chosen.
    pub layout: Strategy,
    /// Reads the layout is planned for (`inline,time=2`, see [`AccessMix::parse`]);
    /// `None`: [`AccessMix::default_for`] the survey's dimensions.
    pub access: Option<String>,
    /// The machine the layout is planned for.
    pub profile: DeviceProfile,
    /// How the amplitude chunks are costed (follows `compression`).
    pub codec: ChunkCodec,
    /// Orientation copies to write besides the amplitude array, one per
    /// access name (`inline`, `crossline`, `time`, ...), each laid out for
    /// that access alone; readers route each read to the fastest copy.
    pub views: Vec<String>,
    /// How amplitude chunks are compressed; error targets (`zfp:snr=40`)
    /// are tuned on a sample of the survey first.
    pub compression: Compression,
    /// Bound on buffer memory in bytes.
    pub memory_limit: u64,
    /// Threads (requests in flight do not apply to ingest).
    pub parallelism: Parallelism,
    /// Replace an existing store.
    pub overwrite: bool,
    /// Flush every file and folder of the store to the device (fsync)
    /// before marking it complete, and the marker after: a power cut then
    /// leaves a store marked incomplete, or a whole one. Without it the
    /// kernel writes back in its own time, and a power cut soon after the
    /// ingest may lose data of a store already marked complete.
    pub durable: bool,
    /// Continue an ingest that stopped: keep the shards it finished, write
    /// the rest. Starts afresh if there is no store yet.
    pub resume: bool,
    /// Name of the vertical axis: "time" or "depth".
    pub vertical: String,
    /// How to reach a store on object storage, besides the `AWS_*`
    /// variables and profiles (never recorded in the store).
    pub storage: StorageOptions,
    /// For a source downloaded from object storage, the object it came
    /// from.
    pub origin: Option<SourceOrigin>,
}

/// The object a source downloaded from object storage came from. The store
/// records it as the source, and a resume must match it: the local copy's
/// path and time change with each download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceOrigin {
    /// The object's URL.
    pub url: String,
    /// Its version as the server tells it (ETag, else time and size).
    pub version: String,
}

impl Default for IngestOptions {
    fn default() -> Self {
        Self {
            segy: SegyOptions::default(),
            scan: ScanOptions::default(),
            dtype: AmplitudeType::Float32,
            layout: Strategy::Auto,
            access: None,
            profile: DeviceProfile::typical(),
            codec: ChunkCodec::Raw { crc: true },
            views: Vec::new(),
            compression: Compression::None,
            memory_limit: DEFAULT_MEMORY_LIMIT,
            parallelism: Parallelism::default(),
            overwrite: false,
            durable: false,
            resume: false,
            vertical: "time".into(),
            storage: StorageOptions::new(),
            origin: None,
        }
    }
}

/// Help for each option, by the name the Python API and the command line
/// give it (the command line with dashes).
pub fn option_help() -> Vec<(&'static str, String)> {
    [
        ("endian", "Byte order of the SEG-Y file: auto, big or little".to_string()),
        ("allow_truncated", "Ingest the whole traces of a cut-short file".into()),
        ("sample_interval_us", "Sample interval in µs, if the headers lack it".into()),
        ("inline_byte", "Trace header byte of the inline number".into()),
        ("crossline_byte", "Trace header byte of the crossline number".into()),
        ("offset_byte", "Trace header byte of the offset (pre-stack)".into()),
        (
            "dtype",
            "SEG-Y: element type of the amplitudes, float32, another numpy type, or 'native' (the \
             source's own); raw bytes: the type they hold. Other files keep their own"
                .into(),
        ),
        ("layout", format!("How chunks and shards are shaped: {LAYOUT_NAMES}")),
        (
            "access",
            "Reads to plan the layout for, e.g. inline,crossline,time=2,trace (default: every plane)".into(),
        ),
        (
            "profile",
            "Device profile to plan for (default: this disk's, else a typical machine)".into(),
        ),
        ("compress", format!("How chunks are compressed: {COMPRESSION_NAMES}")),
        (
            "views",
            "Orientation copies to write too, e.g. inline,crossline,time; reads go to the fastest".into(),
        ),
        ("memory_limit", "Bound on the ingest's buffers, e.g. 1GiB".into()),
        ("threads", "Worker threads (default: all cores)".into()),
        ("in_flight", "Requests handed to the kernel ahead of the workers".into()),
        ("overwrite", "Replace an existing store".into()),
        (
            "durable",
            "Flush the store to the device before marking it complete (power-cut safe)".into(),
        ),
        ("resume", "Continue a stopped ingest (same source and options)".into()),
        ("vertical", "Name of the vertical axis: time or depth".into()),
    ]
    .into()
}
