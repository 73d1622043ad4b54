//! Which of several arrays holding the same data in different layouts (a
//! volume and its orientation copies) a read of a window goes to: the one
//! whose predicted cold plus warm time, weighed as the planner weighs them,
//! is least. Choices are kept by the window's shape and steps.

use std::{collections::HashMap, sync::Mutex};

use crate::{
    plan::{predict_both, CacheState, DeviceProfile, ReadSetup, StateWeights, StoredArray},
    store::ReadOptions,
    window::Window,
};

/// The cost models of the arrays, and the routes chosen so far.
pub struct Router {
    models: Vec<StoredArray>,
    weights: StateWeights,
    setup: ReadSetup,
    profile: DeviceProfile,
    routes: Mutex<HashMap<Vec<u64>, usize>>,
}

impl Router {
    /// Route among arrays described by `models` (in the arrays' order) for
    /// reads made with `options` on the machine `profile` describes. With
    /// fewer than two models every read goes to the first array.
    pub fn new(models: Vec<StoredArray>, profile: DeviceProfile, options: &ReadOptions) -> Self {
        let setup = ReadSetup {
            threads: options.parallelism.threads,
            in_flight: options.parallelism.in_flight,
            verify: options.verify,
        };
        Self {
            weights: StateWeights::of(CacheState::Both, &profile, &setup),
            models,
            setup,
            profile,
            routes: Mutex::new(HashMap::new()),
        }
    }

    /// Index of the array a read of `window` (checked by the caller) goes to.
    pub fn route(&self, window: &Window) -> usize {
        if self.models.len() < 2 {
            return 0;
        }
        let key: Vec<u64> = window.dims.iter().flat_map(|d| [d.len(), d.step]).collect();
        if let Some(&choice) = self.routes.lock().expect("routes lock").get(&key) {
            return choice;
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
        best.1
    }
}
