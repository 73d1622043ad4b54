//! Each codec's encode and decode speed and ratio on the sample data.

use std::{path::Path, time::Instant};

use serde_json::Value;

use super::{median_time, Sample};
use crate::plan::profile::CodecRate;
use crate::plan::stored::dir_bytes;

use super::engine::read_window;
use crate::{
    compress::Compression,
    config::Parallelism,
    error::Result,
    store::{ArraySpec, ReadOptions, StoreError, ZarrArray},
    window::Window,
};

/// A codec's ratio and speed on the sample, through the engine's own
/// write and read paths (so the decode rate is the one reads will see).
pub(super) fn measure_codec(
    dir: &Path,
    compression: &Compression,
    sample: &Sample<'_>,
) -> Result<CodecRate> {
    let name = compression.name();
    let codecs = compression
        .codecs(sample.dtype)
        .map_err(|what| StoreError::Unsupported {
            path: dir.to_path_buf(),
            what,
        })?;
    let inner = [16u64, 16, 16].map(|c| c.min(sample.shape[0]).max(1));
    let spec = |codecs: Vec<Value>| ArraySpec {
        shape: sample.shape.to_vec(),
        dtype: sample.dtype,
        chunk_shape: sample.shape.to_vec(),
        inner_chunks: Some(
            inner
                .iter()
                .zip(&sample.shape)
                .map(|(&c, &n)| c.min(n))
                .collect(),
        ),
        codecs,
        dimension_names: vec!["a".into(), "b".into(), "c".into()],
        fill_value: sample.dtype.default_fill(),
        attributes: Default::default(),
        generation: None,
    };
    let one = Parallelism::resolve(Some(1), None);
    let options = ReadOptions {
        parallelism: one,
        verify: true,
    };
    let full = Window::full(&sample.shape);
    let logical = sample.bytes.len() as f64;
    // Each run opens the array afresh: an open array keeps decoded chunks,
    // and a second read of the same chunks would only measure that cache.
    let time_read =
        |path: &Path| median_time(9, || read_window(&ZarrArray::open(path)?, &full, &options));

    let raw_path = dir.join(format!("codec-raw-{}", sanitize(&name)));
    let raw = ZarrArray::create(&raw_path, &spec(Vec::new()))?;
    raw.write_array(sample.bytes, one)?;
    let raw_time = time_read(&raw_path)?;

    let path = dir.join(format!("codec-{}", sanitize(&name)));
    let array = ZarrArray::create(&path, &spec(codecs))?;
    let start = Instant::now();
    array.write_array(sample.bytes, one)?;
    let encode_time = start.elapsed().as_secs_f64();
    let stored = dir_bytes(&path.join("c")) as f64;
    let decode_time = time_read(&path)?;
    let _ = std::fs::remove_dir_all(&raw_path);
    let _ = std::fs::remove_dir_all(&path);
    Ok(CodecRate {
        name,
        ratio: logical / stored.max(1.0),
        decode: logical / (decode_time - raw_time).max(1e-6),
        encode: logical / encode_time.max(1e-6),
    })
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}
