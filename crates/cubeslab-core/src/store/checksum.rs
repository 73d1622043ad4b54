//! The crc32c (Castagnoli) checksum of the Zarr v3 `crc32c` codec, computed
//! the one way the engine computes it: `crc-fast`, which folds 64 bytes at a
//! time with carry-less multiplies chosen at run time (docs/reads.md says
//! what it gained over the `crc32c` crate).

/// crc32c of `bytes`, as the `crc32c` codec stores it (little endian u32).
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(bytes)
}

#[cfg(test)]
mod tests {
    /// Bit-at-a-time CRC-32C (reflected polynomial 0x82F63B78): slow, but
    /// independent of the table- and instruction-based implementation.
    fn bitwise(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &byte in data {
            crc ^= byte as u32;
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0x82F6_3B78
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    #[test]
    fn matches_the_reference_crc32c() {
        // The check value of CRC-32C ("123456789"), and the bitwise
        // definition on lengths around the instruction's 8-byte words and
        // the three-stream blocks.
        assert_eq!(super::crc32c(b"123456789"), 0xE306_9283);
        let data: Vec<u8> = (0..5000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for n in [0, 1, 7, 8, 15, 16, 63, 64, 255, 256, 4095, 4608, 5000] {
            assert_eq!(super::crc32c(&data[..n]), bitwise(&data[..n]), "length {n}");
        }
    }
}
