//! How far decoded values are from the originals: maximum absolute error,
//! RMS error, SNR and PSNR, accumulated chunk by chunk and merged.

use serde_json::{json, Value};

use crate::dtype::{with_element_type, DType};

/// Error statistics of decoded against original values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ErrorStats {
    /// Values compared.
    pub count: u64,
    /// Sum of squared originals.
    pub signal_energy: f64,
    /// Sum of squared differences.
    pub error_energy: f64,
    /// Largest absolute difference.
    pub max_abs_error: f64,
    /// Smallest and largest original value.
    pub min: f64,
    /// Largest original value.
    pub max: f64,
}

impl Default for ErrorStats {
    fn default() -> Self {
        Self {
            count: 0,
            signal_energy: 0.0,
            error_energy: 0.0,
            max_abs_error: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }
}

impl ErrorStats {
    /// Compare two buffers of elements of `dtype` (native endian).
    pub fn of_bytes(original: &[u8], decoded: &[u8], dtype: DType) -> Self {
        let mut s = Self::default();
        with_element_type!(dtype, T => {
            let n = std::mem::size_of::<T>();
            for (a, b) in original.chunks_exact(n).zip(decoded.chunks_exact(n)) {
                let a = T::from_ne_bytes(a.try_into().expect("element")) as f64;
                let b = T::from_ne_bytes(b.try_into().expect("element")) as f64;
                s.add(a, b);
            }
        });
        s
    }

    /// Compare `original` elements of `original_type` with `decoded` ones of
    /// `decoded_type` (native endian, as many of each), as f64.
    pub fn of_mixed(
        original: &[u8],
        original_type: DType,
        decoded: &[u8],
        decoded_type: DType,
    ) -> Self {
        if original_type == decoded_type {
            return Self::of_bytes(original, decoded, original_type);
        }
        let (a, b) = (
            values(original, original_type),
            values(decoded, decoded_type),
        );
        let mut s = Self::default();
        for (a, b) in a.into_iter().zip(b) {
            s.add(a, b);
        }
        s
    }

    /// Compare two C-order chunks of shape `inner` over their leading corner
    /// of shape `sides` only (the part inside the array: the rest is padding).
    pub fn of_chunk_corner(
        original: &[u8],
        decoded: &[u8],
        dtype: DType,
        inner: &[u64],
        sides: &[u64],
    ) -> Self {
        if sides == inner {
            return Self::of_bytes(original, decoded, dtype);
        }
        let nd = inner.len();
        let elem = dtype.size();
        let row = sides[nd - 1] as usize * elem;
        let strides = crate::window::strides(inner);
        let mut s = Self::default();
        for r in 0..sides[..nd - 1].iter().product::<u64>() {
            let at = crate::window::unravel(r, &sides[..nd - 1]);
            let start = (0..nd - 1).map(|d| at[d] * strides[d]).sum::<u64>() as usize * elem;
            s.merge(&Self::of_bytes(
                &original[start..start + row],
                &decoded[start..start + row],
                dtype,
            ));
        }
        s
    }

    /// Count one value. NaN in both (a cell without a trace) is not a value;
    /// the same infinity in both is one kept exactly (its error would be NaN).
    #[inline]
    pub fn add(&mut self, original: f64, decoded: f64) {
        if original.is_nan() && decoded.is_nan() {
            return;
        }
        if original.is_infinite() && original == decoded {
            self.count += 1;
            return;
        }
        let e = decoded - original;
        self.count += 1;
        self.signal_energy += original * original;
        self.error_energy += e * e;
        // A NaN error (NaN decoded from a number) must not vanish in max().
        if e.abs() > self.max_abs_error || e.is_nan() {
            self.max_abs_error = if e.is_nan() { f64::INFINITY } else { e.abs() };
        }
        self.min = self.min.min(original);
        self.max = self.max.max(original);
    }

    /// Combine with the statistics of other values.
    pub fn merge(&mut self, other: &ErrorStats) {
        self.count += other.count;
        self.signal_energy += other.signal_energy;
        self.error_energy += other.error_energy;
        self.max_abs_error = self.max_abs_error.max(other.max_abs_error);
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// RMS of the originals.
    pub fn rms_signal(&self) -> f64 {
        (self.signal_energy / self.count.max(1) as f64).sqrt()
    }

    /// RMS of the differences.
    pub fn rms_error(&self) -> f64 {
        (self.error_energy / self.count.max(1) as f64).sqrt()
    }

    /// Signal-to-noise ratio, dB: signal energy over error energy (infinite
    /// when exact).
    pub fn snr_db(&self) -> f64 {
        if self.error_energy == 0.0 {
            f64::INFINITY
        } else {
            10.0 * (self.signal_energy / self.error_energy).log10()
        }
    }

    /// Peak signal-to-noise ratio, dB: the originals' range squared over the
    /// mean squared error.
    pub fn psnr_db(&self) -> f64 {
        let mse = self.error_energy / self.count.max(1) as f64;
        let range = self.max - self.min;
        if mse == 0.0 {
            f64::INFINITY
        } else {
            10.0 * (range * range / mse).log10()
        }
    }

    /// As JSON (infinities, for exact data, as null).
    pub fn to_json(&self) -> Value {
        let finite = |x: f64| if x.is_finite() { json!(x) } else { Value::Null };
        json!({
            "values": self.count,
            "max_abs_error": finite(self.max_abs_error),
            "rms_error": finite(self.rms_error()),
            "rms_signal": finite(self.rms_signal()),
            "snr_db": finite(self.snr_db()),
            "psnr_db": finite(self.psnr_db()),
        })
    }
}

/// Elements of `dtype` (native endian) as f64.
fn values(bytes: &[u8], dtype: DType) -> Vec<f64> {
    with_element_type!(dtype, T => {
        bytes
            .chunks_exact(std::mem::size_of::<T>())
            .map(|b| T::from_ne_bytes(b.try_into().expect("element")) as f64)
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snr_of_a_known_error() {
        // Signal of RMS 1, error of RMS 0.01: 40 dB.
        let original: Vec<f32> = (0..1000)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        let decoded: Vec<f32> = original.iter().map(|v| v + 0.01).collect();
        let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
        let s = ErrorStats::of_bytes(&bytes(&original), &bytes(&decoded), DType::Float32);
        assert_eq!(s.count, 1000);
        assert!((s.snr_db() - 40.0).abs() < 1e-3, "{}", s.snr_db());
        assert!((s.max_abs_error - 0.01).abs() < 1e-6);
        // PSNR: range 2, MSE 1e-4 -> 10 log10(4 / 1e-4) = 46.02 dB.
        assert!((s.psnr_db() - 46.0206).abs() < 1e-3);
        let mut halves = ErrorStats::of_bytes(
            &bytes(&original[..500]),
            &bytes(&decoded[..500]),
            DType::Float32,
        );
        halves.merge(&ErrorStats::of_bytes(
            &bytes(&original[500..]),
            &bytes(&decoded[500..]),
            DType::Float32,
        ));
        assert!((halves.snr_db() - s.snr_db()).abs() < 1e-9);
        assert_eq!(
            ErrorStats::of_bytes(&bytes(&original), &bytes(&original), DType::Float32).snr_db(),
            f64::INFINITY
        );
        let infinities = [f32::INFINITY, 2.0, f32::NEG_INFINITY];
        let kept = ErrorStats::of_bytes(&bytes(&infinities), &bytes(&infinities), DType::Float32);
        assert_eq!(
            (kept.count, kept.max_abs_error, kept.snr_db()),
            (3, 0.0, f64::INFINITY)
        );
    }
}

/// Error statistics over many chunks: the total, and the worst chunk by
/// maximum absolute error and by SNR.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChunkErrors {
    /// All values of all chunks.
    pub total: ErrorStats,
    /// Chunks counted.
    pub chunks: u64,
    /// The chunk with the largest absolute error: (error, key).
    pub worst_max_abs: Option<(f64, String)>,
    /// The chunk with the lowest SNR: (dB, key).
    pub worst_snr: Option<(f64, String)>,
}

impl ChunkErrors {
    /// Count one chunk.
    pub fn add(&mut self, key: &str, stats: &ErrorStats) {
        self.total.merge(stats);
        self.chunks += 1;
        if self
            .worst_max_abs
            .as_ref()
            .is_none_or(|(e, _)| stats.max_abs_error > *e)
        {
            self.worst_max_abs = Some((stats.max_abs_error, key.to_string()));
        }
        let snr = stats.snr_db();
        if self.worst_snr.as_ref().is_none_or(|(s, _)| snr < *s) {
            self.worst_snr = Some((snr, key.to_string()));
        }
    }

    /// Combine with other chunks.
    pub fn merge(&mut self, other: &ChunkErrors) {
        self.total.merge(&other.total);
        self.chunks += other.chunks;
        if let Some((e, k)) = &other.worst_max_abs {
            if self.worst_max_abs.as_ref().is_none_or(|(mine, _)| e > mine) {
                self.worst_max_abs = Some((*e, k.clone()));
            }
        }
        if let Some((s, k)) = &other.worst_snr {
            if self.worst_snr.as_ref().is_none_or(|(mine, _)| s < mine) {
                self.worst_snr = Some((*s, k.clone()));
            }
        }
    }

    /// As JSON: the total's fields, `chunks`, and the worst chunks.
    pub fn to_json(&self) -> Value {
        let finite = |x: f64| if x.is_finite() { json!(x) } else { Value::Null };
        let mut v = self.total.to_json();
        v["chunks"] = json!(self.chunks);
        if let Some((e, k)) = &self.worst_max_abs {
            v["worst_chunk_max_abs_error"] = json!({"chunk": k, "max_abs_error": finite(*e)});
        }
        if let Some((s, k)) = &self.worst_snr {
            v["worst_chunk_snr"] = json!({"chunk": k, "snr_db": finite(*s)});
        }
        v
    }
}
