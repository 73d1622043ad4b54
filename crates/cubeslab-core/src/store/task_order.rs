//! The order in which a read visits the inner chunks of a window: shard by
//! shard (the touched shards in C order), and inside each shard its chunks
//! in C order — the order they lie in the file, so that neighbouring chunks
//! merge into one request and each worker's run of chunks stays in few
//! shards. The cost model walks the same order.

use crate::window::{chunk_spans, strides, unravel, ChunkSpan, Window, MAX_DIMS};

/// One inner chunk to read: which touched shard, where in it, which part.
pub struct Task {
    /// Index of the shard among the touched shards (C order).
    pub slot: usize,
    /// Position of the inner chunk in its shard (C order).
    pub inner: usize,
    /// The selection inside the chunk, per dimension.
    pub spans: [ChunkSpan; MAX_DIMS],
}

/// The chunks a window touches, in reading order.
pub struct TaskOrder {
    nd: usize,
    spans: Vec<Vec<ChunkSpan>>,
    /// Per dimension: the shard indices touched, ascending.
    touched: Vec<Vec<u64>>,
    /// Per dimension and touched shard: (first span, number of spans).
    ranges: Vec<Vec<(usize, u64)>>,
    touched_shape: Vec<u64>,
    /// Where each touched shard's tasks start; one more entry: the total.
    starts: Vec<u64>,
    chunks_per_shard: Vec<u64>,
    /// The array's inner chunks per dimension (the last ones may be partial).
    grid: Vec<u64>,
    inner_strides: [u64; MAX_DIMS],
}

impl TaskOrder {
    /// The tasks of `window`, on an array of `shape`, over inner chunks of
    /// `inner_shape`, grouped `chunks_per_shard` to a shard.
    pub fn new(
        shape: &[u64],
        window: &Window,
        inner_shape: &[u64],
        chunks_per_shard: &[u64],
    ) -> Self {
        let nd = inner_shape.len();
        let spans: Vec<Vec<ChunkSpan>> = (0..nd)
            .map(|d| chunk_spans(&window.dims[d], inner_shape[d]))
            .collect();
        let mut touched: Vec<Vec<u64>> = Vec::with_capacity(nd);
        let mut ranges: Vec<Vec<(usize, u64)>> = Vec::with_capacity(nd);
        for d in 0..nd {
            let (mut shards, mut r): (Vec<u64>, Vec<(usize, u64)>) = (Vec::new(), Vec::new());
            for (i, s) in spans[d].iter().enumerate() {
                let shard = s.chunk / chunks_per_shard[d];
                if shards.last() == Some(&shard) {
                    r.last_mut().expect("pushed with the shard").1 += 1;
                } else {
                    shards.push(shard);
                    r.push((i, 1));
                }
            }
            touched.push(shards);
            ranges.push(r);
        }
        let touched_shape: Vec<u64> = touched.iter().map(|t| t.len() as u64).collect();
        let n_shards: u64 = if nd == 0 {
            0
        } else {
            touched_shape.iter().product()
        };
        let mut starts = Vec::with_capacity(n_shards as usize + 1);
        let mut total = 0u64;
        for q in 0..n_shards {
            starts.push(total);
            let idx = unravel(q, &touched_shape);
            total += (0..nd)
                .map(|d| ranges[d][idx[d] as usize].1)
                .product::<u64>();
        }
        starts.push(total);
        Self {
            nd,
            spans,
            touched,
            ranges,
            touched_shape,
            starts,
            chunks_per_shard: chunks_per_shard.to_vec(),
            grid: shape
                .iter()
                .zip(inner_shape)
                .map(|(&n, &c)| n.div_ceil(c))
                .collect(),
            inner_strides: strides(chunks_per_shard),
        }
    }

    /// Number of chunks (tasks).
    pub fn n_tasks(&self) -> u64 {
        *self.starts.last().unwrap_or(&0)
    }

    /// Number of touched shards.
    pub fn n_shards(&self) -> u64 {
        self.starts.len() as u64 - 1
    }

    /// The shard grid indices of touched shard `slot`.
    pub fn shard_indices(&self, slot: u64) -> Vec<u64> {
        let idx = unravel(slot, &self.touched_shape);
        (0..self.nd)
            .map(|d| self.touched[d][idx[d] as usize])
            .collect()
    }

    /// Whether the window's chunks in shard `slot` are at least half of the
    /// chunks the shard holds. Such a shard is read whole, in one request
    /// with its index: one trip to the device instead of the index first and
    /// the chunks after.
    pub fn covers_most_of(&self, slot: u64) -> bool {
        let tasks = self.starts[slot as usize + 1] - self.starts[slot as usize];
        tasks * 2 >= self.chunks_held(slot)
    }

    /// Chunks shard `slot` holds: all it has room for, fewer at the array's
    /// edges.
    pub fn chunks_held(&self, slot: u64) -> u64 {
        let idx = unravel(slot, &self.touched_shape);
        (0..self.nd)
            .map(|d| {
                let per = self.chunks_per_shard[d];
                let first = self.touched[d][idx[d] as usize] * per;
                per.min(self.grid[d].saturating_sub(first))
            })
            .product()
    }

    /// Spans per dimension (over all chunks the window touches).
    pub fn spans(&self) -> &[Vec<ChunkSpan>] {
        &self.spans
    }

    /// Tasks `range` in reading order, each found from the one before: no
    /// search or division per task, as [`TaskOrder::locate`] needs. Reads
    /// visit thousands of small chunks, where that difference shows.
    pub fn tasks(&self, range: std::ops::Range<u64>) -> Tasks<'_> {
        let mut tasks = Tasks {
            order: self,
            next: range.start,
            end: range.end.min(self.n_tasks()),
            fresh: true,
            counts: [1; MAX_DIMS],
            first_span: [0; MAX_DIMS],
            origin: [0; MAX_DIMS],
            local: [0; MAX_DIMS],
            task: Task {
                slot: 0,
                inner: 0,
                spans: [ChunkSpan::default(); MAX_DIMS],
            },
        };
        if tasks.next < tasks.end {
            let q = self.starts.partition_point(|&s| s <= range.start) - 1;
            tasks.enter(q);
            let lidx = unravel(range.start - self.starts[q], &tasks.counts[..self.nd]);
            tasks.local[..self.nd].copy_from_slice(&lidx[..self.nd]);
            tasks.fill(0);
        }
        tasks
    }

    /// Task `t` in reading order.
    pub fn locate(&self, t: u64) -> Task {
        let q = self.starts.partition_point(|&s| s <= t) - 1;
        let local = t - self.starts[q];
        let sidx = unravel(q as u64, &self.touched_shape);
        let mut counts = [1u64; MAX_DIMS];
        for d in 0..self.nd {
            counts[d] = self.ranges[d][sidx[d] as usize].1;
        }
        let lidx = unravel(local, &counts[..self.nd]);
        let mut inner = 0u64;
        let mut spans = [ChunkSpan::default(); MAX_DIMS];
        for d in 0..self.nd {
            let span = self.spans[d][self.ranges[d][sidx[d] as usize].0 + lidx[d] as usize];
            inner += (span.chunk % self.chunks_per_shard[d]) * self.inner_strides[d];
            spans[d] = span;
        }
        Task {
            slot: q,
            inner: inner as usize,
            spans,
        }
    }
}

/// Consecutive tasks of a [`TaskOrder`] (see [`TaskOrder::tasks`]): a
/// cursor that updates one task in place, so a step costs what changed
/// (mostly one dimension's span), not a fresh task of `MAX_DIMS` spans.
pub struct Tasks<'a> {
    order: &'a TaskOrder,
    /// Index of the task [`Tasks::advance`] hands out next, and the end.
    next: u64,
    end: u64,
    /// Whether `task` has not been handed out yet.
    fresh: bool,
    /// Per dimension of the current touched shard: its number of spans,
    /// its first span, the shard's first chunk, and the current task's
    /// span counted from the first.
    counts: [u64; MAX_DIMS],
    first_span: [usize; MAX_DIMS],
    origin: [u64; MAX_DIMS],
    local: [u64; MAX_DIMS],
    task: Task,
}

impl Tasks<'_> {
    /// The next task with its index in reading order, or `None` past the
    /// end of the range.
    #[inline]
    pub fn advance(&mut self) -> Option<(u64, &Task)> {
        if self.next >= self.end {
            return None;
        }
        if !self.fresh {
            self.step();
        }
        self.fresh = false;
        self.next += 1;
        Some((self.next - 1, &self.task))
    }

    /// Move to the following task: advance the odometer over the shard's
    /// spans (past its last task, enter the next shard) and refill the
    /// dimensions that moved.
    #[inline]
    fn step(&mut self) {
        let nd = self.order.nd;
        let mut d = nd;
        let moved = loop {
            if d == 0 {
                self.enter(self.task.slot + 1);
                break 0;
            }
            d -= 1;
            self.local[d] += 1;
            if self.local[d] < self.counts[d] {
                break d;
            }
            self.local[d] = 0;
        };
        self.fill(moved);
    }

    /// Start at the first task of touched shard `q`.
    fn enter(&mut self, q: usize) {
        let o = self.order;
        let sidx = unravel(q as u64, &o.touched_shape);
        self.task.slot = q;
        for d in 0..o.nd {
            let (first, count) = o.ranges[d][sidx[d] as usize];
            self.counts[d] = count;
            self.first_span[d] = first;
            self.origin[d] = o.touched[d][sidx[d] as usize] * o.chunks_per_shard[d];
            self.local[d] = 0;
        }
    }

    /// Set the spans of dimensions `from..` from the odometer, and the
    /// chunk's position in its shard.
    #[inline]
    fn fill(&mut self, from: usize) {
        let o = self.order;
        for d in from..o.nd {
            // Not `origin + local`: a step longer than a chunk skips chunks.
            self.task.spans[d] = o.spans[d][self.first_span[d] + self.local[d] as usize];
        }
        let mut inner = 0u64;
        for d in 0..o.nd {
            inner += (self.task.spans[d].chunk - self.origin[d]) * o.inner_strides[d];
        }
        self.task.inner = inner as usize;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::DimRange;

    #[test]
    fn consecutive_tasks_agree_with_locate_when_steps_skip_chunks() {
        // Every 4th element in chunks of 2: chunks 0, 2, 4, ... are read,
        // the odd ones skipped, inside shards of 3 chunks.
        let window = Window {
            dims: vec![
                DimRange::new(0, 3),
                DimRange {
                    start: 0,
                    stop: 23,
                    step: 4,
                },
            ],
        };
        let order = TaskOrder::new(&[3, 23], &window, &[1, 2], &[2, 3]);
        let n = order.n_tasks();
        assert_eq!(n, 3 * 6);
        let mut tasks = order.tasks(0..n);
        for t in 0..n {
            let (index, task) = tasks.advance().expect("n tasks");
            assert_eq!(index, t);
            let found = order.locate(t);
            assert_eq!(
                (task.slot, task.inner),
                (found.slot, found.inner),
                "task {t}"
            );
            // The position in the shard is the chunk's own.
            let chunk = task.spans[1].chunk;
            assert_eq!(task.inner as u64 % 3, chunk % 3, "task {t}");
        }
    }

    #[test]
    fn every_chunk_once_shard_by_shard_in_file_order() {
        // 10 x 10 chunks of 2 x 2 in shards of 3 x 4 chunks; a window that
        // cuts shards at both ends.
        let window = Window {
            dims: vec![DimRange::new(3, 17), DimRange::new(1, 20)],
        };
        let order = TaskOrder::new(&[20, 20], &window, &[2, 2], &[3, 4]);
        let n = order.n_tasks();
        assert_eq!(n, 8 * 10); // chunks 1..=8 x 0..=9
        let mut seen = std::collections::HashSet::new();
        let mut last: Option<(usize, usize)> = None;
        for t in 0..n {
            let task = order.locate(t);
            assert!(seen.insert((task.spans[0].chunk, task.spans[1].chunk)));
            // Shard slots never go back; inside a shard positions ascend.
            if let Some((slot, inner)) = last {
                assert!(task.slot > slot || (task.slot == slot && task.inner > inner));
            }
            last = Some((task.slot, task.inner));
            let shard = order.shard_indices(task.slot as u64);
            assert_eq!(
                shard,
                vec![task.spans[0].chunk / 3, task.spans[1].chunk / 4]
            );
        }
        assert_eq!(order.n_shards(), 3 * 3);
        // Walking consecutively from any start gives what locate finds.
        for first in [0, 1, 17, n - 1] {
            let mut tasks = order.tasks(first..n);
            for t in first..n {
                let (index, task) = tasks.advance().expect("a task per index");
                assert_eq!(index, t);
                let found = order.locate(t);
                assert_eq!(
                    (task.slot, task.inner),
                    (found.slot, found.inner),
                    "task {t}"
                );
                assert_eq!(task.spans[..2], found.spans[..2], "task {t}");
            }
            assert!(tasks.advance().is_none(), "nothing past the range");
        }
    }
}
