//! The DAMON parts of a report: cost per aggregation interval, and the DAMON configuration at
//! the start and end of the capture (pure).
use std::fmt::Write as _;

use damon_common::FunctionId;
use serde::Serialize;
use serde_json::Value;

use super::{FunctionReport, Report};
use crate::{
    capture::Capture,
    stats::intervals::{self, Boundaries, KdamondIntervals, PerInterval},
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
fn wants_intervals(f: &FunctionReport, id: u32) -> bool {
    FunctionId::try_from(id).is_ok_and(FunctionId::is_damon)
        && matches!(f.attach, "fentry" | "kprobe")
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
        if !wants_intervals(f, *id) {
            continue;
        }
        let calls: Vec<_> = capture
            .records
            .iter()
            .filter(|r| r.func == *id)
            .copied()
            .collect();
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

fn us(v: &Value) -> String {
    match v.as_u64() {
        Some(u) if u >= 1_000_000 && u % 1000 == 0 => format!("{} s", u as f64 / 1e6),
        Some(u) if u >= 1000 => format!("{} ms", u as f64 / 1e3),
        Some(u) => format!("{u} us"),
        None => "?".to_owned(),
    }
}

/// One line per running or configured kdamond context: ops, intervals, targets, schemes.
pub fn context_lines(snapshot: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    if snapshot["damon_stat_enabled"] == Value::Bool(true) {
        lines.push(format!(
            "DAMON_STAT enabled (kdamond pid {})",
            snapshot["damon_stat_kdamond_pid"]
        ));
    }
    for k in snapshot["kdamonds"].as_array().into_iter().flatten() {
        for c in k["contexts"].as_array().into_iter().flatten() {
            let mut l = format!(
                "kdamond {} {} pid {}: {} sample {} aggr {} update {} regions {}..{}",
                k["index"],
                k["state"].as_str().unwrap_or("?"),
                k["pid"],
                c["operations"].as_str().unwrap_or("?"),
                us(&c["sample_us"]),
                us(&c["aggr_us"]),
                us(&c["update_us"]),
                c["nr_regions_min"],
                c["nr_regions_max"],
            );
            for t in c["targets"].as_array().into_iter().flatten() {
                let _ = write!(l, "; target pid {}", t["pid"]);
                for r in t["regions"].as_array().into_iter().flatten() {
                    if let (Some(a), Some(b)) = (r[0].as_u64(), r[1].as_u64()) {
                        let _ = write!(l, " [{a:#x}, {b:#x})");
                    }
                }
            }
            for s in c["schemes"].as_array().into_iter().flatten() {
                let _ = write!(l, "; scheme {}", s["action"].as_str().unwrap_or("?"));
                if let Some(n) = s["target_nid"].as_i64().filter(|n| *n >= 0) {
                    let _ = write!(l, " target_nid {n}");
                }
                if let Some(d) = s["dests"].as_array().filter(|d| !d.is_empty()) {
                    let d: Vec<String> = d.iter().map(|x| format!("{}:{}", x[0], x[1])).collect();
                    let _ = write!(l, " dests {}", d.join(","));
                }
                let _ = write!(
                    l,
                    " quota {} ms {} B / {} ms weights sz {} acc {} age {}",
                    s["quota_ms"],
                    s["quota_bytes"],
                    s["quota_reset_interval_ms"],
                    s["weight_sz_permil"],
                    s["weight_nr_accesses_permil"],
                    s["weight_age_permil"]
                );
                if let Some(a) = s["apply_interval_us"].as_u64().filter(|a| *a > 0) {
                    let _ = write!(l, " apply every {}", us(&Value::from(a)));
                }
                let filters = s["filters"].as_array().map_or(0, Vec::len);
                let _ = write!(l, " filters {filters}");
            }
            lines.push(l);
        }
    }
    lines
}

/// The table report's DAMON blocks: context at start and its changes, then the per-interval
/// table of the DAMON functions.
pub fn render_table(r: &Report) -> String {
    let mut out = String::new();
    if let Some(ctx) = &r.meta.damon {
        let lines = context_lines(&ctx.start);
        let _ = writeln!(out, "\nDAMON at start:");
        if lines.is_empty() {
            let _ = writeln!(out, "  no kdamond configured");
        }
        for l in lines {
            let _ = writeln!(out, "  {l}");
        }
        match (&ctx.end, ctx.changed_at_end) {
            (None, _) => {
                let _ = writeln!(out, "DAMON at end: not recorded");
            }
            (Some(_), false) => {
                let _ = writeln!(
                    out,
                    "DAMON at end: configuration unchanged ({} scheme stats advanced)",
                    ctx.stats_changes.len()
                );
            }
            (Some(_), true) => {
                let _ = writeln!(
                    out,
                    "DAMON at end: {} configuration values changed",
                    ctx.changes.len()
                );
                for c in ctx.changes.iter().take(12) {
                    let _ = writeln!(out, "  {c}");
                }
                if ctx.changes.len() > 12 {
                    let _ = writeln!(
                        out,
                        "  … {} more (see --format json)",
                        ctx.changes.len() - 12
                    );
                }
            }
        }
    }
    let Some(iv) = &r.intervals else {
        return out;
    };
    if !iv.attached {
        let _ = writeln!(
            out,
            "\nper aggregation interval: no boundaries ({} not attached: {})",
            iv.hook,
            iv.detail.as_deref().unwrap_or("unknown reason")
        );
        return out;
    }
    let _ = writeln!(
        out,
        "\nper aggregation interval ({}; {} boundaries, {} lost)",
        iv.hook, iv.markers, iv.markers_dropped
    );
    for k in &iv.kdamonds {
        let _ = writeln!(
            out,
            "  kdamond tid {}: {} intervals, length mean {:.1} ms min {:.1} max {:.1}",
            k.tid,
            k.intervals,
            k.mean_interval_ns / 1e6,
            k.min_interval_ns as f64 / 1e6,
            k.max_interval_ns as f64 / 1e6
        );
    }
    let rows: Vec<(&str, &PerInterval)> = r
        .functions
        .iter()
        .filter_map(|f| f.per_interval.as_ref().map(|p| (f.name.as_str(), p)))
        .collect();
    if rows.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "{:<27} {:>9} {:>7} {:>9} {:>12} {:>11} {:>11} {:>11} {:>8}",
        "function",
        "intervals",
        "w/calls",
        "calls/int",
        "mean ns/int",
        "p50 ns/int",
        "p99 ns/int",
        "max ns/int",
        "outside"
    );
    for (name, p) in rows {
        let _ = writeln!(
            out,
            "{:<27} {:>9} {:>7} {:>9.1} {:>12.0} {:>11} {:>11} {:>11} {:>8}",
            name,
            p.intervals,
            p.intervals_with_calls,
            p.mean_calls,
            p.mean_total_ns,
            p.p50_total_ns,
            p.p99_total_ns,
            p.max_total_ns,
            p.calls_outside + p.calls_not_kdamond
        );
    }
    let _ = writeln!(
        out,
        "(time in the function per interval = sum of its call durations; an interval holds \
         the calls its kdamond entered between two boundaries; outside = calls before the \
         first or after the last boundary, or by a thread that is not a kdamond)"
    );
    out
}

/// The Markdown report's per-interval table (empty without per-interval numbers).
pub fn render_markdown(r: &Report) -> String {
    let mut out = String::new();
    let Some(iv) = r.intervals.as_ref().filter(|iv| iv.attached) else {
        return out;
    };
    let rows: Vec<&FunctionReport> = r
        .functions
        .iter()
        .filter(|f| f.per_interval.is_some())
        .collect();
    if rows.is_empty() {
        return out;
    }
    let kdamonds: Vec<String> = iv
        .kdamonds
        .iter()
        .map(|k| {
            format!(
                "kdamond {}: {} intervals of {:.1} ms on average",
                k.tid,
                k.intervals,
                k.mean_interval_ns / 1e6
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "\n### Time per DAMON aggregation interval\n\n_{}; {}; {} boundaries lost._\n",
        iv.hook,
        kdamonds.join(", "),
        iv.markers_dropped
    );
    let _ = writeln!(
        out,
        "| function | intervals | with calls | calls/interval | mean ns | p50 ns | p99 ns | max ns | calls outside |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|"
    );
    for f in rows {
        let Some(p) = &f.per_interval else { continue };
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {:.1} | {:.0} | {} | {} | {} | {} |",
            f.name,
            p.intervals,
            p.intervals_with_calls,
            p.mean_calls,
            p.mean_total_ns,
            p.p50_total_ns,
            p.p99_total_ns,
            p.max_total_ns,
            p.calls_outside + p.calls_not_kdamond
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn diff_lists_changed_leaves() {
        let a = json!({"kdamonds": [{"state": "on", "pid": 5, "x": [1, 2]}], "s": true});
        let b = json!({"kdamonds": [{"state": "off", "pid": null, "x": [1, 2]}], "s": true});
        let mut out = Vec::new();
        diff("", &a, &b, &mut out);
        assert_eq!(
            out,
            vec![
                "kdamonds[0].pid: 5 -> null".to_owned(),
                "kdamonds[0].state: \"on\" -> \"off\"".to_owned()
            ]
        );
        let mut none = Vec::new();
        diff("", &a, &a, &mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn context_line_names_ops_intervals_and_scheme() {
        let snap = json!({
            "damon_stat_enabled": false,
            "kdamonds": [{"index": 0, "state": "on", "pid": 88, "contexts": [{
                "operations": "vaddr", "sample_us": 5000, "aggr_us": 100000,
                "update_us": 1000000, "nr_regions_min": 10, "nr_regions_max": 1000,
                "targets": [{"pid": 321, "regions": []}],
                "schemes": [{"action": "migrate_hot", "target_nid": 1, "dests": [[1, 1]],
                    "quota_ms": 100, "quota_bytes": 33554432, "quota_reset_interval_ms": 1000,
                    "weight_sz_permil": 0, "weight_nr_accesses_permil": 700,
                    "weight_age_permil": 300, "apply_interval_us": 0, "filters": []}]
            }]}]
        });
        assert_eq!(
            context_lines(&snap),
            vec![
                "kdamond 0 on pid 88: vaddr sample 5 ms aggr 100 ms update 1 s regions 10..1000; \
                 target pid 321; scheme migrate_hot target_nid 1 dests 1:1 quota 100 ms \
                 33554432 B / 1000 ms weights sz 0 acc 700 age 300 filters 0"
                    .to_owned()
            ]
        );
    }
}

/// The real 15 s capture of the migrate-hot scenario in the 7.2 guest, with boundaries.
#[cfg(test)]
mod real_capture {
    use std::path::Path;

    use crate::{
        capture::format::read_file,
        report::{ReportOptions, build, render},
        stats::intervals::{Boundaries, per_interval},
    };

    const FILE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/intervals-7.2.dtcap"
    );

    #[test]
    fn intervals_partition_the_real_calls() {
        let c = read_file(Path::new(FILE)).expect("capture");
        let bounds = Boundaries::from_marks(&c.marks);
        assert_eq!(c.marks.len(), 130);
        assert_eq!(bounds.intervals_of(133), 129);
        for id in 0..3 {
            let calls: Vec<_> = c.records.iter().filter(|r| r.func == id).copied().collect();
            let p = per_interval(&calls, &bounds).expect("boundaries");
            p.check(&calls).expect("partition");
            assert_eq!(p.kdamonds, vec![133]);
            assert_eq!(p.calls_not_kdamond, 0, "every DAMON call is the kdamond's");
        }
        let opts = ReportOptions {
            bucket_ns: 20,
            ..ReportOptions::default()
        };
        let r = build(&c, &opts).expect("report");
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        let hot = r.functions[0].per_interval.as_ref().expect("per_interval");
        assert_eq!(
            (hot.intervals, hot.calls_in_intervals, hot.calls_outside),
            (129, 1993, 16)
        );
        assert_eq!(
            (hot.p50_total_ns, hot.p99_total_ns, hot.max_total_ns),
            (29667, 90926, 309974)
        );
        assert!(
            r.functions[3].per_interval.is_none(),
            "lock_timer_base is not DAMON's"
        );
        let iv = r.intervals.as_ref().expect("intervals");
        assert_eq!((iv.markers, iv.markers_dropped), (130, 0));
        assert_eq!(
            (iv.kernel_markers, iv.kernel_emitted),
            (Some(130), Some(130))
        );
        let ctx = r.meta.damon.as_ref().expect("damon context");
        assert!(
            !ctx.changed_at_end && ctx.stats_changes.len() == 5,
            "{ctx:?}"
        );
        let json = serde_json::to_value(&r).expect("json");
        let f = &json["functions"][1]["per_interval"];
        assert_eq!(f["intervals"], 129);
        assert_eq!(f["ns_per_interval"].as_array().map(Vec::len), Some(129));
        for key in ["mean_total_ns", "p99_total_ns", "max_total_ns"] {
            assert!(f[key].is_number(), "{key}: {f}");
        }
        let md = render::markdown(&r);
        assert!(
            md.contains(
                "| `damon_hot_score` | 129 | 129 | 15.4 | 34743 | 29667 | 90926 | 309974 | 16 |"
            ),
            "{md}"
        );
        let table = render::table(&r, None);
        for line in [
            "DAMON at start:",
            "  kdamond 0 on pid 133: vaddr sample 5 ms aggr 100 ms update 1 s regions 10..1000; \
             target pid 131; scheme migrate_hot target_nid 1 dests 1:1",
            "DAMON at end: configuration unchanged (5 scheme stats advanced)",
            "per aggregation interval (tracepoint:damon:damon_aggregated; 130 boundaries, 0 lost)",
            "  kdamond tid 133: 129 intervals, length mean 117.8 ms min 103.9 max 363.0",
        ] {
            assert!(table.contains(line), "{line:?} missing from\n{table}");
        }
        let block = table
            .split("per aggregation interval")
            .nth(1)
            .expect("per-interval block");
        let row: Vec<&str> = block
            .lines()
            .find(|l| l.starts_with("damon_hot_score "))
            .expect("hot score row")
            .split_whitespace()
            .collect();
        assert_eq!(
            row,
            [
                "damon_hot_score",
                "129",
                "129",
                "15.4",
                "34743",
                "29667",
                "90926",
                "309974",
                "16"
            ]
        );
    }

    #[test]
    fn a_scheme_with_its_own_apply_interval_is_pointed_out() {
        let mut c = read_file(Path::new(FILE)).expect("capture");
        let opts = ReportOptions {
            bucket_ns: 20,
            ..ReportOptions::default()
        };
        let pointer = "/kdamonds/0/contexts/0/schemes/0/apply_interval_us";
        let damon = c.meta.damon.as_ref().expect("damon");
        assert_eq!(damon.pointer(pointer), Some(&0.into()), "{damon}");
        let quiet = build(&c, &opts).expect("report");
        assert!(quiet.warnings.is_empty(), "{:?}", quiet.warnings);
        *c.meta
            .damon
            .as_mut()
            .and_then(|d| d.pointer_mut(pointer))
            .expect("apply interval") = 500_000.into();
        let r = build(&c, &opts).expect("report");
        assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
        assert!(
            r.warnings[0].starts_with(
                "kdamond 0 applies its migrate_hot scheme every 500000 us, not every aggregation \
                 interval (100000 us)"
            ),
            "{:?}",
            r.warnings
        );
    }
}
