//! Zarr v3 arrays and groups on a local filesystem.
//!
//! Metadata parsing and encoding go through the `zarrs` crate. Reads of
//! sharded arrays whose inner chunks use the plain `bytes` codec (optionally
//! with `crc32c` and compressors) take the engine's own path: the shard files
//! are memory-mapped once, the shard index says where each inner chunk lies,
//! and each chunk's selected elements are copied straight into the caller's
//! buffer — one copy, no per-chunk file open. Everything else (for example
//! MDIO's unsharded blosc arrays) is read through `zarrs` itself.

mod aligned_buffer;
mod array;
mod array_write;
mod atomic;
mod checksum;
mod claims;
mod contents;
mod decoded;
mod direct_write;
mod error;
mod group;
mod identity;
mod lock;
mod metadata;
mod publish;
mod relayout;
mod shard;
mod shard_builder;
mod shard_codecs;
mod sharded;
mod spec;
mod task_order;
mod text;
mod truncation;
mod zstd_chunk;

pub use aligned_buffer::{AlignedBuffer, BufferPool};
pub use array::{ReadOptions, ZarrArray};
pub use atomic::{sync_tree, write_atomic, write_atomic_aligned, write_json_atomic, Durability};
pub use checksum::crc32c;
pub use contents::{StoreContents, VIEWS_ATTR, VIEW_ARRAY_KEY};
pub use decoded::{decoded_cache_bytes, DEFAULT_DECODED_CACHE_BYTES};
pub use error::StoreError;
pub use group::{
    mark_complete, mark_created, Group, StoreState, COMPLETE, CREATED, CUBESLAB_ATTR, FOREIGN,
    MAIN_ARRAY_ATTR, STATS_V1,
};
pub use identity::{
    new_generation, record_generation, recorded_generation, ShardIdentity, MAX_IDENTITY_BLOCK,
};
pub use lock::{live_holder, process_alive, StoreLock, LOCK_FILE, WRITE_LOCK_FILE};
pub use metadata::{parse_metadata, read_metadata};
pub(crate) use publish::is_empty_dir;
pub use publish::{first_foreign_entry, staging_path, Publication};
pub use shard_builder::{Prefill, ShardBuilder};
pub use sharded::{pieces_per_thread, SERIAL_BYTES};
pub use spec::ArraySpec;
pub use task_order::{Task, TaskOrder};
pub(crate) use text::{data_type_name, labels, FIXED_UTF32};
pub use text::{is_text, read_text, write_text};
pub(crate) use truncation::Watched;
