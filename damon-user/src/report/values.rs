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

impl ValueDist {
    pub fn new(mut values: Vec<i64>) -> Option<ValueDist> {
        if values.is_empty() {
            return None;
        }
        values.sort_unstable();
        let (min, max) = (values[0], values[values.len() - 1]);
        let sum: i128 = values.iter().map(|&v| i128::from(v)).sum();
        let n = values.len() as u64;
        let width = width_for(min, max);
        let first = i128::from(min).div_euclid(width);
        let rows = (i128::from(max).div_euclid(width) - first + 1) as usize;
        let mut counts = vec![0u64; rows];
        for &v in &values {
            counts[(i128::from(v).div_euclid(width) - first) as usize] += 1;
        }
        let clamp = |v: i128| v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
        let histogram = counts
            .into_iter()
            .enumerate()
            .map(|(i, count)| {
                let lo = (first + i as i128) * width;
                ValueRow {
                    lo: clamp(lo),
                    hi: clamp(lo + width - 1),
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
            sum: sum.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64,
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
        let vals = records
            .iter()
            .map(|r| if col == 0 { r.arg0 } else { r.arg1 })
            .collect();
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

/// One distribution as text: a summary line and the histogram rows.
pub fn render_dist(out: &mut String, label: &str, d: &ValueDist) {
    use std::fmt::Write as _;
    let _ = writeln!(
        out,
        "  {label}: n {} min {} p50 {} p90 {} p99 {} max {} mean {:.1} sum {}",
        d.count, d.min, d.p50, d.p90, d.p99, d.max, d.mean, d.sum
    );
    for row in &d.histogram {
        let range = if row.lo == row.hi {
            format!("{}", row.lo)
        } else {
            format!("{}..{}", row.lo, row.hi)
        };
        let bar = "#".repeat((row.percent / 5.0).round() as usize);
        let _ = writeln!(
            out,
            "    {range:>13} | {:>7} | {:>5.1}% {bar}",
            row.count, row.percent
        );
    }
}

/// The values block of one function as text.
pub fn render(out: &mut String, name: &str, v: &FunctionValues) {
    use std::fmt::Write as _;
    let _ = writeln!(out, "{name}: values");
    if let (Some(vn), Some(d)) = (v.value_name, &v.value) {
        render_dist(out, vn, d);
    }
    for (arg, d) in &v.args {
        render_dist(out, arg, d);
    }
    if !v.by_target_nid.is_empty() {
        let _ = writeln!(out, "  per target node: node | calls | pages migrated");
        for b in &v.by_target_nid {
            let _ = writeln!(out, "    {:>4} | {:>7} | {}", b.arg, b.calls, b.value_sum);
        }
    }
    if let Some(o) = &v.already_on_destination {
        let _ = writeln!(
            out,
            "  already on destination: {} of {} calls (node and destination known for {})",
            o.on_destination, o.calls, o.known
        );
    }
    if let Some(m) = &v.missing {
        let _ = writeln!(out, "  {m}");
    }
}

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
    let width = width_for(min, max);
    let first = i128::from(min).div_euclid(width);
    let n = (i128::from(max).div_euclid(width) - first + 1) as usize;
    let count = |vals: &[i64]| {
        let mut c = vec![0u64; n];
        for &v in vals {
            c[(i128::from(v).div_euclid(width) - first) as usize] += 1;
        }
        c
    };
    let (cb, ca) = (count(before), count(after));
    let clamp = |v: i128| v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
    (0..n)
        .map(|i| {
            let lo = (first + i as i128) * width;
            SideRow {
                lo: clamp(lo),
                hi: clamp(lo + width - 1),
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
        .map(|r| match col {
            None => r.value,
            Some(0) => r.arg0,
            Some(_) => r.arg1,
        })
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
    if let Some(vn) = super::value_name(func) {
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

/// Before/after value distributions as text.
pub fn render_comparison(out: &mut String, cmp: &[DistComparison]) {
    use std::fmt::Write as _;
    for d in cmp {
        let line = |s: &Option<ValueDist>| match s {
            Some(d) => format!(
                "n {} min {} p50 {} p90 {} max {} mean {:.1} sum {}",
                d.count, d.min, d.p50, d.p90, d.max, d.mean, d.sum
            ),
            None => "not recorded".to_owned(),
        };
        let _ = writeln!(out, "\n{}:", d.name);
        let _ = writeln!(out, "  before: {}", line(&d.before));
        let _ = writeln!(out, "  after:  {}", line(&d.after));
        let nb = d.before.as_ref().map_or(0, |x| x.count);
        let na = d.after.as_ref().map_or(0, |x| x.count);
        let pct = |c: u64, n: u64| {
            if n == 0 {
                "-".to_owned()
            } else {
                format!("{:.1}%", 100.0 * c as f64 / n as f64)
            }
        };
        let _ = writeln!(out, "  {:>13} {:>17} {:>17}", "Range", "Before", "After");
        for r in &d.rows {
            let range = if r.lo == r.hi {
                format!("{}", r.lo)
            } else {
                format!("{}..{}", r.lo, r.hi)
            };
            let _ = writeln!(
                out,
                "  {range:>13} {:>8} {:>8} {:>8} {:>8}",
                r.before,
                pct(r.before, nb),
                r.after,
                pct(r.after, na)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_rows_are_nice_and_cover_every_value() {
        let d = ValueDist::new((0..100).collect()).unwrap();
        assert_eq!(d.histogram.len(), 10);
        assert_eq!((d.histogram[0].lo, d.histogram[0].hi), (0, 9));
        assert!(d.histogram.iter().all(|r| r.count == 10));
        assert_eq!((d.min, d.p50, d.p90, d.p99, d.max), (0, 49, 89, 98, 99));
        let d = ValueDist::new(vec![3, 3, 5]).unwrap();
        assert_eq!(d.histogram.len(), 3);
        assert_eq!(d.histogram[1].count, 0);
        assert_eq!(d.histogram.iter().map(|r| r.count).sum::<u64>(), 3);
        let d = ValueDist::new(vec![-7, 12]).unwrap();
        assert!(d.histogram.len() <= 10);
        assert!(d.histogram[0].lo <= -7 && d.histogram.last().unwrap().hi >= 12);
        let d = ValueDist::new(vec![i64::MIN, i64::MAX]).unwrap();
        assert_eq!(d.histogram.iter().map(|r| r.count).sum::<u64>(), 2);
        assert!(ValueDist::new(Vec::new()).is_none());
    }

    #[test]
    fn side_by_side_shares_one_grid() {
        let rows = side_by_side(&[0, 5, 5, 50], &[99, 98]);
        assert_eq!(rows.len(), 10);
        assert_eq!(rows.iter().map(|r| r.before).sum::<u64>(), 4);
        assert_eq!(rows.iter().map(|r| r.after).sum::<u64>(), 2);
        assert_eq!((rows[9].lo, rows[9].hi, rows[9].after), (90, 99, 2));
        assert!(side_by_side(&[], &[]).is_empty());
    }
}

#[cfg(test)]
mod capture_tests {
    use std::path::Path;

    use super::*;
    use crate::{
        capture::format::read_file,
        report::{ReportOptions, build},
    };

    fn load(name: &str) -> Capture {
        read_file(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data")
                .join(name),
        )
        .expect("fixture reads")
    }

    /// A capture written before arguments existed: the scores and pages are shown, no
    /// argument is (its records' argument columns are absent, read as 0).
    #[test]
    fn old_capture_shows_returned_values_only() {
        let c = load("migrate-hot-7.2.dtcap");
        assert!(c.meta.args.is_empty());
        let opts = ReportOptions {
            bucket_ns: 20,
            ..Default::default()
        };
        let r = build(&c, &opts).expect("report");
        let hot = r
            .functions
            .iter()
            .find(|f| f.name == "damon_hot_score")
            .unwrap();
        let v = hot.values.as_ref().expect("values");
        assert!(v.args.is_empty() && v.by_target_nid.is_empty());
        let score = v.value.as_ref().expect("scores");
        assert_eq!(score.count, hot.matched);
        assert!(score.min >= 0 && score.max <= 99, "{score:?}");
        assert_eq!(
            score.histogram.iter().map(|r| r.count).sum::<u64>(),
            score.count
        );
        let old = hot.value.expect("min/mean/max kept");
        assert_eq!(
            (old.min, old.max, old.sum),
            (score.min, score.max, score.sum)
        );
        let table = crate::report::render::table(&r, None);
        assert!(
            table.contains("damon_hot_score: values\n  hotness_score: n "),
            "{table}"
        );
    }

    /// compare: a capture against itself gives identical before/after histograms of the
    /// scores on one grid.
    #[test]
    fn compare_shows_value_distributions_side_by_side() {
        let c = load("migrate-hot-7.2.dtcap");
        let cmp = compare("damon_hot_score", &[(&c, 0)], &[(&c, 0)], &|_| true);
        assert_eq!(cmp.len(), 1, "{cmp:?}");
        let d = &cmp[0];
        assert_eq!(d.name, "hotness_score");
        assert!(d.rows.iter().all(|r| r.before == r.after));
        let n = d.before.as_ref().unwrap().count;
        assert_eq!(d.rows.iter().map(|r| r.after).sum::<u64>(), n);
        let mut text = String::new();
        render_comparison(&mut text, &cmp);
        assert!(text.contains("hotness_score:\n  before: n "), "{text}");
        assert!(compare("lock_timer_base", &[(&c, 3)], &[(&c, 3)], &|_| true).is_empty());
    }

    /// A real 7.2 capture (`xtask/tests/vm_values.rs` under `scenario migrate-hot`, fentry):
    /// scores, region inputs, pages per target node, folios on their destination.
    #[test]
    fn real_capture_with_arguments() {
        let c = load("values-7.2.dtcap");
        let names: Vec<_> = c.meta.args.iter().map(|a| a.function.as_str()).collect();
        assert_eq!(
            names,
            [
                "damon_hot_score",
                "damos_va_migrate_dests_add",
                "damon_migrate_pages"
            ]
        );
        assert!(c.meta.args.iter().all(|a| a.missing.is_empty()));
        let opts = ReportOptions {
            bucket_ns: 20,
            ..Default::default()
        };
        let r = build(&c, &opts).expect("report");
        let f = |name: &str| {
            r.functions
                .iter()
                .find(|f| f.name == name)
                .and_then(|f| f.values.clone())
                .unwrap_or_else(|| panic!("{name} has no values"))
        };
        let ctx = &c.meta.damon.as_ref().expect("damon")["kdamonds"][0]["contexts"][0];
        let max_acc =
            (ctx["aggr_us"].as_i64().unwrap() / ctx["sample_us"].as_i64().unwrap()).max(1);
        let target = ctx["schemes"][0]["target_nid"].as_i64().unwrap();

        let hot = f("damon_hot_score");
        let score = hot.value.as_ref().unwrap();
        assert!(score.min >= 0 && score.max <= 99);
        assert_eq!(score.count, 2244);
        let acc = &hot.args["nr_accesses"];
        assert!(acc.min >= 0 && acc.max <= max_acc, "{acc:?} max {max_acc}");
        assert!(hot.args["age"].min >= 0);

        let mig = f("damon_migrate_pages");
        assert_eq!(mig.args["target_nid"].min, target);
        assert_eq!(mig.args["target_nid"].max, target);
        assert_eq!(mig.by_target_nid.len(), 1);
        assert_eq!(
            mig.by_target_nid[0].value_sum,
            mig.value.as_ref().unwrap().sum
        );

        let add = f("damos_va_migrate_dests_add");
        let on = add.already_on_destination.as_ref().unwrap();
        assert_eq!((on.on_destination, on.calls, on.known), (11, 34, 34));
        assert_eq!(add.args["dest_nid"].min, target);
        // Every folio not already on node 1 was a 2 MiB THP that damon_migrate_pages moved.
        assert_eq!(
            mig.value.as_ref().unwrap().sum,
            (on.calls - on.on_destination) as i64 * 512
        );

        let table = crate::report::render::table(&r, None);
        assert!(
            table.contains(
                "  already on destination: 11 of 34 calls (node and destination known for 34)"
            ),
            "{table}"
        );
        assert!(table.contains(
            "  per target node: node | calls | pages migrated\n       1 |      22 | 11776"
        ));
        let json = serde_json::to_value(&r).unwrap();
        let v = &json["functions"][0]["values"];
        assert_eq!(v["value_name"], "hotness_score");
        assert!(v["args"]["nr_accesses"]["histogram"].is_array(), "{v}");
    }
}
