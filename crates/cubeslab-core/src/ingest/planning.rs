//! The layout an ingest would choose for an array, asked for by name: the
//! strategy, accesses, compression and cache state as a caller writes them,
//! within the ingest's memory bound (what `cubeslab plan` shows).

use super::{task_budget, DEFAULT_MEMORY_LIMIT};
use crate::{
    compress::Compression,
    dtype::DType,
    plan::{
        chunk_codec, AccessMix, CacheState, DeviceProfile, Evaluated, Planner, ReadSetup, Strategy,
        DEFAULT_STATE, DEFAULT_TOP,
    },
};

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

/// Plan a layout for an array of `shape` and `dtype`: the pick first, then
/// runners-up. Errors name the option at fault.
pub fn plan_layout(
    shape: &[u64],
    dtype: DType,
    request: &PlanRequest,
) -> Result<Vec<Evaluated>, String> {
    if shape.is_empty() || shape.len() > crate::window::MAX_DIMS {
        return Err(format!(
            "shape {shape:?} has {} dimensions; cubeslab stores arrays of 1 to {}",
            shape.len(),
            crate::window::MAX_DIMS
        ));
    }
    if shape.contains(&0) {
        return Err(format!(
            "shape {shape:?} has a side of 0; cubeslab stores non-empty arrays"
        ));
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
        ingest_task_limit: task_budget(
            request.memory_limit.unwrap_or(DEFAULT_MEMORY_LIMIT),
            request.setup.threads,
        ),
    };
    let keep = request.top.unwrap_or(DEFAULT_TOP).max(1);
    let ranked = strategy.choose(shape, dtype.size(), &planner, keep)?;
    Ok(ranked.into_iter().take(keep).collect())
}
