//! Large files written past the page cache (`O_DIRECT`).
//!
//! A store's shards are written once and read later, often much later.
//! Written through the page cache, every byte first needs a fresh page: on
//! a virtual machine whose free memory goes back to the host, touching it
//! again runs at a fraction of the disk's rate (0.4-0.6 GB/s here against
//! 1.7 GB/s), and a large ingest fills memory with dirty pages the kernel
//! must later write and reclaim. Direct writes hand the bytes to the device
//! from one reused buffer per thread.

use std::{
    cell::RefCell,
    fs::{File, OpenOptions},
    io,
    os::unix::fs::{FileExt, OpenOptionsExt},
    path::Path,
};

use super::aligned_buffer::{AlignedBuffer, ALIGN};

/// Files at least this large are written directly; smaller ones (metadata,
/// small shards) through the page cache, where one write costs less than
/// a device round trip.
pub const DIRECT_MIN_BYTES: usize = 1 << 20;

/// Bytes per direct write of bytes that are not in an aligned buffer: the
/// size of each thread's buffer they are copied through.
const PIECE: usize = 4 << 20;

thread_local! {
    static BUFFER: RefCell<AlignedBuffer> = RefCell::new(AlignedBuffer::default());
}

/// Whether the file system refused direct I/O (tmpfs, some network file
/// systems): the caller then writes through the page cache.
fn refused(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINVAL)
}

/// A new file at `path` open for direct writes; `None` if the file system
/// takes none.
fn create_direct(path: &Path) -> io::Result<Option<File>> {
    match OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    {
        Ok(file) => Ok(Some(file)),
        Err(e) if refused(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Write `padded` (aligned, whole blocks) at `at`; `false` if the device
/// refused or wrote less: a short write would leave an unaligned remainder,
/// which direct I/O refuses, so the caller writes the file again instead.
fn write_blocks(file: &File, padded: &[u8], at: u64) -> io::Result<bool> {
    match file.write_at(padded, at) {
        Ok(written) => Ok(written == padded.len()),
        Err(e) if refused(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Write `bytes` as the whole content of a new file at `path`, directly to
/// the device, copied through this thread's aligned buffer. `Ok(false)`
/// when the file system does not take direct writes; the file may then
/// exist, partly written, and the caller writes it again through the page
/// cache.
pub fn write_direct(path: &Path, bytes: &[u8]) -> io::Result<bool> {
    let Some(file) = create_direct(path)? else {
        return Ok(false);
    };
    BUFFER.with_borrow_mut(|buffer| {
        let mut at = 0;
        while at < bytes.len() {
            let n = PIECE.min(bytes.len() - at);
            buffer.clear();
            buffer.extend_from_slice(&bytes[at..at + n]);
            if !write_blocks(&file, buffer.padded(), at as u64)? {
                return Ok(false);
            }
            at += n;
        }
        finish(&file, bytes.len())
    })
}

/// [`write_direct`] of bytes already in an aligned buffer: no copy.
pub fn write_direct_aligned(path: &Path, buffer: &mut AlignedBuffer) -> io::Result<bool> {
    let Some(file) = create_direct(path)? else {
        return Ok(false);
    };
    let len = buffer.len();
    if !write_blocks(&file, buffer.padded(), 0)? {
        return Ok(false);
    }
    finish(&file, len)
}

/// Cut the padding of the last block off.
fn finish(file: &File, len: usize) -> io::Result<bool> {
    if !len.is_multiple_of(ALIGN) {
        file.set_len(len as u64)?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_direct_write_holds_exactly_the_bytes_at_every_length_copied_or_not() {
        let dir = tempfile::tempdir().unwrap();
        for len in [
            1,
            ALIGN - 1,
            ALIGN,
            PIECE - 3,
            PIECE,
            PIECE + 5,
            2 * PIECE + ALIGN + 1,
        ] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
            let path = dir.path().join(format!("f{len}"));
            if !write_direct(&path, &bytes).unwrap() {
                return; // this file system takes no direct writes: nothing to check
            }
            assert_eq!(std::fs::read(&path).unwrap(), bytes, "length {len}");
            let mut aligned = AlignedBuffer::default();
            aligned.extend_from_slice(&bytes);
            assert!(write_direct_aligned(&path, &mut aligned).unwrap());
            assert_eq!(
                std::fs::read(&path).unwrap(),
                bytes,
                "length {len}, aligned"
            );
        }
    }
}
