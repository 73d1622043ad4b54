//! The optimizer: try many chunk and shard shapes, predict every access of
//! the mix for each, keep the layout whose slowest weighted access is fastest.
//!
//! By default both cache states count: the slowest cold access plus the
//! slowest warm one, the warm time weighed by how much faster this machine
//! moves bytes in memory than its device streams them ([`StateWeights`]).
//! Summed unweighed, the cold time (tens of times the warm) would decide
//! alone, and warm reads could be several times slower than they need be
//! for a cold gain of a few percent.

use rayon::prelude::*;
use serde::Serialize;

use super::{
    access::AccessMix,
    best::BestScores,
    candidates::inner_candidates,
    cost::{cold_floor, predict_both, ChunkCodec, Prediction, ReadSetup, StoredArray},
    layout::{shard_fitting, shard_for, Layout, ShardGrowth},
    profile::DeviceProfile,
};

/// Which cache state the objective counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheState {
    /// Data in the page cache.
    Warm,
    /// Data on the device.
    Cold,
    /// The slowest cold access plus the slowest warm one, weighed by
    /// [`StateWeights`] (the default).
    Both,
}

/// The best layouts of the first round that [`Planner::rank`] tries again
/// with other shards.
const FINALISTS: usize = 24;

/// How many plans a request returns unless it says (the pick and four runners-up).
pub const DEFAULT_TOP: usize = 5;
/// The cache state a request plans for unless it says.
pub const DEFAULT_STATE: CacheState = CacheState::Both;

impl CacheState {
    /// The name [`CacheState::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            Self::Cold => "cold",
            Self::Warm => "warm",
            Self::Both => "both",
        }
    }

    /// `cold`, `warm` or `both`.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "cold" => Ok(Self::Cold),
            "warm" => Ok(Self::Warm),
            "both" => Ok(Self::Both),
            other => Err(format!("state must be cold, warm or both, not {other}")),
        }
    }
}

/// What a second of each cache state counts for in the objective.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StateWeights {
    /// Weight of warm time.
    pub warm: f64,
    /// Weight of cold time.
    pub cold: f64,
}

impl StateWeights {
    /// The weights `state` gives on this machine. `Both` weighs warm time by
    /// the ratio of the rate warm reads move whole chunks (checksummed, or
    /// copied when reads are not verified, on all threads) to the device's
    /// sequential rate: each state's time counted in units of its own
    /// bound, so a tenth slower warm weighs as much as a tenth slower cold.
    pub fn of(state: CacheState, profile: &DeviceProfile, setup: &ReadSetup) -> Self {
        match state {
            CacheState::Warm => Self {
                warm: 1.0,
                cold: 0.0,
            },
            CacheState::Cold => Self {
                warm: 0.0,
                cold: 1.0,
            },
            CacheState::Both => {
                let per_thread = if setup.verify {
                    profile.memory.crc
                } else {
                    profile.memory.copy
                };
                let memory = per_thread * setup.threads.max(1) as f64;
                let device = profile.io.sequential_rate().max(1.0);
                Self {
                    warm: (memory / device).max(1.0),
                    cold: 1.0,
                }
            }
        }
    }

    /// A warm and a cold time (s) as the objective counts them together.
    pub fn apply(&self, warm: f64, cold: f64) -> f64 {
        self.warm * warm + self.cold * cold
    }
}

/// What a layout is planned for, and on what machine.
#[derive(Debug, Clone)]
pub struct Planner {
    /// The machine.
    pub profile: DeviceProfile,
    /// The reads to serve.
    pub mix: AccessMix,
    /// How reads are made.
    pub setup: ReadSetup,
    /// How chunks are encoded.
    pub codec: ChunkCodec,
    /// Cache state the objective counts.
    pub state: CacheState,
    /// Chunk sides are multiples of this, or the whole dimension: the codec
    /// works in blocks of this side (ZFP: 4) and pads partial ones.
    pub block: u64,
    /// Shards are narrowed until an ingest task (see
    /// [`Layout::ingest_task_bytes`]) needs at most this many bytes, so that
    /// an ingest reads its source once within its memory bound;
    /// `u64::MAX`: no bound.
    pub ingest_task_limit: u64,
}

/// One access's predicted cost under a layout.
#[derive(Debug, Clone, Serialize)]
pub struct AccessCost {
    /// Access name (`inline`, `trace`, ...).
    pub access: String,
    /// Its weight in the mix.
    pub weight: f64,
    /// The window predicted: `[start, stop)` per dimension.
    pub window: Vec<[u64; 2]>,
    /// Data in the page cache.
    pub warm: Prediction,
    /// Data on the device.
    pub cold: Prediction,
    /// This access's cost in the objective's units (s): its weight times
    /// its warm and cold times, each weighed as [`StateWeights`] says.
    pub objective: f64,
}

/// A layout with its predicted costs.
#[derive(Debug, Clone, Serialize)]
pub struct Evaluated {
    /// The layout.
    pub layout: Layout,
    /// The objective (s): the slowest weighted access warm and the slowest
    /// cold (they may be different accesses), weighed by `weights`.
    pub score: f64,
    /// What a second of each cache state counts for in `score`.
    pub weights: StateWeights,
    /// All weighted accesses together (s): among layouts whose slowest
    /// access is as fast, the one whose other accesses are faster wins.
    pub total: f64,
    /// Stored padding as a share of the data.
    pub padding: f64,
    /// Inner chunks in the array.
    pub chunks: u64,
    /// Shard files in the array.
    pub shards: u64,
    /// Each access of the mix.
    pub accesses: Vec<AccessCost>,
}

impl Planner {
    /// `layout` with its shards narrowed to the ingest task's bound, if it can be.
    pub fn fit(&self, layout: Layout, shape: &[u64], elem: usize) -> Option<Layout> {
        if self.ingest_task_limit == u64::MAX {
            return Some(layout);
        }
        layout.fit_ingest_task(shape, elem, self.ingest_task_limit)
    }

    /// Predict every access of the mix for `layout` on an array of `shape`.
    pub fn evaluate(&self, shape: &[u64], elem: usize, layout: &Layout) -> Evaluated {
        self.evaluate_within(shape, elem, layout, f64::INFINITY)
            .expect("no score is above infinity")
    }

    /// [`Self::evaluate`], or None as soon as the accesses predicted score
    /// above `bound`: the score is the slowest access, so the rest cannot
    /// lower it.
    fn evaluate_within(
        &self,
        shape: &[u64],
        elem: usize,
        layout: &Layout,
        bound: f64,
    ) -> Option<Evaluated> {
        let array = StoredArray {
            shape: shape.to_vec(),
            elem,
            layout: layout.clone(),
            codec: self.codec.clone(),
        };
        let weights = StateWeights::of(self.state, &self.profile, &self.setup);
        if bound.is_finite() {
            // Most layouts that cannot win are told by their chunks' bytes alone.
            let floor = self
                .mix
                .accesses
                .iter()
                .fold(0.0f64, |slowest, (access, weight)| {
                    let window = access.window(shape);
                    slowest.max(weight * cold_floor(&array, &window, &self.setup, &self.profile))
                });
            if weights.apply(0.0, floor) > bound {
                return None;
            }
        }
        let mut accesses: Vec<AccessCost> = Vec::with_capacity(self.mix.accesses.len());
        let (mut slowest_warm, mut slowest_cold) = (0.0f64, 0.0f64);
        for (access, weight) in &self.mix.accesses {
            let window = access.window(shape);
            let (warm, cold) = predict_both(&array, &window, &self.setup, &self.profile);
            slowest_warm = slowest_warm.max(weight * warm.seconds);
            slowest_cold = slowest_cold.max(weight * cold.seconds);
            if weights.apply(slowest_warm, slowest_cold) > bound {
                return None;
            }
            let seconds = weights.apply(warm.seconds, cold.seconds);
            accesses.push(AccessCost {
                access: access.name(shape.len()),
                weight: *weight,
                window: window.dims.iter().map(|r| [r.start, r.stop]).collect(),
                warm,
                cold,
                objective: weight * seconds,
            });
        }
        let score = weights.apply(slowest_warm, slowest_cold);
        let total = accesses.iter().map(|a| a.objective).sum();
        let (chunks, shards) = layout.counts(shape);
        Some(Evaluated {
            layout: layout.clone(),
            score,
            weights,
            total,
            padding: layout.padding(shape),
            chunks,
            shards,
            accesses,
        })
    }

    /// [`Self::evaluate_within`] the bound of the `best` kept so far,
    /// counted among them if finished.
    fn evaluate_among(
        &self,
        shape: &[u64],
        elem: usize,
        layout: &Layout,
        best: &BestScores,
    ) -> Option<Evaluated> {
        let e = self.evaluate_within(shape, elem, layout, best.bound())?;
        best.offer(e.score);
        Some(e)
    }

    /// Every admissible layout tried, best first: all inner chunk shapes
    /// from a ladder of sides with default shards, then the best of those
    /// with every shard growth rule and with each access's fitting shard.
    pub fn rank(&self, shape: &[u64], elem: usize) -> Vec<Evaluated> {
        self.rank_best(shape, elem, usize::MAX)
    }

    /// [`Self::rank`] for the `keep` best alone, ranked as there; layouts
    /// that cannot be among them (nor the finalists) are left out, most of
    /// them unfinished: a third of an ingest's planning, which keeps one.
    pub fn rank_best(&self, shape: &[u64], elem: usize, keep: usize) -> Vec<Evaluated> {
        let best = BestScores::new(keep.max(FINALISTS));
        let evaluate = |layout: &Layout| self.evaluate_among(shape, elem, layout, &best);
        let first_round = |inners: &[Vec<u64>]| -> Vec<Evaluated> {
            inners
                .par_iter()
                .filter_map(|inner| {
                    let layout = self.fit(
                        Layout::with_default_shards(inner.clone(), shape, elem),
                        shape,
                        elem,
                    )?;
                    evaluate(&layout)
                })
                .collect()
        };
        let (coarse, fine) = coarse_first(
            inner_candidates(shape, elem, self.block, self.codec.ratio()),
            shape,
        );
        let mut first = first_round(&coarse);
        first.append(&mut first_round(&fine));
        sort(&mut first);
        let finalists: Vec<Layout> = first
            .iter()
            .take(FINALISTS)
            .map(|e| e.layout.clone())
            .collect();
        let mut second: Vec<Evaluated> = finalists
            .par_iter()
            .flat_map_iter(|l| {
                // Shards grown by each rule, and shards holding exactly what
                // one access of the mix reads (read whole, in one trip).
                let grown = ShardGrowth::ALL
                    .iter()
                    .map(|&g| shard_for(&l.inner, shape, elem, g));
                let fitting = self
                    .mix
                    .accesses
                    .iter()
                    .filter_map(|(a, _)| shard_fitting(&a.window(shape), &l.inner, elem));
                grown
                    .chain(fitting)
                    .filter_map(|shard| {
                        let layout = Layout {
                            inner: l.inner.clone(),
                            shard,
                        };
                        self.fit(layout, shape, elem)
                    })
                    .filter(|c| c != l)
                    .collect::<Vec<_>>()
            })
            .filter_map(|layout| evaluate(&layout))
            .collect();
        first.append(&mut second);
        sort(&mut first);
        first.dedup_by(|a, b| a.layout == b.layout);
        first
    }
}

impl Planner {
    /// The `keep` best layouts whose every shard holds one read of `window`
    /// and little else (the read is at least half of it), best first: the
    /// layouts of an orientation copy, where each read is one shard fetched
    /// whole. As in [`Self::rank_best`], layouts that cannot be among them
    /// are left unfinished.
    pub fn rank_one_read_per_shard(
        &self,
        shape: &[u64],
        elem: usize,
        window: &crate::window::Window,
        keep: usize,
    ) -> Vec<Evaluated> {
        let best = BestScores::new(keep);
        let round = |inners: &[Vec<u64>]| -> Vec<Evaluated> {
            inners
                .par_iter()
                .filter_map(|inner| {
                    let shard = shard_fitting(window, inner, elem)?;
                    if window.num_elements() * 2 < shard.iter().product::<u64>() {
                        return None;
                    }
                    let layout = Layout {
                        inner: inner.clone(),
                        shard,
                    };
                    self.evaluate_among(shape, elem, &layout, &best)
                })
                .collect()
        };
        let (coarse, fine) = coarse_first(
            inner_candidates(shape, elem, self.block, self.codec.ratio()),
            shape,
        );
        let mut ranked = round(&coarse);
        ranked.append(&mut round(&fine));
        sort(&mut ranked);
        ranked.truncate(keep);
        ranked
    }
}

/// Inner shapes whose sides are powers of two (or whole dimensions), then
/// the others: a coarse ladder whose best come near the pick, so that a
/// search that keeps a few bounds the rest tightly from the start.
fn coarse_first(inners: Vec<Vec<u64>>, shape: &[u64]) -> (Vec<Vec<u64>>, Vec<Vec<u64>>) {
    inners.into_iter().partition(|inner| {
        inner
            .iter()
            .zip(shape)
            .all(|(&c, &n)| c.is_power_of_two() || c == n)
    })
}

fn sort(list: &mut [Evaluated]) {
    list.sort_by(|a, b| {
        a.score
            .total_cmp(&b.score)
            .then(a.total.total_cmp(&b.total))
            .then(a.padding.total_cmp(&b.padding))
            .then(a.chunks.cmp(&b.chunks))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{access::Access, candidates::MAX_PADDING};

    fn planner(mix: AccessMix) -> Planner {
        Planner {
            profile: DeviceProfile::typical(),
            mix,
            setup: ReadSetup {
                threads: 2,
                in_flight: 32,
                verify: true,
            },
            codec: ChunkCodec::Raw { crc: true },
            state: CacheState::Both,
            block: 1,
            ingest_task_limit: u64::MAX,
        }
    }

    #[test]
    fn ranking_the_best_alone_ranks_them_as_ranking_all_does() {
        let compressed = ChunkCodec::Compressed {
            ratio: 3.0,
            decode: 1e9,
            crc: true,
        };
        let cases = [
            (vec![120u64, 160, 200], AccessMix::planes(3), None),
            (vec![600, 800, 1000], AccessMix::planes(3), None),
            (vec![600, 800, 1000], AccessMix::planes(3), Some(compressed)),
            (
                vec![300, 400, 500],
                AccessMix::parse("trace,time=2", 3).unwrap(),
                None,
            ),
            (vec![40, 50, 60, 70], AccessMix::planes(4), None),
        ];
        for (shape, mix, codec) in cases {
            let p = Planner {
                codec: codec.unwrap_or(ChunkCodec::Raw { crc: true }),
                ..planner(mix)
            };
            let all = p.rank(&shape, 4);
            for keep in [1, 5] {
                let best = p.rank_best(&shape, 4, keep);
                assert!(
                    best.len() < all.len(),
                    "layouts that cannot win are left out"
                );
                for (a, b) in all.iter().zip(&best).take(keep) {
                    assert_eq!((&a.layout, a.score, a.total), (&b.layout, b.score, b.total));
                }
            }
        }
    }

    #[test]
    fn a_view_planned_for_its_pick_alone_gets_the_pick_of_all() {
        let shape = [600u64, 800, 1000];
        for plane in 0..3 {
            let access = Access::Plane(plane);
            let p = planner(AccessMix {
                accesses: vec![(access.clone(), 1.0)],
            });
            let window = access.window(&shape);
            let all = p.rank_one_read_per_shard(&shape, 4, &window, usize::MAX);
            let best = p.rank_one_read_per_shard(&shape, 4, &window, 1);
            assert!(all.len() > 1 && best.len() == 1);
            assert_eq!(
                (&all[0].layout, all[0].score),
                (&best[0].layout, best[0].score)
            );
        }
    }

    #[test]
    fn the_pick_obeys_the_bounds_and_beats_the_rest() {
        let shape = [120, 160, 200];
        let p = planner(AccessMix::planes(3));
        let ranked = p.rank(&shape, 4);
        assert!(ranked.len() > 30);
        let best = &ranked[0];
        assert!(best.padding <= MAX_PADDING);
        assert!(best.layout.check(&shape).is_ok());
        assert!(ranked.windows(2).all(|w| w[0].score <= w[1].score));
        // Layouts whose slowest access ties (the same chunks for it, other
        // shapes elsewhere) are ranked by all their accesses together.
        let ties: Vec<_> = ranked
            .windows(2)
            .filter(|w| w[0].score == w[1].score)
            .collect();
        assert!(!ties.is_empty());
        assert!(ties.iter().all(|w| w[0].total <= w[1].total));
        // The score is the slowest cold access plus the slowest warm one,
        // weighed by the machine's memory rate over its device's.
        let slowest =
            |state: fn(&AccessCost) -> f64| best.accesses.iter().map(state).fold(0.0, f64::max);
        let profile = DeviceProfile::typical();
        let k = profile.memory.crc * 2.0 / profile.io.sequential_rate();
        assert!(k > 1.0);
        assert_eq!(best.weights.warm, k);
        let expected = slowest(|a| a.cold.seconds) + k * slowest(|a| a.warm.seconds);
        assert!((best.score - expected).abs() <= 1e-12 * expected);
    }

    #[test]
    fn both_states_count_alike() {
        // The default pick is near the best layout of each cache state in
        // that state. Summed unweighed, cold time (tens of times warm) would
        // decide alone and leave warm reads much slower than they need be.
        let shape = [300, 400, 500];
        let slowest = |e: &Evaluated, state: fn(&AccessCost) -> f64| {
            e.accesses.iter().map(state).fold(0.0, f64::max)
        };
        let best_in = |state: CacheState| {
            let p = Planner {
                state,
                ..planner(AccessMix::planes(3))
            };
            p.rank(&shape, 4).swap_remove(0)
        };
        let (warm, cold) = (best_in(CacheState::Warm), best_in(CacheState::Cold));
        let both = best_in(CacheState::Both);
        let warm_ratio = slowest(&both, |a| a.warm.seconds) / slowest(&warm, |a| a.warm.seconds);
        let cold_ratio = slowest(&both, |a| a.cold.seconds) / slowest(&cold, |a| a.cold.seconds);
        assert!(
            warm_ratio <= 1.25 && cold_ratio <= 1.25,
            "{:?}: warm {warm_ratio:.2}x, cold {cold_ratio:.2}x the best",
            both.layout
        );
    }

    #[test]
    fn a_single_access_gets_a_layout_made_for_it() {
        // Only time slices: chunks one sample deep hold a slice's elements
        // and nothing else.
        let shape = [120, 160, 200];
        let p = planner(AccessMix {
            accesses: vec![(Access::Plane(2), 1.0)],
        });
        let best = &p.rank(&shape, 4)[0];
        assert_eq!(best.layout.inner[2], 1, "{:?}", best.layout);
        // Only traces: a trace takes a chunk or two, not a column of them.
        let p = planner(AccessMix {
            accesses: vec![(Access::Trace, 1.0)],
        });
        let best = &p.rank(&shape, 4)[0];
        let cold = &best.accesses[0].cold;
        assert!(
            cold.chunks <= 2 && cold.touched_bytes <= 64 << 10,
            "{:?}",
            best.layout
        );
    }
}
