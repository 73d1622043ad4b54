//! A plan asked for by name: the strategy, accesses, compression and cache
//! state as a caller writes them, turned into a [`Planner`] and ranked.

use super::{
    chunk_codec, AccessMix, CacheState, DeviceProfile, Evaluated, Planner, ReadSetup, Strategy,
};
use crate::{compress::Compression, dtype::DType, ingest};

/// How many plans a request returns unless it says (the pick and four runners-up).
pub const DEFAULT_TOP: usize = 5;
/// The cache state a request plans for unless it says.
pub const DEFAULT_STATE: CacheState = CacheState::Both;

/// What a caller asks the planner for.
#[derive(Debug, Clone)]
pub struct PlanRequest {
    /// `--layout`: `auto`, `cube:N`, a shape, ...
    pub layout: Option<String>,
    /// `--access`; `None`: every plane.
    pub access: Option<String>,
    /// `--compress`; `None`: raw.
    pub compress: Option<String>,
    /// The machine.
    pub profile: DeviceProfile,
    /// How reads are made.
    pub setup: ReadSetup,
    /// `cold`, `warm` or `both`; `None`: both.
    pub state: Option<String>,
    /// The ingest memory bound the shards must fit (see [`Planner::ingest_task_limit`]).
    pub memory_limit: Option<u64>,
    /// Plans to return, the pick first; `None`: [`DEFAULT_TOP`].
    pub top: Option<usize>,
}

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

/// Plan a layout for an array of `shape` and `dtype`: the pick first, then
/// runners-up. Errors name the option at fault.
pub fn plan_layout(
    shape: &[u64],
    dtype: DType,
    request: &PlanRequest,
) -> Result<Vec<Evaluated>, String> {
    if shape.is_empty() || shape.contains(&0) {
        return Err("shape must have positive sides".into());
    }
    let strategy = match &request.layout {
        None => Strategy::Auto,
        Some(name) => Strategy::parse(name)?,
    };
    let mix = match &request.access {
        None => AccessMix::default_for(shape.len()),
        Some(text) => AccessMix::parse(text, shape.len())?,
    };
    let compression = match &request.compress {
        None => Compression::None,
        Some(name) => Compression::parse(name)?,
    };
    let planner = Planner {
        codec: chunk_codec(&request.profile, request.compress.as_deref()),
        profile: request.profile.clone(),
        mix,
        setup: request.setup,
        state: match &request.state {
            None => DEFAULT_STATE,
            Some(text) => CacheState::parse(text)?,
        },
        block: compression.block_side(),
        ingest_task_limit: ingest::task_budget(
            request.memory_limit.unwrap_or(ingest::DEFAULT_MEMORY_LIMIT),
            request.setup.threads,
        ),
    };
    let ranked = strategy.choose(shape, dtype.size(), &planner)?;
    Ok(ranked
        .into_iter()
        .take(request.top.unwrap_or(DEFAULT_TOP).max(1))
        .collect())
}
