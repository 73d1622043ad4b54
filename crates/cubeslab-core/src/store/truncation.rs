//! A shard file cut short by another process while the engine has it
//! mapped: reading a page past the new end raises SIGBUS, which kills the
//! process. cubeslab never rewrites a shard in place, but another program
//! (or a user's `truncate`) can; the reader must then fail with an error
//! naming the shard, not die.
//!
//! Each shard mapping is registered here. A SIGBUS handler looks the
//! faulting address up; if it lies in a registered mapping, the handler
//! maps a page of zeros over the faulting page (so the interrupted copy
//! finishes) and marks the mapping cut short. The read checks the mark
//! before it returns, and fails. A fault anywhere else is passed to the
//! handler that was there before (or the default, which ends the process).

use std::sync::{
    atomic::{AtomicBool, AtomicUsize, Ordering},
    Once,
};

/// Mappings registered at once, at most. Past it a mapping is still used,
/// only without the protection (a handle caps its open shards well below).
const SLOTS: usize = 16384;

struct Slot {
    start: AtomicUsize,
    len: AtomicUsize,
    cut: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    cut: AtomicBool::new(false),
};

static TABLE: [Slot; SLOTS] = [EMPTY; SLOTS];
/// Where the next registration starts looking for a free slot.
static HINT: AtomicUsize = AtomicUsize::new(0);
static INSTALL: Once = Once::new();
/// The SIGBUS action in place before ours (written once, before ours is).
static mut PREVIOUS: Option<libc::sigaction> = None;

/// A registered mapping; unregistered when dropped (before the unmap).
#[derive(Debug)]
pub(crate) struct Watched {
    slot: Option<usize>,
}

impl Watched {
    /// Watch the mapping of `len` bytes at `start`.
    pub fn new(start: *const u8, len: usize) -> Self {
        if len == 0 {
            return Self { slot: None };
        }
        INSTALL.call_once(install);
        let first = HINT.fetch_add(1, Ordering::Relaxed);
        for k in 0..SLOTS {
            let i = (first + k) % SLOTS;
            let slot = &TABLE[i];
            if slot
                .start
                .compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                // Reserved: fill in the length, then publish the start.
                slot.cut.store(false, Ordering::Relaxed);
                slot.len.store(len, Ordering::Relaxed);
                slot.start.store(start as usize, Ordering::Release);
                return Self { slot: Some(i) };
            }
        }
        Self { slot: None }
    }

    /// Whether a page of the mapping was found cut off the file.
    pub fn cut_short(&self) -> bool {
        self.slot
            .is_some_and(|i| TABLE[i].cut.load(Ordering::Acquire))
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            TABLE[i].len.store(0, Ordering::Relaxed);
            TABLE[i].start.store(0, Ordering::Release);
        }
    }
}

fn install() {
    // SAFETY: a plain sigaction call; the old action is stored before the
    // new one can run, and only read by the handler.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigbus as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
        libc::sigemptyset(&mut action.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) == 0 {
            PREVIOUS = Some(old);
        }
        libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
    }
}

/// Only async-signal-safe work: atomic loads and stores, `mmap`, `sigaction`.
extern "C" fn on_sigbus(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let address = unsafe { (*info).si_addr() } as usize;
    for slot in &TABLE {
        let start = slot.start.load(Ordering::Acquire);
        if start == 0 || start == usize::MAX {
            continue;
        }
        let len = slot.len.load(Ordering::Relaxed);
        if address < start || address >= start + len {
            continue;
        }
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
        let at = address / page * page;
        // SAFETY: the page lies inside a mapping the engine owns and reads
        // only; replacing it with zeros changes nothing else.
        let mapped = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                page,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if mapped != libc::MAP_FAILED {
            slot.cut.store(true, Ordering::Release);
            return;
        }
        break;
    }
    // Not ours: what was there before.
    // SAFETY: PREVIOUS was written before this handler was installed.
    let previous = unsafe { PREVIOUS };
    match previous {
        Some(old) if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN => {
            if old.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: the previous handler was installed as an SA_SIGINFO one.
                let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    unsafe { std::mem::transmute(old.sa_sigaction) };
                handler(signal, info, context);
            } else {
                // SAFETY: the previous handler was installed as a plain one.
                let handler: extern "C" fn(libc::c_int) =
                    unsafe { std::mem::transmute(old.sa_sigaction) };
                handler(signal);
            }
        }
        _ => {
            // Default action: reinstate it; returning re-runs the faulting
            // access, which now ends the process as it would have.
            // SAFETY: a plain sigaction call with a zeroed (SIG_DFL) action.
            unsafe {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(libc::SIGBUS, &default, std::ptr::null_mut());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use memmap2::Mmap;

    use super::Watched;

    #[test]
    fn a_mapped_file_cut_short_reads_as_zeros_and_is_marked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shard");
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(&vec![7u8; 64 << 10]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        // SAFETY: the test truncates the file on purpose; that is what is handled.
        let map = unsafe { Mmap::map(&file) }.unwrap();
        let watched = Watched::new(map.as_ptr(), map.len());
        assert_eq!(map[100], 7);
        assert!(!watched.cut_short());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(4096)
            .unwrap();
        let tail: u64 = map[32 << 10..].iter().map(|&b| b as u64).sum();
        assert_eq!(tail, 0, "pages past the new end read as zeros");
        assert!(watched.cut_short());
        assert_eq!(map[100], 7, "pages still in the file are untouched");
    }
}
