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
    alloc::{alloc_zeroed, dealloc, Layout},
    cell::RefCell,
    fs::OpenOptions,
    io,
    os::unix::fs::{FileExt, OpenOptionsExt},
    path::Path,
};

/// Files at least this large are written directly; smaller ones (metadata,
/// small shards) through the page cache, where one write costs less than
/// a device round trip.
pub const DIRECT_MIN_BYTES: usize = 1 << 20;

/// Offsets, lengths and buffer addresses of direct writes are multiples of
/// this: the largest logical block size of common devices.
const ALIGN: usize = 4096;

/// Bytes per direct write, and the size of each thread's buffer.
const PIECE: usize = 4 << 20;

/// A zeroed buffer of [`PIECE`] bytes aligned to [`ALIGN`].
struct Aligned(*mut u8);

impl Aligned {
    fn layout() -> Layout {
        Layout::from_size_align(PIECE, ALIGN).expect("a valid constant layout")
    }

    fn new() -> Self {
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(Self::layout()) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(Self::layout());
        }
        Self(ptr)
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: `self.0` points to PIECE bytes owned by this value.
        unsafe { std::slice::from_raw_parts_mut(self.0, PIECE) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.0, Self::layout()) }
    }
}

thread_local! {
    static BUFFER: RefCell<Option<Aligned>> = const { RefCell::new(None) };
}

/// Whether the file system refused direct I/O (tmpfs, some network file
/// systems): the caller then writes through the page cache.
fn refused(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINVAL)
}

/// Write `bytes` as the whole content of a new file at `path`, directly to
/// the device. `Ok(false)` when the file system does not take direct
/// writes; the file may then exist, partly written, and the caller writes
/// it again through the page cache.
pub fn write_direct(path: &Path, bytes: &[u8]) -> io::Result<bool> {
    let file = match OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if refused(&e) => return Ok(false),
        Err(e) => return Err(e),
    };
    BUFFER.with(|cell| {
        let mut slot = cell.borrow_mut();
        let buffer = slot.get_or_insert_with(Aligned::new).bytes();
        let mut at = 0;
        while at < bytes.len() {
            let n = PIECE.min(bytes.len() - at);
            buffer[..n].copy_from_slice(&bytes[at..at + n]);
            let padded = n.next_multiple_of(ALIGN);
            buffer[n..padded].fill(0);
            // A short write would leave an unaligned remainder, which direct
            // I/O refuses: the caller writes the file again instead.
            match file.write_at(&buffer[..padded], at as u64) {
                Ok(written) if written == padded => {}
                Ok(_) => return Ok(false),
                Err(e) if refused(&e) => return Ok(false),
                Err(e) => return Err(e),
            }
            at += n;
        }
        if !bytes.len().is_multiple_of(ALIGN) {
            file.set_len(bytes.len() as u64)?;
        }
        Ok(true)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_direct_write_holds_exactly_the_bytes_at_every_length() {
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
        }
    }
}
