//! Accesses: the reads a layout is planned for, each a window family placed
//! in the middle of the array, with a weight.

use crate::window::{DimRange, Window};

/// One kind of read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// Every element with one index fixed along `dim` (an inline is plane 0
    /// of a 3-D survey, a crossline plane 1, a time slice the last).
    Plane(usize),
    /// `count` consecutive planes along the last dimension (MSI ion images).
    Slices(u64),
    /// One index fixed in every dimension but the last (a trace).
    Trace,
    /// `side` x `side` traces (MSI spectra), whole along the last dimension.
    Spectra(u64),
    /// A box with these sides (clipped to the array).
    Box(Vec<u64>),
    /// A cube of `side` along every dimension (clipped to the array).
    SubVolume(u64),
    /// Whole along dimensions `a` and `b`, one index along the others (a
    /// 2-D section of an N-D array: a gather, an inline at one offset, ...).
    Section(usize, usize),
}

impl Access {
    /// Parse a name: `inline`, `crossline`, `time` (or `slice`, `depth`),
    /// `plane:K`, `trace`, `subvolume:N`, `spectra:N`, `ion-images:N`,
    /// `box:AxBxC`, `section:A,B`.
    pub fn parse(text: &str, ndim: usize) -> Result<Self, String> {
        let (name, arg) = match text.split_once(':') {
            Some((n, a)) => (n.trim(), Some(a.trim())),
            None => (text.trim(), None),
        };
        let number = |default: u64| -> Result<u64, String> {
            match arg {
                None => Ok(default),
                Some(a) => a
                    .parse::<u64>()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("access {text}: {a} is not a positive integer")),
            }
        };
        let last = ndim.saturating_sub(1);
        let access = match name {
            "inline" => Access::Plane(0),
            "crossline" if ndim >= 3 => Access::Plane(1),
            "time" | "slice" | "depth" => Access::Plane(last),
            "plane" => Access::Plane(number(0)? as usize),
            "trace" => Access::Trace,
            "subvolume" => Access::SubVolume(number(64)?),
            "spectra" => Access::Spectra(number(5)?),
            "ion-images" | "slices" => Access::Slices(number(25)?),
            "section" => {
                let dims: Option<Vec<usize>> = arg
                    .unwrap_or("")
                    .split(',')
                    .map(|s| s.trim().parse().ok())
                    .collect();
                match dims.as_deref() {
                    Some(&[a, b]) if a < ndim && b < ndim && a != b => Access::Section(a, b),
                    _ => {
                        return Err(format!(
                            "access {text}: give section:A,B with two dimensions"
                        ))
                    }
                }
            }
            "box" => {
                let sides: Option<Vec<u64>> = arg
                    .unwrap_or("")
                    .split('x')
                    .map(|s| s.trim().parse().ok().filter(|&n: &u64| n > 0))
                    .collect();
                match sides {
                    Some(s) if s.len() == ndim => Access::Box(s),
                    _ => return Err(format!("access {text}: give box:AxBx.. with {ndim} sides")),
                }
            }
            _ => {
                return Err(format!(
                    "unknown access {text:?}: use inline, crossline, time, plane:K, trace, \
                     subvolume:N, spectra:N, ion-images:N, box:AxBx.. or section:A,B"
                ))
            }
        };
        if let Access::Plane(d) = access {
            if d >= ndim {
                return Err(format!("access {text}: the array has {ndim} dimensions"));
            }
        }
        Ok(access)
    }

    /// A short name for tables (`inline`, `plane:2`, ...), given dimension names.
    pub fn name(&self, ndim: usize) -> String {
        match self {
            Access::Plane(0) if ndim == 3 => "inline".into(),
            Access::Plane(1) if ndim == 3 => "crossline".into(),
            Access::Plane(2) if ndim == 3 => "time".into(),
            Access::Plane(d) => format!("plane:{d}"),
            Access::Slices(n) => format!("ion-images:{n}"),
            Access::Trace => "trace".into(),
            Access::Spectra(n) => format!("spectra:{n}"),
            Access::Box(s) => format!(
                "box:{}",
                s.iter().map(u64::to_string).collect::<Vec<_>>().join("x")
            ),
            Access::SubVolume(n) => format!("subvolume:{n}"),
            Access::Section(a, b) => format!("section:{a},{b}"),
        }
    }

    /// The window this access reads from an array of `shape`, centred.
    pub fn window(&self, shape: &[u64]) -> Window {
        let nd = shape.len();
        let last = nd - 1;
        let sides: Vec<u64> = (0..nd)
            .map(|d| match self {
                Access::Plane(k) => {
                    if d == *k {
                        1
                    } else {
                        shape[d]
                    }
                }
                Access::Slices(n) => {
                    if d == last {
                        *n
                    } else {
                        shape[d]
                    }
                }
                Access::Trace => {
                    if d == last {
                        shape[d]
                    } else {
                        1
                    }
                }
                Access::Spectra(n) => {
                    if d == last {
                        shape[d]
                    } else {
                        *n
                    }
                }
                Access::Box(s) => s[d],
                Access::SubVolume(n) => *n,
                Access::Section(a, b) => {
                    if d == *a || d == *b {
                        shape[d]
                    } else {
                        1
                    }
                }
            })
            .collect();
        centred(shape, &sides)
    }
}

/// A window of `sides` (clipped to `shape`) centred in the array.
fn centred(shape: &[u64], sides: &[u64]) -> Window {
    Window {
        dims: shape
            .iter()
            .zip(sides)
            .map(|(&n, &s)| {
                let s = s.clamp(1, n.max(1));
                let start = (n - s) / 2;
                DimRange::new(start, start + s)
            })
            .collect(),
    }
}

/// Accesses with weights: what a layout is optimised for.
#[derive(Debug, Clone, PartialEq)]
pub struct AccessMix {
    /// Each access with its weight (a read's time is multiplied by it).
    pub accesses: Vec<(Access, f64)>,
}

impl AccessMix {
    /// Every plane equally (inline, crossline and time slice for a 3-D survey).
    pub fn planes(ndim: usize) -> Self {
        Self {
            accesses: (0..ndim).map(|d| (Access::Plane(d), 1.0)).collect(),
        }
    }

    /// The default mix: in 1 to 3 dimensions every plane; beyond, the 2-D
    /// sections through the last dimension (for pre-stack data: inline and
    /// crossline sections at one offset, gathers) and the first two
    /// dimensions' map view, equally.
    pub fn default_for(ndim: usize) -> Self {
        if ndim <= 3 {
            return Self::planes(ndim);
        }
        let last = ndim - 1;
        let mut accesses: Vec<(Access, f64)> =
            (0..last).map(|d| (Access::Section(d, last), 1.0)).collect();
        accesses.push((Access::Section(0, 1), 1.0));
        Self { accesses }
    }

    /// Parse `inline,crossline=2,time` (weights after `=`, default 1).
    pub fn parse(text: &str, ndim: usize) -> Result<Self, String> {
        let mut accesses = Vec::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, weight) = match item.split_once('=') {
                Some((n, w)) => (
                    n,
                    w.trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|w| *w > 0.0 && w.is_finite())
                        .ok_or_else(|| {
                            format!("access {item}: weight must be a positive number")
                        })?,
                ),
                None => (item, 1.0),
            };
            accesses.push((Access::parse(name, ndim)?, weight));
        }
        if accesses.is_empty() {
            return Err("no accesses given".into());
        }
        Ok(Self { accesses })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_centred_and_clipped() {
        let shape = [600, 800, 1000];
        let inline = Access::parse("inline", 3).unwrap().window(&shape);
        assert_eq!(inline.shape(), vec![1, 800, 1000]);
        assert_eq!(inline.dims[0].start, 299);
        let slice = Access::parse("time", 3).unwrap().window(&shape);
        assert_eq!(slice.shape(), vec![600, 800, 1]);
        let sub = Access::parse("subvolume:2000", 3).unwrap().window(&shape);
        assert_eq!(sub.shape(), vec![600, 800, 1000]);
        let spectra = Access::parse("spectra:5", 3).unwrap().window(&shape);
        assert_eq!(spectra.shape(), vec![5, 5, 1000]);
        let mix = AccessMix::parse("inline, time=2", 3).unwrap();
        assert_eq!(mix.accesses[1], (Access::Plane(2), 2.0));
        assert!(AccessMix::parse("inline=0", 3).is_err());
        assert!(Access::parse("plane:3", 3).is_err());
        assert!(Access::parse("box:1x2", 3).is_err());
        assert_eq!(Access::parse("box:1x2x3", 3).unwrap().name(3), "box:1x2x3");
        let gather = Access::parse("section:2,3", 4)
            .unwrap()
            .window(&[10, 20, 30, 40]);
        assert_eq!(gather.shape(), vec![1, 1, 30, 40]);
        assert_eq!(AccessMix::default_for(4).accesses.len(), 4);
        assert_eq!(AccessMix::default_for(3), AccessMix::planes(3));
    }
}
