//! A volume and its orientation copies, read as one array: each read goes
//! to the copy the cost model predicts fastest for its window.

use std::{collections::HashMap, path::Path, sync::Mutex};

use crate::{
    error::Result,
    plan::{
        predict_both, stored_array, CacheState, DeviceProfile, ReadSetup, StateWeights, StoredArray,
    },
    store::{ReadOptions, StoreError, ZarrArray},
    window::Window,
};

/// The arrays that hold the same data (the volume first), and the routes
/// chosen so far, by the window's shape and steps.
pub struct ArrayWithViews {
    arrays: Vec<ZarrArray>,
    models: Vec<StoredArray>,
    weights: StateWeights,
    setup: ReadSetup,
    profile: DeviceProfile,
    routes: Mutex<HashMap<Vec<u64>, usize>>,
}

impl ArrayWithViews {
    /// Open the volume at `path`, for reading; without `copies` every read
    /// goes to it. The routes are costed for reads made with `options` on
    /// the machine `profile` describes.
    pub fn open(
        path: &Path,
        copies: &[impl AsRef<Path>],
        profile: DeviceProfile,
        options: &ReadOptions,
    ) -> Result<Self> {
        let mut arrays = vec![ZarrArray::open_to_read(path)?];
        for copy in copies {
            let copy = ZarrArray::open_to_read(copy)?;
            if copy.shape() != arrays[0].shape() || copy.dtype() != arrays[0].dtype() {
                return Err(StoreError::Metadata {
                    path: copy.path().join("zarr.json"),
                    message: format!(
                        "a copy of {} must have its shape and dtype",
                        arrays[0].path().display()
                    ),
                }
                .into());
            }
            arrays.push(copy);
        }
        let setup = ReadSetup {
            threads: options.parallelism.threads,
            in_flight: options.parallelism.in_flight,
            verify: options.verify,
        };
        // Arrays the model does not describe (unsharded) are never routed among.
        let models = if arrays.len() > 1 {
            arrays
                .iter()
                .map(|a| stored_array(a, &profile))
                .collect::<Option<Vec<_>>>()
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        Ok(Self {
            weights: StateWeights::of(CacheState::Both, &profile, &setup),
            arrays,
            models,
            setup,
            profile,
            routes: Mutex::new(HashMap::new()),
        })
    }

    /// The volume (not a copy).
    pub fn volume(&self) -> &ZarrArray {
        &self.arrays[0]
    }

    /// The volume, then its copies.
    pub fn arrays(&self) -> &[ZarrArray] {
        &self.arrays
    }

    /// Index in [`Self::arrays`] of the array a read of `window` goes to:
    /// the one whose predicted cold plus warm time, weighed as the planner
    /// weighs them, is least.
    pub fn route(&self, window: &Window) -> Result<usize> {
        window.validate(self.volume().shape())?;
        if self.models.is_empty() {
            return Ok(0);
        }
        let key: Vec<u64> = window.dims.iter().flat_map(|d| [d.len(), d.step]).collect();
        if let Some(&choice) = self.routes.lock().expect("routes lock").get(&key) {
            return Ok(choice);
        }
        let mut best = (f64::INFINITY, 0);
        for (i, model) in self.models.iter().enumerate() {
            let (warm, cold) = predict_both(model, window, &self.setup, &self.profile);
            let t = self.weights.apply(warm.seconds, cold.seconds);
            if t < best.0 {
                best = (t, i);
            }
        }
        self.routes.lock().expect("routes lock").insert(key, best.1);
        Ok(best.1)
    }

    /// Read `window` from the array predicted fastest into `out`.
    pub fn read_into(&self, window: &Window, out: &mut [u8], options: &ReadOptions) -> Result<()> {
        self.arrays[self.route(window)?].read_into(window, out, options)
    }
}
