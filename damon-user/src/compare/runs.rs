//! The run as the unit of replication: per-run summaries of one function, the inference built
//! on them, and the checks that both sides did comparable work.
use serde::Serialize;

use crate::stats::runs::{self, Interval, RunTest};

/// One run (one capture) of one function.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub file: String,
    /// Calls made while traced (entries seen + entries the kernel skipped).
    pub calls: u64,
    /// Calls with a duration that the filters kept.
    pub matched: u64,
    pub dropped: u64,
    /// Length of the recording, when the capture is complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calls_per_s: Option<f64>,
    /// Mean calls per DAMON aggregation interval, when the capture has the boundaries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calls_per_interval: Option<f64>,
    /// Nearest-rank percentiles of this run, as in `PERCENTILES` (None: too few calls).
    #[serde(skip)]
    pub percentiles: Vec<Option<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_ns: Option<f64>,
}

/// How many runs a side would take to resolve a difference, and from what run-to-run
/// variation that number comes.
#[derive(Debug, Clone, Serialize)]
pub struct RunsNeeded {
    /// Runs per side for 80 % power at the verdict's level; `None`: more than [`MAX_RUNS`].
    pub per_side: Option<u32>,
    /// The difference it is computed for (ns, at the median).
    pub effect_ns: f64,
    /// The run-to-run standard deviation of the per-run median it assumes, ns.
    pub run_sd_ns: f64,
    /// Where that variation comes from.
    pub basis: String,
}

/// Beyond this many runs a side, `runs_needed` says "more than".
pub const MAX_RUNS: u32 = 50;

/// Typical run-to-run variation of a function's per-run median, as a fraction of the median
/// (the standard deviation of the per-run medians over their mean), measured on A/A runs:
/// separate boots of one kernel, the same binary and scenario. See [`TYPICAL_SOURCE`].
/// The larger of the two kernels' values where both traced the function (6.12 does not reach
/// the two migration functions). The test `real_a_a_runs_show_no_significant_difference`
/// recomputes them from those runs (damon-user/tests/data/aa-7.2 and aa-6.12).
pub const TYPICAL_RELATIVE_SD: [(&str, f64); 4] = [
    ("damon_hot_score", 0.090),
    ("damos_va_migrate_dests_add", 0.528),
    ("damon_migrate_pages", 0.514),
    ("lock_timer_base", 0.123),
];

/// Where [`TYPICAL_RELATIVE_SD`] comes from.
pub const TYPICAL_SOURCE: &str = "A/A runs: 6 boots each of Debian 7.2 and 6.12 in QEMU/TCG \
    (interleaved, 3 runs a side: the migrate-hot scenario, fentry, 20 s each; the source \
    tree's damon-user/tests/data/aa-7.2, aa-6.12); a real machine varies differently: \
    measure yours";

/// The typical relative run-to-run SD of `name`'s median; for a function not measured, the
/// largest of the measured ones (so the advice errs towards more runs).
pub fn typical_relative_sd(name: &str) -> (f64, bool) {
    TYPICAL_RELATIVE_SD
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, v)| (v, true))
        .unwrap_or_else(|| {
            (
                TYPICAL_RELATIVE_SD
                    .iter()
                    .map(|&(_, v)| v)
                    .fold(0.0, f64::max),
                false,
            )
        })
}

/// Per-run values of one statistic, those runs that have it.
pub fn values(runs: &[RunSummary], get: impl Fn(&RunSummary) -> Option<f64>) -> Vec<f64> {
    runs.iter().filter_map(get).collect()
}

/// Smallest and largest per-run value, when more than one run has it.
pub fn spread(v: &[f64]) -> Option<[f64; 2]> {
    if v.len() < 2 {
        return None;
    }
    Some([
        v.iter().copied().fold(f64::INFINITY, f64::min),
        v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    ])
}

/// Welch's interval over per-run values, as an [`Interval`] (None: fewer than 2 runs a side).
pub fn interval(before: &[f64], after: &[f64]) -> Option<Interval> {
    runs::welch(before, after).map(|t| Interval {
        estimate: t.estimate,
        lo: t.lo,
        hi: t.hi,
    })
}

/// The test behind a verdict: Welch's t on the per-run medians.
pub fn median_test(before: &[RunSummary], after: &[RunSummary]) -> Option<RunTest> {
    runs::welch(
        &values(before, |r| r.p50_ns.map(|v| v as f64)),
        &values(after, |r| r.p50_ns.map(|v| v as f64)),
    )
}

/// Runs a side needs to resolve `effect_ns` at the median: from the observed run-to-run SD
/// when both sides have several runs, else from the typical variation of this function.
pub fn needed(
    name: &str,
    effect_ns: f64,
    reference_ns: f64,
    observed: Option<&RunTest>,
    alpha: f64,
) -> Option<RunsNeeded> {
    if effect_ns == 0.0 || !effect_ns.is_finite() {
        return None;
    }
    let (sd, basis) = match observed {
        Some(t) if t.sd_before.is_finite() && t.sd_after.is_finite() => (
            ((t.sd_before.powi(2) + t.sd_after.powi(2)) / 2.0).sqrt(),
            "the run-to-run variation of these runs".to_owned(),
        ),
        _ => {
            let (rel, measured) = typical_relative_sd(name);
            (
                rel * reference_ns,
                if measured {
                    format!(
                        "the typical run-to-run variation of {name}'s median ({:.1} %, from A/A \
                         boots)",
                        rel * 100.0
                    )
                } else {
                    format!(
                        "the largest typical run-to-run variation of the built-in functions' \
                         medians ({:.1} %, from A/A boots; {name} was not measured)",
                        rel * 100.0
                    )
                },
            )
        }
    };
    if sd <= 0.0 {
        return None;
    }
    Some(RunsNeeded {
        per_side: runs::runs_needed(sd, effect_ns, alpha, MAX_RUNS),
        effect_ns,
        run_sd_ns: sd,
        basis,
    })
}

/// Whether two sides' per-run rates (calls per second, calls per interval, …) differ by more
/// than run-to-run variation explains: a ratio of at least [`RATE_RATIO`] either way and,
/// with several runs a side, Welch's test on the logarithms at 5 % (with one run on a side no
/// variation is known: the ratio alone). Returns the ratio after / before of the mean rates.
pub fn rates_differ(before: &[f64], after: &[f64]) -> Option<f64> {
    if before.is_empty() || after.is_empty() {
        return None;
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (mb, ma) = (mean(before), mean(after));
    if mb == 0.0 && ma == 0.0 {
        return None;
    }
    let ratio = ma / mb;
    let far = !(1.0 / RATE_RATIO..RATE_RATIO).contains(&ratio) || !ratio.is_finite();
    let all_positive = before.iter().chain(after).all(|&v| v > 0.0);
    if before.len() >= 2 && after.len() >= 2 && all_positive {
        let ln = |v: &[f64]| v.iter().map(|x| x.ln()).collect::<Vec<_>>();
        let t = runs::welch(&ln(before), &ln(after))?;
        (t.p_value < 0.05 && far).then_some(ratio)
    } else {
        far.then_some(ratio)
    }
}

/// Rates this far apart (either way) can be called different work. Below it, A/A boots of one
/// kernel differ by themselves: DAMON's scheme work varied 1.3–1.9 MiB/s over the six runs of
/// damon-user/tests/data/aa-7.2.
pub const RATE_RATIO: f64 = 1.5;
