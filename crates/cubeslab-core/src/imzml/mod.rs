//! imzML: an XML index (mzML with imaging terms) of the spectra in a binary
//! `.ibd` file. [`read_index`] streams through the XML once, keeping only
//! each spectrum's numbers: its pixel, and the offset, length and encoding
//! of its m/z and intensity arrays in the `.ibd`; with them the file's mode
//! (continuous: one m/z array shared by every pixel; processed: one per
//! pixel), the `.ibd`'s UUID and checksum, and instrument metadata.

mod error;
pub mod terms;

use std::{collections::HashMap, io::BufReader, path::Path};

use quick_xml::{
    events::{BytesStart, Event},
    Reader, XmlVersion,
};

use crate::{dtype::DType, error::Result};
pub use error::ImzmlError;
use terms::*;

/// How one kind of array (m/z or intensity) is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Encoding {
    /// The element type (little-endian in the `.ibd`).
    pub dtype: DType,
    /// Each array zlib-compressed.
    pub zlib: bool,
}

/// Numbers per spectrum in [`ImzmlIndex::table`].
pub const TABLE_COLUMNS: usize = 9;

/// What an imzML file says about its `.ibd`.
#[derive(Debug, Clone)]
pub struct ImzmlIndex {
    /// Continuous mode (else processed).
    pub continuous: bool,
    /// The `.ibd`'s UUID as the file writes it.
    pub uuid: Option<String>,
    /// (`sha1` or `md5`, lower-case hex digest) of the `.ibd`.
    pub checksum: Option<(&'static str, String)>,
    /// The m/z arrays' encoding.
    pub mz: Encoding,
    /// The intensity arrays' encoding.
    pub intensity: Encoding,
    /// Pixel size x (and y), µm, as scan settings give them.
    pub pixel_size_um: Vec<f64>,
    /// Scan polarity, if a parameter group gives it.
    pub polarity: Option<&'static str>,
    /// Per spectrum in file order: x, y, z, then the m/z array's offset,
    /// length and encoded length, then the intensity array's.
    pub table: Vec<i64>,
}

/// A `cvParam`: accession, name, value.
#[derive(Debug, Clone, Default)]
struct Param {
    accession: String,
    name: String,
    value: String,
}

/// Elements whose parameters the index is read from.
#[derive(Debug, Clone, PartialEq)]
enum Scope {
    Group(String),
    FileContent,
    ScanSettings,
    Spectrum,
    ScanList,
    BinaryArray,
    Other,
}

/// One spectrum's parameters, gathered until its end tag.
#[derive(Default)]
struct SpectrumParams {
    id: String,
    all: Vec<Param>,
    scan_list: Option<Vec<Param>>,
    /// Per binary data array: its group references and its own parameters.
    arrays: Vec<(Vec<String>, Vec<Param>)>,
}

struct IndexReader<'a> {
    path: &'a Path,
    groups: HashMap<String, Vec<Param>>,
    group: Vec<Param>,
    file_params: Vec<Param>,
    pixel_size_um: Vec<f64>,
    spectrum: SpectrumParams,
    spectra: usize,
    mz: Option<Encoding>,
    intensity: Option<Encoding>,
    table: Vec<i64>,
}

/// Read the index of the imzML file at `path`; errors name the file and
/// the element.
pub fn read_index(path: &Path) -> Result<ImzmlIndex> {
    let file = std::fs::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ImzmlError::Missing {
            path: path.to_path_buf(),
        }
        .into(),
        _ => crate::Error::io(path, e),
    })?;
    let mut xml = Reader::from_reader(BufReader::with_capacity(1 << 20, file));
    let mut index = IndexReader {
        path,
        groups: HashMap::new(),
        group: Vec::new(),
        file_params: Vec::new(),
        pixel_size_um: Vec::new(),
        spectrum: SpectrumParams::default(),
        spectra: 0,
        mz: None,
        intensity: None,
        table: Vec::new(),
    };
    let mut stack: Vec<Scope> = Vec::new();
    let mut root_seen = false;
    let mut buf = Vec::new();
    loop {
        let event = xml
            .read_event_into(&mut buf)
            .map_err(|e| ImzmlError::NotXml {
                path: path.to_path_buf(),
                detail: format!("{e} (byte {})", xml.error_position()),
            })?;
        match event {
            Event::Start(ref element) | Event::Empty(ref element) => {
                if !root_seen {
                    root_seen = true;
                    index.check_root(element)?;
                }
                let scope = index.open(element, &stack)?;
                if matches!(event, Event::Start(_)) {
                    stack.push(scope);
                } else {
                    index.close(&scope)?;
                }
            }
            Event::End(_) => {
                if let Some(scope) = stack.pop() {
                    index.close(&scope)?;
                }
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    if !root_seen {
        return Err(index.not_imzml("empty file, not imzML"));
    }
    index.finish()
}

impl IndexReader<'_> {
    fn not_imzml(&self, what: impl Into<String>) -> crate::Error {
        ImzmlError::NotImzml {
            path: self.path.to_path_buf(),
            what: what.into(),
        }
        .into()
    }

    fn spectrum_error(&self, what: impl Into<String>) -> crate::Error {
        ImzmlError::Spectrum {
            path: self.path.to_path_buf(),
            index: self.spectra,
            id: self.spectrum.id.clone(),
            what: what.into(),
        }
        .into()
    }

    fn check_root(&self, root: &BytesStart) -> Result<()> {
        let name = String::from_utf8_lossy(root.name().as_ref()).into_owned();
        let namespaced = root.attributes().flatten().any(|a| {
            a.key.as_ref().starts_with(b"xmlns") && a.value.as_ref() == MZML_NAMESPACE.as_bytes()
        });
        if root.local_name().as_ref() != b"mzML" || !namespaced {
            return Err(self.not_imzml(format!(
                "not imzML (the root element is {name}, not mzML in {MZML_NAMESPACE})"
            )));
        }
        Ok(())
    }

    /// An element starts inside `stack`: its scope, its parameter recorded.
    fn open(&mut self, element: &BytesStart, stack: &[Scope]) -> Result<Scope> {
        let inside = |scope: &Scope| stack.contains(scope);
        Ok(match element.local_name().as_ref() {
            b"cvParam" => {
                let param = param(element);
                if stack.iter().any(|s| matches!(s, Scope::Group(_))) {
                    self.group.push(param.clone());
                }
                if inside(&Scope::FileContent) {
                    self.file_params.push(param.clone());
                }
                if inside(&Scope::ScanSettings) && PIXEL_SIZE.contains(&param.accession.as_str()) {
                    let size = param.value.trim().parse::<f64>().map_err(|_| {
                        self.not_imzml(format!(
                            "scan settings: pixel size {:?} is not a number",
                            param.value
                        ))
                    })?;
                    self.pixel_size_um.push(size);
                }
                if inside(&Scope::Spectrum) {
                    if inside(&Scope::ScanList) {
                        if let Some(list) = self.spectrum.scan_list.as_mut() {
                            list.push(param.clone());
                        }
                    }
                    if inside(&Scope::BinaryArray) {
                        if let Some(array) = self.spectrum.arrays.last_mut() {
                            array.1.push(param.clone());
                        }
                    }
                    self.spectrum.all.push(param);
                }
                Scope::Other
            }
            b"referenceableParamGroupRef" if inside(&Scope::BinaryArray) => {
                if let Some(array) = self.spectrum.arrays.last_mut() {
                    array.0.push(attribute(element, b"ref"));
                }
                Scope::Other
            }
            b"referenceableParamGroup" => {
                self.group.clear();
                Scope::Group(attribute(element, b"id"))
            }
            b"fileContent" => Scope::FileContent,
            b"scanSettings" => Scope::ScanSettings,
            b"spectrum" => {
                self.spectrum = SpectrumParams {
                    id: attribute(element, b"id"),
                    ..Default::default()
                };
                Scope::Spectrum
            }
            b"scanList" if inside(&Scope::Spectrum) => {
                self.spectrum.scan_list.get_or_insert_with(Vec::new);
                Scope::ScanList
            }
            b"binaryDataArray" if inside(&Scope::Spectrum) => {
                self.spectrum.arrays.push(Default::default());
                Scope::BinaryArray
            }
            _ => Scope::Other,
        })
    }

    fn close(&mut self, scope: &Scope) -> Result<()> {
        match scope {
            Scope::Group(id) => {
                self.groups
                    .insert(id.clone(), std::mem::take(&mut self.group));
            }
            Scope::Spectrum => {
                self.spectrum_ended()?;
                self.spectra += 1;
            }
            _ => {}
        }
        Ok(())
    }

    fn spectrum_ended(&mut self) -> Result<()> {
        let mut position = [1i64; 3];
        let mut seen = [false; 3];
        let params = self
            .spectrum
            .scan_list
            .as_ref()
            .unwrap_or(&self.spectrum.all);
        for p in params {
            if let Some(axis) = POSITION.iter().position(|&a| a == p.accession) {
                position[axis] = p.value.trim().parse().map_err(|_| {
                    self.spectrum_error(format!(
                        "pixel position {} is {:?}, not a whole number",
                        p.name, p.value
                    ))
                })?;
                seen[axis] = true;
            }
        }
        if !(seen[0] && seen[1]) {
            return Err(self.spectrum_error("no pixel position (IMS:1000050/1000051)"));
        }
        let mut found: [Option<[i64; 3]>; 2] = [None, None];
        for (refs, own) in &self.spectrum.arrays {
            let mut params: Vec<&Param> = Vec::new();
            for r in refs {
                let group = self.groups.get(r).ok_or_else(|| {
                    self.spectrum_error(format!("refers to an unknown parameter group {r}"))
                })?;
                params.extend(group);
            }
            params.extend(own);
            let (kind, encoding) = self.binary_kind(&params)?;
            let known = if kind == 0 {
                &mut self.mz
            } else {
                &mut self.intensity
            };
            if known.is_some_and(|k| k != encoding) {
                return Err(self.spectrum_error(format!(
                    "the {} array's encoding differs from the first spectrum's",
                    KINDS[kind]
                )));
            }
            *known = Some(encoding);
            let number = |accession: &str| {
                own.iter()
                    .find(|p| p.accession == accession)
                    .and_then(|p| p.value.trim().parse::<i64>().ok())
            };
            match (number(OFFSET), number(ARRAY_LENGTH), number(ENCODED_LENGTH)) {
                (Some(offset), Some(length), Some(encoded)) => {
                    found[kind] = Some([offset, length, encoded]);
                }
                _ => {
                    return Err(self.spectrum_error(format!(
                    "the {} array lacks a valid external offset, array length or encoded length",
                    KINDS[kind]
                )))
                }
            }
        }
        let [Some(mz), Some(intensity)] = found else {
            let has: Vec<String> = (0..2)
                .filter(|&k| found[k].is_some())
                .map(|k| format!("'{}'", KINDS[k]))
                .collect();
            return Err(self.spectrum_error(format!(
                "needs one m/z and one intensity array, has [{}]",
                has.join(", ")
            )));
        };
        self.table.extend(position);
        self.table.extend(mz);
        self.table.extend(intensity);
        Ok(())
    }

    /// Which kind of array (0: m/z, 1: intensity) the parameters describe,
    /// and its encoding.
    fn binary_kind(&self, params: &[&Param]) -> Result<(usize, Encoding)> {
        let (mut kind, mut dtype, mut zlib) = (None, None, false);
        let mut others = Vec::new();
        for p in params {
            let (accession, name) = (p.accession.as_str(), p.name.as_str());
            let typed = DATA_TYPES
                .iter()
                .find(|(a, _)| *a == accession)
                .or_else(|| DATA_TYPE_NAMES.iter().find(|(n, _)| *n == name));
            if accession == MZ_ARRAY {
                kind = Some(0);
            } else if accession == INTENSITY_ARRAY {
                kind = Some(1);
            } else if let Some((_, t)) = typed {
                dtype = Some(*t);
            } else if accession == ZLIB {
                zlib = true;
            } else if name.contains("compression") && accession != NO_COMPRESSION {
                return Err(self
                    .spectrum_error(format!("compression {name} ({accession}) is not supported")));
            } else if name.contains("bit") && (name.contains("float") || name.contains("integer")) {
                return Err(self.spectrum_error(format!("unknown data type {name} ({accession})")));
            } else if ![
                NO_COMPRESSION,
                EXTERNAL_DATA,
                ARRAY_LENGTH,
                OFFSET,
                ENCODED_LENGTH,
            ]
            .contains(&accession)
            {
                others.push(format!("{accession} '{name}'"));
            }
        }
        let kind = kind.ok_or_else(|| {
            self.spectrum_error("a binary data array that is neither m/z nor intensity")
        })?;
        let dtype = dtype.ok_or_else(|| {
            // A type this reader does not know is among the others, under a name it cannot tell.
            let given = if others.is_empty() {
                String::new()
            } else {
                format!(" (its other parameters: {})", others.join(", "))
            };
            self.spectrum_error(format!(
                "the {} array has no data type this reader knows{given}",
                KINDS[kind]
            ))
        })?;
        Ok((kind, Encoding { dtype, zlib }))
    }

    fn finish(self) -> Result<ImzmlIndex> {
        let value = |accession: &str| {
            self.file_params
                .iter()
                .find(|p| p.accession == accession)
                .map(|p| p.value.clone())
        };
        let continuous = match (value(CONTINUOUS).is_some(), value(PROCESSED).is_some()) {
            (true, false) => true,
            (false, true) => false,
            (true, true) => return Err(self.not_imzml(
                "fileContent says both continuous (IMS:1000030) and processed (IMS:1000031) mode",
            )),
            (false, false) => {
                return Err(self.not_imzml(
                    "fileContent says neither continuous (IMS:1000030) nor processed mode",
                ))
            }
        };
        let (Some(mz), Some(intensity)) = (self.mz, self.intensity) else {
            return Err(self.not_imzml("no spectra"));
        };
        let checksum = match (value(IBD_SHA1), value(IBD_MD5)) {
            (Some(sha1), _) => Some(("sha1", sha1.to_lowercase())),
            (None, Some(md5)) => Some(("md5", md5.to_lowercase())),
            (None, None) => None,
        };
        let polarity = self
            .groups
            .values()
            .flatten()
            .find_map(|p| POLARITY.iter().find(|(a, _)| *a == p.accession))
            .map(|(_, name)| *name);
        Ok(ImzmlIndex {
            continuous,
            uuid: value(UUID),
            checksum,
            mz,
            intensity,
            pixel_size_um: self.pixel_size_um,
            polarity,
            table: self.table,
        })
    }
}

/// The two kinds of binary array, as messages name them.
const KINDS: [&str; 2] = ["mz", "intensity"];

/// An attribute's value, entities resolved ("" when absent).
fn attribute(element: &BytesStart, key: &[u8]) -> String {
    element
        .attributes()
        .flatten()
        .find(|a| a.key.local_name().as_ref() == key)
        .map(|a| {
            a.normalized_value(XmlVersion::Implicit1_0)
                .map(|v| v.into_owned())
                .unwrap_or_else(|_| String::from_utf8_lossy(&a.value).into_owned())
        })
        .unwrap_or_default()
}

fn param(element: &BytesStart) -> Param {
    Param {
        accession: attribute(element, b"accession"),
        name: attribute(element, b"name"),
        value: attribute(element, b"value"),
    }
}
