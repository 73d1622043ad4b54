//! Copying an array into another of the same shape and type but another
//! layout (an orientation copy). The destination's shards are taken in
//! groups whose window spans whole chunks of the source along every
//! dimension: each group's window is read in one parallel read (every
//! source chunk decoded and checked about once in all), then its shards
//! are cut from it, encoded and written whole and atomically, in parallel.

use std::sync::mpsc::{channel, sync_channel, Receiver, Sender};

use rayon::prelude::*;

use super::{Prefill, ReadOptions, ShardBuilder, StoreError, ZarrArray};
use crate::{
    config::{max_threads, Parallelism},
    error::Result,
    progress::Progress,
    window::{copy_block, unravel, DimRange, Window},
};

impl ZarrArray {
    /// Fill this (sharded) array with the contents of `source`, holding at
    /// most about `memory_limit` bytes of buffers at once; `progress`
    /// counts the bytes written and may stop the copy.
    pub fn copy_from(
        &self,
        source: &ZarrArray,
        parallelism: Parallelism,
        memory_limit: u64,
        progress: &Progress,
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
        let shape = self.shape().to_vec();
        let nd = shape.len();
        let elem = self.dtype().size();
        let grid = self.chunk_grid_shape();
        let shard = self.chunk_shape().to_vec();
        let source_chunk = source
            .inner_chunk_shape()
            .unwrap_or(source.chunk_shape())
            .to_vec();
        let shard_bytes = shard.iter().product::<u64>() * elem as u64;
        // A thread writing a shard waits on the device: twice as many
        // writers as threads keep the cores busy cutting meanwhile (a time
        // slice copy took a quarter less time), unless their shards would
        // take over a quarter of the memory. Each holds a shard and its
        // encoded copy beside the window.
        let doubled = (2 * parallelism.threads).min(max_threads());
        let writers = if 2 * shard_bytes * doubled as u64 <= memory_limit / 4 {
            doubled
        } else {
            parallelism.threads
        };
        let workers_bytes = 2 * shard_bytes * writers as u64;
        let writers = Parallelism::resolve(Some(writers), None);
        let mut group: Vec<u64> = (0..nd)
            .map(|d| source_chunk[d].div_ceil(shard[d]).clamp(1, grid[d]))
            .collect();
        let window_bytes = |g: &[u64]| -> u64 {
            (0..nd)
                .map(|d| (g[d] * shard[d]).min(shape[d]))
                .product::<u64>()
                * elem as u64
        };
        // Shards one element deep along the last dimension (time slices)
        // are cut from a copy of the window with that dimension moved first,
        // where each is a run of whole rows: cut from the window itself, each
        // would gather single elements across all of it.
        let inner = self.inner_chunk_shape().unwrap_or(self.chunk_shape());
        let turned = nd >= 2 && inner[nd - 1] == 1;
        // The window being cut, the next one being read meanwhile, and the turned copy.
        let copies = if turned { 3 } else { 2 };
        while copies * window_bytes(&group) + workers_bytes > memory_limit {
            let Some(d) = (0..nd).filter(|&d| group[d] > 1).max_by_key(|&d| group[d]) else {
                break;
            };
            group[d] = group[d].div_ceil(2);
        }
        let groups: Vec<u64> = (0..nd).map(|d| grid[d].div_ceil(group[d])).collect();
        let read = ReadOptions {
            parallelism,
            verify: true,
        };
        let firsts: Vec<Vec<u64>> = (0..groups.iter().product::<u64>())
            .map(|g| {
                let at = unravel(g, &groups);
                (0..nd).map(|d| at[d] * group[d]).collect()
            })
            .collect();
        let windows: Vec<Window> = firsts
            .iter()
            .map(|first| Window {
                dims: (0..nd)
                    .map(|d| {
                        let start = first[d] * shard[d];
                        DimRange::new(start, ((first[d] + group[d]) * shard[d]).min(shape[d]))
                    })
                    .collect(),
            })
            .collect();
        let mut last_first = Vec::new();
        self.recycle_buffers(workers_bytes as usize);
        std::thread::scope(|scope| -> Result<()> {
            let (filled, recycle) = read_ahead(scope, source, windows.clone(), read, elem);
            for (first, window) in firsts.iter().zip(&windows) {
                progress.check()?;
                let buffer = filled
                    .recv()
                    .expect("the reader sends a result per window")?;
                self.cut_group(
                    &buffer,
                    first,
                    window,
                    &group,
                    turned,
                    &mut last_first,
                    &writers,
                    progress,
                )?;
                let _ = recycle.send(buffer); // read into again, unless the reader is done
            }
            Ok(())
        })?;
        self.recycle_buffers(0);
        Ok(())
    }

    /// Cut the shards of the group at `first` (`group` shards along each
    /// dimension, clipped to the grid) from `buffer`, which holds `window`
    /// of the source, and write them in parallel.
    #[allow(clippy::too_many_arguments)]
    fn cut_group(
        &self,
        buffer: &[u8],
        first: &[u64],
        window: &Window,
        group: &[u64],
        turned: bool,
        last_first: &mut Vec<u8>,
        writers: &Parallelism,
        progress: &Progress,
    ) -> Result<()> {
        let shape = self.shape().to_vec();
        let nd = shape.len();
        let elem = self.dtype().size();
        let grid = self.chunk_grid_shape();
        let sides = window.shape();
        let held: Vec<u64> = (0..nd).map(|d| group[d].min(grid[d] - first[d])).collect();
        let depth = sides[nd - 1] as usize;
        let cut = if turned && depth > 1 {
            move_last_first(buffer, depth, elem, last_first, *writers);
            let mut turned_sides = sides.clone();
            turned_sides.rotate_right(1); // as Cut::fill turns each chunk's corner
            Cut {
                window,
                from: last_first,
                sides: turned_sides,
                turned: true,
            }
        } else {
            Cut {
                window,
                from: buffer,
                sides,
                turned: false,
            }
        };
        writers.pool().install(|| {
            (0..held.iter().product::<u64>())
                .into_par_iter()
                .try_for_each(|k| {
                    let pos = unravel(k, &held);
                    let indices: Vec<u64> = (0..nd).map(|d| first[d] + pos[d]).collect();
                    let mut builder = self.shard_builder(&indices, Prefill::EdgeChunks)?;
                    let written = cut.fill(&mut builder, &indices, &shape, elem);
                    // A copy's errors against its (already decoded) source are not
                    // the data's errors: those are the main array's, recorded at ingest.
                    self.write_shard(builder)?;
                    progress.add(written);
                    Ok::<(), crate::Error>(())
                })
        })?;
        Ok(())
    }
}

/// Read `windows` of `source` one after another on a thread of their own,
/// each while the one before is cut: one result per window, in order. A
/// buffer sent back is read into again, so that two are used in all.
fn read_ahead<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    source: &'scope ZarrArray,
    windows: Vec<Window>,
    read: ReadOptions,
    elem: usize,
) -> (Receiver<Result<Vec<u8>>>, Sender<Vec<u8>>) {
    let (send_filled, filled) = sync_channel(0);
    let (recycle, returned) = channel::<Vec<u8>>();
    scope.spawn(move || {
        for window in windows {
            let mut buffer = returned.try_recv().unwrap_or_default();
            buffer.resize(window.num_elements() as usize * elem, 0);
            let result = source
                .read_into(&window, &mut buffer, &read)
                .map(|()| buffer);
            let failed = result.is_err();
            if send_filled.send(result).is_err() || failed {
                return;
            }
        }
    });
    (filled, recycle)
}

/// A window of the source read into memory, from which shards are cut.
struct Cut<'a> {
    window: &'a Window,
    /// The window's elements, C order over `sides`.
    from: &'a [u8],
    sides: Vec<u64>,
    /// `from` holds the window with its last dimension moved first.
    turned: bool,
}

impl Cut<'_> {
    /// Fill every chunk of `builder`, the shard at `indices`, from the
    /// window; returns the bytes filled.
    fn fill(&self, builder: &mut ShardBuilder, indices: &[u64], shape: &[u64], elem: usize) -> u64 {
        let nd = shape.len();
        let inner = builder.inner_shape().to_vec();
        let cps = builder.chunks_per_shard().to_vec();
        // A chunk one element deep has the bytes of its shape with that side first.
        let mut chunk_shape = inner.clone();
        if self.turned {
            chunk_shape.rotate_right(1);
        }
        let mut written = 0u64;
        for i in 0..cps.iter().product::<u64>() {
            let c = unravel(i, &cps);
            // The chunk's corner inside the window, and its sides there.
            let mut corner = vec![0u64; nd];
            let mut extent = vec![0u64; nd];
            for d in 0..nd {
                let start = (indices[d] * cps[d] + c[d]) * inner[d];
                let stop = (start + inner[d]).min(shape[d]);
                corner[d] = start - self.window.dims[d].start;
                extent[d] = stop.saturating_sub(start);
            }
            let Some(chunk) = builder.chunk_mut(i as usize) else {
                continue; // wholly outside the array
            };
            if self.turned {
                corner.rotate_right(1);
                extent.rotate_right(1);
            }
            copy_block(
                self.from,
                &self.sides,
                &corner,
                chunk,
                &chunk_shape,
                &extent,
                elem,
            );
            written += extent.iter().product::<u64>() * elem as u64;
        }
        written
    }
}

/// Rows of `window` at a time in each task of [`move_last_first`]: their
/// `depth` elements each, read once, go to `depth` runs of the output.
const TURN_ROWS: usize = 1024;

/// `window`, C-order rows of `depth` elements of `elem` bytes, into `out`
/// with that last dimension moved first (a transpose of rows x depth),
/// in parallel over blocks of rows.
fn move_last_first(
    window: &[u8],
    depth: usize,
    elem: usize,
    out: &mut Vec<u8>,
    parallelism: Parallelism,
) {
    let rows = window.len() / (depth * elem);
    out.resize(window.len(), 0);
    // Each block's piece of every output row: disjoint, so tasks share none.
    let blocks = rows.div_ceil(TURN_ROWS);
    let mut pieces: Vec<Vec<&mut [u8]>> = (0..blocks).map(|_| Vec::with_capacity(depth)).collect();
    for row in out.chunks_mut(rows * elem) {
        for (b, piece) in row.chunks_mut(TURN_ROWS * elem).enumerate() {
            pieces[b].push(piece);
        }
    }
    parallelism.pool().install(|| {
        pieces.into_par_iter().enumerate().for_each(|(b, mut to)| {
            let rows = to[0].len() / elem;
            let from = &window[b * TURN_ROWS * depth * elem..][..rows * depth * elem];
            match elem {
                1 => turn_block::<1>(from, depth, &mut to),
                2 => turn_block::<2>(from, depth, &mut to),
                4 => turn_block::<4>(from, depth, &mut to),
                8 => turn_block::<8>(from, depth, &mut to),
                _ => {
                    for (l, piece) in to.iter_mut().enumerate() {
                        for (r, out) in piece.chunks_exact_mut(elem).enumerate() {
                            out.copy_from_slice(&from[(r * depth + l) * elem..][..elem]);
                        }
                    }
                }
            }
        })
    });
}

/// One block's turn: `from`, rows of `depth` elements of `E` bytes, into
/// one piece per element of a row. Each piece is filled in one sequential
/// sweep while the block (some tens of KiB) stays in the CPU's cache.
fn turn_block<const E: usize>(from: &[u8], depth: usize, to: &mut [&mut [u8]]) {
    for (l, piece) in to.iter_mut().enumerate() {
        for (r, out) in piece.chunks_exact_mut(E).enumerate() {
            let at = (r * depth + l) * E;
            out.copy_from_slice(&from[at..at + E]);
        }
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
        dtype::DType,
        progress::Progress,
        store::{ArraySpec, ReadOptions, ZarrArray, SERIAL_BYTES},
        window::{DimRange, Window},
    };

    #[test]
    fn a_copy_into_another_layout_holds_the_same_values_edges_included() {
        let dir = tempfile::tempdir().unwrap();
        // Over TURN_ROWS rows of 29: time-slice copies turn it in several blocks.
        let shape = vec![41u64, 67, 29];
        let spec = |chunks: Vec<u64>, inner: Vec<u64>| ArraySpec {
            shape: shape.clone(),
            dtype: DType::Float32,
            chunk_shape: chunks,
            inner_chunks: Some(inner),
            codecs: Vec::new(),
            dimension_names: vec!["a".into(), "b".into(), "c".into()],
            fill_value: DType::Float32.default_fill(),
            attributes: Default::default(),
            generation: None,
        };
        let from = ZarrArray::create(
            dir.path().join("from"),
            &spec(vec![8, 4, 12], vec![4, 2, 6]),
        )
        .unwrap();
        let n = shape.iter().product::<u64>() as usize;
        let data: Vec<u8> = (0..n).flat_map(|i| (i as f32).to_ne_bytes()).collect();
        from.write_array(&data, Parallelism::resolve(Some(2), None))
            .unwrap();
        for (chunks, inner, limit) in [
            (vec![1, 67, 29], vec![1, 67, 29], 1 << 30),
            (vec![41, 67, 1], vec![41, 67, 1], 1 << 30),
            (vec![40, 67, 2], vec![20, 67, 1], 1 << 30),
            (vec![16, 67, 1], vec![16, 67, 1], 64 << 10),
            (vec![6, 3, 10], vec![3, 3, 5], 4096),
        ] {
            let to = ZarrArray::create(
                dir.path().join(format!("to{chunks:?}{inner:?}")),
                &spec(chunks, inner),
            )
            .unwrap();
            let progress = Progress::default();
            progress.begin("copy", crate::progress::Unit::Bytes, n as u64 * 4, 0);
            to.copy_from(&from, Parallelism::resolve(Some(2), None), limit, &progress)
                .unwrap();
            assert_eq!(progress.snapshot().done, n as u64 * 4);
            let mut out = vec![0u8; n * 4];
            let whole = Window {
                dims: shape.iter().map(|&s| DimRange::new(0, s)).collect(),
            };
            let options = ReadOptions {
                parallelism: Parallelism::resolve(Some(1), None),
                verify: true,
            };
            to.read_into(&whole, &mut out, &options).unwrap();
            assert!(out == data);
        }
    }

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
            generation: None,
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

    #[test]
    fn a_turn_moves_the_last_dimension_first_for_every_element_size() {
        // Rows over one block of TURN_ROWS, so that blocks end inside the output rows.
        let (rows, depth) = (super::TURN_ROWS + 77, 5);
        for elem in [1usize, 2, 4, 8, 3] {
            let window: Vec<u8> = (0..rows * depth * elem)
                .map(|i| (i * 7 % 251) as u8)
                .collect();
            let mut turned = Vec::new();
            super::move_last_first(
                &window,
                depth,
                elem,
                &mut turned,
                Parallelism::resolve(Some(2), None),
            );
            for r in 0..rows {
                for l in 0..depth {
                    let (a, b) = ((r * depth + l) * elem, (l * rows + r) * elem);
                    assert_eq!(
                        window[a..a + elem],
                        turned[b..b + elem],
                        "elem {elem} row {r} {l}"
                    );
                }
            }
        }
    }
}
