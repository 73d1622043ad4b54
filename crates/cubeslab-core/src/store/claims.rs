//! Decompression bombs: a compressed chunk whose header claims more bytes
//! than a chunk holds is refused before anything is decompressed, so a
//! damaged or hostile file cannot make a read allocate without bound.
//!
//! zstd frames and blosc buffers state their decoded size up front; both
//! are checked here. (gzip states it only in its trailer, after the data.)

use serde_json::Value;

/// The compressor whose header the stored bytes of a chunk start with: the
/// last bytes-to-bytes codec before any checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outer {
    Zstd,
    Blosc,
    Other,
}

impl Outer {
    /// The outer compressor of a chunk codec chain (Zarr v3 JSON).
    pub fn of(codecs: &[Value]) -> Self {
        let name = |c: &Value| c.get("name").and_then(Value::as_str).map(str::to_owned);
        if codecs
            .iter()
            .any(|c| name(c).as_deref() == Some("sharding_indexed"))
        {
            // Compressed whole shards (zarr-python keeps its compressor after a sharding
            // codec): they decode to a shard and its index, not to one chunk's bytes.
            return Outer::Other;
        }
        let outer = codecs
            .iter()
            .rev()
            .filter_map(|c| c.get("name").and_then(Value::as_str))
            .find(|name| *name != "crc32c");
        match outer {
            Some("zstd") => Outer::Zstd,
            Some("blosc") => Outer::Blosc,
            _ => Outer::Other,
        }
    }

    /// Refuse `bytes` (a stored chunk, checksum included or not) whose
    /// header claims more than `limit` decoded bytes.
    pub fn check(self, bytes: &[u8], limit: usize) -> Result<(), String> {
        let claimed = match self {
            Outer::Zstd => match zstd::zstd_safe::get_frame_content_size(bytes) {
                Ok(Some(n)) => n,
                Ok(None) => return Ok(()), // size not recorded: the decoder bounds it by its buffer
                Err(_) => return Err("not a zstd frame".into()),
            },
            Outer::Blosc => match bytes.get(4..8) {
                Some(b) => u32::from_le_bytes(b.try_into().expect("4 bytes")) as u64,
                None => return Err("blosc header cut short".into()),
            },
            Outer::Other => return Ok(()),
        };
        if claimed > limit as u64 {
            Err(format!(
                "compressed chunk claims {claimed} decoded bytes; a chunk holds {limit}"
            ))
        } else {
            Ok(())
        }
    }
}
