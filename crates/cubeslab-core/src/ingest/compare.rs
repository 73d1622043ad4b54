//! A store's amplitudes against the SEG-Y samples they were made from:
//! every shard rebuilt from the source, read back, and compared chunk by
//! chunk: at the samples' own precision for `verify --against` (float32
//! rounds 32-bit integers and float64), and as the ingest built them for a
//! resumed lossy ingest, whose codec errors must cover the chunks an
//! earlier run wrote.

use crate::{
    compress::{ChunkErrors, ErrorStats},
    config::Parallelism,
    dtype::DType,
    error::Result,
    segy::{Geometry, SegyFile},
    store::{ReadOptions, ShardBuilder, ZarrArray},
    window::{strides, unravel, Window},
};

use super::{rebuild_shards, Layout};

/// What the stored values are compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reference {
    /// The source's samples at their own precision (float64 for a float32 store).
    Samples,
    /// The values the ingest made of them, in the stored type (the codec's error alone).
    Stored,
}

/// The errors of every chunk of `amplitude` against `source` (scanned as
/// `geometry`), rebuilt a task at a time within `memory_limit`.
pub fn compare_with_source(
    amplitude: &ZarrArray,
    source: &SegyFile,
    geometry: &Geometry,
    parallelism: Parallelism,
    memory_limit: u64,
    reference: Reference,
) -> Result<ChunkErrors> {
    let shape = amplitude.shape().to_vec();
    let shard = amplitude.chunk_shape().to_vec();
    let layout = Layout {
        inner: amplitude
            .inner_chunk_shape()
            .map_or_else(|| shard.clone(), <[u64]>::to_vec),
        shard,
    };
    let one = ReadOptions {
        parallelism: Parallelism::resolve(Some(1), Some(parallelism.in_flight)),
        verify: true,
    };
    let stored = amplitude.dtype();
    let (dtype, fill) = match reference {
        Reference::Samples if stored == DType::Float32 => {
            let fill =
                f32::from_ne_bytes(amplitude.fill_bytes().try_into().expect("a float32 fill"));
            (DType::Float64, (fill as f64).to_ne_bytes().to_vec())
        }
        _ => (stored, amplitude.fill_bytes().to_vec()),
    };
    let per_shard = rebuild_shards(
        source,
        geometry,
        &shape,
        &layout,
        dtype,
        &fill,
        memory_limit,
        parallelism,
        |built| compare_shard(amplitude, &layout, built, dtype, &one),
    )?;
    let mut errors = ChunkErrors::default();
    for e in &per_shard {
        errors.merge(e);
    }
    Ok(errors)
}

/// Read the shard `built` stands for from the store and compare each inner chunk.
fn compare_shard(
    array: &ZarrArray,
    layout: &Layout,
    built: &ShardBuilder,
    built_type: DType,
    options: &ReadOptions,
) -> Result<ChunkErrors> {
    let shape = array.shape();
    let nd = shape.len();
    let elem = array.dtype().size();
    let indices = built.indices();
    let window = Window::of_chunk(indices, &layout.shard, shape);
    let extent = window.shape();
    let mut stored = vec![0u8; window.num_elements() as usize * elem];
    array.read_into(&window, &mut stored, options)?;
    let stored_strides = strides(&extent);
    let inner = &layout.inner;
    let inner_strides = strides(inner);
    let cps: Vec<u64> = layout.shard.iter().zip(inner).map(|(s, c)| s / c).collect();
    let key = array
        .chunk_path(indices)
        .strip_prefix(array.path())
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let mut errors = ChunkErrors::default();
    for i in 0..cps.iter().product::<u64>() {
        let Some(chunk) = built.chunk(i as usize) else {
            continue;
        };
        let pos = unravel(i, &cps);
        // The chunk's part inside the array, compared row by row along the last dimension.
        let origin: Vec<u64> = (0..nd).map(|d| pos[d] * inner[d]).collect();
        let sides: Vec<u64> = (0..nd)
            .map(|d| inner[d].min(extent[d].saturating_sub(origin[d])))
            .collect();
        if sides.contains(&0) {
            continue;
        }
        let (row, built_row) = (
            sides[nd - 1] as usize * elem,
            sides[nd - 1] as usize * built_type.size(),
        );
        let rows: u64 = sides[..nd - 1].iter().product();
        let mut stats = ErrorStats::default();
        for r in 0..rows {
            let at = unravel(r, &sides[..nd - 1]);
            let (mut from_chunk, mut from_store) = (0u64, 0u64);
            for d in 0..nd - 1 {
                from_chunk += at[d] * inner_strides[d];
                from_store += (origin[d] + at[d]) * stored_strides[d];
            }
            from_store += origin[nd - 1];
            let (c, s) = (
                from_chunk as usize * built_type.size(),
                from_store as usize * elem,
            );
            stats.merge(&ErrorStats::of_mixed(
                &chunk[c..c + built_row],
                built_type,
                &stored[s..s + row],
                array.dtype(),
            ));
        }
        errors.add(&format!("{key} (inner chunk {i})"), &stats);
    }
    Ok(errors)
}
