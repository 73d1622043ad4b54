//! Where a shard belongs: the store generation, the array and the key it was
//! written for. A crc32c covers a chunk's bytes, not its place, so a shard
//! copied over another, swapped with one, or left from the store an
//! `--overwrite` replaced would read as valid numbers at the wrong place.
//!
//! The identity is a small block between a shard's last chunk and its index.
//! The Zarr v3 sharding codec only reads the bytes its index points at, so
//! other tools read such shards as they read any other; the engine checks
//! the block once per shard opened (it lies on the index's page), which is
//! why the check costs nothing per chunk.
//!
//! Block layout, little endian: `CUBESLAB` magic, a format byte (1), the
//! generation (u64), the array name and the key (each a u16 length and
//! UTF-8 bytes), a crc32c of all of that, and the block's length (u32) last,
//! so a reader finds the block's start from the index's.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

use serde_json::{Map, Value};

use super::{checksum::crc32c, group::CUBESLAB_ATTR};

/// The attribute (inside `cubeslab`) that holds a node's generation.
const GENERATION: &str = "generation";

const MAGIC: &[u8; 8] = b"CUBESLAB";
const FORMAT: u8 = 1;
/// Magic, format, generation, two lengths, crc, block length.
const FIXED: usize = 8 + 1 + 8 + 2 + 2 + 4 + 4;
/// Longer blocks are not ours (names and keys are short).
pub const MAX_IDENTITY_BLOCK: usize = 4096;
const MAX_BLOCK: usize = MAX_IDENTITY_BLOCK;

/// A fresh store generation: random, so that two stores (or a store and the
/// one that replaced it) never share one.
pub fn new_generation() -> u64 {
    // The standard library seeds each RandomState from the OS's randomness.
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.write_u32(std::process::id());
    hasher.finish()
}

/// A generation as it is written in attributes: 16 hexadecimal digits.
pub fn generation_text(generation: u64) -> String {
    format!("{generation:016x}")
}

/// A generation read back from its text.
pub fn parse_generation(text: &str) -> Option<u64> {
    (text.len() == 16)
        .then(|| u64::from_str_radix(text, 16).ok())
        .flatten()
}

/// The generation recorded in a node's attributes (`cubeslab.generation`),
/// if any: a group's, and each of its arrays'.
pub fn recorded_generation(attributes: &Map<String, Value>) -> Option<u64> {
    attributes
        .get(CUBESLAB_ATTR)?
        .get(GENERATION)?
        .as_str()
        .and_then(parse_generation)
}

/// Record `generation` in a node's attributes.
pub fn record_generation(attributes: &mut Map<String, Value>, generation: u64) {
    let entry = attributes
        .entry(CUBESLAB_ATTR)
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    entry[GENERATION] = Value::String(generation_text(generation));
}

/// Who a shard belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardIdentity {
    /// The store generation that wrote it.
    pub generation: u64,
    /// The array's name (its folder's name in the store).
    pub array: String,
    /// The shard's key.
    pub key: String,
}

impl ShardIdentity {
    /// The block to place between the shard's chunks and its index.
    pub fn encode(&self) -> Vec<u8> {
        let mut block = Vec::with_capacity(FIXED + self.array.len() + self.key.len());
        block.extend_from_slice(MAGIC);
        block.push(FORMAT);
        block.extend_from_slice(&self.generation.to_le_bytes());
        for text in [&self.array, &self.key] {
            block.extend_from_slice(&(text.len() as u16).to_le_bytes());
            block.extend_from_slice(text.as_bytes());
        }
        let sum = crc32c(&block);
        block.extend_from_slice(&sum.to_le_bytes());
        let len = (block.len() + 4) as u32;
        block.extend_from_slice(&len.to_le_bytes());
        block
    }

    /// The identity block ending at `end` of `bytes` (the start of the
    /// index), or why there is none.
    pub fn decode(bytes: &[u8], end: usize) -> Result<Self, String> {
        let none = || {
            "it carries no cubeslab identity block before its index: another tool wrote it into a \
             store that records cubeslab's generation (a copy made with xarray's open_zarr(...).to_zarr \
             carries that record along; xarray.open_dataset on the store, whose cubeslab engine leaves \
             it out, makes a copy cubeslab reads as any Zarr store)"
                .to_string()
        };
        if end < FIXED || end > bytes.len() {
            return Err(none());
        }
        let len = u32::from_le_bytes(bytes[end - 4..end].try_into().expect("4 bytes")) as usize;
        if !(FIXED..=MAX_BLOCK.min(end)).contains(&len) {
            return Err(none());
        }
        let block = &bytes[end - len..end];
        if &block[..8] != MAGIC {
            return Err(none());
        }
        if block[8] != FORMAT {
            return Err(format!(
                "its identity block has format {}, not {FORMAT}",
                block[8]
            ));
        }
        let body = &block[..len - 8];
        let stored = u32::from_le_bytes(block[len - 8..len - 4].try_into().expect("4 bytes"));
        let computed = crc32c(body);
        if stored != computed {
            return Err(format!(
                "its identity block fails its checksum (stored {stored:#010x}, computed {computed:#010x})"
            ));
        }
        let generation = u64::from_le_bytes(body[9..17].try_into().expect("8 bytes"));
        let mut at = 17;
        let mut text = || -> Result<String, String> {
            let n = body
                .get(at..at + 2)
                .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
                .ok_or_else(none)?;
            let s = body.get(at + 2..at + 2 + n).ok_or_else(none)?;
            at += 2 + n;
            String::from_utf8(s.to_vec()).map_err(|_| none())
        };
        let array = text()?;
        let key = text()?;
        Ok(Self {
            generation,
            array,
            key,
        })
    }

    /// Why a shard carrying `found` cannot be read as this one, if it cannot.
    pub fn mismatch(&self, found: &ShardIdentity) -> Option<String> {
        if found.array != self.array || found.key != self.key {
            Some(format!(
                "it was written as shard '{}' of array '{}': it was moved or copied here",
                found.key, found.array
            ))
        } else if found.generation != self.generation {
            Some(format!(
                "it was written by another store (generation {}, this store's is {})",
                generation_text(found.generation),
                generation_text(self.generation)
            ))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> ShardIdentity {
        ShardIdentity {
            generation: 0x0123_4567_89ab_cdef,
            array: "amplitude".into(),
            key: "c/1/0/2".into(),
        }
    }

    #[test]
    fn a_block_reads_back_after_chunk_bytes() {
        let mut shard = vec![7u8; 100];
        shard.extend(identity().encode());
        let end = shard.len();
        shard.extend([0u8; 20]); // the index
        assert_eq!(ShardIdentity::decode(&shard, end).unwrap(), identity());
    }

    #[test]
    fn a_shard_without_a_block_or_with_a_damaged_one_is_told_apart() {
        let plain = vec![0u8; 200];
        assert!(ShardIdentity::decode(&plain, 200)
            .unwrap_err()
            .contains("no cubeslab identity"));
        let mut shard = identity().encode();
        shard[12] ^= 1;
        let end = shard.len();
        assert!(ShardIdentity::decode(&shard, end)
            .unwrap_err()
            .contains("checksum"));
    }

    #[test]
    fn mismatches_name_what_differs() {
        let here = identity();
        let moved = ShardIdentity {
            key: "c/0/0/0".into(),
            ..identity()
        };
        assert!(here.mismatch(&moved).unwrap().contains("c/0/0/0"));
        let other_store = ShardIdentity {
            generation: 1,
            ..identity()
        };
        assert!(here
            .mismatch(&other_store)
            .unwrap()
            .contains("another store"));
        assert!(here.mismatch(&identity()).is_none());
        assert_ne!(new_generation(), new_generation());
        assert_eq!(
            parse_generation(&generation_text(here.generation)),
            Some(here.generation)
        );
    }
}
