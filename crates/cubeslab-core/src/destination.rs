//! Where an ingest's store goes, and how it is published once complete:
//! moved into place on this machine ([`store::Publication`]), or uploaded
//! to object storage ([`remote::Upload`]). Either way it is written in a
//! local staging folder first.

use std::path::{Path, PathBuf};

use crate::{
    error::Result,
    remote::{Location, StorageOptions, Upload},
    store::{Durability, Publication},
};

/// A store being written, to be published at its location.
#[derive(Debug)]
pub enum Destination {
    /// A folder on this machine.
    Local(Publication),
    /// A prefix on object storage.
    Remote(Upload),
}

impl Destination {
    /// Begin a store at `location`; an existing one is replaced only with
    /// `overwrite`.
    pub fn begin(location: &Location, options: &StorageOptions, overwrite: bool) -> Result<Self> {
        Ok(match location {
            Location::Local(path) => Self::Local(Publication::begin(path, overwrite)?),
            Location::S3(url) => Self::Remote(Upload::begin(url, options, overwrite)?),
        })
    }

    /// Continue a stopped run for `location`, in its staging folder.
    pub fn resume(location: &Location, options: &StorageOptions) -> Result<Self> {
        Ok(match location {
            Location::Local(path) => Self::Local(Publication::resume(path)?),
            Location::S3(url) => Self::Remote(Upload::resume(url, options)?),
        })
    }

    /// Where the store is written meanwhile.
    pub fn staging(&self) -> &Path {
        match self {
            Self::Local(p) => &p.staging,
            Self::Remote(u) => &u.staging,
        }
    }

    /// Where the store will be, for messages.
    pub fn target(&self) -> PathBuf {
        match self {
            Self::Local(p) => p.target.clone(),
            Self::Remote(u) => u.url.to_string().into(),
        }
    }

    /// Publish the complete store (`durability` applies on this machine;
    /// an upload is complete when the server acknowledges it).
    pub fn commit(self, durability: Durability) -> Result<()> {
        match self {
            Self::Local(p) => p.commit(durability),
            Self::Remote(u) => u.commit(),
        }
    }
}
