//! Where a writer's chunks live: the operations a write-back cache needs of
//! a store, so that one cache serves an array in a folder and one on object
//! storage alike.

use std::path::PathBuf;

use serde_json::Value;

use crate::{
    compress::ChunkErrors,
    error::Result,
    store::{ReadOptions, ZarrArray},
    window::Window,
};

/// Which version of a chunk a writer read: it is replaced only while that
/// version is still there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stamp {
    /// There was no chunk (it reads as the fill value).
    Absent,
    /// A file.
    File {
        /// Its inode.
        inode: u64,
        /// Its modification time, ns since the epoch.
        mtime_ns: i64,
        /// Its length.
        len: u64,
    },
    /// An object.
    Object {
        /// Its entity tag.
        e_tag: String,
    },
}

/// The chunks and metadata of one array, as a writer reads and replaces them.
pub trait ChunkStorage: Send + Sync {
    /// The array's geometry and codecs; chunks are encoded by it.
    fn array(&self) -> &ZarrArray;

    /// The name of the chunk (shard) at `indices`, for messages.
    fn chunk_name(&self, indices: &[u64]) -> PathBuf;

    /// The name of the array's metadata document, for messages.
    fn metadata_name(&self) -> PathBuf;

    /// The version of the chunk at `indices` there now; reads of it after
    /// this see that version (or a later one, which the replace refuses).
    fn stamp(&self, indices: &[u64]) -> Result<Stamp>;

    /// Read `window` as stored.
    fn read_into(&self, window: &Window, out: &mut [u8], options: &ReadOptions) -> Result<()>;

    /// Replace the chunk at `indices` with `data` (its elements, full
    /// shape) if the version there is still `read`; else
    /// `StoreError::Conflict`. The new version and, for lossy codecs, the
    /// error of what was written.
    fn replace_chunk(
        &self,
        indices: &[u64],
        data: &[u8],
        read: &Stamp,
    ) -> Result<(Stamp, Option<ChunkErrors>)>;

    /// Change the array's `zarr.json` with `change`, which returns whether
    /// it changed anything; no other writer's change is lost meanwhile.
    fn update_metadata(&self, change: &mut dyn FnMut(&mut Value) -> bool) -> Result<()>;
}
