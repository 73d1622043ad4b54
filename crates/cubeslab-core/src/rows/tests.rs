use super::*;
use crate::{
    dtype::DType,
    store::{ArraySpec, ReadOptions},
    window::{DimRange, Window},
};

fn array(dir: &std::path::Path, shape: &[u64], shard: &[u64], inner: &[u64]) -> ZarrArray {
    let spec = ArraySpec {
        shape: shape.to_vec(),
        dtype: DType::Int16,
        chunk_shape: shard.to_vec(),
        inner_chunks: Some(inner.to_vec()),
        codecs: Vec::new(),
        dimension_names: vec!["x".into(), "y".into(), "z".into()],
        fill_value: serde_json::json!(-1),
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
    };
    let error = fill_from_rows(
        &out,
        &source,
        Parallelism::resolve(Some(1), None),
        1 << 30,
        &Progress::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("short.bin") && error.contains("byte offset 90"),
        "{error}"
    );
}
