//! The record of lossy chunks rewritten after ingest (`cubeslab.rewrites`):
//! what `info` reports besides the ingest's own error.

use std::path::Path;

use serde_json::Value;

use super::local;
use crate::{compress::ChunkErrors, error::Result};

/// Record in the array in `dir` the error of lossy chunks written outside a
/// writer (shards built whole), as the writer records its write-backs.
pub(crate) fn record_lossy_writes(dir: &Path, errors: &ChunkErrors) -> Result<()> {
    local::update_metadata(dir, &mut |metadata| merge_rewrites(metadata, errors))
}

/// Merge `errors` into the record of rewritten lossy chunks in `metadata`
/// (`attributes.cubeslab.rewrites`); always a change.
pub(super) fn merge_rewrites(metadata: &mut Value, errors: &ChunkErrors) -> bool {
    let record = &mut metadata["attributes"]["cubeslab"]["rewrites"];
    let earlier_chunks = record["chunks"].as_u64().unwrap_or(0);
    let earlier_max = record["max_abs_error"].as_f64().unwrap_or(0.0);
    let max_abs = errors.total.max_abs_error.max(earlier_max);
    let mut merged = serde_json::json!({
        "chunks": earlier_chunks + errors.chunks,
        "max_abs_error": max_abs,
    });
    let new_worst = errors.worst_snr.as_ref().filter(|(db, _)| db.is_finite());
    let keep_earlier = match (new_worst, record["worst_chunk_snr"]["snr_db"].as_f64()) {
        (Some((db, _)), Some(earlier)) => earlier <= *db,
        (None, _) => true,
        (Some(_), None) => false,
    };
    merged["worst_chunk_snr"] = match new_worst {
        Some((db, key)) if !keep_earlier => serde_json::json!({"chunk": key, "snr_db": db}),
        _ => record["worst_chunk_snr"].clone(),
    };
    *record = merged;
    true
}
