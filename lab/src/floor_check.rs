//! Checks one floor of `damon-trace calibrate --json` against the data it carries, for the
//! calibration guest test (`lab/tests/vm_calibrate.rs`).
//!
//! The guest test's check — the held-out empty function, corrected with the floor, within
//! `B ×` the stated ± of zero — is only as strong as the ± is honest: a ± inflated by a bug
//! passes any floor. Comparing against another measured floor (the other attach method's)
//! rejects such a bound only where the two methods happen to sit far apart on the machine
//! (they were 420–610 ns apart with 2 × ± of 680–1040 ns on one CI-class machine), and a
//! floor "shifted by a multiple of its own ±" scales with an inflated ± and is rejected
//! whatever the ±. What is independent of the machine is the data the ± is computed from:
//! the floor's whole histogram and the pooled functions' own medians are in the JSON, so
//! [`restate`] computes median, spread, between-functions term and ± again, here, from
//! them, by the documented method (`damon-user/src/stats/calibration.rs`), and
//! [`check_stated`] requires the tool's numbers to equal them.
//!
//! [`power_shift`] states what the held-out check can then detect: the shift of the floor
//! that it rejects with a given probability, computed from the ±'s own model.
use anyhow::{Context as _, Result, bail, ensure};
use serde_json::Value;

use crate::parse::float;

/// t(0.975, df) for df = 1..=10: the 95 % two-sided quantile the between-functions term uses
/// (`t(0.975, k − 1) · s · √(1 + 1/k)` over k pooled medians).
const T_975: [f64; 10] = [
    12.706_205, 4.302_653, 3.182_446, 2.776_445, 2.570_582, 2.446_912, 2.364_624, 2.306_004,
    2.262_157, 2.228_139,
];

/// t(0.999, df) for df = 1..=10: the one-sided quantile of [`power_shift`]'s 99.9 % power.
const T_999: [f64; 10] = [
    318.308_839,
    22.327_125,
    10.214_532,
    7.173_182,
    5.893_430,
    5.207_626,
    4.785_290,
    4.500_791,
    4.296_806,
    4.143_700,
];

fn quantile(table: &[f64; 10], df: usize) -> Result<f64> {
    df.checked_sub(1)
        .and_then(|i| table.get(i).copied())
        .with_context(|| format!("no t quantile here for {df} degrees of freedom (1..=10)"))
}

/// A floor's summary, computed here from its histogram and its pooled functions' medians.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Restated {
    pub count: u64,
    pub median_ns: f64,
    pub p5_ns: f64,
    pub p95_ns: f64,
    /// Widest bucket from p5's to p95's (1 for exact durations).
    pub resolution_ns: u64,
    /// `(p95 − p5)/2 + (resolution − 1)/2`.
    pub spread_ns: f64,
    /// `t(0.975, k − 1) · s · √(1 + 1/k)` over the k pooled medians.
    pub between_ns: f64,
    /// `√(spread² + between²)`.
    pub uncertainty_ns: f64,
    /// The lowest and highest pooled function's median: the pooled median lies between them
    /// (at the lowest one's median fewer than half of every function's calls are below, at the
    /// highest one's at least half of every function's are at or below).
    pub function_medians: (f64, f64),
}

struct Bucket {
    lo: u64,
    hi: u64,
    count: u64,
}

impl Bucket {
    /// The value a bucket stands for: the middle of the integers it holds; the low edge of
    /// the open-ended last kernel bucket.
    fn value(&self) -> f64 {
        if self.hi == u64::MAX {
            self.lo as f64
        } else {
            (self.lo as f64 + self.hi as f64 - 1.0) / 2.0
        }
    }
}

/// Nearest rank of the `milli`-th 1/1000 percentile among `n`: ⌈milli · n / 100 000⌉ in 1..=n.
fn rank(milli: u64, n: u64) -> u64 {
    (u128::from(milli) * u128::from(n))
        .div_ceil(100_000)
        .clamp(1, u128::from(n.max(1))) as u64
}

/// Index of the bucket holding the nearest-rank percentile.
fn at(buckets: &[Bucket], milli: u64, n: u64) -> usize {
    let r = rank(milli, n);
    let mut seen = 0;
    for (i, b) in buckets.iter().enumerate() {
        seen += b.count;
        if seen >= r {
            return i;
        }
    }
    buckets.len() - 1
}

/// Restates a floor object (an element of `calibrate --json`'s `floors`) from its data.
pub fn restate(floor: &Value) -> Result<Restated> {
    let d = &floor["floor"];
    let mut buckets: Vec<Bucket> = d["buckets"]
        .as_array()
        .context("the floor has no histogram (`floor.buckets`)")?
        .iter()
        .map(|b| {
            Ok(Bucket {
                lo: crate::parse::num(b, "lo_ns")?,
                hi: crate::parse::num(b, "hi_ns")?,
                count: crate::parse::num(b, "count")?,
            })
        })
        .collect::<Result<_>>()?;
    buckets.retain(|b| b.count > 0);
    buckets.sort_unstable_by_key(|b| b.lo);
    ensure!(!buckets.is_empty(), "the floor's histogram is empty");
    let n: u64 = buckets.iter().map(|b| b.count).sum();
    let (i5, i50, i95) = (
        at(&buckets, 5_000, n),
        at(&buckets, 50_000, n),
        at(&buckets, 95_000, n),
    );
    let resolution = buckets[i5..=i95]
        .iter()
        .map(|b| b.hi.saturating_sub(b.lo))
        .max()
        .unwrap_or(1)
        .max(1);
    let (p5, p95) = (buckets[i5].value(), buckets[i95].value());
    let spread = (p95 - p5) / 2.0 + (resolution as f64 - 1.0) / 2.0;

    let medians: Vec<f64> = floor["functions"]
        .as_array()
        .context("the floor has no pooled functions' medians (`functions`)")?
        .iter()
        .map(|f| float(f, "median_ns"))
        .collect::<Result<_>>()?;
    let k = medians.len();
    let between = if k < 2 {
        0.0
    } else {
        let kf = k as f64;
        let mean = medians.iter().sum::<f64>() / kf;
        let var = medians.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (kf - 1.0);
        quantile(&T_975, k - 1)? * var.sqrt() * (1.0 + 1.0 / kf).sqrt()
    };
    let lowest = medians.iter().copied().fold(f64::INFINITY, f64::min);
    let highest = medians.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Ok(Restated {
        count: n,
        median_ns: buckets[i50].value(),
        p5_ns: p5,
        p95_ns: p95,
        resolution_ns: resolution,
        spread_ns: spread,
        between_ns: between,
        uncertainty_ns: spread.hypot(between),
        function_medians: (lowest, highest),
    })
}

/// [`restate`], and every number the tool stated for the floor equal to it (to 10⁻⁶ ns for
/// the exact ones, 10⁻⁵ relative for the between-functions term and the ±, whose t quantile is
/// tabulated here to seven digits); the pooled median between the pooled functions' medians.
pub fn check_stated(floor: &Value) -> Result<Restated> {
    let r = restate(floor)?;
    let d = &floor["floor"];
    let label = format!("{}/{}", floor["attach"], floor["mode"]).replace('"', "");
    let exact = [
        ("floor.median_ns", float(d, "median_ns")?, r.median_ns),
        ("floor.p5_ns", float(d, "p5_ns")?, r.p5_ns),
        ("floor.p95_ns", float(d, "p95_ns")?, r.p95_ns),
        (
            "floor.resolution_ns",
            float(d, "resolution_ns")?,
            r.resolution_ns as f64,
        ),
        ("floor.spread_ns", float(d, "spread_ns")?, r.spread_ns),
        ("floor.count", float(d, "count")?, r.count as f64),
    ];
    for (what, stated, here) in exact {
        ensure!(
            (stated - here).abs() < 1e-6,
            "{label}: {what} is {stated} but the floor's own histogram gives {here}"
        );
    }
    let relative = |stated: f64, here: f64| (stated - here).abs() <= 1e-5 * here.abs().max(1.0);
    let between = float(floor, "between_functions_ns")?;
    ensure!(
        relative(between, r.between_ns),
        "{label}: between_functions_ns is {between} but the pooled functions' medians give \
         {:.3} (t(0.975, k − 1) · s · √(1 + 1/k))",
        r.between_ns
    );
    let stated = float(floor, "uncertainty_ns")?;
    ensure!(
        relative(stated, r.uncertainty_ns),
        "{label}: uncertainty_ns is {stated} but √(spread² + between²) from the data is {:.3}",
        r.uncertainty_ns
    );
    let (lo, hi) = r.function_medians;
    if !(lo - 1e-6..=hi + 1e-6).contains(&r.median_ns) {
        bail!(
            "{label}: the pooled median {} lies outside its functions' medians {lo}..{hi}: the \
             floor is not the pool of those functions",
            r.median_ns
        );
    }
    Ok(r)
}

/// The shift of a floor, in units of its stated ±, that the held-out check `|corrected| ≤
/// bounds × ±` rejects with probability `≥ 99.9 %`, when the ± is what it says: a 95 %
/// prediction bound for a new function's corrected median from `pooled` functions (t on
/// `pooled − 1` degrees of freedom when the between-functions term makes all of it; the
/// per-call spread only widens the ± beyond the median's real scatter, so this is the worst
/// case). A floor wrong by `shift · ±` leaves the held-out function at `X − shift · ±`, with
/// `X / ± ~ t / t(0.975)`; it is rejected at least when `X < (shift − bounds) · ±`, so
/// `shift = bounds + t(0.999) / t(0.975)`.
pub fn power_shift(bounds: f64, pooled: usize) -> Result<f64> {
    let df = pooled.checked_sub(1).context("no pooled functions")?;
    Ok(bounds + quantile(&T_999, df)? / quantile(&T_975, df)?)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A floor as `calibrate --json` writes it, from exact durations, summarised here by hand.
    fn floor(durations: &[u64], medians: &[f64]) -> Value {
        let mut sorted = durations.to_vec();
        sorted.sort_unstable();
        let mut buckets: Vec<Value> = Vec::new();
        for d in &sorted {
            match buckets.last_mut() {
                Some(b) if b["lo_ns"] == *d => b["count"] = json!(b["count"].as_u64().unwrap() + 1),
                _ => buckets.push(json!({"lo_ns": d, "hi_ns": d + 1, "count": 1})),
            }
        }
        json!({"attach": "fentry", "mode": "stream", "floor": {"buckets": buckets},
               "functions": medians.iter().map(|m| json!({"median_ns": m})).collect::<Vec<_>>()})
    }

    #[test]
    fn restates_median_spread_between_and_bound_from_the_data() {
        // 20 durations 100..=119: nearest-rank p5 is the 1st (100), median the 10th (109), p95
        // the 19th (118); spread (118 − 100)/2 = 9. Medians 100, 110, 120: s = 10, k = 3.
        let durations: Vec<u64> = (100..120).collect();
        let r = restate(&floor(&durations, &[100.0, 110.0, 120.0])).expect("restates");
        assert_eq!(
            (r.count, r.p5_ns, r.median_ns, r.p95_ns),
            (20, 100.0, 109.0, 118.0)
        );
        assert_eq!((r.resolution_ns, r.spread_ns), (1, 9.0));
        let between = 4.302_653 * 10.0 * (4.0_f64 / 3.0).sqrt();
        assert!((r.between_ns - between).abs() < 1e-9, "{r:?}");
        assert!((r.uncertainty_ns - 9.0_f64.hypot(between)).abs() < 1e-9);
        assert_eq!(r.function_medians, (100.0, 120.0));
    }

    #[test]
    fn kernel_buckets_stand_for_their_middle_and_add_their_width() {
        // Kernel mode: 10 ns buckets; 18 calls in [200, 210), one in [300, 310) and one in
        // the open-ended bucket from 5000.
        let f = json!({"attach": "fentry", "mode": "kernel", "functions": [],
            "floor": {"buckets": [
                {"lo_ns": 5000, "hi_ns": u64::MAX, "count": 1},
                {"lo_ns": 200, "hi_ns": 210, "count": 18},
                {"lo_ns": 300, "hi_ns": 310, "count": 1}]}});
        let r = restate(&f).expect("restates");
        assert_eq!((r.p5_ns, r.median_ns, r.p95_ns), (204.5, 204.5, 304.5));
        assert_eq!(r.resolution_ns, 10);
        assert_eq!(r.spread_ns, 50.0 + 4.5);
        assert_eq!(r.between_ns, 0.0, "fewer than two functions");
    }

    /// A floor whose stated numbers are `restate`'s, as the tool writes a right one.
    fn stated(mut f: Value) -> Value {
        let r = restate(&f).expect("restates");
        let d = &mut f["floor"];
        d["median_ns"] = json!(r.median_ns);
        d["p5_ns"] = json!(r.p5_ns);
        d["p95_ns"] = json!(r.p95_ns);
        d["resolution_ns"] = json!(r.resolution_ns);
        d["spread_ns"] = json!(r.spread_ns);
        d["count"] = json!(r.count);
        f["between_functions_ns"] = json!(r.between_ns);
        f["uncertainty_ns"] = json!(r.uncertainty_ns);
        f
    }

    #[test]
    fn a_right_floor_passes_and_each_wrong_number_fails_by_name() {
        let durations: Vec<u64> = (0..200).map(|i| 600 + (i * 37) % 300).collect();
        let right = stated(floor(
            &durations,
            &[690.0, 720.0, 750.0, 700.0, 735.0, 745.0, 760.0],
        ));
        check_stated(&right).expect("a right floor passes");
        // The mutants the guest test must fail: the spread ×10 (the earlier negative
        // control's mutant), the between term inflated, the ± not from its parts, the central
        // value from another quantile, a floor that is not its functions' pool.
        let spread = right["floor"]["spread_ns"].as_f64().unwrap();
        let cases: [(&str, &str, Value, &str); 5] = [
            (
                "floor",
                "spread_ns",
                json!(spread * 10.0),
                "floor.spread_ns",
            ),
            (
                "",
                "between_functions_ns",
                json!(500.0),
                "between_functions_ns",
            ),
            ("", "uncertainty_ns", json!(5000.0), "uncertainty_ns"),
            (
                "floor",
                "median_ns",
                right["floor"]["p95_ns"].clone(),
                "floor.median_ns",
            ),
            ("floor", "count", json!(199), "floor.count"),
        ];
        for (obj, key, value, named) in cases {
            let mut wrong = right.clone();
            let target = if obj.is_empty() {
                &mut wrong
            } else {
                &mut wrong[obj]
            };
            target[key] = value;
            let e = check_stated(&wrong).expect_err(key).to_string();
            assert!(e.contains(named), "{key}: {e}");
        }
        // Every pooled function's median moved up by 400 ns while the pool stays: the pool is
        // not theirs.
        let mut moved = right.clone();
        for f in moved["functions"].as_array_mut().unwrap() {
            f["median_ns"] = json!(f["median_ns"].as_f64().unwrap() + 400.0);
        }
        let moved = stated(moved);
        let e = check_stated(&moved).expect_err("moved medians").to_string();
        assert!(e.contains("outside its functions' medians"), "{e}");
    }

    #[test]
    fn power_shift_is_the_bound_plus_the_quantile_ratio() {
        // Seven pooled functions, twice the ±: 2 + 5.2076 / 2.4469 = 4.128.
        let s = power_shift(2.0, 7).expect("df 6");
        assert!((s - 4.128_24).abs() < 1e-4, "{s}");
        assert!(power_shift(2.0, 12).is_err(), "df 11 is not tabulated");
        assert!(power_shift(2.0, 0).is_err());
    }

    /// On a real floor (fentry/stream, four pooled functions, Debian 7.2 under TCG, from a
    /// `record` capture's `meta.calibration`): what this module restates from its 478-bucket
    /// histogram and four medians is what damon-trace stated — two implementations of the
    /// documented method agreeing on real data.
    #[test]
    fn a_real_floor_restates_to_what_the_tool_stated() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../damon-user/tests/data/calibrated-7.2.dtcap"
        );
        let meta = dtcap::meta_json(&std::fs::read(path).expect("fixture"));
        let floor = &meta["calibration"]["floors"][0];
        assert_eq!(floor["attach"], "fentry", "{floor}");
        let r = check_stated(floor).expect("the tool's own numbers");
        assert!(r.spread_ns > 0.0 && r.between_ns > 0.0, "{r:?}");
    }
}
