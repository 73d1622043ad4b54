use super::*;
use crate::{
    dtype::DType,
    store::{ArraySpec, ReadOptions},
    window::{DimRange, Window},
};

fn array(dir: &std::path::Path, shape: &[u64], shard: &[u64], inner: &[u64]) -> ZarrArray {
    typed_array(dir, shape, shard, inner, DType::Int16)
}

fn typed_array(
    dir: &std::path::Path,
    shape: &[u64],
    shard: &[u64],
    inner: &[u64],
    dtype: DType,
) -> ZarrArray {
    let spec = ArraySpec {
        shape: shape.to_vec(),
        dtype,
        chunk_shape: shard.to_vec(),
        inner_chunks: Some(inner.to_vec()),
        codecs: Vec::new(),
        dimension_names: vec!["x".into(), "y".into(), "z".into()],
        fill_value: if dtype.is_float() {
            serde_json::json!(0.0)
        } else {
            serde_json::json!(-1)
        },
        attributes: Default::default(),
        generation: None,
    };
    ZarrArray::create(dir.join(format!("a{shard:?}")), &spec).unwrap()
}

/// Rows scattered through a big-endian file in another order than the
/// cells, some cells without one, some rows back to back: every cell holds
/// its row (or the fill value) after a fill under any memory bound, and the
/// sums are the rows' and columns'.
#[test]
fn rows_land_in_their_cells_whatever_the_file_order_and_bound() {
    let dir = tempfile::tempdir().unwrap();
    let shape = [5u64, 7, 23];
    let (cells, ns) = (35usize, 23usize);
    let value = |cell: usize, z: usize| (cell * 100 + z) as i16 - 1000;
    // File order: a 16-byte head, then rows in reverse cell order, every
    // third cell missing, a gap of 6 bytes after every fifth row.
    let mut file = vec![0xAAu8; 16];
    let mut offsets = vec![NO_ROW; cells];
    for (k, cell) in (0..cells).rev().filter(|c| c % 3 != 1).enumerate() {
        offsets[cell] = file.len() as u64;
        for z in 0..ns {
            file.extend_from_slice(&value(cell, z).to_be_bytes());
        }
        if k % 5 == 4 {
            file.extend_from_slice(&[0xBB; 6]);
        }
    }
    let path = dir.path().join("rows.bin");
    std::fs::write(&path, &file).unwrap();
    let source = FileRows {
        path,
        offsets: offsets.clone(),
        little_endian: false,
        binned: None,
    };
    for (shard, inner, limit) in [
        (vec![5u64, 7, 23], vec![5u64, 7, 23], 1u64 << 30),
        (vec![2, 4, 8], vec![1, 2, 4], 1 << 30),
        (vec![4, 4, 10], vec![2, 2, 5], 600 << 10),
    ] {
        let out = array(dir.path(), &shape, &shard, &inner);
        let progress = Progress::default();
        let sums = fill_from_rows(
            &out,
            &source,
            Parallelism::resolve(Some(2), None),
            limit,
            &progress,
        )
        .unwrap();
        let mut read = vec![0u8; cells * ns * 2];
        let whole = Window {
            dims: shape.iter().map(|&s| DimRange::new(0, s)).collect(),
        };
        let options = ReadOptions {
            parallelism: Parallelism::resolve(Some(1), None),
            verify: true,
        };
        out.read_into(&whole, &mut read, &options).unwrap();
        let got: Vec<i16> = read
            .chunks_exact(2)
            .map(|b| i16::from_ne_bytes([b[0], b[1]]))
            .collect();
        let mut columns = vec![0f64; ns];
        for cell in 0..cells {
            let live = offsets[cell] != NO_ROW;
            let row: Vec<i16> = (0..ns)
                .map(|z| if live { value(cell, z) } else { -1 })
                .collect();
            assert_eq!(
                &got[cell * ns..(cell + 1) * ns],
                &row[..],
                "cell {cell}, {shard:?}"
            );
            let total: f64 = if live {
                row.iter().map(|&v| v as f64).sum()
            } else {
                0.0
            };
            assert_eq!(sums.rows[cell], total);
            if live {
                columns
                    .iter_mut()
                    .zip(&row)
                    .for_each(|(c, &v)| *c += v as f64);
            }
        }
        assert_eq!(sums.columns, columns);
        let live = offsets.iter().filter(|&&o| o != NO_ROW).count() as u64;
        assert!(progress.snapshot().done >= live * ns as u64 * 2);
    }
}

#[test]
fn a_file_shorter_than_its_offsets_is_an_error_naming_it_and_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("short.bin");
    std::fs::write(&path, vec![0u8; 100]).unwrap();
    let out = array(dir.path(), &[1, 2, 10], &[1, 2, 10], &[1, 1, 10]);
    let source = FileRows {
        path,
        offsets: vec![0, 90],
        little_endian: true,
        binned: None,
    };
    let error = fill_error(&out, &source);
    assert!(
        error.contains("short.bin") && error.contains("byte offset 90"),
        "{error}"
    );
}

/// The message of a fill that fails.
fn fill_error(out: &ZarrArray, source: &FileRows) -> String {
    let threads = Parallelism::resolve(Some(1), None);
    fill_from_rows(out, source, threads, 1 << 30, &Progress::default())
        .unwrap_err()
        .to_string()
}

fn read_f32(array: &ZarrArray) -> Vec<f32> {
    let shape = array.shape().to_vec();
    let mut read = vec![0u8; shape.iter().product::<u64>() as usize * 4];
    let whole = Window {
        dims: shape.iter().map(|&s| DimRange::new(0, s)).collect(),
    };
    let options = ReadOptions {
        parallelism: Parallelism::resolve(Some(1), None),
        verify: true,
    };
    array.read_into(&whole, &mut read, &options).unwrap();
    read.chunks_exact(4)
        .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// Sparse rows (f64 keys, u16 values, little-endian, laid out key array
/// then value array per record) binned into float32 rows: every bin holds
/// the sum of its values, as computed here one pair at a time; pairs
/// outside the bins and merged into a filled one are counted once each
/// whatever the shards along the row.
#[test]
fn sparse_rows_are_binned_summed_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let (cells, n_bins) = (6usize, 40u64);
    let bins = Bins::Linear {
        low: 100.0,
        width: 0.5,
        high: 119.9,
    };
    let mut file = vec![0u8; 16];
    let (mut keys, mut offsets, mut lengths) =
        (vec![0; cells], vec![NO_ROW; cells], vec![0; cells]);
    let mut expected = vec![0f64; cells * n_bins as usize];
    let (mut outside, mut merged) = (0u64, 0u64);
    for cell in 0..cells {
        if cell == 4 {
            continue; // no record for this cell
        }
        // Keys from below the bins to past them, some two to a bin.
        let pairs: Vec<(f64, u16)> = (0..9)
            .map(|k| {
                (
                    99.0 + 2.6 * k as f64 + 0.1 * (k % 2) as f64,
                    (cell * 10 + k) as u16,
                )
            })
            .chain([(106.95, 7u16)]) // beside 106.9, in its bin
            .collect();
        let mut sorted = pairs.clone();
        sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
        keys[cell] = file.len() as u64;
        for (k, _) in &sorted {
            file.extend_from_slice(&k.to_le_bytes());
        }
        offsets[cell] = file.len() as u64;
        for (_, v) in &sorted {
            file.extend_from_slice(&v.to_le_bytes());
        }
        lengths[cell] = sorted.len() as u64;
        let mut last = None;
        for (k, v) in &sorted {
            let b = ((k - 100.0) / 0.5).floor() as i64;
            if !(0..n_bins as i64).contains(&b) || *k > 119.9 {
                outside += 1;
                continue;
            }
            if last == Some(b) {
                merged += 1;
            }
            last = Some(b);
            expected[cell * n_bins as usize + b as usize] += *v as f64;
        }
    }
    let path = dir.path().join("pairs.bin");
    std::fs::write(&path, &file).unwrap();
    let source = FileRows {
        path: path.clone(),
        offsets,
        little_endian: true,
        binned: Some(BinnedRows {
            keys,
            lengths,
            records: (0..cells as u64).collect(),
            key_type: DType::Float64,
            value_type: DType::UInt16,
            bins,
            names: RecordNames {
                file: dir.path().join("pairs.xml"),
                record: "record".into(),
                keys: "key array".into(),
            },
        }),
    };
    for shard in [[3u64, 2, 40], [2, 2, 16]] {
        let out = typed_array(
            dir.path(),
            &[3, 2, n_bins],
            &shard,
            &[1, 1, 8],
            DType::Float32,
        );
        let sums = fill_from_rows(
            &out,
            &source,
            Parallelism::resolve(Some(2), None),
            1 << 30,
            &Progress::default(),
        )
        .unwrap();
        let got = read_f32(&out);
        let want: Vec<f32> = expected.iter().map(|&v| v as f32).collect();
        assert_eq!(got, want, "{shard:?}");
        for cell in 0..cells {
            let row = &expected[cell * n_bins as usize..(cell + 1) * n_bins as usize];
            assert_eq!(sums.rows[cell], row.iter().sum::<f64>());
        }
        assert_eq!(sums.counts, BinCounts { outside, merged });
        assert!(outside > 0 && merged > 0);
    }
    // A record whose keys go down is refused, naming the describing file and the record.
    let mut broken = source.clone();
    let b = broken.binned.as_mut().unwrap();
    b.keys[2] = b.keys[1];
    b.lengths[2] = b.lengths[1] + 3; // runs on into record 1's values: not sorted keys
    let out = typed_array(
        dir.path(),
        &[3, 2, n_bins],
        &[3, 2, 40],
        &[1, 1, 8],
        DType::Float32,
    );
    let error = fill_error(&out, &broken);
    assert!(
        error.contains("pairs.xml: record 2's key array is not sorted"),
        "{error}"
    );
}

/// By default an ingest runs one task more than the cores, so that one
/// waits on the device while the others work; threads the user chose bound
/// the tasks at once.
#[test]
fn chosen_threads_bound_the_tasks_at_once() {
    let layout = Layout {
        inner: vec![4, 4, 8],
        shard: vec![8, 8, 16],
    };
    let plan = |parallelism| {
        tasks::plan(&[32, 32, 64], &layout, DType::Float32, 1 << 30, parallelism)
            .unwrap()
            .workers
    };
    let mut cores = Parallelism::resolve(Some(3), None);
    assert_eq!(plan(cores), 3);
    cores.chosen = false;
    assert_eq!(plan(cores), 4);
    assert_eq!(plan(Parallelism::resolve(Some(1), None)), 1);
}
