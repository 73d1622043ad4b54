//! Stores on S3-compatible object storage.
//!
//! A store is named by a [`Location`]: a local path, or an `s3://bucket/key`
//! URL; any other scheme is refused, never taken for a path. Reads go
//! through `zarrs` over `object_store` (ranged GETs, coalesced and many in
//! flight). Writes are staged in a local folder, as every ingest is, and
//! published by uploading whole shards with the group's metadata, which
//! marks the store complete, last ([`upload`]). Window writes replace one
//! shard at a time by conditional puts ([`writable`]).

mod array;
mod client;
mod contents;
mod download;
mod error;
mod location;
mod objects;
mod profile;
mod text;
mod upload;
mod volume;
mod writable;

pub use array::RemoteArray;
pub use client::{connect, StorageOptions, MAX_ATTEMPTS_DEFAULT};
pub use contents::{remote_contents, remote_node, store_keys, store_objects};
pub use download::{download, download_store, Downloaded};
pub use error::RemoteError;
pub use location::{Location, S3Url};
pub use text::read_remote_text;
pub use upload::{stored_bytes, upload_folder, Upload};
pub use volume::RemoteVolume;
pub use writable::open_writer;
