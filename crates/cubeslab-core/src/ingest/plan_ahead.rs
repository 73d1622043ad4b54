//! Planning the layouts while the trace headers are scanned. A plan needs
//! only the array's shape, which the first inline of a regular survey
//! already tells; on a cold file the scan waits on the disk, and the
//! planner's CPU time hides behind it. A guess the scan does not confirm
//! is set aside and the layouts are planned again.

use std::{path::Path, thread::JoinHandle};

use super::{
    layouts::{amplitude_dtype, plan_layouts, Layouts},
    survey::RecordedLayouts,
    IngestOptions,
};
use crate::{error::Result, segy::Geometry, segy::SegyFile};

/// Layouts being planned for a guessed shape.
pub(super) struct PlanAhead {
    shape: Vec<u64>,
    planning: JoinHandle<Result<Layouts>>,
}

impl PlanAhead {
    /// Start planning a new store at `store` (not a resumed one, whose
    /// recorded layouts decide) for the shape the first traces of
    /// `source` suggest, if they suggest one.
    pub fn start(store: &Path, source: &SegyFile, options: &IngestOptions) -> Option<Self> {
        let mut shape = Geometry::guess_trace_shape(source, &options.scan)?;
        shape.push(source.samples as u64);
        let dtype = amplitude_dtype(options, source);
        let (store, options, guessed) = (store.to_path_buf(), options.clone(), shape.clone());
        let planning = std::thread::Builder::new()
            .name("cubeslab-plan-ahead".into())
            .spawn(move || {
                plan_layouts(
                    &store,
                    &guessed,
                    dtype,
                    &options,
                    &RecordedLayouts::default(),
                )
            })
            .ok()?;
        Some(Self { shape, planning })
    }

    /// The layouts planned, if they were planned for `shape`. (Otherwise
    /// the planning finishes unheeded.)
    pub fn result_for(self, shape: &[u64]) -> Option<Result<Layouts>> {
        (self.shape == shape)
            .then(|| self.planning.join().ok())
            .flatten()
    }
}
