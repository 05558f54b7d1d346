//! The DAMON parts of a report: cost per aggregation interval, and the DAMON configuration at
//! the start and end of the capture (pure).
use damon_common::FunctionId;
use serde::Serialize;
use serde_json::Value;

use super::FunctionReport;
use crate::{
    capture::Capture,
    stats::intervals::{self, Boundaries, KdamondIntervals},
};

/// How the capture's interval boundaries were found, and what was lost.
#[derive(Debug, Clone, Serialize)]
pub struct IntervalsReport {
    /// "tracepoint:damon:damon_aggregated".
    pub hook: String,
    pub attached: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Boundary markers in the capture.
    pub markers: u64,
    /// Markers the kernel lost (ring full): the two intervals around a lost one count as one.
    pub markers_dropped: u64,
    /// The kernel's own counts: boundaries seen and markers written (absent when the capture
    /// has no summary). `kernel_markers == markers + markers_dropped` for a complete capture.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_markers: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_emitted: Option<u64>,
    pub kdamonds: Vec<KdamondIntervals>,
}

/// The DAMON sysfs configuration at start and end, and what differs.
#[derive(Debug, Clone, Serialize)]
pub struct DamonContext {
    pub start: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end: Option<Value>,
    /// The configuration differs at the end (false without an end snapshot); scheme stats
    /// advancing is not a change.
    pub changed_at_end: bool,
    /// `path: start -> end` of every configuration value that differs.
    pub changes: Vec<String>,
    /// The same for the schemes' stats counters (these advance while DAMON works).
    pub stats_changes: Vec<String>,
}

/// Whether per-interval numbers are computed for this function: DAMON functions that were
/// traced.
pub fn wants_intervals(attach: crate::capture::AttachState, id: u32) -> bool {
    FunctionId::try_from(id).is_ok_and(FunctionId::is_damon) && attach.is_traced()
}

/// Every record of one function (per-interval cost ignores `--cpu`/`--pid`).
fn calls_of(capture: &Capture, id: u32) -> Vec<damon_common::CallRecord> {
    capture
        .records
        .iter()
        .filter(|r| r.func == id)
        .copied()
        .collect()
}

/// The per-interval cost of each traced DAMON function, by name, as `add_intervals` gives it
/// to the report (for exports; `None` entries left out): empty without interval boundaries
/// or per-call records (kernel mode).
pub fn per_interval_of(capture: &Capture) -> Vec<(String, intervals::PerInterval)> {
    if capture.meta.intervals.is_none() || capture.is_kernel_mode() {
        return Vec::new();
    }
    let bounds = Boundaries::from_marks(&capture.marks);
    capture
        .meta
        .functions
        .iter()
        .filter(|f| wants_intervals(f.attach, f.id))
        .filter_map(|f| {
            Some((
                f.name.clone(),
                intervals::per_interval(&calls_of(capture, f.id), &bounds)?,
            ))
        })
        .collect()
}

/// Fills `per_interval` of the DAMON functions and returns the interval facts, with warnings.
pub fn add_intervals(
    capture: &Capture,
    functions: &mut [(u32, &mut FunctionReport)],
    warnings: &mut Vec<String>,
) -> Option<IntervalsReport> {
    let hook = capture.meta.intervals.as_ref()?;
    let bounds = Boundaries::from_marks(&capture.marks);
    let counters = capture.summary.as_ref().and_then(|s| s.intervals);
    let dropped = counters.map_or(0, |c| c.ring_full);
    if let Some(c) = counters
        && c.emitted != capture.marks.len() as u64
    {
        warnings.push(format!(
            "the kernel wrote {} interval boundaries, the capture holds {}",
            c.emitted,
            capture.marks.len()
        ));
    }
    if dropped > 0 {
        warnings.push(format!(
            "{dropped} aggregation-interval boundaries were lost (ring full): the intervals on \
             both sides of each are counted as one"
        ));
    }
    if let Some(snap) = &capture.meta.damon {
        for k in snap["kdamonds"].as_array().into_iter().flatten() {
            for c in k["contexts"].as_array().into_iter().flatten() {
                let aggr = c["aggr_us"].as_u64().unwrap_or(0);
                for s in c["schemes"].as_array().into_iter().flatten() {
                    if let Some(apply) = s["apply_interval_us"]
                        .as_u64()
                        .filter(|a| *a > 0 && *a != aggr)
                    {
                        warnings.push(format!(
                            "kdamond {} applies its {} scheme every {apply} us, not every \
                             aggregation interval ({aggr} us): per-interval numbers are per \
                             aggregation interval, so intervals without an application show 0",
                            k["index"],
                            s["action"].as_str().unwrap_or("?")
                        ));
                    }
                }
            }
        }
    }
    for (id, f) in functions.iter_mut() {
        if !wants_intervals(f.attach, *id) {
            continue;
        }
        let calls = calls_of(capture, *id);
        let p = intervals::per_interval(&calls, &bounds);
        if let Some(p) = &p
            && let Err(e) = p.check(&calls)
        {
            warnings.push(format!("{}: per-interval accounting: {e}", f.name));
        }
        f.per_interval = p;
    }
    Some(IntervalsReport {
        hook: hook.hook.clone(),
        attached: hook.attached,
        detail: hook.detail.clone(),
        markers: capture.marks.len() as u64,
        markers_dropped: dropped,
        kernel_markers: counters.map(|c| c.markers),
        kernel_emitted: counters.map(|c| c.emitted),
        kdamonds: intervals::kdamonds(&bounds),
    })
}

/// The DAMON context of a capture, when it has a start snapshot.
pub fn context(capture: &Capture) -> Option<DamonContext> {
    let start = capture.meta.damon.clone()?;
    let end = capture.summary.as_ref().and_then(|s| s.damon_end.clone());
    let mut all = Vec::new();
    if let Some(end) = &end {
        diff("", &start, end, &mut all);
    }
    let (stats_changes, changes): (Vec<String>, Vec<String>) =
        all.into_iter().partition(|c| c.contains(".stats."));
    Some(DamonContext {
        changed_at_end: !changes.is_empty(),
        start,
        end,
        changes,
        stats_changes,
    })
}

/// Appends `path: a -> b` for every leaf that differs.
pub fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                diff(
                    &p,
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                diff(&format!("{path}[{i}]"), u, v, out);
            }
        }
        _ if a != b => out.push(format!("{path}: {a} -> {b}")),
        _ => {}
    }
}
