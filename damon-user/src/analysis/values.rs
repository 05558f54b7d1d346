//! Distributions of the returned values and recorded arguments of the DAMON functions: the
//! scores `damon_hot_score` returns and the region `nr_accesses`/`age` they come from, the pages
//! `damon_migrate_pages` moved and the node it moved them to.
use std::collections::BTreeMap;

use damon_common::{CallRecord, FunctionId};
use serde::Serialize;

use crate::capture::Capture;

/// How many rows a histogram has at most.
const MAX_ROWS: i128 = 10;

/// One histogram row: values in `lo..=hi`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValueRow {
    pub lo: i64,
    pub hi: i64,
    pub count: u64,
    pub percent: f64,
}

/// The distribution of one value over the selected records.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValueDist {
    pub count: u64,
    pub min: i64,
    pub mean: f64,
    pub p50: i64,
    pub p90: i64,
    pub p99: i64,
    pub max: i64,
    pub sum: i64,
    /// At most 10 rows of equal width (1, 2 or 5 times a power of ten), empty rows included.
    pub histogram: Vec<ValueRow>,
}

/// Nearest-rank percentile of sorted values.
fn rank(sorted: &[i64], p: f64) -> i64 {
    let n = sorted.len();
    let i = ((p / 100.0 * n as f64).ceil() as usize).clamp(1, n);
    sorted[i - 1]
}

/// Row width for `span` distinct integers: the smallest of 1, 2, 5, 10, 20, 50, … that needs
/// at most [`MAX_ROWS`] rows.
fn width_for(lo: i64, hi: i64) -> i128 {
    let (lo, hi) = (i128::from(lo), i128::from(hi));
    let mut w: i128 = 1;
    loop {
        for m in [1, 2, 5] {
            let width = w * m;
            if hi.div_euclid(width) - lo.div_euclid(width) < MAX_ROWS {
                return width;
            }
        }
        w *= 10;
    }
}

/// Rows of equal width (1, 2 or 5 times a power of ten), at most [`MAX_ROWS`], that cover
/// `min..=max`: the grid of a value histogram, and of two side by side.
#[derive(Debug, Clone, Copy)]
pub struct ValueGrid {
    width: i128,
    first: i128,
    /// How many rows.
    pub rows: usize,
}

impl ValueGrid {
    pub fn new(min: i64, max: i64) -> ValueGrid {
        let width = width_for(min, max);
        let first = i128::from(min).div_euclid(width);
        let rows = (i128::from(max).div_euclid(width) - first + 1) as usize;
        ValueGrid { width, first, rows }
    }

    /// How many of `values` (all within the grid) each row holds.
    pub fn count(&self, values: &[i64]) -> Vec<u64> {
        let mut counts = vec![0u64; self.rows];
        for &v in values {
            counts[(i128::from(v).div_euclid(self.width) - self.first) as usize] += 1;
        }
        counts
    }

    /// The values of row `i`: `lo..=hi`.
    pub fn bounds(&self, i: usize) -> (i64, i64) {
        let lo = (self.first + i as i128) * self.width;
        (saturate(lo), saturate(lo + self.width - 1))
    }
}

/// `v` as an i64, saturated at its ends.
fn saturate(v: i128) -> i64 {
    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

impl ValueDist {
    pub fn new(mut values: Vec<i64>) -> Option<ValueDist> {
        if values.is_empty() {
            return None;
        }
        values.sort_unstable();
        let (min, max) = (values[0], values[values.len() - 1]);
        let sum: i128 = values.iter().map(|&v| i128::from(v)).sum();
        let n = values.len() as u64;
        let grid = ValueGrid::new(min, max);
        let histogram = grid
            .count(&values)
            .into_iter()
            .enumerate()
            .map(|(i, count)| {
                let (lo, hi) = grid.bounds(i);
                ValueRow {
                    lo,
                    hi,
                    count,
                    percent: 100.0 * count as f64 / n as f64,
                }
            })
            .collect();
        Some(ValueDist {
            count: n,
            min,
            mean: sum as f64 / n as f64,
            p50: rank(&values, 50.0),
            p90: rank(&values, 90.0),
            p99: rank(&values, 99.0),
            max,
            sum: saturate(sum),
            histogram,
        })
    }
}

/// Calls and returned-value sum for one value of an argument (e.g. one target node).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ByArg {
    pub arg: i64,
    pub calls: u64,
    /// Sum of the returned values of those calls (pages migrated to that node).
    pub value_sum: i64,
}

/// The values block of one function in a report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionValues {
    /// What the returned value means ("hotness_score", "pages_migrated").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_name: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<ValueDist>,
    /// Recorded arguments by name (only those the capture's metadata says were read).
    pub args: BTreeMap<String, ValueDist>,
    /// For `damon_migrate_pages`: calls and pages per `target_nid`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub by_target_nid: Vec<ByArg>,
    /// For `damos_va_migrate_dests_add`: folios already on their destination node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub already_on_destination: Option<OnDestination>,
    /// Arguments this kernel could not give, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
}

/// How many `damos_va_migrate_dests_add` calls got a folio already on its destination node
/// (the case the kernel skips without isolating the folio).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OnDestination {
    pub calls: u64,
    /// Calls where both the folio's node and the destination are known.
    pub known: u64,
    pub on_destination: u64,
}

/// Argument `col` (0 or 1) of a record.
pub fn arg(r: &CallRecord, col: usize) -> i64 {
    if col == 0 { r.arg0 } else { r.arg1 }
}

/// Names of the arguments a capture recorded for `func` with their column (0 or 1).
pub fn recorded_args(capture: &Capture, func: FunctionId) -> Vec<(usize, &'static str)> {
    let Some(status) = capture
        .meta
        .args
        .iter()
        .find(|a| a.function == func.symbol())
    else {
        return Vec::new();
    };
    func.arg_names()
        .into_iter()
        .enumerate()
        .filter(|(_, n)| !n.is_empty() && status.recorded.iter().any(|r| r == n))
        .collect()
}

/// Builds the values block of `func` from its selected records; `None` for functions with
/// neither a kept return value nor recorded arguments, or without records.
pub fn function_values(
    capture: &Capture,
    func: FunctionId,
    records: &[&CallRecord],
) -> Option<FunctionValues> {
    let value_name = super::value_name(func);
    let args = recorded_args(capture, func);
    if (value_name.is_none() && args.is_empty()) || records.is_empty() {
        return None;
    }
    let value = value_name.and_then(|_| ValueDist::new(records.iter().map(|r| r.value).collect()));
    let mut dists = BTreeMap::new();
    for &(col, name) in &args {
        let vals = records.iter().map(|r| arg(r, col)).collect();
        if let Some(d) = ValueDist::new(vals) {
            dists.insert(name.to_owned(), d);
        }
    }
    let mut by_target_nid = Vec::new();
    if func == FunctionId::DamonMigratePages && args.iter().any(|&(_, n)| n == "target_nid") {
        let mut by: BTreeMap<i64, (u64, i64)> = BTreeMap::new();
        for r in records {
            let e = by.entry(r.arg0).or_default();
            e.0 += 1;
            e.1 = e.1.saturating_add(r.value);
        }
        by_target_nid = by
            .into_iter()
            .map(|(arg, (calls, value_sum))| ByArg {
                arg,
                calls,
                value_sum,
            })
            .collect();
    }
    let already_on_destination = (func == FunctionId::DamosVaMigrateDestsAdd && args.len() == 2)
        .then(|| {
            let known: Vec<_> = records
                .iter()
                .filter(|r| r.arg0 >= 0 && r.arg1 >= 0)
                .collect();
            OnDestination {
                calls: records.len() as u64,
                known: known.len() as u64,
                on_destination: known.iter().filter(|r| r.arg0 == r.arg1).count() as u64,
            }
        });
    let missing = capture
        .meta
        .args
        .iter()
        .find(|a| a.function == func.symbol() && !a.missing.is_empty())
        .map(|a| {
            format!(
                "{} not recorded: {}",
                a.missing.join(", "),
                a.detail.as_deref().unwrap_or("unknown reason")
            )
        });
    Some(FunctionValues {
        value_name,
        value,
        args: dists,
        by_target_nid,
        already_on_destination,
        missing,
    })
}
