//! The 400-byte binary file header (file bytes 3201-3600).

use serde_json::{Map, Value};

use super::fields::{header_field, Endian};

/// Named fields of the binary header: (name, 1-based byte in the file, size).
/// Names follow MDIO's, so that a cubeslab store reads like an MDIO one.
const FIELDS: &[(&str, usize, usize)] = &[
    ("job_id", 3201, 4),
    ("line_num", 3205, 4),
    ("reel_num", 3209, 4),
    ("data_traces_per_ensemble", 3213, 2),
    ("aux_traces_per_ensemble", 3215, 2),
    ("sample_interval", 3217, 2),
    ("orig_sample_interval", 3219, 2),
    ("samples_per_trace", 3221, 2),
    ("orig_samples_per_trace", 3223, 2),
    ("data_sample_format", 3225, 2),
    ("ensemble_fold", 3227, 2),
    ("trace_sorting_code", 3229, 2),
    ("vertical_sum_code", 3231, 2),
    ("sweep_freq_start", 3233, 2),
    ("sweep_freq_end", 3235, 2),
    ("sweep_length", 3237, 2),
    ("sweep_type_code", 3239, 2),
    ("sweep_trace_num", 3241, 2),
    ("sweep_taper_start", 3243, 2),
    ("sweep_taper_end", 3245, 2),
    ("taper_type_code", 3247, 2),
    ("correlated_data_code", 3249, 2),
    ("binary_gain_code", 3251, 2),
    ("amp_recovery_code", 3253, 2),
    ("measurement_system_code", 3255, 2),
    ("impulse_polarity_code", 3257, 2),
    ("vibratory_polarity_code", 3259, 2),
    ("extended_data_traces_per_ensemble", 3261, 4),
    ("extended_aux_traces_per_ensemble", 3265, 4),
    ("extended_samples_per_trace", 3269, 4),
    ("extended_sample_interval", 3273, 8),
    ("extended_orig_sample_interval", 3281, 8),
    ("extended_orig_samples_per_trace", 3289, 4),
    ("extended_ensemble_fold", 3293, 4),
    ("integer_constant", 3297, 4),
    ("segy_revision_major", 3501, 1),
    ("segy_revision_minor", 3502, 1),
    ("fixed_length_trace_flag", 3503, 2),
    ("num_extended_text_headers", 3505, 2),
    ("max_extended_trace_headers", 3507, 4),
    ("time_basis_code", 3511, 2),
    ("num_traces", 3513, 8),
    ("byte_offset_of_data", 3521, 8),
    ("num_data_trailers", 3529, 4),
];

/// The binary header and the values the reader needs from it.
#[derive(Debug, Clone)]
pub struct BinaryHeader {
    /// The 400 bytes as stored.
    pub raw: Vec<u8>,
    /// Byte order of the file.
    pub endian: Endian,
}

impl BinaryHeader {
    /// Read field at 1-based file byte `byte` of `len` bytes as a signed integer.
    pub fn int(&self, byte: usize, len: usize) -> i64 {
        header_field(&self.raw, byte - 3200, len, self.endian)
    }

    /// Read an unsigned 16-bit field (sample counts exceed i16 in practice).
    pub fn u16(&self, byte: usize) -> u64 {
        (self.int(byte, 2) as u16) as u64
    }

    /// The unit of lengths (coordinates, depths), as the measurement system
    /// code (byte 3255) says: `ft` for 2, else `m` (1, and unset, as most
    /// files leave it, mean metres).
    pub fn length_unit(&self) -> &'static str {
        if self.int(3255, 2) == 2 {
            "ft"
        } else {
            "m"
        }
    }

    /// SEG-Y revision as (major, minor).
    pub fn revision(&self) -> (u8, u8) {
        (self.raw[300], self.raw[301])
    }
}

/// The named fields as a JSON object (MDIO's `binaryHeader` attribute).
pub fn binary_header_fields(header: &BinaryHeader) -> Map<String, Value> {
    let mut fields = Map::new();
    for &(name, byte, len) in FIELDS {
        let value = match len {
            1 => Value::from(header.raw[byte - 3201]),
            8 if name.starts_with("extended_") && name.ends_with("interval") => {
                let mut b: [u8; 8] = header.raw[byte - 3201..byte - 3193]
                    .try_into()
                    .expect("8 bytes");
                if header.endian == Endian::Little {
                    b.reverse();
                }
                Value::from(f64::from_be_bytes(b))
            }
            _ => Value::from(header.int(byte, len)),
        };
        fields.insert(name.to_string(), value);
    }
    fields
}
