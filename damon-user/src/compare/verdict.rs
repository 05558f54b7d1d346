//! The one-line verdict of a comparison: what may honestly be said about one function.
use super::{ALPHA, FEW, FunctionComparison, PercentileDelta, runs::RunsNeeded};
use crate::{capture::Clock, stats::ranktest};

/// Formats ns with a sign, for deltas.
pub fn signed(v: f64) -> String {
    format!("{}{:.0}", if v > 0.0 { "+" } else { "" }, v)
}

pub fn p_text(p: f64) -> String {
    if p < 1e-4 {
        format!("p={p:.1e}")
    } else {
        format!("p={p:.4}")
    }
}

/// The one-line verdict of a function, whether its difference is significant, and the runs a
/// side would need to resolve it. `tests`: how many functions were tested (Holm's family).
pub fn verdict(
    f: &FunctionComparison,
    tests: usize,
    clock: Clock,
) -> (bool, String, Option<RunsNeeded>) {
    let unit = clock.unit();
    let (nb, na) = (f.runs.before.len(), f.runs.after.len());
    let (mb, ma) = (f.before.matched, f.after.matched);
    let p50 = f.percentiles.iter().find(|d| d.label == "p50");
    let (Some(p50), true) = (p50, mb > 0 && ma > 0) else {
        return (
            false,
            format!("cannot compare: {mb} calls timed before, {ma} after"),
            None,
        );
    };
    let few = if mb < FEW as u64 || ma < FEW as u64 {
        format!(" (only {mb} and {ma} calls: a weak comparison)")
    } else {
        String::new()
    };
    let Some(t) = f.test else {
        // One run on a side: no variation to test against. Describe, and say what it takes.
        return described(f, p50, &few, unit);
    };
    if clock == Clock::Instructions
        && let Some(text) = in_every_run(f, unit)
    {
        return (true, format!("{text}{few}"), None);
    }
    let p_holm = f.p_holm.unwrap_or(t.p_value);
    let p = if tests > 1 {
        format!(
            "Welch {}, Holm-adjusted over {tests} functions {}",
            p_text(t.p_value),
            p_text(p_holm)
        )
    } else {
        format!("Welch {}", p_text(t.p_value))
    };
    let runs = format!("{nb} and {na} runs");
    if p_holm >= ALPHA {
        let needed =
            super::runs::needed(&f.name, t.estimate, p50.before_ns as f64, Some(&t), ALPHA);
        let advice = match needed.as_ref().and_then(|n| n.per_side) {
            Some(k) if k as usize > nb.min(na) => {
                format!("; a shift of this size would take about {k} runs a side")
            }
            None if needed.is_some() => format!(
                "; a shift of this size would take more than {} runs a side",
                super::runs::MAX_RUNS
            ),
            _ => String::new(),
        };
        return (
            false,
            format!(
                "no significant difference over {runs}: median {} {unit} [95% CI {}, {}], {p}; \
                 run-to-run SD of the median {:.0} / {:.0} {unit}{advice}{few}",
                signed(t.estimate),
                signed(t.lo),
                signed(t.hi),
                t.sd_before,
                t.sd_after
            ),
            needed,
        );
    }
    // Under the instruction clock a duration is a path length: shorter, not faster.
    let word = match (clock, t.estimate < 0.0) {
        (Clock::Wall, true) => "faster",
        (Clock::Wall, false) => "slower",
        (Clock::Instructions, true) => "shorter",
        (Clock::Instructions, false) => "longer",
    };
    (
        true,
        format!(
            "after is {word} by {:.0} {unit} at the median [95% CI {:.0}, {:.0}] over {runs}, {p}{few}",
            t.estimate.abs(),
            t.lo.abs().min(t.hi.abs()),
            t.lo.abs().max(t.hi.abs()),
        ),
        None,
    )
}

/// Under the instruction clock, a side whose per-run medians are all the same and whose calls
/// take one value (pooled p50 = p99) is exact, and a difference with every run of the other
/// side beyond it is stated as such (see [`crate::stats::runs::every_run`]): `after is shorter
/// in every run: by 20–25 insn at the median (per-run medians before 251, 256; after 231,
/// 231)`. A side whose calls vary may give equal medians in a few runs by chance (seed-000's
/// age loop: 565 or 570 a run), so equal medians alone do not make a side exact.
fn in_every_run(f: &FunctionComparison, unit: &str) -> Option<String> {
    let medians = |runs: &[super::runs::RunSummary]| -> Option<Vec<f64>> {
        runs.iter().map(|r| r.p50_ns.map(|v| v as f64)).collect()
    };
    let (b, a) = (medians(&f.runs.before)?, medians(&f.runs.after)?);
    let at = |label: &str| f.percentiles.iter().find(|d| d.label == label);
    let (p50, p99) = (at("p50")?, at("p99")?);
    let same = |v: &[f64]| v.iter().all(|x| *x == v[0]);
    let exact_before = same(&b) && p50.before_ns == p99.before_ns;
    let exact_after = same(&a) && p50.after_ns == p99.after_ns;
    if !exact_before && !exact_after {
        return None;
    }
    let [lo, hi] = crate::stats::runs::every_run(&b, &a)?;
    let word = if hi < 0.0 { "shorter" } else { "longer" };
    let (near, far) = (lo.abs().min(hi.abs()), lo.abs().max(hi.abs()));
    let size = if near == far {
        format!("{near:.0}")
    } else {
        format!("{near:.0}–{far:.0}")
    };
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Some(format!(
        "after is {word} in every run: by {size} {unit} at the median (per-run medians before \
         {}; after {}): under the instruction clock a side whose calls all take one path \
         length is exact; stated from these runs, not a test over runs",
        list(&b),
        list(&a)
    ))
}

/// The verdict with one run on a side: the difference described, never judged, and the runs
/// it would take to resolve it.
fn described(
    f: &FunctionComparison,
    p50: &PercentileDelta,
    few: &str,
    unit: &str,
) -> (bool, String, Option<RunsNeeded>) {
    let (nb, na) = (f.runs.before.len(), f.runs.after.len());
    let d = p50.after_ns as f64 - p50.before_ns as f64;
    let needed = super::runs::needed(&f.name, d, p50.before_ns as f64, None, ALPHA);
    let which = match (nb, na) {
        (1, 1) => "one run a side".to_owned(),
        (1, _) => "one run before".to_owned(),
        _ => "one run after".to_owned(),
    };
    let rel = if p50.before_ns > 0 {
        format!(" ({:+.1} %)", d * 100.0 / p50.before_ns as f64)
    } else {
        String::new()
    };
    let delta = f.calls_test.map_or_else(String::new, |m| {
        format!(
            ", Cliff's δ={:+.2} ({}) over their calls",
            m.cliffs_delta,
            ranktest::magnitude(m.cliffs_delta)
        )
    });
    let advice = match &needed {
        Some(n) => match n.per_side {
            Some(k) => format!(
                "; at {}, resolving a difference of this size takes about {k} runs a side",
                n.basis
            ),
            None => format!(
                "; at {}, a difference of this size would take more than {} runs a side",
                n.basis,
                super::runs::MAX_RUNS
            ),
        },
        None => String::new(),
    };
    (
        false,
        format!(
            "{which}: run-to-run variation unknown, nothing is claimed about the kernels; \
             these runs differ by {} {unit} at the median{rel}{delta}{advice}{few}",
            signed(d)
        ),
        needed,
    )
}
