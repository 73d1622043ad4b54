//! The best scores seen so far while layouts are evaluated in parallel,
//! so that a layout whose first accesses already score worse than all the
//! layouts wanted is left unfinished.

use std::{
    collections::BinaryHeap,
    sync::{
        atomic::{AtomicU64, Ordering},
        Mutex,
    },
};

/// The `keep` lowest scores offered, and the highest of them as a bound.
pub(super) struct BestScores {
    keep: usize,
    /// Scores as bits: non-negative doubles order as their bit patterns.
    lowest: Mutex<BinaryHeap<u64>>,
    bound: AtomicU64,
}

impl BestScores {
    pub fn new(keep: usize) -> Self {
        Self {
            keep: keep.max(1),
            lowest: Mutex::new(BinaryHeap::new()),
            bound: AtomicU64::new(f64::INFINITY.to_bits()),
        }
    }

    /// A layout scoring above this cannot be among the `keep` best
    /// (infinite until `keep` scores were offered).
    pub fn bound(&self) -> f64 {
        f64::from_bits(self.bound.load(Ordering::Relaxed))
    }

    /// Count a finished layout's score.
    pub fn offer(&self, score: f64) {
        if self.keep == usize::MAX || score.is_nan() || score < 0.0 {
            return;
        }
        let mut lowest = self.lowest.lock().unwrap_or_else(|e| e.into_inner());
        lowest.push(score.to_bits());
        if lowest.len() > self.keep {
            lowest.pop();
        }
        if lowest.len() == self.keep {
            let worst = *lowest.peek().expect("keep is at least 1");
            self.bound.store(worst, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_the_worst_of_the_best_kept() {
        let best = BestScores::new(2);
        best.offer(3.0);
        assert_eq!(best.bound(), f64::INFINITY, "fewer than two offered");
        best.offer(1.0);
        assert_eq!(best.bound(), 3.0);
        best.offer(2.0);
        assert_eq!(best.bound(), 2.0);
        best.offer(5.0);
        assert_eq!(best.bound(), 2.0);
        let all = BestScores::new(usize::MAX);
        all.offer(1.0);
        assert_eq!(all.bound(), f64::INFINITY, "keeping all prunes nothing");
    }
}
