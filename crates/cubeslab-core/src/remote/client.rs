//! Connections to S3-compatible storage: one client per bucket and options,
//! kept for the process, and the runtime their requests run on.
//!
//! Credentials, region and endpoint come as the AWS tools take them: the
//! `AWS_*` environment variables (`AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`,
//! `AWS_ENDPOINT_URL`), the profile files for what those leave unset
//! (`profile.rs`), then `storage_options` as fsspec users pass them
//! (`key`, `secret`, `token`, `region`, `endpoint_url`, or any object_store
//! S3 option name). An `http://` endpoint is allowed because it was asked
//! for. Failed requests (a server gone, a 503 SlowDown) are retried with
//! exponential backoff, `AWS_MAX_ATTEMPTS` times in all.

use std::{
    collections::{BTreeMap, HashMap},
    future::Future,
    sync::{Arc, Mutex, OnceLock},
    time::Duration,
};

use object_store::{
    aws::{AmazonS3Builder, AmazonS3ConfigKey},
    BackoffConfig, ObjectStore, RetryConfig,
};

use super::{error::without_userinfo, profile::profile_settings, RemoteError, S3Url};

/// Options of a connection, by name (see the module's documentation).
pub type StorageOptions = BTreeMap<String, String>;

/// Requests made for one operation before it fails, unless
/// `AWS_MAX_ATTEMPTS` says otherwise.
pub const MAX_ATTEMPTS_DEFAULT: usize = 5;

/// Time after which a failing request is no longer retried.
const RETRY_TIMEOUT: Duration = Duration::from_secs(60);

/// fsspec's names for the options object_store names otherwise.
const FSSPEC_NAMES: [(&str, &str); 6] = [
    ("key", "aws_access_key_id"),
    ("secret", "aws_secret_access_key"),
    ("token", "aws_session_token"),
    ("region", "aws_region"),
    ("region_name", "aws_region"),
    ("endpoint_url", "aws_endpoint"),
];

/// The runtime every request runs on.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("cubeslab-s3")
            .enable_all()
            .build()
            .expect("a tokio runtime starts")
    })
}

/// Run `future` to its end on the requests' runtime, from a thread that is
/// not one of its own.
pub(super) fn block_on<F: Future>(future: F) -> F::Output {
    runtime().block_on(future)
}

/// The client for `url`'s bucket with `options` (made once per process).
pub fn connect(url: &S3Url, options: &StorageOptions) -> Result<Arc<dyn ObjectStore>, RemoteError> {
    static CLIENTS: OnceLock<Mutex<HashMap<String, Arc<dyn ObjectStore>>>> = OnceLock::new();
    // The environment is part of a connection's identity: a changed endpoint or key is a new client.
    let environment: BTreeMap<String, String> = std::env::vars()
        .filter(|(k, _)| k.starts_with("AWS_"))
        .collect();
    let id = format!("{}\u{0}{options:?}\u{0}{environment:?}", url.bucket);
    let clients = CLIENTS.get_or_init(Default::default);
    if let Some(client) = clients.lock().expect("no panic holds it").get(&id) {
        return Ok(client.clone());
    }
    let client: Arc<dyn ObjectStore> = Arc::new(build(url, options)?);
    clients
        .lock()
        .expect("no panic holds it")
        .insert(id, client.clone());
    Ok(client)
}

/// `http[s]://[user@]host[:port][/path]`: what object_store can send a
/// request to.
fn is_http_url(text: &str) -> bool {
    let Some(rest) = text
        .strip_prefix("http://")
        .or_else(|| text.strip_prefix("https://"))
    else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let (host, port) = match host_port.rfind(':') {
        Some(i) if !host_port[i..].contains(']') => (&host_port[..i], Some(&host_port[i + 1..])),
        _ => (host_port, None),
    };
    !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-_[]:".contains(c))
        && port.is_none_or(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        && !text.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// The endpoint requests for `url` go to, as the environment, the AWS
/// profile and `options` set it ("" for AWS's own).
pub fn endpoint(url: &S3Url, options: &StorageOptions) -> Result<String, RemoteError> {
    Ok(configured(url, options)?
        .get_config_value(&AmazonS3ConfigKey::Endpoint)
        .unwrap_or_default())
}

/// The client's settings for `url`: the environment's, the AWS profile's
/// where those are silent, and `options` over both.
fn configured(url: &S3Url, options: &StorageOptions) -> Result<AmazonS3Builder, RemoteError> {
    let mut builder = AmazonS3Builder::from_env().with_bucket_name(&url.bucket);
    for (key, value) in profile_settings()? {
        if builder.get_config_value(&key).is_none() {
            builder = builder.with_config(key, value);
        }
    }
    for (name, value) in options {
        let name = FSSPEC_NAMES
            .iter()
            .find(|(fsspec, _)| fsspec == name)
            .map_or(name.as_str(), |(_, ours)| ours);
        let key: AmazonS3ConfigKey =
            name.to_ascii_lowercase()
                .parse()
                .map_err(|_| RemoteError::BadUrl {
                    url: url.to_string(),
                    why: format!("unknown storage option {name:?}"),
                })?;
        builder = builder.with_config(key, value);
    }
    Ok(builder)
}

fn build(
    url: &S3Url,
    options: &StorageOptions,
) -> Result<object_store::aws::AmazonS3, RemoteError> {
    let bad = |why: String| RemoteError::BadUrl {
        url: url.to_string(),
        why,
    };
    let mut builder = configured(url, options)?;
    let endpoint = builder
        .get_config_value(&AmazonS3ConfigKey::Endpoint)
        .unwrap_or_default();
    // object_store panics on a request to a malformed endpoint or region.
    if !endpoint.is_empty() && !is_http_url(&endpoint) {
        return Err(bad(format!(
            "the endpoint {:?} is not an http:// or https:// URL with a host",
            without_userinfo(&endpoint)
        )));
    }
    if endpoint.starts_with("http://") {
        builder = builder.with_allow_http(true);
    }
    match builder.get_config_value(&AmazonS3ConfigKey::Region) {
        None => builder = builder.with_region("us-east-1"),
        Some(region)
            if region.is_empty()
                || !region
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-') =>
        {
            return Err(bad(format!("the region {region:?} is not a region name")));
        }
        Some(_) => {}
    }
    let attempts = std::env::var("AWS_MAX_ATTEMPTS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(MAX_ATTEMPTS_DEFAULT)
        .max(1);
    builder = builder.with_retry(RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            base: 2.0,
        },
        max_retries: attempts - 1,
        retry_timeout: RETRY_TIMEOUT,
    });
    builder.build().map_err(|e| bad(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_object_store_can_reach_are_told_apart() {
        for good in [
            "http://127.0.0.1:9000",
            "https://s3.example.org/base",
            "http://[::1]:9000",
            "http://user:pw@host:1",
        ] {
            assert!(is_http_url(good), "{good}");
        }
        for bad in [
            "localhost:9000",
            "http://",
            "http://a b",
            "http://u:pw@",
            "http://host:",
            "http://host:x1",
            "ftp://host",
        ] {
            assert!(!is_http_url(bad), "{bad}");
        }
    }
}
