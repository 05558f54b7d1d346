//! Before/after distributions of the returned values and recorded arguments of the DAMON
//! functions, each side's runs pooled, on one grid (pure; one side's are `analysis::values`).
use damon_common::{CallRecord, FunctionId};
use serde::Serialize;

use crate::{
    analysis::{
        value_name,
        values::{ValueDist, ValueGrid, arg, recorded_args},
    },
    capture::Capture,
};

/// One row of a before/after histogram on a shared grid.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideRow {
    pub lo: i64,
    pub hi: i64,
    pub before: u64,
    pub after: u64,
}

/// One value (the returned value or an argument) of one function in two captures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DistComparison {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<ValueDist>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<ValueDist>,
    /// Both histograms on one grid (at most 10 rows).
    pub rows: Vec<SideRow>,
}

/// Counts both samples on one grid of at most 10 equal rows.
pub fn side_by_side(before: &[i64], after: &[i64]) -> Vec<SideRow> {
    let all = || before.iter().chain(after);
    let (Some(&min), Some(&max)) = (all().min(), all().max()) else {
        return Vec::new();
    };
    let grid = ValueGrid::new(min, max);
    let (cb, ca) = (grid.count(before), grid.count(after));
    (0..grid.rows)
        .map(|i| {
            let (lo, hi) = grid.bounds(i);
            SideRow {
                lo,
                hi,
                before: cb[i],
                after: ca[i],
            }
        })
        .collect()
}

/// The values of one column of `func`'s selected records (None = the returned value).
fn column(
    capture: &Capture,
    id: u32,
    col: Option<usize>,
    keep: &dyn Fn(&CallRecord) -> bool,
) -> Vec<i64> {
    capture
        .records
        .iter()
        .filter(|r| r.func == id && keep(r))
        .map(|r| col.map_or(r.value, |col| arg(r, col)))
        .collect()
}

/// Before/after distributions of the returned value and of every argument any capture
/// recorded, for the function `name`; each side's runs (capture, id of `name` in it) pooled.
pub fn compare(
    name: &str,
    before: &[(&Capture, u32)],
    after: &[(&Capture, u32)],
    keep: &dyn Fn(&CallRecord) -> bool,
) -> Vec<DistComparison> {
    let Some(func) = FunctionId::from_symbol(name) else {
        return Vec::new();
    };
    let mut wanted: Vec<(String, Option<usize>)> = Vec::new();
    if let Some(vn) = value_name(func) {
        wanted.push((vn.to_owned(), None));
    }
    for (col, arg) in before
        .iter()
        .chain(after)
        .flat_map(|&(c, _)| recorded_args(c, func))
    {
        if !wanted.iter().any(|(n, _)| n == arg) {
            wanted.push((arg.to_owned(), Some(col)));
        }
    }
    let has = |c: &Capture, col: Option<usize>, n: &str| {
        col.is_none() || recorded_args(c, func).iter().any(|&(_, a)| a == n)
    };
    let side = |runs: &[(&Capture, u32)], col: Option<usize>, n: &str| -> Vec<i64> {
        runs.iter()
            .filter(|&&(c, _)| has(c, col, n))
            .flat_map(|&(c, id)| column(c, id, col, keep))
            .collect()
    };
    wanted
        .into_iter()
        .filter_map(|(n, col)| {
            let (b, a) = (side(before, col, &n), side(after, col, &n));
            if b.is_empty() && a.is_empty() {
                return None;
            }
            Some(DistComparison {
                rows: side_by_side(&b, &a),
                before: ValueDist::new(b),
                after: ValueDist::new(a),
                name: n,
            })
        })
        .collect()
}
