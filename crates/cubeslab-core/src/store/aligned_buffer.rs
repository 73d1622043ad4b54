//! Byte buffers whose memory suits direct I/O (page-aligned, whole pages),
//! and a pool that hands finished ones to the next shard.
//!
//! A shard is built in such a buffer in its final byte layout and written
//! to the device from it, with no copy. Reusing the buffers matters on a
//! virtual machine: memory freed goes back to the host, and touching fresh
//! pages costs more than filling them (docs/writes.md).

use std::{
    alloc::{alloc, dealloc, Layout},
    ops::{Deref, DerefMut},
    ptr::NonNull,
    sync::Mutex,
};

/// Addresses and lengths of direct writes are multiples of this: the
/// largest logical block size of common devices.
pub const ALIGN: usize = 4096;

/// Buffers this large or larger start on a huge-page boundary and ask for
/// huge pages: touching them first then faults once per 2 MiB, not per
/// 4 KiB page, which on a virtual machine was a seventh of building a shard.
const HUGE_PAGE: usize = 2 << 20;

/// A growable byte buffer whose storage starts on an [`ALIGN`] boundary
/// and spans whole multiples of it.
pub struct AlignedBuffer {
    ptr: NonNull<u8>,
    len: usize,
    capacity: usize,
    /// Bytes below this were written at some time (stale, but initialised).
    written: usize,
}

// SAFETY: the buffer owns its allocation, like a `Vec<u8>`.
unsafe impl Send for AlignedBuffer {}
// SAFETY: shared access only reads.
unsafe impl Sync for AlignedBuffer {}

impl Default for AlignedBuffer {
    fn default() -> Self {
        Self {
            ptr: NonNull::dangling(),
            len: 0,
            capacity: 0,
            written: 0,
        }
    }
}

impl AlignedBuffer {
    /// An empty buffer with room for at least `bytes`.
    pub fn with_capacity(bytes: usize) -> Self {
        let mut buffer = Self::default();
        buffer.reserve(bytes);
        buffer
    }

    fn layout(capacity: usize) -> Layout {
        let align = if capacity >= HUGE_PAGE {
            HUGE_PAGE
        } else {
            ALIGN
        };
        Layout::from_size_align(capacity, align).expect("capacities are far below isize::MAX")
    }

    /// Bytes the buffer holds without growing: a multiple of [`ALIGN`].
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Make it empty, keeping its memory.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Room for `additional` more bytes.
    pub fn reserve(&mut self, additional: usize) {
        let needed = self.len + additional;
        if needed <= self.capacity {
            return;
        }
        let capacity = needed.max(self.capacity * 2).next_multiple_of(ALIGN);
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc(Self::layout(capacity)) };
        let Some(ptr) = NonNull::new(ptr) else {
            std::alloc::handle_alloc_error(Self::layout(capacity));
        };
        if capacity >= HUGE_PAGE {
            // SAFETY: advice only, on memory this buffer owns; refused advice changes nothing.
            unsafe { libc::madvise(ptr.as_ptr().cast(), capacity, libc::MADV_HUGEPAGE) };
        }
        if self.capacity > 0 {
            // SAFETY: both allocations hold at least `written` bytes and do not overlap.
            unsafe {
                std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), ptr.as_ptr(), self.written);
                dealloc(self.ptr.as_ptr(), Self::layout(self.capacity));
            }
        }
        self.ptr = ptr;
        self.capacity = capacity;
    }

    /// Append `bytes`.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.reserve(bytes.len());
        // SAFETY: reserved above; the source is a distinct borrow.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.ptr.as_ptr().add(self.len),
                bytes.len(),
            )
        };
        self.len += bytes.len();
        self.written = self.written.max(self.len);
    }

    /// Grow or shrink to `len` bytes. Bytes added keep whatever an earlier
    /// use of the buffer left there (zero where there was none): for a
    /// caller that overwrites them, which then costs no extra pass.
    pub fn resize_stale(&mut self, len: usize) {
        if len > self.written {
            self.reserve(len - self.len);
            // SAFETY: inside the capacity just reserved.
            unsafe {
                std::ptr::write_bytes(self.ptr.as_ptr().add(self.written), 0, len - self.written)
            };
            self.written = len;
        }
        self.len = len;
    }

    /// The bytes followed by zeros up to the next multiple of [`ALIGN`]:
    /// what a direct write of them hands the device.
    pub fn padded(&mut self) -> &[u8] {
        let padded = self.len.next_multiple_of(ALIGN);
        if padded > self.len {
            // SAFETY: the capacity is a multiple of ALIGN at or past `len`.
            unsafe { std::ptr::write_bytes(self.ptr.as_ptr().add(self.len), 0, padded - self.len) };
            self.written = self.written.max(padded);
        }
        // SAFETY: every byte below `padded` is initialised.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), padded) }
    }
}

impl Deref for AlignedBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `len` bytes are initialised (a dangling pointer with 0 is valid).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `deref`, and `&mut self` is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuffer {
    fn drop(&mut self) {
        if self.capacity > 0 {
            // SAFETY: allocated in `reserve` with this layout.
            unsafe { dealloc(self.ptr.as_ptr(), Self::layout(self.capacity)) }
        }
    }
}

/// Buffers given back for reuse, up to a number of bytes (none by default).
///
/// Taking one never leaves the pool holding more buffers than were in use
/// at once: a request no pooled buffer fits frees one before allocating.
#[derive(Default)]
pub struct BufferPool {
    state: Mutex<Pooled>,
}

#[derive(Default)]
struct Pooled {
    free: Vec<AlignedBuffer>,
    bytes: usize,
    limit: usize,
}

impl BufferPool {
    /// Keep up to `bytes` of buffers given back (0 keeps none, and frees
    /// what is kept).
    pub fn set_limit(&self, bytes: usize) {
        let mut state = self
            .state
            .lock()
            .expect("the pool's lock is never poisoned");
        state.limit = bytes;
        while state.bytes > bytes {
            let freed = state
                .free
                .pop()
                .expect("bytes are counted from the buffers");
            state.bytes -= freed.capacity();
        }
    }

    /// An empty buffer with room for `bytes`: the smallest pooled one that
    /// has it, else a new one.
    pub fn take(&self, bytes: usize) -> AlignedBuffer {
        let mut state = self
            .state
            .lock()
            .expect("the pool's lock is never poisoned");
        let fitting = (0..state.free.len())
            .filter(|&i| state.free[i].capacity() >= bytes)
            .min_by_key(|&i| state.free[i].capacity());
        let mut buffer = match fitting {
            Some(i) => state.free.swap_remove(i),
            None => {
                if let Some(small) = state.free.pop() {
                    state.bytes -= small.capacity();
                }
                drop(state);
                return AlignedBuffer::with_capacity(bytes);
            }
        };
        state.bytes -= buffer.capacity();
        buffer.clear();
        buffer
    }

    /// Give `buffer` back, kept if the limit allows.
    pub fn give(&self, buffer: AlignedBuffer) {
        let mut state = self
            .state
            .lock()
            .expect("the pool's lock is never poisoned");
        if buffer.capacity() > 0 && state.bytes + buffer.capacity() <= state.limit {
            state.bytes += buffer.capacity();
            state.free.push(buffer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_is_aligned_keeps_its_bytes_as_it_grows_and_pads_with_zeros() {
        let mut b = AlignedBuffer::default();
        assert!(b.is_empty());
        for i in 0..10_000u32 {
            b.extend_from_slice(&i.to_le_bytes());
        }
        assert_eq!(b.as_ptr() as usize % ALIGN, 0);
        assert_eq!(b.capacity() % ALIGN, 0);
        assert!(b
            .chunks_exact(4)
            .enumerate()
            .all(|(i, c)| c == (i as u32).to_le_bytes()));
        b.resize_stale(40_001);
        assert_eq!(b[40_000], 0, "never written: zero");
        let padded = b.padded().len();
        assert_eq!(padded, 40_001usize.next_multiple_of(ALIGN));
        assert!(b.padded()[40_001..].iter().all(|&x| x == 0));
        b.resize_stale(8);
        b.resize_stale(16);
        assert_eq!(&b[8..16], &[2, 0, 0, 0, 3, 0, 0, 0], "stale bytes stay");
    }

    #[test]
    fn the_pool_reuses_the_smallest_fitting_buffer_within_its_limit() {
        let pool = BufferPool::default();
        pool.give(AlignedBuffer::with_capacity(ALIGN));
        assert_eq!(
            pool.state.lock().unwrap().free.len(),
            0,
            "no limit set: nothing kept"
        );
        pool.set_limit(10 * ALIGN);
        let (small, big) = (
            AlignedBuffer::with_capacity(ALIGN),
            AlignedBuffer::with_capacity(8 * ALIGN),
        );
        let big_at = big.as_ptr();
        pool.give(small);
        pool.give(big);
        pool.give(AlignedBuffer::with_capacity(2 * ALIGN)); // over the limit: freed
        let taken = pool.take(3 * ALIGN);
        assert_eq!(taken.as_ptr(), big_at, "the one that fits");
        assert!(taken.is_empty());
        // Nothing fits: the small one is freed, so the pool does not grow.
        assert_eq!(pool.take(9 * ALIGN).capacity(), 9 * ALIGN);
        assert_eq!(pool.state.lock().unwrap().free.len(), 0);
    }
}
