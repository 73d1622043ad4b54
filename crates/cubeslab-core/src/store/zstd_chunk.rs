//! zstd for inner chunks with one reusable context per thread: a fresh
//! context and output buffer per small chunk (what a generic codec does)
//! cost more than the decoding (docs/reads.md). The frames are plain
//! zstd frames, as the Zarr v3 `zstd` codec specifies; zarrs and
//! zarr-python read them. Decoding into a buffer of the chunk's size also
//! bounds a frame that claims a huge content size (a "zip bomb").

use std::cell::RefCell;

use super::AlignedBuffer;

thread_local! {
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
    static COMPRESSOR: RefCell<Option<(i32, bool, zstd::bulk::Compressor<'static>)>> = const { RefCell::new(None) };
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Decompress `frame`, which must hold exactly `size` bytes, and hand the
/// result to `use_chunk`.
pub(super) fn with_decompressed<T>(
    frame: &[u8],
    size: usize,
    use_chunk: impl FnOnce(&[u8]) -> T,
) -> Result<T, String> {
    SCRATCH.with_borrow_mut(|scratch| {
        scratch.resize(size, 0);
        let got = DECOMPRESSOR.with_borrow_mut(|d| {
            if d.is_none() {
                *d = Some(zstd::bulk::Decompressor::new().map_err(|e| e.to_string())?);
            }
            d.as_mut()
                .expect("just set")
                .decompress_to_buffer(frame, scratch.as_mut_slice())
                .map_err(|e| e.to_string())
        })?;
        if got != size {
            return Err(format!("zstd frame holds {got} bytes, expected {size}"));
        }
        Ok(use_chunk(scratch))
    })
}

/// Compress `data` into a zstd frame, appended to `out`.
pub(super) fn compress_into(
    data: &[u8],
    level: i32,
    checksum: bool,
    out: &mut AlignedBuffer,
) -> Result<(), String> {
    COMPRESSOR.with_borrow_mut(|c| {
        if !matches!(c, Some((l, k, _)) if *l == level && *k == checksum) {
            let mut compressor = zstd::bulk::Compressor::new(level).map_err(|e| e.to_string())?;
            compressor
                .include_checksum(checksum)
                .map_err(|e| e.to_string())?;
            *c = Some((level, checksum, compressor));
        }
        let (_, _, compressor) = c.as_mut().expect("just set");
        let frame = compressor.compress(data).map_err(|e| e.to_string())?;
        out.extend_from_slice(&frame);
        Ok(())
    })
}
