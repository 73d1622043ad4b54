//! AWS profiles, as the AWS command line and SDKs read them: the profile
//! named by `AWS_PROFILE` (else `default`) in the shared credentials file
//! (`AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`, sections
//! `[name]`) and the config file (`AWS_CONFIG_FILE`, else `~/.aws/config`,
//! sections `[profile name]`, or `[default]`). object_store reads only the
//! environment, so the profile's keys, session token, region and endpoint
//! are given to it here, below the environment and the storage options.

use std::{collections::HashMap, path::PathBuf};

use object_store::aws::AmazonS3ConfigKey;

use super::RemoteError;

/// A profile's settings object_store takes, by the name the files use.
const SETTINGS: [(&str, AmazonS3ConfigKey); 5] = [
    ("aws_access_key_id", AmazonS3ConfigKey::AccessKeyId),
    ("aws_secret_access_key", AmazonS3ConfigKey::SecretAccessKey),
    ("aws_session_token", AmazonS3ConfigKey::Token),
    ("region", AmazonS3ConfigKey::Region),
    ("endpoint_url", AmazonS3ConfigKey::Endpoint),
];

/// The settings of the profile in use; empty when no file has it, unless
/// `AWS_PROFILE` names it (then an error naming the profile and the files).
pub fn profile_settings() -> Result<Vec<(AmazonS3ConfigKey, String)>, RemoteError> {
    let named = std::env::var("AWS_PROFILE").ok().filter(|p| !p.is_empty());
    let profile = named.clone().unwrap_or_else(|| "default".into());
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let file = |variable: &str, default: &str| {
        std::env::var_os(variable).map_or_else(|| home.join(".aws").join(default), PathBuf::from)
    };
    let credentials = file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
    let config = file("AWS_CONFIG_FILE", "config");
    let config_section = if profile == "default" {
        profile.clone()
    } else {
        format!("profile {profile}")
    };
    // The credentials file wins over the config file, as in the AWS tools.
    let mut found: Option<HashMap<String, String>> = None;
    for (path, section) in [(&config, &config_section), (&credentials, &profile)] {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        if let Some(values) = ini_section(&text, section) {
            found.get_or_insert_with(HashMap::new).extend(values);
        }
    }
    let Some(values) = found else {
        return match named {
            Some(profile) => Err(RemoteError::NoProfile {
                profile,
                credentials: credentials.display().to_string(),
                config: config.display().to_string(),
            }),
            None => Ok(Vec::new()),
        };
    };
    Ok(SETTINGS
        .iter()
        .filter_map(|(name, key)| values.get(*name).map(|v| (*key, v.clone())))
        .collect())
}

/// The `key = value` lines of `[section]` in an INI text (`#` and `;` start
/// comments); `None` when there is no such section.
fn ini_section(text: &str, section: &str) -> Option<HashMap<String, String>> {
    let mut values = None;
    let mut inside = false;
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = name.trim() == section;
            if inside {
                values.get_or_insert_with(HashMap::new);
            }
        } else if inside {
            if let (Some(map), Some((key, value))) = (values.as_mut(), line.split_once('=')) {
                let map: &mut HashMap<String, String> = map;
                map.insert(key.trim().to_ascii_lowercase(), value.trim().to_string());
            }
        }
    }
    values
}

#[cfg(test)]
mod tests {
    use super::ini_section;

    #[test]
    fn a_section_is_read_and_others_are_not() {
        let text = "[default]\naws_access_key_id = A\n# note\n[profile lab]\nregion=eu-west-1\n ENDPOINT_URL = http://x:9000 \n";
        let lab = ini_section(text, "profile lab").unwrap();
        assert_eq!(lab["region"], "eu-west-1");
        assert_eq!(lab["endpoint_url"], "http://x:9000");
        assert!(!lab.contains_key("aws_access_key_id"));
        assert!(ini_section(text, "other").is_none());
    }
}
