//! The slow-call share per side (pure): for each function and each run, the share of its
//! calls whose wall time is at least one threshold, and how those calls' time splits (off the
//! CPU, in interrupts, on it) where the capture has the breakdown. The run is the unit: every
//! run has its own share, never the runs' calls pooled as if independent.
use damon_common::CallRecord;
use serde::Serialize;

use super::Inputs;
use crate::{
    analysis::{ReportOptions, breakdown},
    capture::{Capture, DisturbanceStatus},
};

/// The threshold the shares are over, and how it was chosen.
#[derive(Debug, Clone, Serialize)]
pub struct SlowThreshold {
    /// A call is slow when its wall time is at least this; `null`: per function, the before
    /// side's pooled wall p99 (no capture was recorded with `--slow`).
    pub ns: Option<u64>,
    /// The rule, in words.
    pub rule: String,
}

/// One run's slow calls of one function.
#[derive(Debug, Clone, Serialize)]
pub struct RunSlowShare {
    pub file: String,
    /// Calls `--cpu`/`--pid` select (wall time, whatever `--time`).
    pub calls: u64,
    /// Of those, calls whose wall time is at least the threshold.
    pub slow: u64,
    /// `slow` as a percentage of `calls`.
    pub pct: f64,
    /// How the slow calls' summed wall time splits (captures with the breakdown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split: Option<Split>,
}

/// Shares of summed wall time, percent.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Split {
    /// Slow calls whose breakdown is known: what the shares are over.
    pub calls: u64,
    pub off_cpu_pct: f64,
    pub irq_pct: f64,
    pub on_cpu_pct: f64,
}

/// One function's slow-call share on each side, run by run.
#[derive(Debug, Clone, Serialize)]
pub struct SlowShare {
    /// The threshold used for this function (ns).
    pub threshold_ns: u64,
    pub before: Vec<RunSlowShare>,
    pub after: Vec<RunSlowShare>,
}

/// The threshold for all functions, from the captures' `meta.slow`: the one they share; the
/// before side's (the reference) when they differ; per function the before side's p99 when
/// none has one.
pub fn threshold(inp: &Inputs) -> SlowThreshold {
    let of = |side: &[(&str, &Capture)]| -> Vec<(String, Option<u64>)> {
        side.iter()
            .map(|&(f, c)| (f.to_owned(), c.meta.slow.map(|s| s.threshold_ns)))
            .collect()
    };
    let (b, a) = (of(&inp.before), of(&inp.after));
    let all: Vec<&(String, Option<u64>)> = b.iter().chain(&a).collect();
    let set: Vec<u64> = crate::compare::side::distinct(all.iter().filter_map(|x| x.1));
    let listed = || {
        all.iter()
            .map(|(f, t)| match t {
                Some(t) => format!("{f} {t} ns"),
                None => format!("{f} none"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    match set.as_slice() {
        [] => SlowThreshold {
            ns: None,
            rule: "no capture was recorded with --slow: a call counts as slow when its wall \
                   time is at least the before side's p99 (all runs pooled) for its function"
                .to_owned(),
        },
        [t] if all.iter().all(|x| x.1.is_some()) => SlowThreshold {
            ns: Some(*t),
            rule: format!("the captures' --slow threshold: wall time ≥ {t} ns"),
        },
        _ => {
            let t = b
                .iter()
                .find_map(|x| x.1)
                .or_else(|| a.iter().find_map(|x| x.1))
                .expect("a threshold");
            SlowThreshold {
                ns: Some(t),
                rule: format!(
                    "the captures' --slow thresholds differ ({}): every run is cut at {t} ns, \
                     the first before capture's (the first after capture's if no before one \
                     has a threshold); the shares count every call's record, kept or not",
                    listed()
                ),
            }
        }
    }
}

/// The slow-call share of the function `name` on each side, over the records as recorded
/// (wall time: the threshold is a wall time even under `--time on-cpu`).
pub fn share(
    name: &str,
    inp: &Inputs,
    opts: &ReportOptions,
    threshold: &SlowThreshold,
) -> Option<SlowShare> {
    fn side_calls<'a>(
        side: &[(&'a str, &'a Capture)],
        name: &str,
        opts: &ReportOptions,
    ) -> Vec<(String, &'a Capture, Vec<&'a CallRecord>)> {
        side.iter()
            .filter_map(|&(file, c)| {
                let id = c.meta.functions.iter().find(|f| f.name == name)?.id;
                let calls = c
                    .records
                    .iter()
                    .filter(|r| r.func == id && opts.keeps(r.cpu, r.pid))
                    .collect();
                Some((file.to_owned(), c, calls))
            })
            .collect()
    }
    let (b, a) = (
        side_calls(&inp.before, name, opts),
        side_calls(&inp.after, name, opts),
    );
    if b.iter().chain(&a).all(|(_, c, _)| c.is_kernel_mode()) {
        return None;
    }
    let threshold_ns = match threshold.ns {
        Some(t) => t,
        None => {
            let mut pooled: Vec<u64> = b
                .iter()
                .flat_map(|(_, _, calls)| calls.iter().map(|r| r.duration_ns))
                .collect();
            pooled.sort_unstable();
            crate::stats::percentile(&pooled, 99.0)?
        }
    };
    let runs = |side: Vec<(String, &Capture, Vec<&CallRecord>)>| -> Vec<RunSlowShare> {
        side.into_iter()
            .filter(|(_, c, _)| !c.is_kernel_mode())
            .map(|(file, c, calls)| run_share(file, c, &calls, threshold_ns))
            .collect()
    };
    Some(SlowShare {
        threshold_ns,
        before: runs(b),
        after: runs(a),
    })
}

/// One run's share of slow calls, and their split when the capture has the breakdown.
fn run_share(file: String, c: &Capture, calls: &[&CallRecord], threshold_ns: u64) -> RunSlowShare {
    let slow: Vec<&CallRecord> = calls
        .iter()
        .copied()
        .filter(|r| r.duration_ns >= threshold_ns)
        .collect();
    let split = DisturbanceStatus::breakdown(&c.meta)
        .then(|| breakdown::summarize(slow.iter().copied()))
        .flatten()
        .filter(|s| s.calls > 0)
        .map(|s| Split {
            calls: s.calls,
            off_cpu_pct: s.off_cpu_pct,
            irq_pct: s.irq_pct,
            on_cpu_pct: s.on_cpu_pct,
        });
    RunSlowShare {
        file,
        calls: calls.len() as u64,
        slow: slow.len() as u64,
        pct: if calls.is_empty() {
            0.0
        } else {
            slow.len() as f64 * 100.0 / calls.len() as f64
        },
        split,
    }
}
