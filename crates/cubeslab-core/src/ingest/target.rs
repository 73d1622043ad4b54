//! Where an ingest writes: a new store under its staging name (published
//! when complete, see `store/publish.rs`), a stopped one resumed there, or
//! one an older version left unfinished in place, resumed in place.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::{survey, IngestOptions};
use crate::{
    destination::Destination,
    error::Result,
    remote::{Location, StorageOptions, Upload},
    store::{
        is_empty_dir, live_holder, new_generation, record_generation, recorded_generation,
        staging_path, Group, StoreError, StoreLock, StoreState, LOCK_FILE, WRITE_LOCK_FILE,
    },
};

/// Where an ingest writes, decided before anything is read.
pub(super) struct Target {
    /// Where the store will be.
    pub store: PathBuf,
    /// The same, a folder or a URL.
    location: Location,
    /// Where it is written meanwhile.
    pub write_to: PathBuf,
    /// Whether a stopped ingest is continued.
    pub resuming: bool,
    /// Whether that one is an unfinished store at the store's own path.
    in_place: bool,
}

/// The opened target: its lock, and where it goes when complete.
pub(super) struct Opened {
    /// The lock of a store resumed in place (a publication holds its
    /// staging folder's own).
    pub lock: Option<StoreLock>,
    pub publication: Option<Destination>,
    /// The store's generation (see `store/identity.rs`); a store resumed
    /// from before generations existed has none.
    pub generation: Option<u64>,
}

impl Target {
    /// Decide where to write, refusing (before the header scan, which may
    /// be long) a store or staging folder that is there without
    /// `--overwrite` or `--resume`.
    pub fn resolve(store: &Path, options: &IngestOptions) -> Result<Self> {
        let location = Location::parse(&store.to_string_lossy())?;
        let store = store.to_path_buf();
        if let Location::S3(url) = &location {
            // Existence is the upload's to check, when the target opens.
            let write_to = Upload::staging_for(url, &options.storage)?;
            clear_if_no_work(&write_to)?;
            return Ok(Self {
                store,
                resuming: options.resume && write_to.join("zarr.json").is_file(),
                location,
                write_to,
                in_place: false,
            });
        }
        let staging = staging_path(&store);
        clear_if_no_work(&staging)?;
        let staged = options.resume && staging.join("zarr.json").is_file();
        let in_place = options.resume
            && !staged
            && Group::open(&store).is_ok_and(|g| matches!(g.state(), StoreState::Incomplete(_)));
        let resuming = staged || in_place;
        let write_to = if in_place { store.clone() } else { staging };
        if !resuming && !options.overwrite {
            if store.exists() && !is_empty_dir(&store) {
                if options.resume
                    && Group::open(&store).is_ok_and(|g| g.state() == StoreState::Complete)
                {
                    return Err(StoreError::Unsupported {
                        path: store,
                        what: "the store is complete: nothing to resume".into(),
                    }
                    .into());
                }
                return Err(StoreError::AlreadyExists { path: store }.into());
            }
            if write_to.exists() {
                return Err(StoreError::Unfinished {
                    path: store,
                    staging: write_to,
                }
                .into());
            }
        }
        Ok(Self {
            store,
            location,
            write_to,
            resuming,
            in_place,
        })
    }

    /// Whether the store was staged whole by a run that stopped while
    /// uploading it to object storage: resuming only uploads it again.
    pub fn stopped_uploading(&self) -> bool {
        match &self.location {
            Location::S3(_) => self.resuming && Upload::stopped_uploading(&self.write_to),
            Location::Local(_) => false,
        }
    }

    /// Take the locks and prepare the folder, once everything that can be
    /// checked has been; a resume must match the stopped ingest's
    /// `fingerprint`. Records the generation in `attributes`.
    pub fn open(
        &self,
        fingerprint: &Value,
        overwrite: bool,
        storage: &StorageOptions,
        attributes: &mut Map<String, Value>,
    ) -> Result<Opened> {
        let (lock, publication) = if self.resuming {
            survey::check_resumable(
                &self.write_to,
                &self.store,
                fingerprint,
                self.stopped_uploading(),
            )?;
            let held = if self.in_place {
                (Some(StoreLock::acquire(&self.write_to)?), None)
            } else {
                (None, Some(Destination::resume(&self.location, storage)?))
            };
            survey::remove_temporary_files(&self.write_to)?;
            held
        } else {
            (
                None,
                Some(Destination::begin(&self.location, storage, overwrite)?),
            )
        };
        // A resume keeps the generation the stopped ingest chose.
        let generation = if self.resuming {
            Group::open(&self.write_to)
                .ok()
                .and_then(|g| recorded_generation(&g.attributes))
        } else {
            Some(new_generation())
        };
        if let Some(g) = generation {
            record_generation(attributes, g);
        }
        Ok(Opened {
            lock,
            publication,
            generation,
        })
    }
}

/// Remove the staging folder `staging` if a run stopped before it wrote
/// anything there but its lock (and no live process holds that): there is
/// nothing to resume, and it would otherwise be said to be, for ever.
fn clear_if_no_work(staging: &Path) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(staging) else {
        return Ok(());
    };
    let only_locks = entries.flatten().all(|entry| {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        name.starts_with(LOCK_FILE) || name == WRITE_LOCK_FILE
    });
    if only_locks && live_holder(staging).is_none() {
        std::fs::remove_dir_all(staging).map_err(|e| crate::error::Error::io(staging, e))?;
    }
    Ok(())
}
