//! Header fields as SEG-Y stores them: integers of 1 to 8 bytes at 1-based
//! byte positions, in the file's byte order.

/// Byte order of a SEG-Y file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    /// Big endian, the standard's.
    Big,
    /// Little endian (allowed since rev 2, common from some writers).
    Little,
}

/// Read a signed integer field of `len` bytes at 1-based position `byte` of `buf`.
pub fn header_field(buf: &[u8], byte: usize, len: usize, endian: Endian) -> i64 {
    let b = &buf[byte - 1..byte - 1 + len];
    let mut be = [0u8; 8];
    be[8 - len..].copy_from_slice(b);
    if endian == Endian::Little {
        be[8 - len..].reverse();
    }
    // Sign-extend from `len` bytes.
    let shift = 64 - 8 * len as u32;
    (i64::from_be_bytes(be) << shift) >> shift
}
