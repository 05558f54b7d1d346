//! Cost per DAMON aggregation interval, before and after (pure).
use serde::Serialize;

use crate::{
    capture::Capture,
    stats::{
        intervals::{Boundaries, PerInterval, per_interval},
        percentile,
        runs::Interval,
    },
};

/// One side's per-interval numbers, its runs pooled (the series stay in `report --format
/// json`).
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    pub intervals: u64,
    pub mean_calls: f64,
    pub mean_total_ns: f64,
    pub p50_total_ns: u64,
    pub p99_total_ns: u64,
    pub max_total_ns: u64,
    pub mean_interval_ns: f64,
    /// Each run's mean time per interval, ns (runs with intervals only).
    pub run_mean_total_ns: Vec<f64>,
}

impl Side {
    /// The runs' intervals pooled: every interval of every run counts once.
    fn pooled(runs: &[&PerInterval]) -> Option<Side> {
        let intervals: u64 = runs.iter().map(|p| p.intervals).sum();
        if intervals == 0 {
            return None;
        }
        let n = intervals as f64;
        let mut totals: Vec<u64> = runs
            .iter()
            .flat_map(|p| p.per_interval_totals.iter().copied())
            .collect();
        totals.sort_unstable();
        let weighted = |get: &dyn Fn(&PerInterval) -> f64| {
            runs.iter()
                .map(|p| get(p) * p.intervals as f64)
                .sum::<f64>()
                / n
        };
        Some(Side {
            intervals,
            mean_calls: weighted(&|p| p.mean_calls),
            mean_total_ns: weighted(&|p| p.mean_total_ns),
            p50_total_ns: percentile(&totals, 50.0).unwrap_or(0),
            p99_total_ns: percentile(&totals, 99.0).unwrap_or(0),
            max_total_ns: totals.last().copied().unwrap_or(0),
            mean_interval_ns: weighted(&|p| p.mean_interval_ns),
            run_mean_total_ns: runs.iter().map(|p| p.mean_total_ns).collect(),
        })
    }
}

/// Time per interval in one function, before and after.
#[derive(Debug, Clone, Serialize)]
pub struct IntervalComparison {
    /// `None`: no capture of that side has interval boundaries (older capture, or no hook).
    pub before: Option<Side>,
    pub after: Option<Side>,
    /// After − before of the mean time per interval, with a 95 % Welch interval over the
    /// per-run means (at least two runs with intervals a side; the intervals of one run are
    /// not independent samples).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_total_delta: Option<Interval>,
}

/// One run's per-interval numbers of function `id`, when it has complete intervals.
pub fn of_run(c: &Capture, id: u32) -> Option<PerInterval> {
    let bounds = Boundaries::from_marks(&c.marks);
    let calls: Vec<_> = c.records.iter().filter(|r| r.func == id).copied().collect();
    per_interval(&calls, &bounds).filter(|p| p.intervals > 0)
}

/// Per-interval comparison of one function over each side's runs (those with intervals, as
/// [`of_run`] gives them), when at least one run has intervals.
pub fn compare(before: &[&PerInterval], after: &[&PerInterval]) -> Option<IntervalComparison> {
    let (b, a) = (Side::pooled(before), Side::pooled(after));
    if b.is_none() && a.is_none() {
        return None;
    }
    let mean_total_delta = match (&b, &a) {
        (Some(b), Some(a)) => super::runs::interval(&b.run_mean_total_ns, &a.run_mean_total_ns),
        _ => None,
    };
    Some(IntervalComparison {
        before: b,
        after: a,
        mean_total_delta,
    })
}

/// The table lines: one row per statistic, before / after / difference.
pub fn lines(c: &IntervalComparison) -> Vec<String> {
    let fmt = |s: &Option<Side>, f: &dyn Fn(&Side) -> String| s.as_ref().map_or("-".to_owned(), f);
    let mut out = vec![format!(
        "{:<14} {:>12} {:>12} {:>12}",
        "per interval", "before", "after", "after−before"
    )];
    type Get<'a> = &'a dyn Fn(&Side) -> f64;
    let rows: [(&str, Get); 6] = [
        ("intervals", &|s| s.intervals as f64),
        ("calls (mean)", &|s| s.mean_calls),
        ("ns mean", &|s| s.mean_total_ns),
        ("ns p50", &|s| s.p50_total_ns as f64),
        ("ns p99", &|s| s.p99_total_ns as f64),
        ("ns max", &|s| s.max_total_ns as f64),
    ];
    for (label, get) in rows {
        let one = |s: &Side| {
            let v = get(s);
            if v.fract() == 0.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            }
        };
        let delta = match (&c.before, &c.after) {
            (Some(b), Some(a)) => crate::compare::signed(get(a) - get(b)),
            _ => "-".to_owned(),
        };
        let mut line = format!(
            "{label:<14} {:>12} {:>12} {delta:>12}",
            fmt(&c.before, &one),
            fmt(&c.after, &one)
        );
        if label == "ns mean"
            && let Some(i) = c.mean_total_delta
        {
            line.push_str(&format!(
                "  [{}, {}] (Welch, per-run means)",
                crate::compare::signed(i.lo),
                crate::compare::signed(i.hi)
            ));
        }
        out.push(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use damon_common::{AGGREGATION_MARK, CallRecord};

    use super::*;
    use crate::capture::{KernelIdentity, Meta};

    fn bare_capture() -> Capture {
        Capture {
            meta: Meta {
                tool_version: "0.1.0".into(),
                kernel: KernelIdentity::default(),
                hostname: String::new(),
                start_unix_ns: 0,
                start_monotonic_ns: 0,
                command_line: Vec::new(),
                mode: "stream".into(),
                ring_size: 4096,
                functions: Vec::new(),
                damon: None,
                cpu_model: String::new(),
                calibration: None,
                intervals: None,
                args: Vec::new(),
            },
            records: Vec::new(),
            summary: None,
            marks: Vec::new(),
            hist_snapshots: Vec::new(),
        }
    }

    fn with(durations_per_interval: &[u64]) -> Capture {
        let mut c = bare_capture();
        for i in 0..=durations_per_interval.len() as u64 {
            c.marks.push(CallRecord {
                entry_ns: i * 1000,
                tid: 9,
                func: AGGREGATION_MARK,
                ..CallRecord::default()
            });
        }
        for (i, d) in durations_per_interval.iter().enumerate() {
            c.records.push(CallRecord {
                entry_ns: i as u64 * 1000 + 10,
                duration_ns: *d,
                tid: 9,
                func: 0,
                ..CallRecord::default()
            });
        }
        c
    }

    /// The runs' per-interval numbers of function 0, as `build` hands them over.
    fn cmp(before: &[&Capture], after: &[&Capture]) -> Option<IntervalComparison> {
        let runs = |side: &[&Capture]| -> Vec<PerInterval> {
            side.iter().filter_map(|c| of_run(c, 0)).collect()
        };
        let (b, a) = (runs(before), runs(after));
        compare(&b.iter().collect::<Vec<_>>(), &a.iter().collect::<Vec<_>>())
    }

    #[test]
    fn before_after_per_interval() {
        let b = with(&[100, 120, 110, 130]);
        let a = with(&[10, 12, 11, 13]);
        let c = cmp(&[&b], &[&a]).expect("both have intervals");
        assert_eq!(c.before.as_ref().map(|s| s.mean_total_ns), Some(115.0));
        assert_eq!(c.after.as_ref().map(|s| s.max_total_ns), Some(13));
        // One run a side: the intervals of one run are not independent, no interval.
        assert!(c.mean_total_delta.is_none());
        let text = lines(&c).join("\n");
        assert!(text.contains("ns mean"), "{text}");
        // Two runs a side: pooled, and Welch over the runs' means (115, 215 vs 11.5, 21.5).
        let b2 = with(&[200, 220, 210, 230]);
        let a2 = with(&[20, 22, 21, 23]);
        let c = cmp(&[&b, &b2], &[&a, &a2]).expect("intervals");
        let side = c.before.as_ref().expect("before");
        assert_eq!((side.intervals, side.mean_total_ns), (8, 165.0));
        assert_eq!(side.run_mean_total_ns, vec![115.0, 215.0]);
        let d = c.mean_total_delta.expect("delta");
        assert!((d.estimate + 148.5).abs() < 1e-9, "{d:?}");
        assert!(d.lo < -148.5 && d.hi > -148.5, "{d:?}");
        assert!(lines(&c).join("\n").contains("(Welch, per-run means)"));
        // An older capture without boundaries on one side: shown as "-".
        let old = bare_capture();
        let c = cmp(&[&old], &[&a]).expect("after has intervals");
        assert!(c.before.is_none() && c.mean_total_delta.is_none());
        assert!(cmp(&[&old], &[&old]).is_none());
    }

    #[test]
    fn real_capture_against_the_old_fixture_and_itself() {
        use std::path::Path;

        use crate::{
            capture::format::read_file,
            compare::{Inputs, build, render},
            report::ReportOptions,
        };
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/");
        let new = read_file(Path::new(&format!("{dir}intervals-7.2.dtcap"))).expect("new");
        let old = read_file(Path::new(&format!("{dir}migrate-hot-7.2.dtcap"))).expect("old");
        let opts = ReportOptions {
            bucket_ns: 20,
            ..ReportOptions::default()
        };
        let same = build(&Inputs::pair(("a", &new), ("b", &new)), &opts).expect("compare");
        let hot = same.functions[0]
            .per_interval
            .as_ref()
            .expect("per interval");
        assert_eq!(hot.before.as_ref().map(|s| s.intervals), Some(129));
        assert_eq!(
            hot.before.as_ref().map(|s| s.mean_total_ns),
            hot.after.as_ref().map(|s| s.mean_total_ns)
        );
        assert!(
            same.functions[3].per_interval.is_none(),
            "not a DAMON function"
        );
        let table = render::table(&same);
        assert!(
            table.contains("\nper interval         before        after after−before\n"),
            "{table}"
        );
        // A capture from before the interval hook: its side is "-", nothing breaks.
        let mixed = build(&Inputs::pair(("old", &old), ("new", &new)), &opts).expect("compare");
        let hot = mixed.functions[0]
            .per_interval
            .as_ref()
            .expect("after side");
        assert!(hot.before.is_none() && hot.after.is_some());
        assert!(render::markdown(&mixed).contains("Time per DAMON aggregation interval"));
    }
}
