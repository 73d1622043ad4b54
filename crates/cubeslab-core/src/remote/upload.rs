//! Publishing a store to object storage. It is written in a local staging
//! folder as every ingest is, then uploaded: every shard and array document
//! first, whole (multipart above a size), and the root `zarr.json` last. A
//! store's readers open that document first, so an upload that stops
//! midway is never seen as a store, let alone a complete one. Replacing a
//! store deletes its root document before anything else changes.

use std::{
    collections::{HashMap, HashSet},
    io::Read,
    path::{Path, PathBuf},
    sync::Arc,
};

use futures::{StreamExt, TryStreamExt};
use object_store::{
    path::Path as Key, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, WriteMultipart,
};

use super::{
    client::{block_on, connect, endpoint},
    error::without_userinfo,
    store_keys, store_objects, RemoteError, S3Url, StorageOptions,
};
use crate::{
    error::Result,
    store::{live_holder, Group, StoreError, StoreLock, StoreState, LOCK_FILE, WRITE_LOCK_FILE},
    Error,
};

/// Files above this size go up in parts.
const MULTIPART_ABOVE: u64 = 32 << 20;
/// The size of each part.
const PART_BYTES: usize = 16 << 20;
/// Files uploaded at once.
const FILES_IN_FLIGHT: usize = 8;
/// Parts of one file uploaded at once.
const PARTS_IN_FLIGHT: usize = 4;

/// A store being staged locally, to be uploaded to `url` when complete.
#[derive(Debug)]
pub struct Upload {
    /// Where the store will be.
    pub url: S3Url,
    /// Where it is written meanwhile.
    pub staging: PathBuf,
    options: StorageOptions,
    /// Whether a store (or an upload that stopped) is there to be replaced.
    replacing: bool,
    /// Keys of the store that other processes uploaded (ingest tasks run on
    /// a cluster), with their sizes: part of the new store, though not in
    /// the staging folder.
    adopted: HashMap<String, u64>,
    /// The staging folder's lock, held until the upload is done: another
    /// run for the same URL on this machine cannot clear or mix into it.
    _lock: StoreLock,
}

impl Upload {
    /// Begin a store for `url`: a store there is replaced only with
    /// `overwrite`, and objects there that are not a Zarr store's never.
    /// A staging folder a stopped run left is kept for `--resume` unless
    /// `overwrite`.
    pub fn begin(url: &S3Url, options: &StorageOptions, overwrite: bool) -> Result<Self> {
        let staging = Self::staging_for(url, options)?;
        let stopped_here = staging.exists();
        if stopped_here {
            if !overwrite {
                return Err(StoreError::Unfinished {
                    path: url.to_string().into(),
                    staging,
                }
                .into());
            }
            refuse_if_busy(url, &staging)?;
            std::fs::remove_dir_all(&staging).map_err(|e| Error::io(&staging, e))?;
        }
        // Locked before the server is asked anything: a second run for the
        // URL is refused from here on, never let in to clear this folder.
        std::fs::create_dir_all(&staging).map_err(|e| Error::io(&staging, e))?;
        let lock = take_staging(url, &staging)?;
        let replacing = match check_target(url, options, overwrite, stopped_here) {
            Ok(replacing) => replacing,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&staging);
                return Err(e);
            }
        };
        Ok(Self {
            url: url.clone(),
            _lock: lock,
            staging,
            options: options.clone(),
            replacing,
            adopted: HashMap::new(),
        })
    }

    /// Continue a stopped run for `url`: its staging folder is kept.
    pub fn resume(url: &S3Url, options: &StorageOptions) -> Result<Self> {
        let staging = Self::staging_for(url, options)?;
        Ok(Self {
            url: url.clone(),
            _lock: take_staging(url, &staging)?,
            staging,
            options: options.clone(),
            replacing: check_target(url, options, true, true)?,
            adopted: HashMap::new(),
        })
    }

    /// Whether the run that left `staging` staged a complete store and
    /// stopped while uploading it: a resume only uploads it again.
    pub fn stopped_uploading(staging: &Path) -> bool {
        Group::open(staging).is_ok_and(|g| g.state() == StoreState::Complete)
    }

    /// Before other processes upload parts of the store to their final
    /// keys: a store being replaced stops being one (its root `zarr.json`
    /// is deleted), so that no reader mixes its shards with the new ones.
    pub fn open_to_others(&self) -> Result<()> {
        if self.replacing {
            delete_root(&connect(&self.url, &self.options)?, &self.url)?;
        }
        Ok(())
    }

    /// The keys (relative to the store) that are already at the store's
    /// location, with their sizes: one listing.
    pub fn uploaded_keys(&self) -> Result<HashMap<String, u64>> {
        Ok(store_objects(&self.url, &self.options)?
            .into_iter()
            .collect())
    }

    /// Count `keys` (relative to the store, with their sizes), uploaded by
    /// other processes, as part of the new store.
    pub fn adopt(&mut self, keys: impl IntoIterator<Item = (String, u64)>) {
        self.adopted.extend(keys);
    }

    /// Bytes of the adopted keys under `prefix` (relative to the store).
    pub fn adopted_bytes(&self, prefix: &str) -> u64 {
        self.adopted
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(_, size)| size)
            .sum()
    }

    /// Upload the complete store, then remove the staging folder.
    pub fn commit(self) -> Result<()> {
        upload_store(
            self.staging.as_path(),
            &self.url,
            &self.options,
            self.replacing,
            &self.adopted,
        )?;
        // The root document first: a staging folder half removed is never
        // taken for a whole store to upload again.
        let root = self.staging.join("zarr.json");
        std::fs::remove_file(&root).map_err(|e| Error::io(&root, e))?;
        std::fs::remove_dir_all(&self.staging).map_err(|e| Error::io(&self.staging, e))
    }
}

/// Upload every file under `folder` but the node documents (`zarr.json`)
/// to the same names under `url`: what an ingest task wrote, from the
/// worker that ran it. Returns the keys uploaded, relative to `url`.
pub fn upload_folder(folder: &Path, url: &S3Url, options: &StorageOptions) -> Result<Vec<String>> {
    let client = connect(url, options)?;
    let mut files = Vec::new();
    walk(folder, folder, &mut files)?;
    files.retain(|(name, _)| !name.ends_with("zarr.json"));
    let names = files.iter().map(|(n, _)| n.clone()).collect();
    put_all(&client, url, files)?;
    Ok(names)
}

impl Upload {
    /// The local folder a store for `url` on the endpoint `options` reach is
    /// staged in: the same for every run, so that a stopped ingest can be
    /// resumed, and another for another endpoint's bucket of the same name.
    pub fn staging_for(url: &S3Url, options: &StorageOptions) -> Result<PathBuf> {
        let escaped = |text: &str| text.replace('%', "%25").replace('/', "%2F");
        let endpoint = endpoint(url, options)?;
        let server = if endpoint.is_empty() {
            "aws".to_string()
        } else {
            escaped(&without_userinfo(&endpoint))
        };
        Ok(std::env::temp_dir()
            .join("cubeslab-upload")
            .join(server)
            .join(&url.bucket)
            .join(format!("{}.cubeslab-new", escaped(&url.key))))
    }
}

/// Refuse to touch the staging folder of `url` while another run on this
/// machine writes or uploads it.
fn refuse_if_busy(url: &S3Url, staging: &Path) -> Result<()> {
    match live_holder(staging) {
        Some(pid) => Err(busy(url, pid)),
        None => Ok(()),
    }
}

/// Take the lock of the staging folder of `url` (which exists).
fn take_staging(url: &S3Url, staging: &Path) -> Result<StoreLock> {
    StoreLock::acquire(staging).map_err(|e| match e.part::<StoreError>() {
        Some(StoreError::Busy { pid, .. }) => busy(url, *pid),
        _ => e,
    })
}

fn busy(url: &S3Url, pid: u32) -> Error {
    StoreError::Busy {
        path: url.to_string().into(),
        pid,
    }
    .into()
}

/// Refuse a store at `url` unless `overwrite`, and objects there that are
/// not a Zarr store's (`stopped_here`: an upload of it from this machine
/// stopped). Whether something is there to be replaced.
fn check_target(
    url: &S3Url,
    options: &StorageOptions,
    overwrite: bool,
    stopped_here: bool,
) -> Result<bool> {
    let keys = store_keys(url, options)?;
    if keys.is_empty() {
        return Ok(false);
    }
    if !overwrite {
        return Err(RemoteError::AlreadyExists {
            url: url.to_string(),
        }
        .into());
    }
    if let Some(key) = keys.iter().find(|k| !is_zarr_key(k)) {
        return Err(RemoteError::NotAStore {
            url: url.to_string(),
            key: key.clone(),
        }
        .into());
    }
    // Zarr keys without a root document: a prefix of other stores (all
    // would go), unless an upload of this store from here stopped before
    // writing its root last.
    if !keys.iter().any(|k| k == "zarr.json") && !stopped_here {
        return Err(RemoteError::NotAStore {
            url: url.to_string(),
            key: format!("{}, and no zarr.json at its root", keys[0]),
        }
        .into());
    }
    Ok(true)
}

/// Delete the root document of the store at `url`, if it has one.
fn delete_root(client: &Arc<dyn ObjectStore>, url: &S3Url) -> Result<()> {
    match block_on(client.delete(&key_of(url, "zarr.json")?)) {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => {
            Err(
                RemoteError::from_client(&url.to_string(), "delete the old store's zarr.json", e)
                    .into(),
            )
        }
    }
}

/// Upload `files` (name, path) to those names under `url`, `FILES_IN_FLIGHT` at once.
fn put_all(
    client: &Arc<dyn ObjectStore>,
    url: &S3Url,
    files: Vec<(String, PathBuf)>,
) -> Result<()> {
    let keyed = files
        .into_iter()
        .map(|(name, path)| Ok((key_of(url, &name)?, name, path)))
        .collect::<Result<Vec<_>>>()?;
    block_on(
        futures::stream::iter(keyed.into_iter().map(|(key, name, path)| {
            let client = client.clone();
            async move { put_file(&client, &key, &path).await.map_err(|e| (name, e)) }
        }))
        .buffer_unordered(FILES_IN_FLIGHT)
        .try_collect::<Vec<()>>(),
    )
    .map_err(|(name, e)| match e {
        PutError::Client(e) => {
            RemoteError::from_client(&url.to_string(), &format!("upload {name}"), e).into()
        }
        PutError::Local(e) => e,
    })
    .map(|_| ())
}

/// Upload the store staged in `staging` to `url`, the root `zarr.json`
/// last; then remove what a replaced store had that the new one (its
/// files and the `adopted` keys) has not.
fn upload_store(
    staging: &Path,
    url: &S3Url,
    options: &StorageOptions,
    replacing: bool,
    adopted: &HashMap<String, u64>,
) -> Result<()> {
    let client = connect(url, options)?;
    let mut files = Vec::new();
    walk(staging, staging, &mut files)?;
    let failed = |operation: &str, e: object_store::Error| {
        Error::from(RemoteError::from_client(&url.to_string(), operation, e))
    };
    let root = key_of(url, "zarr.json")?;
    if replacing {
        delete_root(&client, url)?;
    }
    let (root_file, others): (Vec<_>, Vec<_>) =
        files.into_iter().partition(|(name, _)| name == "zarr.json");
    let names: HashSet<&String> = others
        .iter()
        .map(|(n, _)| n)
        .chain(adopted.keys())
        .collect();
    let stale: Vec<String> = if replacing {
        store_keys(url, options)?
            .into_iter()
            .filter(|k| !names.contains(k) && k != "zarr.json")
            .collect()
    } else {
        Vec::new()
    };
    put_all(&client, url, others)?;
    if replacing {
        for name in stale {
            match block_on(client.delete(&key_of(url, &name)?)) {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(failed("delete the old store's objects", e)),
            }
        }
    }
    for (_, path) in root_file {
        // Only where no root document is (none was, or the old one was deleted above): another
        // process publishing a store here meanwhile is refused, not mixed with this one.
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        let only_new = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        match block_on(client.put_opts(&root, PutPayload::from(bytes), only_new)) {
            Ok(_) => {}
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => {
                return Err(RemoteError::AlreadyExists {
                    url: url.to_string(),
                }
                .into())
            }
            Err(e) => return Err(failed("upload zarr.json (the store's completion)", e)),
        }
    }
    Ok(())
}

enum PutError {
    Client(object_store::Error),
    Local(Error),
}

async fn put_file(client: &Arc<dyn ObjectStore>, key: &Key, path: &Path) -> Result<(), PutError> {
    let local = |e| PutError::Local(Error::io(path, e));
    let mut file = std::fs::File::open(path).map_err(local)?;
    let size = file.metadata().map_err(local)?.len();
    if size <= MULTIPART_ABOVE {
        let mut bytes = Vec::with_capacity(size as usize);
        file.read_to_end(&mut bytes).map_err(local)?;
        client
            .put(key, PutPayload::from(bytes))
            .await
            .map_err(PutError::Client)?;
        return Ok(());
    }
    let upload = client.put_multipart(key).await.map_err(PutError::Client)?;
    let mut parts = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
    let mut piece = vec![0u8; PART_BYTES];
    loop {
        let got = file.read(&mut piece).map_err(local)?;
        if got == 0 {
            break;
        }
        parts
            .wait_for_capacity(PARTS_IN_FLIGHT)
            .await
            .map_err(PutError::Client)?;
        parts.write(&piece[..got]);
    }
    // A part that failed aborts the upload: the object never appears.
    parts.finish().await.map_err(PutError::Client)?;
    Ok(())
}

fn key_of(url: &S3Url, name: &str) -> Result<Key> {
    Ok(url.join(name).object_key()?)
}

/// A key a Zarr store holds: node documents and chunk keys.
fn is_zarr_key(key: &str) -> bool {
    let last = key.rsplit('/').next().unwrap_or(key);
    last == "zarr.json"
        || (!last.is_empty() && last.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// Every file under `dir` that belongs in the store, as (key, path).
fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().map_err(|e| Error::io(&path, e))?.is_dir() {
            walk(root, &path, out)?;
        } else if name != LOCK_FILE && name != WRITE_LOCK_FILE && !name.ends_with(".tmp") {
            let key = path
                .strip_prefix(root)
                .expect("walked under root")
                .to_string_lossy()
                .into_owned();
            out.push((key, path));
        }
    }
    Ok(())
}

/// Bytes of every object under `url` (a store or one of its arrays).
pub fn stored_bytes(url: &S3Url, options: &StorageOptions) -> Result<u64> {
    let client = connect(url, options)?;
    let prefix = url.object_key()?;
    let found: Vec<_> = block_on(client.list(Some(&prefix)).try_collect::<Vec<_>>())
        .map_err(|e| RemoteError::from_client(&url.to_string(), "list", e))?;
    Ok(found.iter().map(|meta| meta.size).sum())
}
