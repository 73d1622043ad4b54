//! The controlled-vocabulary terms (PSI-MS and imaging MS accessions) an
//! imzML index is read from.

use crate::dtype::DType;

/// The namespace of mzML, and so of imzML, elements.
pub const MZML_NAMESPACE: &str = "http://psi.hupo.org/ms/mzml";

/// Binary data types by accession.
pub const DATA_TYPES: [(&str, DType); 8] = [
    ("MS:1000521", DType::Float32),
    ("MS:1000523", DType::Float64),
    ("MS:1000519", DType::Int32),
    ("MS:1000522", DType::Int64),
    ("IMS:1000141", DType::Int8),
    ("IMS:1000142", DType::Int16),
    ("IMS:1100000", DType::Int8),
    ("IMS:1100001", DType::Int16),
];

/// Binary data types by name, which some writers give with other accessions.
pub const DATA_TYPE_NAMES: [(&str, DType); 6] = [
    ("32-bit float", DType::Float32),
    ("64-bit float", DType::Float64),
    ("32-bit integer", DType::Int32),
    ("64-bit integer", DType::Int64),
    ("8-bit integer", DType::Int8),
    ("16-bit integer", DType::Int16),
];

#[allow(missing_docs)]
pub const NO_COMPRESSION: &str = "MS:1000576";
#[allow(missing_docs)]
pub const ZLIB: &str = "MS:1000574";
#[allow(missing_docs)]
pub const MZ_ARRAY: &str = "MS:1000514";
#[allow(missing_docs)]
pub const INTENSITY_ARRAY: &str = "MS:1000515";
#[allow(missing_docs)]
pub const CONTINUOUS: &str = "IMS:1000030";
#[allow(missing_docs)]
pub const PROCESSED: &str = "IMS:1000031";
#[allow(missing_docs)]
pub const UUID: &str = "IMS:1000080";
#[allow(missing_docs)]
pub const IBD_MD5: &str = "IMS:1000090";
#[allow(missing_docs)]
pub const IBD_SHA1: &str = "IMS:1000091";
/// Pixel position x, y, z.
pub const POSITION: [&str; 3] = ["IMS:1000050", "IMS:1000051", "IMS:1000052"];
#[allow(missing_docs)]
pub const ARRAY_LENGTH: &str = "IMS:1000103";
#[allow(missing_docs)]
pub const OFFSET: &str = "IMS:1000102";
#[allow(missing_docs)]
pub const ENCODED_LENGTH: &str = "IMS:1000104";
/// "external data": the array lies in the `.ibd`, as every imzML array does.
pub const EXTERNAL_DATA: &str = "IMS:1000101";
/// Pixel size x and y, µm.
pub const PIXEL_SIZE: [&str; 2] = ["IMS:1000046", "IMS:1000047"];
/// Scan polarity.
pub const POLARITY: [(&str, &str); 2] = [("MS:1000129", "negative"), ("MS:1000130", "positive")];
