//! Errors of object storage, each naming the URL and the operation. A
//! message never carries a credential: object_store's own errors name the
//! request, not the secret.

use crate::{
    error::{ErrorKind, PartError},
    Error,
};

/// What went wrong with a store or source on object storage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// A URL whose scheme cubeslab does not read or write.
    #[error("{url}: the {scheme}:// scheme is not supported (a local path or s3://bucket/key)")]
    UnsupportedScheme {
        /// The URL as given.
        url: String,
        /// Its scheme.
        scheme: String,
    },
    /// A URL that cannot name an object.
    #[error("{url}: not a usable URL: {why}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong.
        why: String,
    },
    /// The bucket or key does not exist.
    #[error("{url}: {operation}: not found")]
    NotFound {
        /// The object or prefix.
        url: String,
        /// What was being done.
        operation: String,
    },
    /// The server refused the credentials or the request.
    #[error("{url}: {operation}: access denied ({message}); check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or the profile")]
    Denied {
        /// The object or prefix.
        url: String,
        /// What was being done.
        operation: String,
        /// What the server said.
        message: String,
    },
    /// The server failed, went away or kept throttling after the retries.
    #[error("{url}: {operation} failed: {message}")]
    Failed {
        /// The object or prefix.
        url: String,
        /// What was being done.
        operation: String,
        /// What the client said.
        message: String,
    },
    /// A store already exists at the URL.
    #[error("{url}: a store already exists there (pass --overwrite to replace it)")]
    AlreadyExists {
        /// The store.
        url: String,
    },
    /// Objects at the URL that are not a cubeslab or Zarr store.
    #[error("{url}: holds objects that are not a Zarr store ({key}); refusing to write over them")]
    NotAStore {
        /// The prefix.
        url: String,
        /// The first such object.
        key: String,
    },
    /// `AWS_PROFILE` names a profile no file has.
    #[error("AWS_PROFILE={profile}: no such profile in {credentials} or {config}")]
    NoProfile {
        /// The profile named.
        profile: String,
        /// The credentials file read.
        credentials: String,
        /// The config file read.
        config: String,
    },
    /// An operation object storage does not offer here.
    #[error("{url}: {what} is not supported on object storage")]
    Unsupported {
        /// The store.
        url: String,
        /// What was asked.
        what: String,
    },
}

impl RemoteError {
    /// From an object_store error on `url` during `operation`.
    pub fn from_client(url: &str, operation: &str, error: object_store::Error) -> Self {
        let (url, operation) = (without_userinfo(url), operation.to_string());
        match error {
            object_store::Error::NotFound { .. } => Self::NotFound { url, operation },
            object_store::Error::PermissionDenied { source, .. }
            | object_store::Error::Unauthenticated { source, .. } => Self::Denied {
                url,
                operation,
                message: without_userinfo(&source.to_string()),
            },
            other => {
                let message = without_userinfo(&other.to_string());
                // Some servers answer a missing bucket with a plain 404 body.
                if message.contains("NoSuchBucket") {
                    Self::NotFound { url, operation }
                } else if message.contains("InvalidAccessKeyId")
                    || message.contains("SignatureDoesNotMatch")
                    || message.contains("AccessDenied")
                {
                    Self::Denied {
                        url,
                        operation,
                        message: "the server refused the request's signature".into(),
                    }
                } else {
                    Self::Failed {
                        url,
                        operation,
                        message,
                    }
                }
            }
        }
    }
}

/// `text` with the user and password of every URL in it (`scheme://user:password@host`)
/// replaced by `***`: the client's messages repeat the endpoint as given.
pub fn without_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let authority = tail
            .find(|c: char| c == '/' || c.is_whitespace())
            .unwrap_or(tail.len());
        match tail[..authority].rfind('@') {
            Some(user_end) => {
                out.push_str("***");
                out.push_str(&tail[user_end..authority]);
            }
            None => out.push_str(&tail[..authority]),
        }
        rest = &tail[authority..];
    }
    out.push_str(rest);
    out
}

impl PartError for RemoteError {
    fn kind(&self) -> ErrorKind {
        match self {
            Self::UnsupportedScheme { .. }
            | Self::BadUrl { .. }
            | Self::Unsupported { .. }
            | Self::NoProfile { .. } => ErrorKind::InvalidInput,
            Self::NotFound { .. } => ErrorKind::NotFound,
            Self::AlreadyExists { .. } | Self::NotAStore { .. } => ErrorKind::AlreadyExists,
            Self::Denied { .. } | Self::Failed { .. } => ErrorKind::Io,
        }
    }
}

impl From<RemoteError> for Error {
    fn from(error: RemoteError) -> Self {
        Error::Part(Box::new(error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_urls_are_hidden() {
        assert_eq!(
            without_userinfo(
                "GET http://admin:S3CR3T@127.0.0.1:9000/b/k failed; s3://AK:PW@bucket/x"
            ),
            "GET http://***@127.0.0.1:9000/b/k failed; s3://***@bucket/x"
        );
        assert_eq!(without_userinfo("s3://bucket/a@b"), "s3://bucket/a@b");
    }
}
