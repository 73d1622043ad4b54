//! Layout strategies by name, as `--layout` takes them.

use super::{
    layout::{join, pyrus_formula, Layout, PyrusFormula},
    optimize::{Evaluated, Planner},
};

/// How to choose a layout.
#[derive(Debug, Clone, PartialEq)]
pub enum Strategy {
    /// The optimizer's pick for the access mix (the default).
    Auto,
    /// Cubes of this side (clipped to the array), default shards.
    Cube(u64),
    /// The Pyrus chunk-shape study's published formula, default shards.
    PyrusFormula(PyrusFormula),
    /// Inner chunks given, default shards.
    Chunks(Vec<u64>),
    /// Inner chunks and shards given.
    Explicit(Layout),
}

/// What `--layout` takes, for messages and help.
pub const LAYOUT_NAMES: &str =
    "auto, cube:N, pyrus-formula[:KIB,RATIO,ASYMMETRY], AxBxC (chunks) or \
AxBxC/DxExF (chunks/shards)";

impl Strategy {
    /// Parse `auto`, `cube:N`, `pyrus-formula[:KIB,RATIO,ASYM]`, `AxBxC`
    /// (inner chunks) or `AxBxC/DxExF` (inner chunks / shards).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let shape = |s: &str| -> Result<Vec<u64>, String> {
            s.split('x')
                .map(|v| {
                    v.trim()
                        .parse::<u64>()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| format!("layout {text:?}: {v:?} is not a positive integer"))
                })
                .collect()
        };
        if text == "auto" {
            return Ok(Self::Auto);
        }
        if let Some(n) = text.strip_prefix("cube:") {
            return Ok(Self::Cube(shape(n)?[0]));
        }
        if let Some(rest) = text.strip_prefix("pyrus-formula") {
            let mut params = PyrusFormula::default();
            if let Some(args) = rest.strip_prefix(':') {
                let values: Vec<f64> = args
                    .split(',')
                    .map(|v| v.trim().parse::<f64>().ok().filter(|x| *x > 0.0))
                    .collect::<Option<_>>()
                    .ok_or_else(|| {
                        format!("layout {text:?}: give pyrus-formula:KIB,RATIO,ASYMMETRY")
                    })?;
                let [kib, ratio, asymmetry] = values[..] else {
                    return Err(format!(
                        "layout {text:?}: give pyrus-formula:KIB,RATIO,ASYMMETRY"
                    ));
                };
                params = PyrusFormula {
                    target_bytes: kib * 1024.0,
                    ratio,
                    asymmetry,
                };
            } else if !rest.is_empty() {
                return Err(format!("unknown layout {text:?}"));
            }
            return Ok(Self::PyrusFormula(params));
        }
        if text.starts_with(|c: char| c.is_ascii_digit()) {
            return match text.split_once('/') {
                None => Ok(Self::Chunks(shape(text)?)),
                Some((inner, shard)) => Ok(Self::Explicit(Layout {
                    inner: shape(inner)?,
                    shard: shape(shard)?,
                })),
            };
        }
        Err(format!("unknown layout {text:?}: use {LAYOUT_NAMES}"))
    }

    /// The name `parse` takes back.
    pub fn name(&self) -> String {
        match self {
            Self::Auto => "auto".into(),
            Self::Cube(n) => format!("cube:{n}"),
            Self::PyrusFormula(p) if *p == PyrusFormula::default() => "pyrus-formula".into(),
            Self::PyrusFormula(p) => format!(
                "pyrus-formula:{},{},{}",
                p.target_bytes / 1024.0,
                p.ratio,
                p.asymmetry
            ),
            Self::Chunks(inner) => join(inner),
            Self::Explicit(layout) => layout.describe(),
        }
    }

    /// The layout this strategy gives an array of `shape`, with its predicted
    /// costs; for `auto`, up to `keep - 1` runners-up follow the pick.
    pub fn choose(
        &self,
        shape: &[u64],
        elem: usize,
        planner: &Planner,
        keep: usize,
    ) -> Result<Vec<Evaluated>, String> {
        let fixed = |inner: Vec<u64>| -> Layout {
            let inner: Vec<u64> = inner
                .iter()
                .zip(shape)
                .map(|(&c, &n)| c.clamp(1, n.max(1)))
                .collect();
            let layout = Layout::with_default_shards(inner, shape, elem);
            // Narrowed to the ingest's column bound where it can be; where it
            // cannot, the ingest reads its source more than once.
            planner.fit(layout.clone(), shape, elem).unwrap_or(layout)
        };
        let layout = match self {
            Self::Auto => {
                let ranked = planner.rank_best(shape, elem, keep);
                if ranked.is_empty() {
                    return Err(format!(
                        "no chunk shape for an array of shape {shape:?} fits the bounds (chunks of 4 KiB to 16 MiB, \
                         padding and per-chunk overhead within 2 %); give --layout AxBxC"
                    ));
                }
                return Ok(ranked);
            }
            Self::Cube(n) => fixed(vec![*n; shape.len()]),
            Self::PyrusFormula(params) => fixed(pyrus_formula(shape, elem, *params)),
            Self::Chunks(inner) => {
                if inner.len() != shape.len() {
                    return Err(format!(
                        "layout has {} sides for an array of {} dimensions",
                        inner.len(),
                        shape.len()
                    ));
                }
                fixed(inner.clone())
            }
            Self::Explicit(layout) => layout.clone(),
        };
        layout.check(shape)?;
        Ok(vec![planner.evaluate(shape, elem, &layout)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse() {
        assert_eq!(Strategy::parse("auto").unwrap(), Strategy::Auto);
        assert_eq!(Strategy::parse("cube:64").unwrap(), Strategy::Cube(64));
        assert_eq!(
            Strategy::parse("pyrus-formula").unwrap(),
            Strategy::PyrusFormula(PyrusFormula::default())
        );
        assert_eq!(
            Strategy::parse("pyrus-formula:1024,1.5,2").unwrap(),
            Strategy::PyrusFormula(PyrusFormula {
                target_bytes: 1024.0 * 1024.0,
                ratio: 1.5,
                asymmetry: 2.0
            })
        );
        assert_eq!(
            Strategy::parse("8x16x32/64x64x256").unwrap(),
            Strategy::Explicit(Layout {
                inner: vec![8, 16, 32],
                shard: vec![64, 64, 256]
            })
        );
        assert_eq!(
            Strategy::parse("8x8x8").unwrap(),
            Strategy::Chunks(vec![8, 8, 8])
        );
        for name in [
            "auto",
            "cube:64",
            "pyrus-formula",
            "pyrus-formula:1024,1.5,2",
            "8x8x8",
            "8x8x8/16x16x16",
        ] {
            assert_eq!(Strategy::parse(name).unwrap().name(), name);
        }
        for bad in [
            "",
            "cube:0",
            "cube:x",
            "pyrus-formula:1,2",
            "pyrus-formula1",
            "8x0x8",
            "fast",
        ] {
            assert!(Strategy::parse(bad).is_err(), "{bad}");
        }
    }
}
