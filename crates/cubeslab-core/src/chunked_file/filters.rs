//! The HDF5 filter pipeline, undone: a chunk's stored bytes back to its
//! elements. Filters are listed in the order they were applied on writing
//! and undone in reverse; bit `i` of a chunk's filter mask says filter `i`
//! was skipped for that chunk.

use std::{borrow::Cow, cell::RefCell};

/// HDF5's registered filter identifiers for the filters this reader undoes.
pub mod id {
    /// zlib's deflate (`H5Z_FILTER_DEFLATE`).
    pub const DEFLATE: u32 = 1;
    /// Byte shuffle (`H5Z_FILTER_SHUFFLE`).
    pub const SHUFFLE: u32 = 2;
    /// Fletcher-32 checksum (`H5Z_FILTER_FLETCHER32`).
    pub const FLETCHER32: u32 = 3;
    /// Blosc 1 (registered plugin 32001, as hdf5plugin writes it).
    pub const BLOSC: u32 = 32001;
    /// LZ4 in HDF5's block framing (registered plugin 32004).
    pub const LZ4: u32 = 32004;
    /// Zstandard (registered plugin 32015).
    pub const ZSTD: u32 = 32015;
}

/// One filter of a dataset's pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    /// zlib stream.
    Deflate,
    /// Bytes of each element grouped by significance; the element size.
    Shuffle(usize),
    /// A 4-byte Fletcher-32 checksum after the data.
    Fletcher32,
    /// A Blosc 1 frame.
    Blosc,
    /// LZ4 blocks in HDF5's framing.
    Lz4,
    /// A Zstandard frame.
    Zstd,
}

impl Filter {
    /// The filter with HDF5 identifier `id` and client data `values`, or
    /// `None` when this reader does not undo it.
    pub fn from_hdf5(id: u32, values: &[u32], element_size: usize) -> Option<Filter> {
        Some(match id {
            id::DEFLATE => Filter::Deflate,
            // The element size is the first client value (HDF5 sets it from the type).
            id::SHUFFLE => Filter::Shuffle(values.first().map_or(element_size, |&v| v as usize)),
            id::FLETCHER32 => Filter::Fletcher32,
            id::BLOSC => Filter::Blosc,
            id::LZ4 => Filter::Lz4,
            id::ZSTD => Filter::Zstd,
            _ => return None,
        })
    }
}

/// The filters of a dataset, in the order they were applied.
#[derive(Debug, Clone, Default)]
pub struct Pipeline {
    filters: Vec<Filter>,
}

impl Pipeline {
    /// A pipeline of `filters`, in the order they were applied.
    pub fn new(filters: Vec<Filter>) -> Self {
        Self { filters }
    }

    /// Whether a chunk with `mask` is stored as plain elements.
    pub fn passes_through(&self, mask: u32) -> bool {
        (0..self.filters.len()).all(|i| skipped(mask, i))
    }

    /// Undo the filters not masked out, last applied first. `size` is the
    /// chunk's decoded size; `verify` checks Fletcher-32 sums.
    pub fn decode<'a>(
        &self,
        stored: &'a [u8],
        mask: u32,
        size: usize,
        verify: bool,
    ) -> Result<Cow<'a, [u8]>, String> {
        let mut data = Cow::Borrowed(stored);
        for (i, filter) in self.filters.iter().enumerate().rev() {
            if skipped(mask, i) {
                continue;
            }
            data = match *filter {
                Filter::Fletcher32 => {
                    let body = checked_fletcher32(&data, verify)?;
                    match data {
                        Cow::Borrowed(all) => Cow::Borrowed(&all[..body]),
                        Cow::Owned(mut all) => {
                            all.truncate(body);
                            Cow::Owned(all)
                        }
                    }
                }
                Filter::Shuffle(element) => Cow::Owned(unshuffle(&data, element)),
                Filter::Deflate => Cow::Owned(inflate(&data, size)?),
                Filter::Zstd => Cow::Owned(
                    zstd::bulk::decompress(&data, size).map_err(|e| format!("zstd: {e}"))?,
                ),
                Filter::Lz4 => Cow::Owned(lz4_blocks(&data)?),
                Filter::Blosc => Cow::Owned(blosc(&data)?),
            };
        }
        if data.len() != size {
            return Err(format!(
                "decodes to {} bytes, the chunk holds {size}",
                data.len()
            ));
        }
        Ok(data)
    }
}

fn skipped(mask: u32, filter: usize) -> bool {
    filter < 32 && mask & (1 << filter) != 0
}

thread_local! {
    /// libdeflate's decompressor holds tables worth reusing across chunks.
    static INFLATER: RefCell<libdeflater::Decompressor> = RefCell::new(libdeflater::Decompressor::new());
}

/// A zlib stream decoded whole into a buffer of the chunk's size, grown if
/// it holds more (libdeflate decodes whole buffers, about twice as fast as
/// zlib's streaming inflate).
fn inflate(data: &[u8], size: usize) -> Result<Vec<u8>, String> {
    let mut out = vec![0u8; size.max(64)];
    loop {
        match INFLATER.with(|d| d.borrow_mut().zlib_decompress(data, &mut out)) {
            Ok(n) => {
                out.truncate(n);
                return Ok(out);
            }
            Err(libdeflater::DecompressionError::InsufficientSpace) if out.len() < 1 << 36 => {
                out.resize(out.len() * 2, 0);
            }
            Err(e) => return Err(format!("deflate: {e}")),
        }
    }
}

/// Undo the shuffle filter: the first bytes of every element come first in
/// the stored data, then every second byte, and so on; bytes past the last
/// whole element are stored as they are.
fn unshuffle(data: &[u8], element: usize) -> Vec<u8> {
    if element <= 1 || data.len() < element {
        return data.to_vec();
    }
    let n = data.len() / element;
    let mut out = vec![0u8; data.len()];
    for b in 0..element {
        let plane = &data[b * n..(b + 1) * n];
        for (i, &byte) in plane.iter().enumerate() {
            out[i * element + b] = byte;
        }
    }
    out[n * element..].copy_from_slice(&data[n * element..]);
    out
}

/// The length of the data before the 4-byte checksum, after checking the
/// sum when `verify`. HDF5 stores the sum little-endian; files written by
/// HDF5 1.6 on little-endian machines hold it with each 16-bit half's bytes
/// swapped, which HDF5 still accepts, and so does this.
fn checked_fletcher32(data: &[u8], verify: bool) -> Result<usize, String> {
    let Some(body) = data.len().checked_sub(4) else {
        return Err(format!(
            "{} bytes cannot hold a Fletcher-32 checksum",
            data.len()
        ));
    };
    if verify {
        let stored = u32::from_le_bytes(data[body..].try_into().expect("4 bytes"));
        let sum = fletcher32(&data[..body]);
        let swapped = ((sum & 0x00ff_00ff) << 8) | ((sum >> 8) & 0x00ff_00ff);
        if stored != sum && stored != swapped {
            return Err(format!(
                "Fletcher-32 checksum mismatch: stored {stored:#010x}, computed {sum:#010x}"
            ));
        }
    }
    Ok(body)
}

/// HDF5's Fletcher-32: 16-bit big-endian words (a last odd byte as the
/// high byte of a word), both sums folded to 16 bits every 360 words.
pub fn fletcher32(data: &[u8]) -> u32 {
    let fold = |s: u32| (s & 0xffff) + (s >> 16);
    let (mut sum1, mut sum2) = (0u32, 0u32);
    let words = data.chunks_exact(2);
    let odd = words.remainder().first().copied();
    let words: Vec<&[u8]> = words.collect();
    for block in words.chunks(360) {
        for w in block {
            sum1 += u32::from(u16::from_be_bytes([w[0], w[1]]));
            sum2 += sum1;
        }
        sum1 = fold(sum1);
        sum2 = fold(sum2);
    }
    if let Some(byte) = odd {
        sum1 += u32::from(byte) << 8;
        sum2 += sum1;
        sum1 = fold(sum1);
        sum2 = fold(sum2);
    }
    (fold(sum2) << 16) | fold(sum1)
}

/// HDF5's LZ4 framing: the decoded size (u64, big-endian), the block size
/// (u32), then per block its stored size (u32) and bytes — a block whose
/// stored size equals its decoded size is kept uncompressed.
fn lz4_blocks(data: &[u8]) -> Result<Vec<u8>, String> {
    let short = || "lz4: the framing is cut short".to_string();
    let total = u64::from_be_bytes(data.get(..8).ok_or_else(short)?.try_into().expect("8"));
    let block = u32::from_be_bytes(data.get(8..12).ok_or_else(short)?.try_into().expect("4"));
    let total = usize::try_from(total).map_err(|_| short())?;
    if block == 0 && total > 0 {
        return Err("lz4: block size 0".into());
    }
    let mut out = vec![0u8; total];
    let (mut at, mut written) = (12usize, 0usize);
    while written < total {
        let want = (block as usize).min(total - written);
        let stored = u32::from_be_bytes(
            data.get(at..at + 4)
                .ok_or_else(short)?
                .try_into()
                .expect("4"),
        ) as usize;
        at += 4;
        let bytes = data.get(at..at + stored).ok_or_else(short)?;
        let target = &mut out[written..written + want];
        if stored == want {
            target.copy_from_slice(bytes);
        } else {
            let n =
                lz4_flex::block::decompress_into(bytes, target).map_err(|e| format!("lz4: {e}"))?;
            if n != want {
                return Err(format!("lz4: a block decodes to {n} bytes, not {want}"));
            }
        }
        at += stored;
        written += want;
    }
    Ok(out)
}

fn blosc(data: &[u8]) -> Result<Vec<u8>, String> {
    let mut size = 0usize;
    // SAFETY: validate reads at most `data.len()` bytes of `data`.
    let valid =
        unsafe { blosc_src::blosc_cbuffer_validate(data.as_ptr().cast(), data.len(), &mut size) };
    if valid != 0 {
        return Err("blosc: not a valid Blosc frame".into());
    }
    let mut out = vec![0u8; size];
    // SAFETY: the frame was validated against `data.len()`, and `out` holds
    // the `size` bytes it decodes to. The context form keeps no global state.
    let n = unsafe {
        blosc_src::blosc_decompress_ctx(data.as_ptr().cast(), out.as_mut_ptr().cast(), size, 1)
    };
    if n < 0 || n as usize != size {
        return Err(format!("blosc: decoding failed ({n})"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fletcher32_of_known_inputs() {
        // By hand: "abcde" as words 0x6162, 0x6364 and the odd byte 0x65 as 0x6500.
        let (s1, s2) = (0x6162u32, 0x6162u32);
        let (s1, s2) = (s1 + 0x6364, s2 + s1 + 0x6364);
        let (s1, s2) = (s1 + 0x6500, s2 + s1 + 0x6500);
        let fold = |s: u32| (s & 0xffff) + (s >> 16);
        let expected = (fold(fold(s2)) << 16) | fold(fold(s1));
        assert_eq!(fletcher32(b"abcde"), expected);
        assert_eq!(fletcher32(b""), 0);
    }

    #[test]
    fn shuffle_round_trip_keeps_the_tail() {
        let plain: Vec<u8> = (0..23u8).collect();
        let element = 4;
        let n = plain.len() / element;
        let mut shuffled = vec![0u8; plain.len()];
        for i in 0..n {
            for b in 0..element {
                shuffled[b * n + i] = plain[i * element + b];
            }
        }
        shuffled[n * element..].copy_from_slice(&plain[n * element..]);
        assert_eq!(unshuffle(&shuffled, element), plain);
    }

    #[test]
    fn masked_filters_are_skipped_and_sizes_checked() {
        let pipeline = Pipeline::new(vec![Filter::Shuffle(4), Filter::Deflate]);
        assert!(pipeline.passes_through(0b11));
        assert!(!pipeline.passes_through(0b01));
        let raw = [1u8, 2, 3, 4];
        assert_eq!(&*pipeline.decode(&raw, 0b11, 4, true).unwrap(), &raw);
        assert!(pipeline.decode(&raw, 0b11, 8, true).is_err());
        assert!(pipeline
            .decode(&raw, 0, 4, true)
            .unwrap_err()
            .contains("deflate"));
    }

    #[test]
    fn lz4_framing_decodes_raw_and_compressed_blocks() {
        let plain: Vec<u8> = (0..100u32).flat_map(|i| (i % 7).to_le_bytes()).collect();
        let mut framed = (plain.len() as u64).to_be_bytes().to_vec();
        framed.extend(256u32.to_be_bytes());
        for (k, block) in plain.chunks(256).enumerate() {
            let bytes = if k == 0 {
                lz4_flex::block::compress(block)
            } else {
                block.to_vec()
            };
            framed.extend((bytes.len() as u32).to_be_bytes());
            framed.extend(bytes);
        }
        assert_eq!(lz4_blocks(&framed).unwrap(), plain);
        assert!(lz4_blocks(&framed[..framed.len() - 1]).is_err());
    }
}
