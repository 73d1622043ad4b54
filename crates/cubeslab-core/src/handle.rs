//! An array as a caller holds it: for reading, with its orientation copies,
//! each read going to the copy the cost model predicts fastest for its
//! window; or open for writing, through a write-back cache.

use std::path::Path;

use crate::{
    config::Parallelism,
    error::Result,
    plan::{stored_array, DeviceProfile},
    route::Router,
    store::{ReadOptions, StoreContents, StoreError, ZarrArray},
    window::Window,
    writer::ArrayWriter,
};

/// The arrays that hold the same data (the volume first), and how reads
/// are routed among them.
pub struct ArrayHandle {
    arrays: Vec<ZarrArray>,
    router: Router,
    writer: Option<ArrayWriter>,
}

impl ArrayHandle {
    /// Open the volume at `path`, for reading; without `copies` every read
    /// goes to it. The routes are costed for reads made with `options` on
    /// the machine `profile` describes.
    pub fn open(
        path: &Path,
        copies: &[impl AsRef<Path>],
        profile: DeviceProfile,
        options: &ReadOptions,
    ) -> Result<Self> {
        let mut arrays = vec![ZarrArray::open_to_read(path)?];
        for copy in copies {
            let copy = ZarrArray::open_to_read(copy)?;
            if copy.shape() != arrays[0].shape() || copy.dtype() != arrays[0].dtype() {
                return Err(StoreError::Metadata {
                    path: copy.path().join("zarr.json"),
                    message: format!(
                        "a copy of {} must have its shape and dtype",
                        arrays[0].path().display()
                    ),
                }
                .into());
            }
            arrays.push(copy);
        }
        // Arrays the model does not describe (unsharded) are never routed among.
        let models = if arrays.len() > 1 {
            arrays
                .iter()
                .map(|a| stored_array(a, &profile))
                .collect::<Option<Vec<_>>>()
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        Ok(Self {
            arrays,
            router: Router::new(models, profile, options),
            writer: None,
        })
    }

    /// Open the array at `path` for reading and window writes, through a
    /// write-back cache of at most `cache_limit` bytes. A volume with
    /// orientation copies is refused: a write would leave them behind.
    pub fn open_for_writing(path: &Path, cache_limit: u64) -> Result<Self> {
        refuse_copies(path)?;
        let writer = ArrayWriter::open(path, cache_limit)?;
        let mut handle = Self::open(
            path,
            &[] as &[&Path],
            DeviceProfile::typical(),
            &ReadOptions::default(),
        )?;
        handle.writer = Some(writer);
        Ok(handle)
    }

    /// The write-back cache of a handle open for writing; an error naming
    /// the array for one opened to read.
    pub fn writer(&self) -> Result<&ArrayWriter> {
        self.writer.as_ref().ok_or_else(|| {
            StoreError::ReadOnly {
                path: self.volume().path().to_path_buf(),
            }
            .into()
        })
    }

    /// The volume (not a copy).
    pub fn volume(&self) -> &ZarrArray {
        &self.arrays[0]
    }

    /// Write the whole volume from `data` (native-endian C-order bytes),
    /// chunks in parallel, recording the error of lossily compressed ones.
    pub fn write_whole(&self, data: &[u8], parallelism: Parallelism) -> Result<()> {
        if let Some(errors) = self.volume().write_array(data, parallelism)? {
            crate::writer::record_lossy_writes(self.volume().path(), &errors)?;
        }
        Ok(())
    }

    /// See the shards another handle or process has replaced since this
    /// one read them (every array, and a writer's clean cached chunks);
    /// whether any was replaced.
    pub fn forget_replaced_shards(&self) -> Result<bool> {
        // Every array is checked: no short cut after the first replaced.
        let mut replaced = self
            .arrays
            .iter()
            .filter(|a| a.forget_replaced_shards())
            .count()
            > 0;
        if let Some(writer) = &self.writer {
            replaced |= writer.forget_replaced()?;
        }
        Ok(replaced)
    }

    /// The volume, then its copies.
    pub fn arrays(&self) -> &[ZarrArray] {
        &self.arrays
    }

    /// Index in [`Self::arrays`] of the array a read of `window` goes to:
    /// the one whose predicted cold plus warm time, weighed as the planner
    /// weighs them, is least.
    pub fn route(&self, window: &Window) -> Result<usize> {
        window.validate(self.volume().shape())?;
        Ok(self.router.route(window))
    }

    /// Read `window` from the array predicted fastest into `out`.
    pub fn read_into(&self, window: &Window, out: &mut [u8], options: &ReadOptions) -> Result<()> {
        if let Some(writer) = &self.writer {
            return writer.read_into(window, out, options);
        }
        self.arrays[self.route(window)?].read_into(window, out, options)
    }
}

/// Refuse to write the array at `path` if its store keeps orientation
/// copies of it, or if it is such a copy.
fn refuse_copies(path: &Path) -> Result<()> {
    let Some(store) = path.parent().filter(|p| p.join("zarr.json").is_file()) else {
        return Ok(());
    };
    let Ok(contents) = StoreContents::read(store) else {
        return Ok(());
    };
    let involved = contents.main == path || contents.copies.iter().any(|c| c == path);
    if involved && !contents.copies.is_empty() {
        return Err(StoreError::Unsupported {
            path: path.to_path_buf(),
            what: "window writes to a store with orientation views: the copies would no longer \
                   hold the volume's values; ingest again without --views to write to it"
                .into(),
        }
        .into());
    }
    Ok(())
}
