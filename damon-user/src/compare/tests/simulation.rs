//! The verdict's statistics on simulated runs with a known answer.
//!
//! A run is simulated as latencies drawn within the run (a gamma body above a floor, skewed
//! like the real functions') scaled by a run effect (log-normal, the run-to-run variation:
//! boot, emulation speed, layout), with a random number of calls per run. A/A sets must come
//! out "significant" at about the nominal rate; the intervals must hold the true shift at
//! about their nominal rate; a shift of the size `runs_needed` is computed for must be found
//! with about the promised power. Run on the same code `compare` runs: the per-run summaries
//! and `median_test`, Holm and, end to end, `build` on captures.
use crate::compare::runs::{RunSummary, median_test};
use crate::stats::{rng::Rng, runs as stats_runs};

/// Relative SD of the run effect (the committed 7.2 runs: SD of the median ~30 %, scaled
/// down to keep the within-run sampling noise visible in the mix).
const RUN_SD: f64 = 0.08;

/// One run's sorted latencies: `n` calls, median ≈ `scale` · 1000 + 500 ns, plus `shift`.
fn run(rng: &mut Rng, n: usize, shift: f64) -> Vec<u64> {
    let scale = (RUN_SD * rng.normal()).exp();
    let mut v: Vec<u64> = (0..n)
        .map(|_| (500.0 + scale * 300.0 * rng.gamma(3.0) + shift).max(1.0) as u64)
        .collect();
    v.sort_unstable();
    v
}

fn summary(d: &[u64]) -> RunSummary {
    RunSummary {
        file: String::new(),
        calls: d.len() as u64,
        matched: d.len() as u64,
        dropped: 0,
        seconds: None,
        calls_per_s: None,
        calls_per_interval: None,
        percentiles: Vec::new(),
        p50_ns: crate::stats::percentile(d, 50.0),
        mean_ns: None,
    }
}

fn side(rng: &mut Rng, runs: usize, shift: f64) -> Vec<RunSummary> {
    (0..runs)
        .map(|_| {
            let n = 50 + (rng.uniform() * 250.0) as usize;
            summary(&run(rng, n, shift))
        })
        .collect()
}

/// Binomial standard error of a rate `p` over `n` trials.
fn se(p: f64, n: usize) -> f64 {
    (p * (1.0 - p) / n as f64).sqrt()
}

#[test]
fn a_a_sets_are_significant_at_the_nominal_rate_and_intervals_cover() {
    let mut rng = Rng::new(0x5eed);
    for (nb, na) in [(2, 2), (3, 3), (5, 5), (3, 6)] {
        let trials = 2000;
        let (mut hits, mut covered) = (0, 0);
        for _ in 0..trials {
            let (b, a) = (side(&mut rng, nb, 0.0), side(&mut rng, na, 0.0));
            let t = median_test(&b, &a).expect("two runs a side");
            hits += usize::from(t.p_value < crate::compare::ALPHA);
            covered += usize::from(t.lo <= 0.0 && 0.0 <= t.hi);
        }
        let fpr = hits as f64 / trials as f64;
        let cover = covered as f64 / trials as f64;
        eprintln!("{nb}+{na} runs: A/A false positives {fpr:.3}, coverage {cover:.3}");
        // Never above the nominal 5 % beyond Monte-Carlo error (3 standard errors); with five
        // runs a side, within it. With fewer, Welch's df falls towards 1 and the test is
        // conservative (measured: 2.6 % with 2 + 2 runs, 3.4 % with 3 + 3).
        let tol = 3.0 * se(0.05, trials);
        assert!(
            fpr <= 0.05 + tol,
            "{nb}+{na} runs: A/A false positives {fpr:.3}"
        );
        assert!(cover >= 0.95 - tol, "{nb}+{na} runs: coverage {cover:.3}");
        if nb.min(na) >= 5 {
            assert!(
                fpr >= 0.05 - tol,
                "{nb}+{na} runs: A/A false positives {fpr:.3}"
            );
            assert!(cover <= 0.95 + tol, "{nb}+{na} runs: coverage {cover:.3}");
        }
    }
}

#[test]
fn intervals_cover_a_known_shift() {
    let mut rng = Rng::new(11);
    let trials = 2000;
    let shift = -150.0;
    let covered = (0..trials)
        .filter(|_| {
            let (b, a) = (side(&mut rng, 4, 0.0), side(&mut rng, 4, shift));
            let t = median_test(&b, &a).expect("test");
            t.lo <= shift && shift <= t.hi
        })
        .count();
    let cover = covered as f64 / trials as f64;
    assert!(
        (cover - 0.95).abs() <= 3.0 * se(0.05, trials),
        "coverage of a -150 ns shift: {cover:.3}"
    );
}

/// Holm across four A/A functions: the chance of any false "significant" stays near 5 %
/// (unadjusted it would be about 1 − 0.95⁴ = 19 %).
#[test]
fn holm_keeps_the_family_wise_rate() {
    let mut rng = Rng::new(4);
    let trials = 1500;
    let (mut any_raw, mut any_holm) = (0, 0);
    for _ in 0..trials {
        let p: Vec<f64> = (0..4)
            .map(|_| {
                median_test(&side(&mut rng, 3, 0.0), &side(&mut rng, 3, 0.0))
                    .expect("test")
                    .p_value
            })
            .collect();
        any_raw += usize::from(p.iter().any(|&p| p < 0.05));
        any_holm += usize::from(stats_runs::holm(&p).iter().any(|&p| p < 0.05));
    }
    let (raw, holm) = (
        any_raw as f64 / trials as f64,
        any_holm as f64 / trials as f64,
    );
    eprintln!("four A/A functions: any significant {raw:.3} unadjusted, {holm:.3} with Holm");
    assert!(raw > 0.08, "unadjusted family-wise rate {raw:.3}");
    assert!(
        holm <= 0.05 + 3.0 * se(0.05, trials),
        "Holm family-wise rate {holm:.3}"
    );
}

/// The advice: a shift of 6 % of the median with this run-to-run variation needs the runs
/// `runs_needed` says; with that many runs a side the shift is found about 80 % of the time.
#[test]
fn the_stated_runs_find_a_shift_of_realistic_size() {
    let mut rng = Rng::new(99);
    // The run-to-run SD of the median, measured on this model.
    let medians: Vec<f64> = (0..4000)
        .map(|_| summary(&run(&mut rng, 300, 0.0)).p50_ns.expect("p50") as f64)
        .collect();
    let m = medians.iter().sum::<f64>() / medians.len() as f64;
    let sd =
        (medians.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (medians.len() - 1) as f64).sqrt();
    let shift = -0.06 * m;
    let n =
        stats_runs::runs_needed(sd, shift, crate::compare::ALPHA, 50).expect("a number of runs");
    assert!(
        (3..=20).contains(&n),
        "{n} runs for {shift:.0} ns at sd {sd:.0}"
    );
    let trials = 600;
    let found = (0..trials)
        .filter(|_| {
            let b: Vec<RunSummary> = (0..n).map(|_| summary(&run(&mut rng, 1000, 0.0))).collect();
            let a: Vec<RunSummary> = (0..n)
                .map(|_| summary(&run(&mut rng, 300, shift)))
                .collect();
            median_test(&b, &a).expect("test").p_value < crate::compare::ALPHA
        })
        .count();
    let power = found as f64 / trials as f64;
    eprintln!("{n} runs a side for a {shift:.0} ns shift (run SD {sd:.0} ns): found {power:.3}");
    assert!(
        (0.72..=0.95).contains(&power),
        "{n} runs a side found a {shift:.0} ns shift {power:.3} of the time (stated: 80 %)"
    );
}

/// End to end through `build` on captures: A/A sets of 3 + 3 runs of two functions are
/// called significant (after Holm) in about 5 % of the sets at most, and one-run compares
/// never.
#[test]
fn build_on_simulated_captures_keeps_the_rate() {
    use crate::compare::{Inputs, build, tests::capture_of};
    let mut rng = Rng::new(21);
    let trials = 300;
    let mut significant = 0;
    for _ in 0..trials {
        let mut make = || {
            let n = 50 + (rng.uniform() * 150.0) as usize;
            let d1 = run(&mut rng, n, 0.0);
            let d2 = run(&mut rng, n, 0.0);
            capture_of(&d1, &d2)
        };
        let b: Vec<_> = (0..3).map(|_| make()).collect();
        let a: Vec<_> = (0..3).map(|_| make()).collect();
        let c = build(
            &Inputs {
                before: b.iter().map(|c| ("b", c)).collect(),
                after: a.iter().map(|c| ("a", c)).collect(),
            },
            &crate::analysis::ReportOptions {
                bucket_ns: 100,
                ..Default::default()
            },
        )
        .expect("compare");
        assert_eq!(c.functions.len(), 2);
        significant += usize::from(c.functions.iter().any(|f| f.significant));
        let one = build(
            &Inputs::pair(("b", &b[0]), ("a", &a[0])),
            &crate::analysis::ReportOptions {
                bucket_ns: 100,
                ..Default::default()
            },
        )
        .expect("compare");
        assert!(one.functions.iter().all(|f| !f.significant));
    }
    let rate = significant as f64 / trials as f64;
    assert!(
        rate <= 0.05 + 3.0 * se(0.05, trials),
        "A/A sets with a significant function: {rate:.3}"
    );
}
