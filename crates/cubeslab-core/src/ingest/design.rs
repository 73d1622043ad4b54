//! What the store will look like, decided before anything is written: the
//! element type and shape, the layout of the volume and of each view, the
//! tasks within the memory bound, the compression (tuned on a sample of the
//! survey when asked), and the attributes that record all of it.

use std::path::Path;

use serde_json::{json, Map, Value};

use super::{
    layouts::{amplitude_dtype, plan_layouts, Layouts, PlannedView},
    plan_ahead::PlanAhead,
    rebuild, survey,
    survey::{RecordedLayouts, SurveyNames, AMPLITUDE},
    AmplitudeType, IngestOptions,
};
use crate::{
    compress::tune,
    dtype::DType,
    error::Result,
    plan::{Evaluated, Layout},
    progress::{Progress, Unit},
    rows::tasks::{self, TaskPlan},
    segy::{Geometry, SampleFormat, SegyFile},
    store::{ArraySpec, StoreError, CUBESLAB_ATTR, VIEWS_ATTR, VIEW_ARRAY_KEY},
};

/// The store an ingest will write.
pub(super) struct Design {
    pub dtype: DType,
    pub names: SurveyNames,
    pub shape: Vec<u64>,
    pub layout: Layout,
    pub views: Vec<PlannedView>,
    pub work: TaskPlan,
    /// The amplitude's chunk codecs (after tuning).
    pub codecs: Vec<Value>,
    pub fill_value: Value,
    pub amplitude: ArraySpec,
    /// The group's attributes, all but the fingerprint and the generation.
    pub attributes: Map<String, Value>,
}

impl Design {
    /// Plan the store at `store` for `source`; `recorded` holds the layouts
    /// a stopped ingest chose, which a resume keeps, and `ahead` those
    /// planned during the scan, used if planned for the shape it found.
    pub fn new(
        store: &Path,
        source: &SegyFile,
        geometry: &Geometry,
        options: &IngestOptions,
        recorded: &RecordedLayouts,
        ahead: Option<PlanAhead>,
        progress: &Progress,
    ) -> Result<Self> {
        let store = store.to_path_buf();
        let dtype = amplitude_dtype(options, source);
        let names = SurveyNames::new(geometry.offsets.is_some(), &options.vertical);
        let mut shape = geometry.trace_shape();
        shape.push(source.samples as u64);
        progress.begin("plan layout", Unit::Items, 1, 0);
        let planned = match ahead.and_then(|a| a.result_for(&shape)) {
            Some(planned) => planned,
            None => plan_layouts(&store, &shape, dtype, options, recorded),
        };
        let Layouts {
            plan,
            layout,
            views,
        } = planned?;
        progress.add(1);

        if !dtype_holds(dtype, source.format) {
            return Err(StoreError::Unsupported {
                path: store.clone(),
                what: format!(
                    "dtype {} cannot hold every sample of format {} exactly; use float32, float64 or native",
                    dtype.name(),
                    source.format.code()
                ),
            }
            .into());
        }
        let unsupported = |what| StoreError::Unsupported {
            path: store.clone(),
            what,
        };
        let work = tasks::plan(
            &shape,
            &layout,
            dtype,
            options.memory_limit,
            options.parallelism,
        )
        .map_err(unsupported)?;
        let compression = &options.compression;
        compression.check_dtype(dtype).map_err(unsupported)?;
        // With ZFP, cells without a trace read as 0 (the trace mask tells them apart).
        let fill_value = compression.fill_value(dtype);
        let tuned = if compression.needs_tuning() {
            progress.begin("tune compression", Unit::Items, 2, 0);
            let fill = vec![0u8; dtype.size()];
            let sample =
                rebuild::sample_chunks(source, geometry, &shape, &layout.inner, dtype, &fill)?;
            progress.add(1);
            progress.check()?;
            let tuned = tune(compression, &sample).map_err(unsupported)?;
            progress.add(1);
            Some(tuned)
        } else {
            None
        };
        let chosen = tuned
            .as_ref()
            .map_or_else(|| compression.clone(), |t| t.compression.clone());
        let codecs = chosen.codecs(dtype).map_err(unsupported)?;
        let amplitude = survey::amplitude_spec(
            shape.clone(),
            &names,
            &layout,
            dtype,
            &codecs,
            fill_value.clone(),
        );
        amplitude.validate(&store.join(AMPLITUDE))?;

        let source_name = match &options.origin {
            Some(origin) => origin.url.clone(),
            None => source.path().display().to_string(),
        };
        let mut attributes =
            survey::group_attributes(source, &source_name, geometry, &names, &layout, dtype);
        if options.dtype == AmplitudeType::Float32 && !float32_holds(source.format) {
            if let Some(warnings) = attributes["cubeslab"]["warnings"].as_array_mut() {
                let native = source.format.native_dtype();
                let lost = if native.is_float() {
                    "each sample is rounded to float32's 24 significant bits (a relative change up to \
                     6e-8), and one past float32's range (3.4e38) becomes infinite"
                } else {
                    "whole numbers past 2^24 in size are rounded to float32's 24 significant bits"
                };
                warnings.push(json!(format!(
                    "samples of format {} ({}) stored as float32, the default: {lost}; pass \
                     dtype=\"native\" (--dtype native) to keep them exactly",
                    source.format.code(),
                    native.name()
                )));
            }
        }
        attributes["cubeslab"]["memory_limit"] = json!(options.memory_limit);
        attributes["cubeslab"]["source_passes"] = json!(work.passes);
        attributes["cubeslab"]["plan"] = json!({
            "strategy": options.layout.name(),
            "layout": layout.describe(),
            "padding": plan[0].padding,
            "predicted_ms": predicted_ms(&plan[0]),
        });
        attributes["cubeslab"]["compression"] = json!({
            "requested": compression.name(),
            "codec": chosen.name(),
            "lossy": chosen.is_lossy(),
        });
        if let Some(t) = &tuned {
            let mut on_sample = t.error.to_json();
            on_sample["ratio"] = json!(t.ratio);
            on_sample["chunks"] =
                json!(t.error.count / layout.inner.iter().product::<u64>().max(1));
            attributes["cubeslab"]["compression"]["tuned_on_sample"] = on_sample;
        }
        attributes[CUBESLAB_ATTR][VIEWS_ATTR] = views
            .iter()
            .map(|v| {
                (
                    v.access.clone(),
                    json!({VIEW_ARRAY_KEY: v.array, "layout": v.plan.layout.describe(), "predicted_ms": predicted_ms(&v.plan)}),
                )
            })
            .collect::<Map<String, Value>>()
            .into();
        Ok(Self {
            dtype,
            names,
            shape,
            layout,
            views,
            work,
            codecs,
            fill_value,
            amplitude,
            attributes,
        })
    }
}

/// Predicted warm and cold milliseconds per access, for the record.
fn predicted_ms(plan: &Evaluated) -> Value {
    plan.accesses
        .iter()
        .map(|a| {
            (
                a.access.clone(),
                json!({"warm": a.warm.seconds * 1e3, "cold": a.cold.seconds * 1e3}),
            )
        })
        .collect::<Map<String, Value>>()
        .into()
}

/// Whether float32 holds every sample of `format` exactly (IBM floats as
/// segyio reads them): not 32- and 64-bit integers, nor float64.
fn float32_holds(format: SampleFormat) -> bool {
    use SampleFormat::*;
    !matches!(format, Int32 | UInt32 | Int64 | UInt64 | IeeeFloat64)
}

/// Whether `dtype` holds every value of `format` exactly: floats hold what
/// they are asked to (float32 is the documented default, lossless for the
/// common formats), integers only formats whose whole range they cover.
fn dtype_holds(dtype: DType, format: crate::segy::SampleFormat) -> bool {
    use DType::*;
    if dtype.is_float() {
        return true;
    }
    let native = format.native_dtype();
    if native.is_float() {
        return false;
    }
    let range = |d: DType| -> (i128, i128) {
        match d {
            Int8 => (i8::MIN as i128, i8::MAX as i128),
            Int16 => (i16::MIN as i128, i16::MAX as i128),
            Int32 => (i32::MIN as i128, i32::MAX as i128),
            Int64 => (i64::MIN as i128, i64::MAX as i128),
            UInt8 | Bool => (0, u8::MAX as i128),
            UInt16 => (0, u16::MAX as i128),
            UInt32 => (0, u32::MAX as i128),
            UInt64 => (0, u64::MAX as i128),
            Float32 | Float64 => (i128::MIN, i128::MAX),
        }
    };
    // 24-bit formats are narrower than their native 32-bit holder.
    let source = match format {
        crate::segy::SampleFormat::Int24 => (-(1 << 23), (1 << 23) - 1),
        crate::segy::SampleFormat::UInt24 => (0, (1 << 24) - 1),
        _ => range(native),
    };
    let target = range(dtype);
    target.0 <= source.0 && source.1 <= target.1
}
