//! An array on object storage as a writer's [`ChunkStorage`]: a chunk is
//! replaced by one conditional put, accepted only while the object there
//! is still the version read (its entity tag), or still absent. Object
//! stores keep no locks; this is how two writers of one shard never lose
//! each other's data. Chunks are encoded by the engine's own store code,
//! opened on a copy of the array's `zarr.json` in a local folder, so they
//! carry the same checksums and identities as an ingest writes.

use std::{
    path::PathBuf,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
};

use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use serde_json::Value;

use super::{
    client::{block_on, connect},
    contents::get_json,
    RemoteArray, RemoteError, S3Url, StorageOptions,
};
use crate::{
    compress::ChunkErrors,
    error::Result,
    store::{write_json_atomic, Durability, ReadOptions, StoreError, ZarrArray},
    window::Window,
    writer::{ArrayWriter, ChunkStorage, Stamp},
    Error,
};

/// Tries of a metadata update that other writers keep changing under it.
const METADATA_TRIES: usize = 16;

/// An array on object storage, open for writing.
pub struct ObjectChunks {
    url: S3Url,
    client: Arc<dyn ObjectStore>,
    remote: RemoteArray,
    /// The array's metadata in a local folder (no chunks): encodes them.
    encoder: ZarrArray,
    encoder_dir: PathBuf,
}

/// Open the array at `url` for window writes through a cache of at most
/// `limit` bytes. Refused for the main array of a store with orientation
/// copies, which a write would leave behind.
pub fn open_writer(url: &S3Url, options: &StorageOptions, limit: u64) -> Result<ArrayWriter> {
    Ok(ArrayWriter::on(
        Box::new(ObjectChunks::open(url, options)?),
        limit,
    ))
}

impl ObjectChunks {
    fn open(url: &S3Url, options: &StorageOptions) -> Result<Self> {
        let client = connect(url, options)?;
        refuse_copies(&client, url)?;
        let remote = RemoteArray::open(url, options)?;
        static OPENED: AtomicU64 = AtomicU64::new(0);
        let encoder_dir = std::env::temp_dir().join(format!(
            "cubeslab-writer-{}-{}",
            std::process::id(),
            OPENED.fetch_add(1, Ordering::Relaxed)
        ));
        // Named as the array is: shards carry their array's name.
        let name = url.key.rsplit('/').next().unwrap_or_default();
        let dir = encoder_dir.join(if name.is_empty() { "array" } else { name });
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        write_json_atomic(
            &dir.join("zarr.json"),
            remote.metadata(),
            Durability::Cached,
        )?;
        let encoder = ZarrArray::open(&dir)?;
        Ok(Self {
            url: url.clone(),
            client,
            remote,
            encoder,
            encoder_dir,
        })
    }

    fn chunk_url(&self, indices: &[u64]) -> S3Url {
        self.url.join(&self.remote.chunk_key(indices))
    }
}

impl Drop for ObjectChunks {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.encoder_dir);
    }
}

/// Refuse the array at `url` if it is the main array of a store that keeps
/// orientation copies of it, or such a copy.
fn refuse_copies(client: &Arc<dyn ObjectStore>, url: &S3Url) -> Result<()> {
    let Some((parent, _)) = url.key.rsplit_once('/') else {
        return Ok(());
    };
    let group_url = S3Url {
        bucket: url.bucket.clone(),
        key: parent.to_string(),
    };
    let group = match get_json(client, &group_url.join("zarr.json"), "open the store") {
        Ok(group) => group,
        Err(e) if matches!(e.part::<RemoteError>(), Some(RemoteError::NotFound { .. })) => {
            return Ok(()); // a lone array
        }
        Err(e) => return Err(e),
    };
    let root = group_url.to_string();
    let contents = crate::store::StoreContents::of_node(std::path::Path::new(&root), &group);
    let me = PathBuf::from(url.to_string());
    let involved = contents.main == me || contents.copies.contains(&me);
    if involved && !contents.copies.is_empty() {
        return Err(StoreError::Unsupported {
            path: me,
            what: "window writes to a store with orientation views: the copies would no longer \
                   hold the volume's values; ingest again without --views to write to it"
                .into(),
        }
        .into());
    }
    Ok(())
}

impl ChunkStorage for ObjectChunks {
    fn array(&self) -> &ZarrArray {
        &self.encoder
    }

    fn chunk_name(&self, indices: &[u64]) -> PathBuf {
        PathBuf::from(self.chunk_url(indices).to_string())
    }

    fn metadata_name(&self) -> PathBuf {
        PathBuf::from(self.url.join("zarr.json").to_string())
    }

    fn stamp(&self, indices: &[u64]) -> Result<Stamp> {
        let url = self.chunk_url(indices);
        // The read that follows must use this version's index, not one kept
        // from before another writer replaced the shard.
        self.remote.forget_object(&self.remote.chunk_key(indices));
        match block_on(self.client.head(&url.object_key()?)) {
            Ok(meta) => Ok(Stamp::Object {
                e_tag: entity_tag(&url, meta.e_tag)?,
            }),
            Err(object_store::Error::NotFound { .. }) => Ok(Stamp::Absent),
            Err(e) => {
                Err(RemoteError::from_client(&url.to_string(), "look up the chunk", e).into())
            }
        }
    }

    fn read_into(&self, window: &Window, out: &mut [u8], options: &ReadOptions) -> Result<()> {
        self.remote.read_into(window, out, options)
    }

    fn replace_chunk(
        &self,
        indices: &[u64],
        data: &[u8],
        read: &Stamp,
    ) -> Result<(Stamp, Option<ChunkErrors>)> {
        let url = self.chunk_url(indices);
        let mode = match read {
            Stamp::Absent => PutMode::Create,
            Stamp::Object { e_tag } => PutMode::Update(UpdateVersion {
                e_tag: Some(e_tag.clone()),
                version: None,
            }),
            Stamp::File { .. } => unreachable!("an object store's chunks are stamped as objects"),
        };
        let (bytes, errors) = self.encoder.encode_chunk(indices, data)?;
        let put = block_on(self.client.put_opts(
            &url.object_key()?,
            PutPayload::from(bytes.to_vec()),
            PutOptions {
                mode,
                ..Default::default()
            },
        ));
        // Whatever happened, the shard's index read before may be stale now.
        self.remote.forget_object(&self.remote.chunk_key(indices));
        match put {
            Ok(done) => Ok((
                Stamp::Object {
                    e_tag: entity_tag(&url, done.e_tag)?,
                },
                errors,
            )),
            Err(
                object_store::Error::Precondition { .. }
                | object_store::Error::AlreadyExists { .. },
            ) => Err(StoreError::Conflict {
                path: PathBuf::from(url.to_string()),
            }
            .into()),
            Err(e) => Err(RemoteError::from_client(&url.to_string(), "write the chunk", e).into()),
        }
    }

    fn update_metadata(&self, change: &mut dyn FnMut(&mut Value) -> bool) -> Result<()> {
        let url = self.url.join("zarr.json");
        let key = url.object_key()?;
        let failed = |e| -> Error {
            RemoteError::from_client(&url.to_string(), "update the metadata", e).into()
        };
        for _ in 0..METADATA_TRIES {
            let (bytes, e_tag) = block_on(async {
                let got = self.client.get(&key).await?;
                let e_tag = got.meta.e_tag.clone();
                Ok::<_, object_store::Error>((got.bytes().await?, e_tag))
            })
            .map_err(failed)?;
            let mut metadata: Value =
                serde_json::from_slice(&bytes).map_err(|e| StoreError::Metadata {
                    path: PathBuf::from(url.to_string()),
                    message: format!("not valid JSON: {e}"),
                })?;
            if !change(&mut metadata) {
                return Ok(());
            }
            let text = serde_json::to_vec_pretty(&metadata).expect("JSON values serialise");
            let options = PutOptions {
                mode: PutMode::Update(UpdateVersion {
                    e_tag: Some(entity_tag(&url, e_tag)?),
                    version: None,
                }),
                ..Default::default()
            };
            match block_on(self.client.put_opts(&key, PutPayload::from(text), options)) {
                Ok(_) => return Ok(()),
                Err(object_store::Error::Precondition { .. }) => continue,
                Err(e) => return Err(failed(e)),
            }
        }
        Err(RemoteError::Failed {
            url: url.to_string(),
            operation: "update the metadata".into(),
            message: format!("other writers changed it on each of {METADATA_TRIES} tries"),
        }
        .into())
    }
}

/// An object's entity tag, which conditional puts need.
fn entity_tag(url: &S3Url, e_tag: Option<String>) -> Result<String> {
    e_tag.ok_or_else(|| {
        RemoteError::Unsupported {
            url: url.to_string(),
            what: "a server that gives no entity tags (window writes need them to detect other writers)"
                .into(),
        }
        .into()
    })
}
