//! Sample formats (binary header byte 3225) and their conversion to and
//! from the engine's element types.

use num_traits::{AsPrimitive, ToBytes};

use super::fields::Endian;
use crate::dtype::DType;

/// A SEG-Y data sample format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum SampleFormat {
    IbmFloat32,
    Int32,
    Int16,
    /// Code 4, obsolete fixed point with gain. Files in the wild that carry it
    /// hold IEEE floats (segyio writes them so), and segyio reads them as
    /// such; cubeslab does the same and warns.
    FixedPointGain,
    IeeeFloat32,
    IeeeFloat64,
    Int24,
    Int8,
    Int64,
    UInt32,
    UInt16,
    UInt64,
    UInt24,
    UInt8,
}

/// Codes accepted in the binary header, for messages.
pub const VALID_CODES: &str = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 15 or 16";

impl SampleFormat {
    /// The format with binary-header code `code`.
    pub fn from_code(code: i64) -> Option<Self> {
        use SampleFormat::*;
        Some(match code {
            1 => IbmFloat32,
            2 => Int32,
            3 => Int16,
            4 => FixedPointGain,
            5 => IeeeFloat32,
            6 => IeeeFloat64,
            7 => Int24,
            8 => Int8,
            9 => Int64,
            10 => UInt32,
            11 => UInt16,
            12 => UInt64,
            15 => UInt24,
            16 => UInt8,
            _ => return None,
        })
    }

    /// The binary-header code.
    pub fn code(self) -> u16 {
        use SampleFormat::*;
        match self {
            IbmFloat32 => 1,
            Int32 => 2,
            Int16 => 3,
            FixedPointGain => 4,
            IeeeFloat32 => 5,
            IeeeFloat64 => 6,
            Int24 => 7,
            Int8 => 8,
            Int64 => 9,
            UInt32 => 10,
            UInt16 => 11,
            UInt64 => 12,
            UInt24 => 15,
            UInt8 => 16,
        }
    }

    /// Bytes per sample.
    pub fn bytes(self) -> usize {
        use SampleFormat::*;
        match self {
            Int8 | UInt8 => 1,
            Int16 | UInt16 => 2,
            Int24 | UInt24 => 3,
            IbmFloat32 | Int32 | FixedPointGain | IeeeFloat32 | UInt32 => 4,
            IeeeFloat64 | Int64 | UInt64 => 8,
        }
    }

    /// The element type that holds every value of this format exactly.
    pub fn native_dtype(self) -> DType {
        use SampleFormat::*;
        match self {
            IbmFloat32 | FixedPointGain | IeeeFloat32 => DType::Float32,
            IeeeFloat64 => DType::Float64,
            Int8 => DType::Int8,
            Int16 => DType::Int16,
            Int24 | Int32 => DType::Int32,
            Int64 => DType::Int64,
            UInt8 => DType::UInt8,
            UInt16 => DType::UInt16,
            UInt24 | UInt32 => DType::UInt32,
            UInt64 => DType::UInt64,
        }
    }

    /// Decode `src` (whole samples in this format) into `dst`, native-endian
    /// elements of `target` (`dst.len() == samples * target.size()`).
    pub fn decode(self, endian: Endian, src: &[u8], dst: &mut [u8], target: DType) {
        match target {
            DType::Float32 => self.decode_as::<f32>(endian, src, dst),
            DType::Float64 => self.decode_as::<f64>(endian, src, dst),
            DType::Int8 => self.decode_as::<i8>(endian, src, dst),
            DType::Int16 => self.decode_as::<i16>(endian, src, dst),
            DType::Int32 => self.decode_as::<i32>(endian, src, dst),
            DType::Int64 => self.decode_as::<i64>(endian, src, dst),
            DType::UInt8 | DType::Bool => self.decode_as::<u8>(endian, src, dst),
            DType::UInt16 => self.decode_as::<u16>(endian, src, dst),
            DType::UInt32 => self.decode_as::<u32>(endian, src, dst),
            DType::UInt64 => self.decode_as::<u64>(endian, src, dst),
        }
    }

    fn decode_as<T>(self, endian: Endian, src: &[u8], dst: &mut [u8])
    where
        T: Copy + 'static + ToBytes,
        f32: AsPrimitive<T>,
        f64: AsPrimitive<T>,
        i8: AsPrimitive<T>,
        i16: AsPrimitive<T>,
        i32: AsPrimitive<T>,
        i64: AsPrimitive<T>,
        u8: AsPrimitive<T>,
        u16: AsPrimitive<T>,
        u32: AsPrimitive<T>,
        u64: AsPrimitive<T>,
    {
        use SampleFormat::*;
        let size = std::mem::size_of::<T>();
        let big = endian == Endian::Big;
        macro_rules! each {
            ($n:literal, $conv:expr) => {{
                for (d, s) in dst.chunks_exact_mut(size).zip(src.chunks_exact($n)) {
                    let mut b: [u8; $n] = s.try_into().expect("exact chunk");
                    if !big {
                        b.reverse();
                    }
                    let v: T = ($conv)(b);
                    d.copy_from_slice(v.to_ne_bytes().as_ref());
                }
            }};
        }
        match self {
            IbmFloat32 => each!(4, |b| ibm_to_f32(u32::from_be_bytes(b)).as_()),
            FixedPointGain | IeeeFloat32 => each!(4, |b| f32::from_be_bytes(b).as_()),
            IeeeFloat64 => each!(8, |b| f64::from_be_bytes(b).as_()),
            Int8 => each!(1, |b| i8::from_be_bytes(b).as_()),
            Int16 => each!(2, |b| i16::from_be_bytes(b).as_()),
            Int24 => each!(3, |b: [u8; 3]| (i32::from_be_bytes([b[0], b[1], b[2], 0])
                >> 8)
                .as_()),
            Int32 => each!(4, |b| i32::from_be_bytes(b).as_()),
            Int64 => each!(8, |b| i64::from_be_bytes(b).as_()),
            UInt8 => each!(1, |b| u8::from_be_bytes(b).as_()),
            UInt16 => each!(2, |b| u16::from_be_bytes(b).as_()),
            UInt24 => each!(3, |b: [u8; 3]| u32::from_be_bytes([0, b[0], b[1], b[2]])
                .as_()),
            UInt32 => each!(4, |b| u32::from_be_bytes(b).as_()),
            UInt64 => each!(8, |b| u64::from_be_bytes(b).as_()),
        }
    }

    /// Encode native-endian elements of `source` into this format. Integer
    /// formats round to nearest and saturate at their range.
    pub fn encode(self, endian: Endian, src: &[u8], source: DType, dst: &mut [u8]) {
        use SampleFormat::*;
        let n = self.bytes();
        for (i, d) in dst.chunks_exact_mut(n).enumerate() {
            let v = Number::read(src, i, source);
            let be: [u8; 8] = match self {
                IbmFloat32 => pad(f32_to_ibm(v.f64() as f32).to_be_bytes()),
                FixedPointGain | IeeeFloat32 => pad((v.f64() as f32).to_be_bytes()),
                IeeeFloat64 => v.f64().to_be_bytes(),
                Int8 => pad((v.int().clamp(i8::MIN as i128, i8::MAX as i128) as i8).to_be_bytes()),
                Int16 => {
                    pad((v.int().clamp(i16::MIN as i128, i16::MAX as i128) as i16).to_be_bytes())
                }
                Int24 => {
                    let x = v.int().clamp(-(1 << 23), (1 << 23) - 1) as i32;
                    {
                        let b = x.to_be_bytes();
                        pad([b[1], b[2], b[3]])
                    }
                }
                Int32 => {
                    pad((v.int().clamp(i32::MIN as i128, i32::MAX as i128) as i32).to_be_bytes())
                }
                Int64 => (v.int().clamp(i64::MIN as i128, i64::MAX as i128) as i64).to_be_bytes(),
                UInt8 => pad((v.int().clamp(0, u8::MAX as i128) as u8).to_be_bytes()),
                UInt16 => pad((v.int().clamp(0, u16::MAX as i128) as u16).to_be_bytes()),
                UInt24 => {
                    let x = v.int().clamp(0, (1 << 24) - 1) as u32;
                    {
                        let b = x.to_be_bytes();
                        pad([b[1], b[2], b[3]])
                    }
                }
                UInt32 => pad((v.int().clamp(0, u32::MAX as i128) as u32).to_be_bytes()),
                UInt64 => (v.int().clamp(0, u64::MAX as i128) as u64).to_be_bytes(),
            };
            d.copy_from_slice(&be[..n]);
            if endian == Endian::Little {
                d.reverse();
            }
        }
    }
}

fn pad<const N: usize>(b: [u8; N]) -> [u8; 8] {
    let mut out = [0u8; 8];
    out[..N].copy_from_slice(&b);
    out
}

/// One stored element, widened without loss.
enum Number {
    Int(i128),
    Float(f64),
}

impl Number {
    fn read(src: &[u8], i: usize, dtype: DType) -> Self {
        let s = dtype.size();
        let b = &src[i * s..(i + 1) * s];
        macro_rules! ne {
            ($t:ty) => {
                <$t>::from_ne_bytes(b.try_into().expect("element bytes"))
            };
        }
        match dtype {
            DType::Float32 => Number::Float(ne!(f32) as f64),
            DType::Float64 => Number::Float(ne!(f64)),
            DType::Int8 => Number::Int(ne!(i8) as i128),
            DType::Int16 => Number::Int(ne!(i16) as i128),
            DType::Int32 => Number::Int(ne!(i32) as i128),
            DType::Int64 => Number::Int(ne!(i64) as i128),
            DType::UInt8 | DType::Bool => Number::Int(ne!(u8) as i128),
            DType::UInt16 => Number::Int(ne!(u16) as i128),
            DType::UInt32 => Number::Int(ne!(u32) as i128),
            DType::UInt64 => Number::Int(ne!(u64) as i128),
        }
    }

    fn f64(&self) -> f64 {
        match *self {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        }
    }

    fn int(&self) -> i128 {
        match *self {
            Number::Int(i) => i,
            Number::Float(f) if f.is_nan() => 0,
            Number::Float(f) => f.round() as i128,
        }
    }
}

/// IBM System/360 single precision to IEEE: sign, 7-bit base-16 exponent
/// biased by 64, 24-bit fraction without hidden bit.
pub fn ibm_to_f32(x: u32) -> f32 {
    let sign = x & 0x8000_0000;
    let exponent = ((x >> 24) & 0x7f) as i32;
    let fraction = x & 0x00ff_ffff;
    if fraction == 0 {
        return f32::from_bits(sign);
    }
    // Normalise so bit 23 is set: value = (f / 2^23) * 2^(4*(e-64) - 1 - shift).
    let shift = fraction.leading_zeros() as i32 - 8;
    let mantissa = fraction << shift;
    let biased = 4 * (exponent - 64) - 1 - shift + 127;
    if biased >= 255 {
        return f32::from_bits(sign | 0x7f80_0000);
    }
    if biased <= 0 {
        // Subnormal in IEEE single: let f64 do the rounding.
        let v = fraction as f64 * 2f64.powi(4 * (exponent - 64) - 24);
        return if sign != 0 { -(v as f32) } else { v as f32 };
    }
    f32::from_bits(sign | ((biased as u32) << 23) | (mantissa & 0x007f_ffff))
}

/// IEEE single to IBM single, truncating bits the hexadecimal exponent
/// cannot keep (none, for values that came from IBM).
pub fn f32_to_ibm(v: f32) -> u32 {
    let bits = v.to_bits();
    let sign = bits & 0x8000_0000;
    if v == 0.0 || v.is_nan() {
        return sign;
    }
    if v.is_infinite() {
        return sign | 0x7fff_ffff;
    }
    let (mut mantissa, mut exp2) = if (bits >> 23) & 0xff == 0 {
        // Subnormal: no hidden bit.
        (bits & 0x007f_ffff, -126 - 23 + 24)
    } else {
        (
            (bits & 0x007f_ffff) | 0x0080_0000,
            ((bits >> 23) & 0xff) as i32 - 127 + 1,
        )
    };
    // Now |v| = mantissa / 2^24 * 2^exp2; make exp2 a multiple of 4.
    while mantissa & 0x0080_0000 == 0 {
        mantissa <<= 1;
        exp2 -= 1;
    }
    let exp16 = exp2.div_euclid(4) + if exp2.rem_euclid(4) != 0 { 1 } else { 0 };
    let shift = 4 * exp16 - exp2;
    mantissa >>= shift;
    let field = exp16 + 64;
    if field > 127 {
        return sign | 0x7fff_ffff;
    }
    if field < 0 || mantissa == 0 {
        return sign;
    }
    sign | ((field as u32) << 24) | mantissa
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ibm_known_vectors() {
        assert_eq!(ibm_to_f32(0x4110_0000), 1.0);
        assert_eq!(ibm_to_f32(0xC110_0000), -1.0);
        assert_eq!(ibm_to_f32(0x0000_0000), 0.0);
        assert!(ibm_to_f32(0x8000_0000).is_sign_negative());
        assert_eq!(ibm_to_f32(0x4276_A000), 118.625); // IBM's own manual example
        assert_eq!(ibm_to_f32(0xC276_A000), -118.625);
        assert_eq!(ibm_to_f32(0x4080_0000), 0.5);
        assert_eq!(ibm_to_f32(0x3F10_0000), 1.0 / 256.0);
        assert!(ibm_to_f32(0x7FFF_FFFF).is_infinite()); // beyond f32 range
        assert_eq!(ibm_to_f32(0x0010_0000), 0.0); // 16^-64 underflows f32
        assert_eq!(f32_to_ibm(118.625), 0x4276_A000);
        assert_eq!(f32_to_ibm(-1.0), 0xC110_0000);
        assert_eq!(f32_to_ibm(0.0), 0);
    }

    proptest! {
        /// Every IEEE value that IBM can hold survives IBM -> f32 -> IBM.
        #[test]
        fn ibm_round_trip(sign in 0u32..2, exponent in 40u32..90, fraction in 0x10_0000u32..0x100_0000) {
            let ibm = (sign << 31) | (exponent << 24) | fraction;
            prop_assert_eq!(f32_to_ibm(ibm_to_f32(ibm)), ibm);
        }

        /// Integer formats decode what they encoded, in both byte orders.
        #[test]
        fn int_formats_round_trip(values in proptest::collection::vec(-8_000_000i32..8_000_000, 1..20), little in any::<bool>()) {
            let endian = if little { Endian::Little } else { Endian::Big };
            let src: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
            for format in [SampleFormat::Int24, SampleFormat::Int32, SampleFormat::Int64, SampleFormat::IeeeFloat64] {
                let mut encoded = vec![0u8; values.len() * format.bytes()];
                format.encode(endian, &src, DType::Int32, &mut encoded);
                let mut decoded = vec![0u8; values.len() * 4];
                format.decode(endian, &encoded, &mut decoded, DType::Int32);
                prop_assert_eq!(&decoded, &src);
            }
        }
    }
}
