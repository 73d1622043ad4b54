//! Sums of rows as they are placed: each row's total, and each column's
//! total over all rows (an MSI file's TIC image and summed spectrum), in
//! f64 whatever the element type.

use crate::dtype::DType;

/// Independent running sums per row, so the additions of one row do not
/// wait on each other.
const LANES: usize = 8;

macro_rules! sum_as {
    ($t:ty, $row:expr, $columns:expr) => {{
        const SIZE: usize = std::mem::size_of::<$t>();
        let value = |bytes: &[u8]| <$t>::from_ne_bytes(bytes.try_into().unwrap()) as f64;
        let (row, columns): (&[u8], &mut [f64]) = ($row, $columns);
        let mut lanes = [0f64; LANES];
        let whole = row.chunks_exact(SIZE * LANES);
        let tail = whole.remainder();
        let mut at = 0;
        for (group, sums) in whole.zip(columns.chunks_exact_mut(LANES)) {
            for l in 0..LANES {
                let v = value(&group[l * SIZE..(l + 1) * SIZE]);
                sums[l] += v;
                lanes[l] += v;
            }
            at += LANES;
        }
        for (bytes, sum) in tail.chunks_exact(SIZE).zip(&mut columns[at..]) {
            let v = value(bytes);
            *sum += v;
            lanes[0] += v;
        }
        lanes.iter().sum::<f64>()
    }};
}

/// Add the elements of `row` (native byte order, `dtype`) to `columns`,
/// one each, and return their sum.
pub(crate) fn add_row(dtype: DType, row: &[u8], columns: &mut [f64]) -> f64 {
    match dtype {
        DType::Bool | DType::UInt8 => sum_as!(u8, row, columns),
        DType::Int8 => sum_as!(i8, row, columns),
        DType::Int16 => sum_as!(i16, row, columns),
        DType::UInt16 => sum_as!(u16, row, columns),
        DType::Int32 => sum_as!(i32, row, columns),
        DType::UInt32 => sum_as!(u32, row, columns),
        DType::Int64 => sum_as!(i64, row, columns),
        DType::UInt64 => sum_as!(u64, row, columns),
        DType::Float32 => sum_as!(f32, row, columns),
        DType::Float64 => sum_as!(f64, row, columns),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_every_type_into_rows_and_columns() {
        let values: Vec<i16> = (0..21).map(|i| i * 3 - 20).collect();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let mut columns = vec![1.0; values.len()];
        let total = add_row(DType::Int16, &bytes, &mut columns);
        assert_eq!(total, values.iter().map(|&v| v as f64).sum::<f64>());
        for (c, v) in columns.iter().zip(&values) {
            assert_eq!(*c, 1.0 + *v as f64);
        }
        let floats: Vec<f32> = (0..19).map(|i| i as f32 * 0.5).collect();
        let bytes: Vec<u8> = floats.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let mut columns = vec![0.0; floats.len()];
        assert_eq!(add_row(DType::Float32, &bytes, &mut columns), 85.5);
        assert_eq!(columns[18], 9.0);
    }
}
