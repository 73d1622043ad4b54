//! An array on object storage as a caller holds it, as `handle.rs` holds a
//! local one: for reading, with its orientation copies, each read going to
//! the one predicted fastest for its window (`route.rs`); or open for
//! writing, through a write-back cache.

use super::{open_writer, RemoteArray, S3Url, StorageOptions};
use crate::{
    error::Result,
    plan::{stored_array_of, DeviceProfile},
    route::Router,
    store::{ReadOptions, StoreError},
    window::Window,
    writer::ArrayWriter,
};

/// The volume (first) and its copies, and the write-back cache of one open
/// for writing.
pub struct RemoteVolume {
    arrays: Vec<RemoteArray>,
    router: Router,
    writer: Option<ArrayWriter>,
}

impl RemoteVolume {
    /// Open the volume at `url` and its `copies`; routes are costed for
    /// reads made with `options` on the machine `profile` describes.
    pub fn open(
        url: &S3Url,
        copies: &[S3Url],
        options: &StorageOptions,
        profile: DeviceProfile,
        read: &ReadOptions,
    ) -> Result<Self> {
        let mut arrays = vec![RemoteArray::open(url, options)?];
        for copy in copies {
            let copy = RemoteArray::open(copy, options)?;
            if copy.shape() != arrays[0].shape() || copy.dtype() != arrays[0].dtype() {
                return Err(StoreError::Metadata {
                    path: copy.url().join("zarr.json").to_string().into(),
                    message: format!(
                        "a copy of {} must have its shape and dtype",
                        arrays[0].url()
                    ),
                }
                .into());
            }
            arrays.push(copy);
        }
        // The chunks' stored size is not listed (millions of objects): routes
        // among copies turn on their layouts, which the model has.
        let models = if arrays.len() > 1 {
            arrays
                .iter()
                .map(|a| stored_array_of(a.metadata(), a.dtype().size(), || None, &profile))
                .collect::<Option<Vec<_>>>()
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        Ok(Self {
            router: Router::new(models, profile, read),
            arrays,
            writer: None,
        })
    }

    /// Open the array at `url` for reading and window writes, through a
    /// write-back cache of at most `cache_limit` bytes (refused for a
    /// volume with orientation copies, which a write would leave behind).
    pub fn open_for_writing(
        url: &S3Url,
        options: &StorageOptions,
        cache_limit: u64,
    ) -> Result<Self> {
        let writer = open_writer(url, options, cache_limit)?;
        let mut volume = Self::open(
            url,
            &[],
            options,
            DeviceProfile::typical(),
            &ReadOptions::default(),
        )?;
        volume.writer = Some(writer);
        Ok(volume)
    }

    /// The write-back cache of a volume open for writing; an error naming
    /// the array for one opened to read.
    pub fn writer(&self) -> Result<&ArrayWriter> {
        self.writer.as_ref().ok_or_else(|| {
            StoreError::ReadOnly {
                path: self.volume().url().to_string().into(),
            }
            .into()
        })
    }

    /// The volume (not a copy).
    pub fn volume(&self) -> &RemoteArray {
        &self.arrays[0]
    }

    /// Index of the array (0 the volume, then the copies) a read of
    /// `window` goes to.
    pub fn route(&self, window: &Window) -> Result<usize> {
        window.validate(self.volume().shape())?;
        Ok(self.router.route(window))
    }

    /// Read `window` from the array predicted fastest into `out` (through
    /// the cache, its writes included, for a volume open for writing).
    pub fn read_into(&self, window: &Window, out: &mut [u8], options: &ReadOptions) -> Result<()> {
        if let Some(writer) = &self.writer {
            return writer.read_into(window, out, options);
        }
        self.arrays[self.route(window)?].read_into(window, out, options)
    }
}
