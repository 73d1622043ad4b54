//! Summary statistics of the amplitudes, gathered while an ingest decodes
//! them (no second pass), and recorded as MDIO records them (`statsV1`).

use serde_json::{json, Value};

use crate::dtype::DType;

/// Count, sum, sum of squares, minimum and maximum of the finite samples of
/// the live traces.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AmplitudeStats {
    /// Finite samples counted.
    pub count: u64,
    /// Their sum.
    pub sum: f64,
    /// The sum of their squares.
    pub sum_squares: f64,
    /// The smallest (+inf when none was counted).
    pub min: f64,
    /// The largest (-inf when none was counted).
    pub max: f64,
}

impl Default for AmplitudeStats {
    fn default() -> Self {
        Self {
            count: 0,
            sum: 0.0,
            sum_squares: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }
}

impl AmplitudeStats {
    /// Count every finite element of `bytes`, elements of `dtype` in native
    /// byte order.
    pub fn add_bytes(&mut self, bytes: &[u8], dtype: DType) {
        macro_rules! add {
            ($t:ty) => {{
                let n = std::mem::size_of::<$t>();
                for e in bytes.chunks_exact(n) {
                    self.add(<$t>::from_ne_bytes(e.try_into().expect("element")) as f64);
                }
            }};
        }
        match dtype {
            DType::Float32 => self.add_f32(bytes),
            DType::Float64 => add!(f64),
            DType::Int8 => add!(i8),
            DType::Int16 => add!(i16),
            DType::Int32 => add!(i32),
            DType::Int64 => add!(i64),
            DType::UInt8 | DType::Bool => add!(u8),
            DType::UInt16 => add!(u16),
            DType::UInt32 => add!(u32),
            DType::UInt64 => add!(u64),
        }
    }

    /// float32, the common case, in independent lanes the compiler can
    /// vectorise: an ingest counts every sample it decodes.
    fn add_f32(&mut self, bytes: &[u8]) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above.
            return unsafe { self.add_f32_avx2(bytes) };
        }
        self.add_f32_lanes(bytes)
    }

    /// [`Self::add_f32_lanes`] compiled for AVX2: four doubles a step
    /// instead of two, twice as fast here, and the ingest's largest cost
    /// after its copies.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn add_f32_avx2(&mut self, bytes: &[u8]) {
        self.add_f32_lanes(bytes)
    }

    /// In lanes the compiler turns into vector instructions: the selects
    /// and comparisons below, not `f32::min` and its NaN rules, which do
    /// not vectorise.
    #[inline(always)]
    fn add_f32_lanes(&mut self, bytes: &[u8]) {
        const LANES: usize = 8;
        let mut count = [0u64; LANES];
        let (mut sum, mut squares) = ([0f64; LANES], [0f64; LANES]);
        let (mut low, mut high) = ([f32::INFINITY; LANES], [f32::NEG_INFINITY; LANES]);
        let mut blocks = bytes.chunks_exact(4 * LANES);
        for block in &mut blocks {
            let mut v = [0f32; LANES];
            for (k, value) in v.iter_mut().enumerate() {
                *value = f32::from_ne_bytes(block[4 * k..4 * k + 4].try_into().expect("element"));
            }
            for k in 0..LANES {
                let x = v[k];
                let finite = x.abs() < f32::INFINITY; // false for NaN too
                let d = if finite { x as f64 } else { 0.0 };
                count[k] += finite as u64;
                sum[k] += d;
                squares[k] += d * d;
                let (l, h) = if finite {
                    (x, x)
                } else {
                    (f32::INFINITY, f32::NEG_INFINITY)
                };
                low[k] = if l < low[k] { l } else { low[k] };
                high[k] = if h > high[k] { h } else { high[k] };
            }
        }
        for k in 0..LANES {
            self.merge(&Self {
                count: count[k],
                sum: sum[k],
                sum_squares: squares[k],
                min: low[k] as f64,
                max: high[k] as f64,
            });
        }
        for e in blocks.remainder().chunks_exact(4) {
            self.add(f32::from_ne_bytes(e.try_into().expect("element")) as f64);
        }
    }

    fn add(&mut self, v: f64) {
        if v.is_finite() {
            self.count += 1;
            self.sum += v;
            self.sum_squares += v * v;
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
    }

    /// Fold `other` into these.
    pub fn merge(&mut self, other: &Self) {
        self.count += other.count;
        self.sum += other.sum;
        self.sum_squares += other.sum_squares;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// MDIO's `statsV1` attribute: a JSON text of count, sum, sumSquares,
    /// min, max and an (empty) histogram.
    pub fn to_stats_v1(&self) -> Value {
        let finite = |v: f64| if v.is_finite() { json!(v) } else { Value::Null };
        let stats = json!({
            "count": self.count,
            "sum": self.sum,
            "sumSquares": self.sum_squares,
            "min": finite(self.min),
            "max": finite(self.max),
            "histogram": {"counts": [], "binCenters": []},
        });
        Value::String(stats.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_float32_lanes_agree_with_one_sample_at_a_time() {
        let values: Vec<f32> = (0..1003)
            .map(|i| {
                if i % 97 == 0 {
                    f32::NAN
                } else {
                    (i as f32 - 500.0) * 0.25
                }
            })
            .collect();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let mut fast = AmplitudeStats::default();
        fast.add_bytes(&bytes, DType::Float32);
        let mut slow = AmplitudeStats::default();
        for &v in &values {
            slow.add(v as f64);
        }
        assert_eq!(
            (fast.count, fast.min, fast.max),
            (slow.count, slow.min, slow.max)
        );
        assert!(
            (fast.sum - slow.sum).abs() < 1e-9
                && (fast.sum_squares - slow.sum_squares).abs() < 1e-6
        );
    }

    #[test]
    fn finite_samples_are_counted_and_nan_is_skipped() {
        let values = [1.0f32, -2.0, f32::NAN, 4.0];
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let mut a = AmplitudeStats::default();
        a.add_bytes(&bytes[..8], DType::Float32);
        let mut b = AmplitudeStats::default();
        b.add_bytes(&bytes[8..], DType::Float32);
        a.merge(&b);
        assert_eq!(
            (a.count, a.sum, a.sum_squares, a.min, a.max),
            (3, 3.0, 21.0, -2.0, 4.0)
        );
        let text = a.to_stats_v1();
        let parsed: Value = serde_json::from_str(text.as_str().unwrap()).unwrap();
        assert_eq!(parsed["sumSquares"], json!(21.0));
        assert_eq!(parsed["histogram"]["counts"], json!([]));
    }
}
