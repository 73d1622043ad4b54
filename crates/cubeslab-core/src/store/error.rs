//! Errors of the store layer.

use std::path::PathBuf;

use crate::{error::PartError, ErrorKind};

/// What can go wrong with a store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// No store (or array) at the path.
    #[error("{path}: no Zarr store here (no zarr.json)")]
    NotFound {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// Refusing to replace an existing store.
    #[error("{path} already exists; pass overwrite (--overwrite) to replace it")]
    AlreadyExists {
        /// The existing path.
        path: PathBuf,
    },
    /// Another live process is writing the store.
    #[error("{path} is being written by process {pid}; wait for it to finish (or stop it) before writing here")]
    Busy {
        /// The store.
        path: PathBuf,
        /// The writer's process id.
        pid: u32,
    },
    /// A write to an array opened for reading only.
    #[error("{path} is open for reading only; open it with mode=\"r+\" to write")]
    ReadOnly {
        /// The array.
        path: PathBuf,
    },
    /// Another writer replaced a chunk since this one read it.
    #[error("{path}: another writer replaced this chunk after it was read here; this write was not applied (reopen the array and write again)")]
    Conflict {
        /// The chunk (shard) file.
        path: PathBuf,
    },
    /// Refusing to delete something that is not a store.
    #[error("{path} exists and is not a Zarr store; refusing to delete it")]
    NotAStore {
        /// The existing path.
        path: PathBuf,
    },
    /// Refusing to replace a store whose folder holds files not its own.
    #[error("{path} holds {file}, which is not part of the store; refusing to replace it (--overwrite deletes the store's own files only): move that file elsewhere first")]
    ForeignFiles {
        /// The store.
        path: PathBuf,
        /// The first file found that is not the store's.
        file: PathBuf,
    },
    /// The ingest that wrote the store did not finish.
    #[error("{path}: store is incomplete (state '{state}'): the ingest that wrote it did not finish; continue it with --resume (same source and options) or start again with --overwrite")]
    Incomplete {
        /// The store.
        path: PathBuf,
        /// The recorded state.
        state: String,
    },
    /// The store at `path` is still being written (or its ingest stopped):
    /// the work lies in a staging folder beside it until it is complete.
    #[error("{path}: store is incomplete: the ingest that writes it did not finish (its work is kept in {staging}); continue it with --resume (same source and options) or start again with --overwrite")]
    Unfinished {
        /// Where the store will be.
        path: PathBuf,
        /// Where its unfinished work is.
        staging: PathBuf,
    },
    /// A shard a complete store wrote is not there.
    #[error("{array}: shard '{key}' is missing: the store was written complete, so its data is lost (cubeslab verify lists every missing shard)")]
    MissingShard {
        /// The array directory.
        array: PathBuf,
        /// Shard key.
        key: String,
    },
    /// A shard whose identity says it belongs elsewhere (another key,
    /// array or store), or that lacks one where the store wrote one.
    #[error("{array}: shard '{key}' is not this array's: {message}")]
    Misplaced {
        /// The array directory.
        array: PathBuf,
        /// Shard key.
        key: String,
        /// What its identity says.
        message: String,
    },
    /// The store was replaced (by `--overwrite`) while a handle to it was open.
    #[error("{path}: the store was replaced while it was open (another ingest overwrote it); open it again to read the new one")]
    Changed {
        /// The store or array.
        path: PathBuf,
    },
    /// `zarr.json` cannot be parsed or describes something impossible.
    #[error("{path}: invalid metadata: {message}")]
    Metadata {
        /// The metadata file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A chunk or shard index fails its crc32c check.
    #[error("{array}: checksum mismatch in {what} of chunk '{key}' (stored {stored:#010x}, computed {computed:#010x})")]
    Checksum {
        /// The array directory.
        array: PathBuf,
        /// Chunk (shard) key.
        key: String,
        /// Which part: an inner chunk or the shard index.
        what: String,
        /// Checksum stored in the file.
        stored: u32,
        /// Checksum of the bytes read.
        computed: u32,
    },
    /// A shard or chunk is structurally damaged (truncated, index out of range, ...).
    #[error("{array}: chunk '{key}' is damaged: {message}")]
    Corrupt {
        /// The array directory.
        array: PathBuf,
        /// Chunk (shard) key.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A codec failed to encode or decode.
    #[error("{array}: codec error in chunk '{key}': {message}")]
    Codec {
        /// The array directory.
        array: PathBuf,
        /// Chunk key.
        key: String,
        /// The codec's message.
        message: String,
    },
    /// A group of another tool with no one array to read.
    #[error("{path}: a Zarr group that names no main array, with data arrays: {arrays}; open one of them as {path}/NAME")]
    NoMainArray {
        /// The group.
        path: PathBuf,
        /// Its arrays that are not coordinates, comma-separated.
        arrays: String,
    },
    /// A group of another tool without a data array (only coordinates, or groups).
    #[error("{path}: a Zarr group without a data array here (its members: {members}); open a group or array inside it as {path}/NAME")]
    NoDataArray {
        /// The group.
        path: PathBuf,
        /// Its arrays and groups, comma-separated.
        members: String,
    },
    /// A data type or feature the engine does not handle.
    #[error("{path}: unsupported: {what}")]
    Unsupported {
        /// The array.
        path: PathBuf,
        /// What is not supported.
        what: String,
    },
}

impl From<StoreError> for crate::Error {
    fn from(error: StoreError) -> Self {
        crate::Error::Part(Box::new(error))
    }
}

impl PartError for StoreError {
    fn kind(&self) -> ErrorKind {
        match self {
            StoreError::NotFound { .. } => ErrorKind::NotFound,
            StoreError::AlreadyExists { .. }
            | StoreError::NotAStore { .. }
            | StoreError::ForeignFiles { .. } => ErrorKind::AlreadyExists,
            StoreError::Incomplete { .. } | StoreError::Unfinished { .. } => ErrorKind::Incomplete,
            StoreError::Changed { .. } => ErrorKind::Changed,
            StoreError::Busy { .. } | StoreError::Conflict { .. } => ErrorKind::Busy,
            StoreError::Metadata { .. }
            | StoreError::NoMainArray { .. }
            | StoreError::NoDataArray { .. }
            | StoreError::Unsupported { .. }
            | StoreError::ReadOnly { .. } => ErrorKind::InvalidInput,
            StoreError::Checksum { .. }
            | StoreError::Corrupt { .. }
            | StoreError::Codec { .. }
            | StoreError::MissingShard { .. }
            | StoreError::Misplaced { .. } => ErrorKind::Corrupt,
        }
    }
}
