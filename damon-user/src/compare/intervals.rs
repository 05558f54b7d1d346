//! Cost per DAMON aggregation interval, before and after (pure).
use serde::Serialize;

use crate::{
    capture::Capture,
    stats::{
        intervals::{Boundaries, PerInterval, per_interval},
        percentile,
        runs::{self, RunTest},
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
    /// After − before of the mean time per interval: Welch's t over the per-run means, with
    /// its 95 % interval (at least two runs with intervals a side; the intervals of one run
    /// are not independent samples).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_total_delta: Option<RunTest>,
    /// What may be said about the time per interval, in one line.
    pub verdict: String,
    /// The unit of its times: `ns`, or `insn` under the instruction clock.
    #[serde(skip)]
    pub unit: &'static str,
}

/// One run's per-interval numbers of function `id`, when it has complete intervals.
pub fn of_run(c: &Capture, id: u32) -> Option<PerInterval> {
    let bounds = Boundaries::from_marks(&c.marks);
    let calls: Vec<_> = c.records.iter().filter(|r| r.func == id).copied().collect();
    per_interval(&calls, &bounds).filter(|p| p.intervals > 0)
}

/// Per-interval comparison of one function over each side's runs (those with intervals, as
/// [`of_run`] gives them), when at least one run has intervals.
pub fn compare(
    before: &[&PerInterval],
    after: &[&PerInterval],
    unit: &'static str,
) -> Option<IntervalComparison> {
    let (b, a) = (Side::pooled(before), Side::pooled(after));
    if b.is_none() && a.is_none() {
        return None;
    }
    let mean_total_delta = match (&b, &a) {
        (Some(b), Some(a)) => runs::welch(&b.run_mean_total_ns, &a.run_mean_total_ns),
        _ => None,
    };
    let verdict = verdict(before.len(), after.len(), mean_total_delta.as_ref(), unit);
    Some(IntervalComparison {
        before: b,
        after: a,
        mean_total_delta,
        verdict,
        unit,
    })
}

/// The per-interval verdict: Welch's t on the runs' mean time per interval, at the
/// comparison's level. Not adjusted with the medians' family: it is a second question (the
/// time a DAMON interval spends in the function), asked of the same runs.
fn verdict(nb: usize, na: usize, t: Option<&RunTest>, unit: &str) -> String {
    use super::{p_text, signed};
    let Some(t) = t else {
        return format!(
            "per-interval verdict: none with {nb} and {na} runs with intervals (it takes two a \
             side: the intervals of one run are not independent)"
        );
    };
    let runs = format!("{nb} and {na} runs");
    if t.p_value >= super::ALPHA {
        return format!(
            "per-interval verdict: no significant difference over {runs}: mean {} {unit} an interval \
             [95% CI {}, {}], Welch {}",
            signed(t.estimate),
            signed(t.lo),
            signed(t.hi),
            p_text(t.p_value)
        );
    }
    let word = if t.estimate < 0.0 { "less" } else { "more" };
    format!(
        "per-interval verdict: after spends {:.0} {unit} {word} an interval [95% CI {:.0}, {:.0}] \
         over {runs}, Welch {}",
        t.estimate.abs(),
        t.lo.abs().min(t.hi.abs()),
        t.lo.abs().max(t.hi.abs()),
        p_text(t.p_value)
    )
}

/// The table lines: one row per statistic, before / after / difference.
pub fn lines(c: &IntervalComparison) -> Vec<String> {
    let fmt = |s: &Option<Side>, f: &dyn Fn(&Side) -> String| s.as_ref().map_or("-".to_owned(), f);
    let mut out = vec![format!(
        "{:<14} {:>12} {:>12} {:>12}",
        "per interval", "before", "after", "after−before"
    )];
    type Get<'a> = &'a dyn Fn(&Side) -> f64;
    let u = c.unit;
    let rows: [(String, Get); 6] = [
        ("intervals".into(), &|s| s.intervals as f64),
        ("calls (mean)".into(), &|s| s.mean_calls),
        (format!("{u} mean"), &|s| s.mean_total_ns),
        (format!("{u} p50"), &|s| s.p50_total_ns as f64),
        (format!("{u} p99"), &|s| s.p99_total_ns as f64),
        (format!("{u} max"), &|s| s.max_total_ns as f64),
    ];
    for (i, (label, get)) in rows.into_iter().enumerate() {
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
        if i == 2
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
    out.push(c.verdict.clone());
    out
}
