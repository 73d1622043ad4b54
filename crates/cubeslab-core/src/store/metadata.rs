//! Reading nodes' `zarr.json` documents, and the errors that name them.

use std::{fs, path::Path};

use serde_json::Value;

use super::{staging_path, StoreError};
use crate::{error::Result, Error};

/// Read and parse a `zarr.json` file.
pub fn read_metadata(dir: &Path) -> Result<Value> {
    let file = dir.join("zarr.json");
    let text = match fs::read(&file) {
        Ok(t) => t,
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.raw_os_error() == Some(libc::ENOTDIR) =>
        {
            return Err(unfinished(dir)
                .or_else(|| zarr_v2(dir))
                .unwrap_or_else(|| StoreError::NotFound {
                    path: dir.to_path_buf(),
                })
                .into())
        }
        Err(e) => return Err(Error::io(&file, e)),
    };
    parse_metadata(&text).map_err(|e| {
        StoreError::Metadata {
            path: file,
            message: format!("not valid JSON: {e}"),
        }
        .into()
    })
}

/// Parse a `zarr.json` document. zarr-python writes non-finite attribute
/// values as the bare words `NaN`, `Infinity` and `-Infinity`, which JSON
/// has not; they are read as the strings Zarr v3 names such fill values by.
pub fn parse_metadata(text: &[u8]) -> serde_json::Result<Value> {
    serde_json::from_slice(text).or_else(|error| {
        let named = name_non_finite_numbers(text);
        if named.len() == text.len() {
            return Err(error); // no such word: the document is broken some other way
        }
        serde_json::from_slice(&named)
    })
}

/// `text` with every `NaN`, `Infinity` and `-Infinity` outside a string
/// put in quotes.
fn name_non_finite_numbers(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 16);
    let (mut in_string, mut escaped) = (false, false);
    let mut i = 0;
    while i < text.len() {
        let byte = text[i];
        if in_string {
            out.push(byte);
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        let word = [&b"-Infinity"[..], b"Infinity", b"NaN"]
            .into_iter()
            .find(|w| text[i..].starts_with(w));
        match (byte, word) {
            (b'"', _) => {
                in_string = true;
                out.push(byte);
                i += 1;
            }
            (_, Some(word)) => {
                out.push(b'"');
                out.extend_from_slice(word);
                out.push(b'"');
                i += word.len();
            }
            _ => {
                out.push(byte);
                i += 1;
            }
        }
    }
    out
}

/// Why nothing is at `dir` if a store there, or the store holding it, is
/// still being written (or was stopped) under its staging name.
fn unfinished(dir: &Path) -> Option<StoreError> {
    let store = [Some(dir), dir.parent()]
        .into_iter()
        .flatten()
        .find(|p| staging_path(p).join("zarr.json").is_file())?;
    Some(StoreError::Unfinished {
        path: store.to_path_buf(),
        staging: staging_path(store),
    })
}

/// A Zarr v2 node at `dir` (its metadata in `.zgroup` or `.zarray`): named
/// as such, rather than "no store", since it is one in another version.
fn zarr_v2(dir: &Path) -> Option<StoreError> {
    let file = [".zarray", ".zgroup"]
        .into_iter()
        .find(|name| dir.join(name).is_file())?;
    Some(StoreError::Unsupported {
        path: dir.to_path_buf(),
        what: format!(
            "a Zarr v2 {} ({file}); cubeslab reads Zarr v3 (xarray writes it with to_zarr(..., zarr_format=3))",
            if file == ".zarray" { "array" } else { "group" }
        ),
    })
}

pub(super) fn metadata_error(dir: &Path, message: impl Into<String>) -> Error {
    StoreError::Metadata {
        path: dir.join("zarr.json"),
        message: message.into(),
    }
    .into()
}

pub(super) fn u64_list(v: Option<&Value>) -> Option<Vec<u64>> {
    v?.as_array()?.iter().map(Value::as_u64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_words_outside_strings_are_named() {
        let text =
            br#"{"a": NaN, "b": [Infinity, -Infinity, 1.5], "c": "NaN \" Infinity", "d": 2}"#;
        let value = parse_metadata(text).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"a": "NaN", "b": ["Infinity", "-Infinity", 1.5], "c": "NaN \" Infinity", "d": 2})
        );
        assert!(parse_metadata(br#"{"a": NaX}"#).is_err());
    }
}
