//! Progress of a long job (an ingest), watched from another thread, and the
//! request to stop it.
//!
//! The job names each phase with the total it will count to before it
//! starts counting, so a watcher can show a true total and rate for every
//! phase; it checks [`Progress::check`] often enough that a stop request is
//! honoured within a fraction of a second.

use std::sync::{
    atomic::{AtomicBool, AtomicU64, Ordering},
    Arc, Mutex,
};

use crate::error::{Error, Result};

/// What a phase counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Bytes (of the source, or of data written).
    Bytes,
    /// Items: traces, sample chunks, shards.
    Items,
}

impl Unit {
    /// `bytes` or `items`.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Bytes => "bytes",
            Unit::Items => "items",
        }
    }
}

/// A snapshot of a job's progress.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The running phase's name (empty before the first).
    pub phase: String,
    /// Its number, counting from 1 (0 before the first phase).
    pub phase_number: u64,
    /// What `done` and `total` count.
    pub unit: Unit,
    /// Counted so far in this phase.
    pub done: u64,
    /// What this phase counts to.
    pub total: u64,
}

#[derive(Debug)]
struct Shared {
    /// The running phase's name, number and unit, and the phases before it
    /// as they ended.
    phase: Mutex<(String, u64, Unit, Vec<Snapshot>)>,
    done: AtomicU64,
    total: AtomicU64,
    stop: AtomicBool,
}

/// A handle on a job's progress, cheap to clone and shared by the job and
/// its watchers.
#[derive(Debug, Clone)]
pub struct Progress(Arc<Shared>);

impl Default for Progress {
    fn default() -> Self {
        Self(Arc::new(Shared {
            phase: Mutex::new((String::new(), 0, Unit::Items, Vec::new())),
            done: AtomicU64::new(0),
            total: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        }))
    }
}

impl Progress {
    /// Start a phase named `name` that counts `total` of `unit`, of which
    /// `done` are done already (a resumed job).
    pub fn begin(&self, name: &str, unit: Unit, total: u64, done: u64) {
        let mut phase = self.0.phase.lock().unwrap_or_else(|e| e.into_inner());
        if phase.1 > 0 {
            let ended = self.current(&phase);
            phase.3.push(ended);
        }
        phase.0 = name.to_string();
        phase.1 += 1;
        phase.2 = unit;
        self.0.total.store(total, Ordering::Relaxed);
        self.0.done.store(done.min(total), Ordering::Relaxed);
    }

    /// Count `n` more in the current phase.
    pub fn add(&self, n: u64) {
        self.0.done.fetch_add(n, Ordering::Relaxed);
    }

    /// Ask the job to stop; it returns [`Error::Interrupted`] soon after.
    pub fn stop(&self) {
        self.0.stop.store(true, Ordering::Relaxed);
    }

    /// `Err(Interrupted)` once [`Progress::stop`] was called.
    pub fn check(&self) -> Result<()> {
        if self.0.stop.load(Ordering::Relaxed) {
            Err(Error::Interrupted)
        } else {
            Ok(())
        }
    }

    /// Where the job is.
    pub fn snapshot(&self) -> Snapshot {
        let phase = self.0.phase.lock().unwrap_or_else(|e| e.into_inner());
        self.current(&phase)
    }

    /// The phases that ended, oldest first, as they were when the next began.
    pub fn ended(&self) -> Vec<Snapshot> {
        let phase = self.0.phase.lock().unwrap_or_else(|e| e.into_inner());
        phase.3.clone()
    }

    fn current(&self, phase: &(String, u64, Unit, Vec<Snapshot>)) -> Snapshot {
        let total = self.0.total.load(Ordering::Relaxed);
        Snapshot {
            phase: phase.0.clone(),
            phase_number: phase.1,
            unit: phase.2,
            done: self.0.done.load(Ordering::Relaxed).min(total),
            total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_counts_to_its_total_and_the_next_one_starts_from_zero() {
        let progress = Progress::default();
        progress.begin("scan", Unit::Items, 10, 0);
        progress.add(4);
        progress.add(4);
        let s = progress.snapshot();
        assert_eq!(
            (s.phase.as_str(), s.phase_number, s.done, s.total),
            ("scan", 1, 8, 10)
        );
        progress.begin("write", Unit::Bytes, 100, 30);
        let s = progress.snapshot();
        assert_eq!(
            (s.phase.as_str(), s.phase_number, s.done, s.unit),
            ("write", 2, 30, Unit::Bytes)
        );
        let ended = progress.ended();
        assert_eq!(ended.len(), 1);
        assert_eq!(
            (ended[0].phase.as_str(), ended[0].done, ended[0].total),
            ("scan", 8, 10)
        );
    }

    #[test]
    fn a_stopped_job_is_told_so_by_check() {
        let progress = Progress::default();
        assert!(progress.check().is_ok());
        progress.clone().stop();
        assert!(matches!(progress.check(), Err(Error::Interrupted)));
    }
}
