//! Read-ahead for memory-mapped files: hand the byte ranges a read will need
//! to the kernel ahead of the thread that copies them, so the device sees a
//! deep queue (the Pyrus parallel IO study, docs/references.md), and tell
//! whether a range is already in the page cache (then asking costs a system
//! call and gains nothing).

use memmap2::{Advice, Mmap};

/// The largest range handed to `madvise(WILLNEED)` at once. The kernel reads
/// at most max(read-ahead window, device's optimal IO size) per call and
/// silently drops the rest — 128 KiB with default settings — so longer
/// requests are advised in pieces of this size (the block layer merges
/// them again).
pub const WILL_NEED_PIECE: u64 = 128 << 10;

/// Ask the kernel to start reading `len` bytes at `offset` of `map` into the
/// page cache, without waiting.
pub fn will_need(map: &Mmap, offset: u64, len: u64) {
    let end = (offset + len).min(map.len() as u64);
    let mut at = offset;
    while at < end {
        let n = WILL_NEED_PIECE.min(end - at);
        // Advice is a hint; failure only costs speed.
        let _ = map.advise_range(Advice::WillNeed, at as usize, n as usize);
        at += n;
    }
}

/// Whether every page of `len` bytes at `offset` of `map` is in the page
/// cache (so reading it costs memory bandwidth only).
pub fn is_resident(map: &Mmap, offset: u64, len: u64) -> bool {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
    let start = offset as usize / page * page;
    let end = ((offset + len) as usize).min(map.len());
    if end <= start {
        return true;
    }
    let mut pages = vec![0u8; (end - start).div_ceil(page)];
    // SAFETY: the range lies inside the mapping and starts on a page boundary.
    let ok = unsafe {
        libc::mincore(
            map.as_ptr().add(start) as *mut libc::c_void,
            end - start,
            pages.as_mut_ptr(),
        )
    };
    ok == 0 && pages.iter().all(|p| p & 1 == 1)
}

/// Ranges closer than this are requested as one: the kernel then issues
/// fewer, larger reads, which every device serves faster.
pub const COALESCE_GAP: u64 = 64 * 1024;

/// Largest single request handed to the kernel.
pub const MAX_REQUEST: u64 = 8 << 20;

/// One worker's read-ahead over its run of tasks: merges neighbouring byte
/// ranges into requests and keeps `outstanding` of them issued ahead of the
/// task being copied.
pub(crate) struct Prefetcher {
    /// Next task whose range has not been requested.
    scan: u64,
    last: u64,
    outstanding: usize,
    /// For each issued request, the task after the last one it covers.
    issued: std::collections::VecDeque<u64>,
}

impl Prefetcher {
    pub fn new(first: u64, last: u64, outstanding: usize) -> Self {
        Self {
            scan: first,
            last,
            outstanding,
            issued: Default::default(),
        }
    }

    /// Called before copying task `t`. `range_of(task)` gives the task's
    /// `(file, offset, len)`, if it reads any bytes; `request_range` hands a merged
    /// range of one file to the kernel.
    pub fn advance(
        &mut self,
        t: u64,
        range_of: &impl Fn(u64) -> Option<(usize, u64, u64)>,
        request_range: &impl Fn(usize, u64, u64),
    ) {
        while self.issued.front().is_some_and(|&end| end <= t) {
            self.issued.pop_front();
        }
        while self.issued.len() < self.outstanding && self.scan < self.last {
            let mut merged: Option<(usize, u64, u64)> = None;
            while self.scan < self.last {
                let Some((slot, offset, len)) = range_of(self.scan) else {
                    self.scan += 1;
                    continue;
                };
                match &mut merged {
                    None => merged = Some((slot, offset, len)),
                    Some((s, o, l))
                        if *s == slot
                            && offset >= *o
                            && offset <= *o + *l + COALESCE_GAP
                            && *l < MAX_REQUEST =>
                    {
                        *l = (*l).max(offset + len - *o);
                    }
                    Some(_) => break,
                }
                self.scan += 1;
            }
            if let Some((slot, offset, len)) = merged {
                request_range(slot, offset, len);
                self.issued.push_back(self.scan);
            }
        }
    }
}
