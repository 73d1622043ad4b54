//! Where a store or a source is: a local path or an `s3://` URL.

use std::path::PathBuf;

use object_store::path::Path as Key;

use super::{error::without_userinfo, RemoteError};

/// A store's or a source's place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A path on this machine.
    Local(PathBuf),
    /// An object, or a prefix of objects, on S3-compatible storage.
    S3(S3Url),
}

/// `s3://bucket/key`: a bucket and a key (no leading or trailing `/`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct S3Url {
    /// The bucket.
    pub bucket: String,
    /// The key, or the prefix of a store's keys; empty for the bucket's root.
    pub key: String,
}

impl Location {
    /// Read `text`: a URL with a scheme (`s3://`; `file://` for a local
    /// path), or a plain path. A scheme cubeslab does not support is an
    /// error, so that `gs://b/x` never becomes a folder named `gs:`.
    pub fn parse(text: &str) -> Result<Self, RemoteError> {
        let Some((scheme, rest)) = text.split_once("://") else {
            return Ok(Self::Local(PathBuf::from(text)));
        };
        let valid_scheme = !scheme.is_empty()
            && scheme
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
        if !valid_scheme {
            return Ok(Self::Local(PathBuf::from(text)));
        }
        match scheme.to_ascii_lowercase().as_str() {
            // file:///path and file://localhost/path; another host's file is not ours to read.
            "file" => match rest.strip_prefix("localhost").unwrap_or(rest) {
                path if path.starts_with('/') => Ok(Self::Local(PathBuf::from(path))),
                _ => Err(RemoteError::BadUrl {
                    url: without_userinfo(text),
                    why: "a file URL names a path on this machine: file:///path".into(),
                }),
            },
            "s3" => {
                let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
                if bucket.is_empty() {
                    return Err(RemoteError::BadUrl {
                        url: without_userinfo(text),
                        why: "no bucket".into(),
                    });
                }
                if !bucket
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".-_".contains(c))
                {
                    return Err(RemoteError::BadUrl {
                        url: without_userinfo(text),
                        why: "a bucket name holds only letters, digits, '.', '-' and '_'".into(),
                    });
                }
                // One trailing '/' names the same folder; an empty segment anywhere
                // else would be dropped by the server's key, naming another object.
                let key = key.strip_suffix('/').unwrap_or(key);
                if key.starts_with('/') || key.ends_with('/') || key.contains("//") {
                    return Err(RemoteError::BadUrl {
                        url: without_userinfo(text),
                        why:
                            "its key has an empty path segment (two '/' together); object storage \
                              would name another object than the URL"
                                .into(),
                    });
                }
                let url = S3Url {
                    bucket: bucket.into(),
                    key: key.into(),
                };
                url.object_key()?;
                Ok(Self::S3(url))
            }
            _ => Err(RemoteError::UnsupportedScheme {
                url: without_userinfo(text),
                scheme: scheme.into(),
            }),
        }
    }
}

impl S3Url {
    /// Refuse this URL (`text` as given) where a file is wanted: a bucket
    /// or a folder (a key ending in `/`) is answered with a listing.
    pub fn file_only(&self, text: &str) -> Result<(), RemoteError> {
        if self.key.is_empty() || text.ends_with('/') {
            return Err(RemoteError::BadUrl {
                url: without_userinfo(text),
                why: "names a bucket or a folder, not a file".into(),
            });
        }
        Ok(())
    }

    /// The key as object storage names it, exactly as written. (object_store's
    /// `From` would percent-encode `ü`, `%` or `#` and drop empty segments:
    /// another object than zarr-python or the AWS CLI would name.) A key
    /// with an empty, `.` or `..` segment, or a control character, is refused.
    pub fn object_key(&self) -> Result<Key, RemoteError> {
        Key::parse(&self.key).map_err(|e| RemoteError::BadUrl {
            url: self.to_string(),
            why: format!("its key cannot name an object ({e})"),
        })
    }

    /// The URL of `name` under this one.
    pub fn join(&self, name: &str) -> Self {
        let name = name.trim_matches('/');
        let key = if self.key.is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", self.key)
        };
        Self {
            bucket: self.bucket.clone(),
            key,
        }
    }
}

impl std::fmt::Display for S3Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "s3://{}/{}", self.bucket, self.key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_paths_and_file_urls_are_local() {
        for (text, path) in [
            ("survey.zarr", "survey.zarr"),
            ("/data/a.zarr", "/data/a.zarr"),
            ("file:///data/a.zarr", "/data/a.zarr"),
            ("weird name://x", "weird name://x"),
        ] {
            assert_eq!(
                Location::parse(text).unwrap(),
                Location::Local(PathBuf::from(path))
            );
        }
    }

    #[test]
    fn s3_urls_give_bucket_and_key() {
        let Location::S3(url) = Location::parse("s3://bucket/raw/f3.zarr/").unwrap() else {
            panic!("not an S3 URL");
        };
        assert_eq!(
            (url.bucket.as_str(), url.key.as_str()),
            ("bucket", "raw/f3.zarr")
        );
        assert_eq!(
            url.join("amplitude").to_string(),
            "s3://bucket/raw/f3.zarr/amplitude"
        );
        assert!(matches!(
            Location::parse("s3:///key"),
            Err(RemoteError::BadUrl { .. })
        ));
    }

    #[test]
    fn keys_are_kept_as_written_and_unnameable_ones_refused() {
        let Location::S3(url) = Location::parse("s3://b/proj/ü #1%.zarr").unwrap() else {
            panic!("not an S3 URL");
        };
        assert_eq!(url.object_key().unwrap().as_ref(), "proj/ü #1%.zarr");
        for text in [
            "s3://b/a//x.zarr",
            "s3://b/a/../x.zarr",
            "s3://b/./x",
            "s3://b/x\ty",
        ] {
            assert!(
                matches!(Location::parse(text), Err(RemoteError::BadUrl { .. })),
                "{text}"
            );
        }
    }

    #[test]
    fn file_urls_name_this_machine_only() {
        assert_eq!(
            Location::parse("file://localhost/data/a.zarr").unwrap(),
            Location::Local(PathBuf::from("/data/a.zarr"))
        );
        for text in ["file://server/data/a.zarr", "file://a.zarr"] {
            assert!(matches!(
                Location::parse(text),
                Err(RemoteError::BadUrl { .. })
            ));
        }
    }

    #[test]
    fn other_schemes_are_refused() {
        for text in ["gs://b/x.zarr", "https://host/x.zarr", "az://c/x"] {
            assert!(matches!(
                Location::parse(text),
                Err(RemoteError::UnsupportedScheme { .. })
            ));
        }
    }
}
