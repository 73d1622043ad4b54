//! Copying an array into another of the same shape and type but another
//! layout (an orientation copy): each destination shard is filled chunk by
//! chunk with reads from the source, then written whole and atomically.

use rayon::prelude::*;

use super::{ReadOptions, StoreError, ZarrArray};
use crate::{
    config::Parallelism,
    error::Result,
    window::{unravel, DimRange, Window},
};

impl ZarrArray {
    /// Fill this (sharded) array with the contents of `source`, holding at
    /// most about `memory_limit` bytes of shards at once.
    pub fn copy_from(
        &self,
        source: &ZarrArray,
        parallelism: Parallelism,
        memory_limit: u64,
    ) -> Result<()> {
        if source.shape() != self.shape() || source.dtype() != self.dtype() {
            return Err(StoreError::Unsupported {
                path: self.dir.clone(),
                what: format!(
                    "copying a {:?} {} array into a {:?} {} one",
                    source.shape(),
                    source.dtype().name(),
                    self.shape(),
                    self.dtype().name()
                ),
            }
            .into());
        }
        let grid = self.chunk_grid_shape();
        let n_shards: u64 = grid.iter().product();
        let shard_bytes = self.chunk_shape().iter().product::<u64>() * self.dtype().size() as u64;
        // Each worker holds one shard (and its encoded copy) at a time.
        let workers =
            (memory_limit / (2 * shard_bytes).max(1)).clamp(1, parallelism.threads as u64) as usize;
        let read = ReadOptions {
            parallelism: Parallelism::resolve(Some(1), Some(parallelism.in_flight)),
            verify: true,
        };
        let nd = grid.len();
        Parallelism::resolve(Some(workers), None)
            .pool()
            .install(|| {
                (0..n_shards).into_par_iter().try_for_each(|s| {
                    let indices = &unravel(s, &grid)[..nd];
                    let mut builder = self.shard_builder(indices)?;
                    let inner = builder.inner_shape().to_vec();
                    let cps = builder.chunks_per_shard().to_vec();
                    let elem = self.dtype().size();
                    let mut scratch = Vec::new();
                    for i in 0..cps.iter().product::<u64>() {
                        let pos = unravel(i, &cps);
                        let window = Window {
                            dims: (0..nd)
                                .map(|d| {
                                    let start = (indices[d] * cps[d] + pos[d]) * inner[d];
                                    let stop = (start + inner[d]).min(self.shape()[d]);
                                    DimRange::new(start.min(stop), stop)
                                })
                                .collect(),
                        };
                        let Some(chunk) = builder.chunk_mut(i as usize) else {
                            continue; // wholly outside the array
                        };
                        let sides = window.shape();
                        if sides == inner {
                            source.read_into(&window, chunk, &read)?;
                        } else {
                            // An edge chunk: read the part inside, place its rows.
                            scratch.resize(window.num_elements() as usize * elem, 0);
                            source.read_into(&window, &mut scratch, &read)?;
                            place_rows(&scratch, &sides, chunk, &inner, elem);
                        }
                    }
                    // A copy's errors against its (already decoded) source are not
                    // the data's errors: those are the main array's, recorded at ingest.
                    self.write_shard(builder).map(|_| ())
                })
            })
    }
}

/// Copy a C-order block of `sides` into the corner of a C-order chunk of `inner`.
fn place_rows(block: &[u8], sides: &[u64], chunk: &mut [u8], inner: &[u64], elem: usize) {
    let nd = sides.len();
    let row = sides[nd - 1] as usize * elem;
    if row == 0 {
        return;
    }
    let rows = sides[..nd - 1].iter().product::<u64>();
    for r in 0..rows {
        let idx = unravel(r, &sides[..nd - 1]);
        let mut at = 0u64;
        for d in 0..nd - 1 {
            at = at * inner[d] + idx[d];
        }
        let dst = (at * inner[nd - 1]) as usize * elem;
        let src = r as usize * row;
        chunk[dst..dst + row].copy_from_slice(&block[src..src + row]);
    }
}

#[cfg(test)]
mod tests {
    use std::{
        cell::Cell,
        sync::atomic::{AtomicUsize, Ordering},
    };

    use rayon::prelude::*;

    use crate::{
        config::Parallelism,
        store::{ArraySpec, DType, ReadOptions, ZarrArray, SERIAL_BYTES},
        window::{DimRange, Window},
    };

    thread_local! {
        /// Tasks of the test's pool running on this thread's stack right now.
        static DEPTH: Cell<usize> = const { Cell::new(0) };
    }

    #[test]
    fn one_thread_reads_in_a_pools_tasks_never_nest_its_tasks() {
        // An orientation copy's workers each read with one thread, as here.
        // Were such a read handed to a pool, the waiting worker would run
        // further tasks of its own pool on its stack: depth above 1.
        let (planes, rows, cols) = (16u64, 512u64, 1024u64);
        let plane_bytes = rows * cols * 4;
        assert!(
            plane_bytes > SERIAL_BYTES,
            "reads small enough stay on the caller anyway"
        );
        let dir = tempfile::tempdir().unwrap();
        let spec = ArraySpec {
            shape: vec![planes, rows, cols],
            dtype: DType::Float32,
            chunk_shape: vec![1, rows, cols],
            inner_chunks: Some(vec![1, rows, cols]),
            codecs: Vec::new(),
            dimension_names: vec!["a".into(), "b".into(), "c".into()],
            fill_value: DType::Float32.default_fill(),
            attributes: Default::default(),
        };
        let array = ZarrArray::create(dir.path().join("a"), &spec).unwrap();
        let n = (planes * rows * cols) as usize;
        let data: Vec<u8> = (0..n).flat_map(|i| (i as f32).to_ne_bytes()).collect();
        array
            .write_array(&data, Parallelism::resolve(Some(2), None))
            .unwrap();
        let one = ReadOptions {
            parallelism: Parallelism::resolve(Some(1), None),
            verify: true,
        };
        let deepest = AtomicUsize::new(0);
        Parallelism::resolve(Some(2), None).pool().install(|| {
            (0..planes).into_par_iter().for_each(|p| {
                let depth = DEPTH.with(|d| {
                    d.set(d.get() + 1);
                    d.get()
                });
                deepest.fetch_max(depth, Ordering::Relaxed);
                let window = Window {
                    dims: vec![
                        DimRange::new(p, p + 1),
                        DimRange::new(0, rows),
                        DimRange::new(0, cols),
                    ],
                };
                let mut out = vec![0u8; plane_bytes as usize];
                array.read_into(&window, &mut out, &one).unwrap();
                let first = f32::from_ne_bytes(out[..4].try_into().unwrap());
                assert_eq!(first, (p * rows * cols) as f32);
                DEPTH.with(|d| d.set(d.get() - 1));
            })
        });
        assert_eq!(deepest.into_inner(), 1);
    }
}
