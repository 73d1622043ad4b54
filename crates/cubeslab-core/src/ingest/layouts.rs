//! The layouts an ingest writes, planned from the array's shape alone: the
//! volume's (the pick of the strategy asked for) and each view's.

use std::path::Path;

use serde_json::{Map, Value};

use super::{
    survey::{RecordedLayouts, AMPLITUDE},
    AmplitudeType, IngestOptions,
};
use crate::{
    config::Parallelism,
    dtype::DType,
    error::Result,
    plan::{Access, AccessMix, CacheState, Evaluated, Layout, Planner, ReadSetup, Strategy},
    rows::tasks::task_budget,
    segy::SegyFile,
    store::StoreError,
};

/// An orientation copy to write: the access it serves, its array, its plan.
pub(super) struct PlannedView {
    pub access: String,
    pub array: String,
    pub plan: Evaluated,
}

/// The element type an ingest stores the amplitudes as.
pub(super) fn amplitude_dtype(options: &IngestOptions, source: &SegyFile) -> DType {
    match options.dtype {
        AmplitudeType::Float32 => DType::Float32,
        AmplitudeType::Native => source.format.native_dtype(),
        AmplitudeType::Given(d) => d,
    }
}

/// The layouts an ingest writes: the volume's plan (the pick first) and
/// each view's.
pub(super) struct Layouts {
    pub plan: Vec<Evaluated>,
    pub layout: Layout,
    pub views: Vec<PlannedView>,
}

/// Plan the layouts of a store at `store` of `shape` and `dtype`:
/// `recorded` holds those a stopped ingest chose, which a resume keeps.
/// A function of its arguments alone, so that it can run ahead of the scan
/// ([`super::plan_ahead::PlanAhead`]).
pub(super) fn plan_layouts(
    store: &Path,
    shape: &[u64],
    dtype: DType,
    options: &IngestOptions,
    recorded: &RecordedLayouts,
) -> Result<Layouts> {
    let unsupported = |what| StoreError::Unsupported {
        path: store.to_path_buf(),
        what,
    };
    let planner = Planner {
        profile: options.profile.clone(),
        mix: match &options.access {
            None => AccessMix::default_for(shape.len()),
            Some(text) => AccessMix::parse(text, shape.len()).map_err(unsupported)?,
        },
        setup: ReadSetup {
            threads: options.parallelism.threads,
            in_flight: Parallelism::default().in_flight,
            verify: true,
        },
        codec: options.codec.clone(),
        state: CacheState::Both,
        block: options.compression.block_side(),
        ingest_task_limit: task_budget(options.memory_limit, options.parallelism.threads),
    };
    let plan = recorded
        .volume
        .as_ref()
        .unwrap_or(&options.layout)
        .choose(shape, dtype.size(), &planner, 1)
        .map_err(unsupported)?;
    let layout = plan[0].layout.clone();
    layout.check(shape).map_err(unsupported)?;
    let views =
        plan_views(&options.views, shape, dtype, &planner, &recorded.views).map_err(unsupported)?;
    Ok(Layouts {
        plan,
        layout,
        views,
    })
}

/// Plan each view's layout for its access alone.
fn plan_views(
    views: &[String],
    shape: &[u64],
    dtype: DType,
    planner: &Planner,
    recorded: &Map<String, Value>,
) -> std::result::Result<Vec<PlannedView>, String> {
    let mut planned: Vec<PlannedView> = Vec::new();
    for text in views {
        let access = Access::parse(text, shape.len())?;
        let name = access.name(shape.len());
        if planned.iter().any(|v| v.access == name) {
            continue;
        }
        if let Some(layout) = recorded.get(&name).and_then(|v| v["layout"].as_str()) {
            let plan = Strategy::parse(layout)?
                .choose(shape, dtype.size(), planner, 1)?
                .remove(0);
            let array = recorded[&name]["array"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            planned.push(PlannedView {
                array,
                access: name,
                plan,
            });
            continue;
        }
        let window = access.window(shape);
        let alone = Planner {
            mix: AccessMix {
                accesses: vec![(access, 1.0)],
            },
            ..planner.clone()
        };
        // A view is the volume laid out for its access: each read one shard
        // holding little else, fetched whole in one trip. When no such
        // layout fits the bounds (a tiny array), the best for the access.
        let mut fitted = alone.rank_one_read_per_shard(shape, dtype.size(), &window, 1);
        let plan = if fitted.is_empty() {
            Strategy::Auto
                .choose(shape, dtype.size(), &alone, 1)?
                .remove(0)
        } else {
            fitted.remove(0)
        };
        let suffix: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        planned.push(PlannedView {
            array: format!("{AMPLITUDE}_{suffix}"),
            access: name,
            plan,
        });
    }
    Ok(planned)
}
