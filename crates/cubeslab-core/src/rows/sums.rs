//! Sums of rows as they are placed: each row's total, and each column's
//! total over all rows (an MSI file's TIC image and summed spectrum), in
//! f64 whatever the element type.

use crate::dtype::{with_element_type, DType};

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
    if dtype == DType::Float32 {
        return add_f32(row, columns);
    }
    with_element_type!(dtype, T => sum_as!(T, row, columns))
}

/// `add_row` of float32, the type of most spectra: eight at a time where
/// the machine has AVX, else as the other types.
fn add_f32(row: &[u8], columns: &mut [f64]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: AVX is present.
        return unsafe { add_f32_avx(row, columns) };
    }
    sum_as!(f32, row, columns)
}

/// The same sums as `sum_as!(f32, ..)`, added in the same order.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn add_f32_avx(row: &[u8], columns: &mut [f64]) -> f64 {
    use std::arch::x86_64::*;
    let n = (row.len() / 4).min(columns.len());
    let (from, to) = (row.as_ptr(), columns.as_mut_ptr());
    let (mut low, mut high) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    let mut i = 0;
    while i + LANES <= n {
        // SAFETY: elements i..i + 8 lie inside both slices.
        unsafe {
            let values = _mm256_loadu_ps(from.add(i * 4).cast());
            let first = _mm256_cvtps_pd(_mm256_castps256_ps128(values));
            let second = _mm256_cvtps_pd(_mm256_extractf128_ps(values, 1));
            _mm256_storeu_pd(to.add(i), _mm256_add_pd(_mm256_loadu_pd(to.add(i)), first));
            _mm256_storeu_pd(
                to.add(i + 4),
                _mm256_add_pd(_mm256_loadu_pd(to.add(i + 4)), second),
            );
            low = _mm256_add_pd(low, first);
            high = _mm256_add_pd(high, second);
        }
        i += LANES;
    }
    let mut lanes = [0f64; LANES];
    // SAFETY: `lanes` holds eight f64.
    unsafe {
        _mm256_storeu_pd(lanes.as_mut_ptr(), low);
        _mm256_storeu_pd(lanes.as_mut_ptr().add(4), high);
    }
    for k in i..n {
        let v = f32::from_ne_bytes(row[k * 4..k * 4 + 4].try_into().unwrap()) as f64;
        columns[k] += v;
        lanes[0] += v;
    }
    lanes.iter().sum::<f64>()
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

    #[test]
    fn float32_eight_at_a_time_adds_as_one_at_a_time() {
        // Values whose sums round differently in another order.
        let floats: Vec<f32> = (0..1003)
            .map(|i| ((i * 7919) % 1009) as f32 * 1e-3 + (i % 5) as f32 * 1e6)
            .collect();
        let bytes: Vec<u8> = floats.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let (mut fast, mut plain) = (vec![0.5; 1003], vec![0.5; 1003]);
        let total = add_f32(&bytes, &mut fast);
        let expected = sum_as!(f32, &bytes[..], &mut plain[..]);
        assert_eq!(total.to_bits(), expected.to_bits());
        assert_eq!(fast, plain);
    }
}
