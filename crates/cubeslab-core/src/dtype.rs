//! Element data types the engine reads and writes.

/// A fixed-size element type, named as in the Zarr v3 core spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum DType {
    Bool,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Float32,
    Float64,
}

impl DType {
    /// Every supported type.
    pub const ALL: [DType; 11] = [
        DType::Bool,
        DType::Int8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::UInt8,
        DType::UInt16,
        DType::UInt32,
        DType::UInt64,
        DType::Float32,
        DType::Float64,
    ];

    /// The Zarr v3 name (`"float32"`, ...), also numpy's.
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::Int8 => "int8",
            DType::Int16 => "int16",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::UInt8 => "uint8",
            DType::UInt16 => "uint16",
            DType::UInt32 => "uint32",
            DType::UInt64 => "uint64",
            DType::Float32 => "float32",
            DType::Float64 => "float64",
        }
    }

    /// Parse a Zarr v3 / numpy name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::Int8 | DType::UInt8 => 1,
            DType::Int16 | DType::UInt16 => 2,
            DType::Int32 | DType::UInt32 | DType::Float32 => 4,
            DType::Int64 | DType::UInt64 | DType::Float64 => 8,
        }
    }

    /// Whether the type is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, DType::Float32 | DType::Float64)
    }

    /// The fill value cubeslab uses for missing data: NaN for floats, 0 otherwise,
    /// as JSON metadata.
    pub fn default_fill(self) -> serde_json::Value {
        match self {
            DType::Float32 | DType::Float64 => "NaN".into(),
            DType::Bool => false.into(),
            _ => 0.into(),
        }
    }
}

/// Evaluate `$body` with `$t` naming the Rust type of `$dtype`'s elements
/// (`Bool` as `u8`): the one match from an element type to its Rust type.
macro_rules! with_element_type {
    (@as $ty:ty, $t:ident => $body:expr) => {{
        type $t = $ty;
        // A body's `as f64` is a no-op in the f64 arm alone.
        #[allow(clippy::unnecessary_cast)]
        let value = $body;
        value
    }};
    ($dtype:expr, $t:ident => $body:expr) => {{
        use $crate::dtype::DType as D;
        match $dtype {
            D::Bool | D::UInt8 => with_element_type!(@as u8, $t => $body),
            D::Int8 => with_element_type!(@as i8, $t => $body),
            D::Int16 => with_element_type!(@as i16, $t => $body),
            D::UInt16 => with_element_type!(@as u16, $t => $body),
            D::Int32 => with_element_type!(@as i32, $t => $body),
            D::UInt32 => with_element_type!(@as u32, $t => $body),
            D::Int64 => with_element_type!(@as i64, $t => $body),
            D::UInt64 => with_element_type!(@as u64, $t => $body),
            D::Float32 => with_element_type!(@as f32, $t => $body),
            D::Float64 => with_element_type!(@as f64, $t => $body),
        }
    }};
}
pub(crate) use with_element_type;
