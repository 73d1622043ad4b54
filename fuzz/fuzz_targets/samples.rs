//! Any bytes as samples of every SEG-Y sample format, in both byte orders,
//! decoded to every element type and encoded back: no panic, whatever the
//! bit patterns (NaN, infinities, IBM floats out of IEEE range, denormals).
#![no_main]

use cubeslab_core::{
    segy::{Endian, SampleFormat},
    store::DType,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for code in 0..=16 {
        let Some(format) = SampleFormat::from_code(code) else {
            continue;
        };
        let samples = data.len() / format.bytes();
        let src = &data[..samples * format.bytes()];
        for endian in [Endian::Big, Endian::Little] {
            for target in DType::ALL {
                let mut decoded = vec![0u8; samples * target.size()];
                format.decode(endian, src, &mut decoded, target);
                let mut encoded = vec![0u8; src.len()];
                format.encode(endian, &decoded, target, &mut encoded);
            }
        }
    }
});
