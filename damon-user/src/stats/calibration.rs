//! The probe floor: what our own probes add to every measured duration, and the corrected
//! latencies that subtract it (pure; measuring it is `probe::calibrate`).
//!
//! Calibration times an empty kernel function with exactly the programs of a session, tens of
//! thousands of times. That distribution (the *floor*) is stored whole, as a histogram, in the
//! capture's `meta.calibration`.
//!
//! - **Central value: the median.** An interrupt or a preemption between the entry and exit
//!   stamps adds microseconds to a few calls; the mean follows them, the median does not.
//! - **The uncertainty stated with every corrected value combines two spreads.** (1) Per call:
//!   the probe does not cost every call the same; on 90 % of calls its cost lies inside the
//!   floor's p5..p95, so the half-width of that range (plus half a bucket in kernel mode) is
//!   the *spread*. (2) Per function: the probe's cost also differs from one empty function to
//!   another (code placement; under TCG emulation by up to ~10 %), and a traced function is a
//!   *new* function. The floor therefore pools several empty functions, and the 95 %
//!   prediction half-width for a new function's median from theirs (`t(0.975, k−1) · s ·
//!   √(1 + 1/k)` over their k medians) is the *between-functions* term. The stated ± is
//!   `√(spread² + between²)`. The median's own sampling error (≈ 1.25 σ/√n, well under 1 ns at
//!   tens of thousands of calls) is negligible beside it.
//! - **Corrected = raw − median, not clamped.** A negative corrected value is shown as such: it
//!   says the function's own time is below the floor's central value, i.e. within the stated
//!   uncertainty of zero. Clamping at 0 would hide that and bias averages upwards.
use serde::{Deserialize, Serialize};

use crate::trace::{Attach, Mode};

pub use super::floor::{FloorBucket, FloorDistribution};

/// The check of a calibration: a second empty function, timed in the same run, corrected
/// with the floor. Its corrected median should be 0 within the floor's uncertainty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldOut {
    pub function: String,
    pub count: u64,
    /// Its raw median.
    pub median_ns: f64,
    /// Raw median minus the floor's median.
    pub corrected_median_ns: f64,
    /// The floor's stated uncertainty: the corrected median should be within ± this of 0.
    pub uncertainty_ns: f64,
}

/// One empty function's share of a pooled floor: its own median (how much the probe's cost
/// differs from one function to another).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionMedian {
    pub function: String,
    pub count: u64,
    pub median_ns: f64,
}

/// The floor for one way of tracing: an attach method and a trace mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Floor {
    /// The attach method, by name (`fentry`, `kprobe`, ...).
    pub attach: Attach,
    /// `stream` or `kernel`.
    pub mode: Mode,
    /// Absent when this calibration failed (then `error` says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor: Option<FloorDistribution>,
    /// The pooled functions' own medians.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<FunctionMedian>,
    /// 95 % prediction half-width of a new function's median from the pooled functions'
    /// medians (0 with fewer than two).
    #[serde(default)]
    pub between_functions_ns: f64,
    /// What every corrected value is good to: `√(spread² + between_functions²)`.
    #[serde(default)]
    pub uncertainty_ns: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_out: Option<HeldOut>,
    /// Calls of the empty function the kernel saw and did not time (dropped, in flight):
    /// a floor that lost calls says so.
    #[serde(default)]
    pub untimed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Wall time this floor took (load, attach, calls, detach), ns.
    #[serde(default)]
    pub took_ns: u64,
}

impl Floor {
    /// The central value subtracted from raw latencies (0 when not measured).
    pub fn median_ns(&self) -> f64 {
        self.floor.as_ref().map_or(0.0, |d| d.median_ns)
    }

    /// A raw latency with the floor's central value taken out (may be negative).
    pub fn correct(&self, raw_ns: f64) -> f64 {
        raw_ns - self.median_ns()
    }

    /// Sets [`Floor::between_functions_ns`] from the pooled functions' medians and
    /// [`Floor::uncertainty_ns`] from it and the spread; the held-out check's bound follows.
    pub fn settle_uncertainty(&mut self) {
        let medians: Vec<f64> = self.functions.iter().map(|f| f.median_ns).collect();
        self.between_functions_ns = prediction_half_width(&medians);
        let spread = self.floor.as_ref().map_or(0.0, |d| d.spread_ns);
        self.uncertainty_ns = spread.hypot(self.between_functions_ns);
        let u = self.uncertainty_ns;
        if let Some(h) = &mut self.held_out {
            h.uncertainty_ns = u;
        }
    }
}

/// 95 % two-sided prediction half-width for one more value from `values`' distribution:
/// `t(0.975, k−1) · s · √(1 + 1/k)`; 0 with fewer than two values.
pub fn prediction_half_width(values: &[f64]) -> f64 {
    let k = values.len();
    if k < 2 {
        return 0.0;
    }
    let n = k as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    super::dist::t_quantile(0.975, n - 1.0) * var.sqrt() * (1.0 + 1.0 / n).sqrt()
}

/// Whether calibration ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CalibrationStatus {
    /// At least one floor was measured.
    Ok,
    /// The user said `--no-calibrate`.
    Skipped,
    /// Nothing could be measured (`detail` says why).
    Failed,
    /// Being measured beside the session when the capture's header was written; the summary
    /// at its end holds the result. A capture that still says so ended before it (killed).
    Pending,
}

/// What `meta.calibration` holds: the floors of the attach methods and trace mode a session
/// used, or why there are none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub status: CalibrationStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The empty functions timed for the floor (their durations pooled).
    #[serde(default)]
    pub functions: Vec<String>,
    /// Test runs per floor: each calls every function once.
    pub calls: u64,
    /// How the floor is summarised, in words (for readers of the JSON).
    pub method: String,
    #[serde(default)]
    pub floors: Vec<Floor>,
}

/// How a floor is summarised and applied, for `Calibration::method`.
pub const METHOD: &str = "corrected = raw - floor median; uncertainty = (floor p95 - p5)/2 \
                          + (bucket width - 1)/2; negatives are kept (below the floor)";

impl Calibration {
    /// Reads `meta.calibration` of a capture: `None` when absent or not understood (a newer
    /// or foreign shape), so such captures read as uncalibrated.
    pub fn from_meta(value: Option<&serde_json::Value>) -> Option<Calibration> {
        serde_json::from_value(value?.clone()).ok()
    }

    /// With every floor's uncertainty computed ([`Floor::settle_uncertainty`]).
    #[cfg(test)]
    pub fn settled(mut self) -> Calibration {
        for f in &mut self.floors {
            f.settle_uncertainty();
        }
        self
    }

    /// A calibration that did not run, and why.
    pub fn not_run(status: CalibrationStatus, detail: String) -> Calibration {
        Calibration {
            status,
            detail: Some(detail),
            functions: Vec::new(),
            calls: 0,
            method: METHOD.to_owned(),
            floors: Vec::new(),
        }
    }

    /// The measured floor for an attach method and trace mode.
    pub fn floor(&self, attach: Attach, mode: Mode) -> Option<&Floor> {
        self.floors
            .iter()
            .find(|f| f.attach == attach && f.mode == mode && f.floor.is_some())
    }
}

/// Latencies with the floor taken out, for one function (what `report` and `compare` show next
/// to the raw ones).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Corrected {
    /// The floor's median that was subtracted.
    pub floor_ns: f64,
    /// ± what each corrected value is good to (the floor's spread).
    pub uncertainty_ns: f64,
    pub min_ns: f64,
    pub mean_ns: f64,
    pub p50_ns: f64,
    pub p90_ns: f64,
    pub p95_ns: f64,
    pub p99_ns: f64,
    pub p999_ns: f64,
    pub max_ns: f64,
}

impl Corrected {
    pub fn new(floor: &Floor, raw: &super::LatencyStats) -> Corrected {
        let c = |v: u64| floor.correct(v as f64);
        Corrected {
            floor_ns: floor.median_ns(),
            uncertainty_ns: floor.uncertainty_ns,
            min_ns: c(raw.min_ns),
            mean_ns: floor.correct(raw.mean_ns),
            p50_ns: c(raw.p50_ns),
            p90_ns: c(raw.p90_ns),
            p95_ns: c(raw.p95_ns),
            p99_ns: c(raw.p99_ns),
            p999_ns: c(raw.p999_ns),
            max_ns: c(raw.max_ns),
        }
    }
}

impl Floor {
    /// The floor of an attach method and trace mode with nothing measured yet.
    pub fn empty(attach: Attach, mode: Mode) -> Floor {
        Floor {
            attach,
            mode,
            floor: None,
            functions: Vec::new(),
            between_functions_ns: 0.0,
            uncertainty_ns: 0.0,
            held_out: None,
            untimed: 0,
            error: None,
            took_ns: 0,
        }
    }
}

/// A fentry/stream floor of one function, and a settled calibration of such floors: the
/// fixtures of the report, compare and screen tests.
#[cfg(test)]
impl Floor {
    pub(crate) fn for_tests(floor: Option<FloorDistribution>) -> Floor {
        Floor {
            floor,
            took_ns: 1,
            ..Floor::empty(Attach::Fentry, Mode::Stream)
        }
    }
}

#[cfg(test)]
impl Calibration {
    pub(crate) fn for_tests(calls: u64, floors: Vec<Floor>) -> Calibration {
        Calibration {
            status: CalibrationStatus::Ok,
            detail: None,
            functions: vec!["bpf_fentry_test1".into()],
            calls,
            method: METHOD.into(),
            floors,
        }
        .settled()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::LatencyStats;

    #[test]
    fn corrections_subtract_the_median_and_keep_negatives() {
        let floor = FloorDistribution::from_durations(&[40, 42, 44, 46, 48]).expect("floor");
        assert_eq!(floor.median_ns, 44.0);
        let raw = LatencyStats::from_durations(&mut [41, 50, 60, 1000]).expect("raw");
        let mut floor = Floor::for_tests(Some(floor));
        floor.settle_uncertainty();
        assert_eq!(floor.uncertainty_ns, 4.0, "one function: the spread alone");
        let c = Corrected::new(&floor, &raw);
        assert_eq!(c.floor_ns, 44.0);
        assert_eq!(c.min_ns, -3.0);
        assert_eq!(c.p50_ns, raw.p50_ns as f64 - 44.0);
        assert_eq!(c.max_ns, 956.0);
        assert!((c.mean_ns - (raw.mean_ns - 44.0)).abs() < 1e-9);
    }

    #[test]
    fn meta_round_trip_and_old_shapes() {
        let floor = FloorDistribution::from_durations(&[10, 11, 12]).expect("floor");
        let cal = Calibration {
            status: CalibrationStatus::Ok,
            detail: None,
            functions: vec!["bpf_fentry_test1".into()],
            calls: 3,
            method: METHOD.into(),
            floors: vec![Floor {
                took_ns: 5,
                ..Floor::for_tests(Some(floor.clone()))
            }],
        }
        .settled();
        let v = serde_json::to_value(&cal).expect("json");
        assert_eq!(v["floors"][0]["floor"]["median_ns"], 11.0);
        assert_eq!(v["status"], "ok");
        let back = Calibration::from_meta(Some(&v)).expect("reads back");
        assert_eq!(back, cal);
        assert_eq!(
            back.floor(Attach::Fentry, Mode::Stream)
                .and_then(|f| f.floor.as_ref()),
            Some(&floor)
        );
        assert_eq!(back.floor(Attach::Kprobe, Mode::Stream), None);
        assert_eq!(back.floor(Attach::Fentry, Mode::Kernel), None);
        // Absent (captures before calibration) and foreign shapes read as uncalibrated.
        assert_eq!(Calibration::from_meta(None), None);
        assert_eq!(
            Calibration::from_meta(Some(&serde_json::json!({"fentry": 40}))),
            None
        );
        let skipped = Calibration::not_run(CalibrationStatus::Skipped, "x".into());
        let v = serde_json::to_value(&skipped).expect("json");
        assert_eq!(v["status"], "skipped");
        assert_eq!(v["detail"], "x");
    }

    #[test]
    fn uncertainty_adds_the_spread_between_functions() {
        // Four functions with medians 690, 720, 700, 670: s = 20.82, t(0.975, 3) = 3.182,
        // √(1 + 1/4) = 1.118: a new function's median within ± 74.1 ns.
        let medians = [690.0, 720.0, 700.0, 670.0];
        let b = prediction_half_width(&medians);
        assert!((b - 74.07).abs() < 0.05, "{b}");
        assert_eq!(prediction_half_width(&[700.0]), 0.0);
        assert_eq!(prediction_half_width(&[5.0, 5.0, 5.0]), 0.0);
        let dist = FloorDistribution::from_durations(&(650..=750).collect::<Vec<u64>>());
        let mut f = Floor {
            functions: medians
                .iter()
                .enumerate()
                .map(|(i, &m)| FunctionMedian {
                    function: format!("bpf_fentry_test{}", i + 1),
                    count: 10,
                    median_ns: m,
                })
                .collect(),
            held_out: Some(HeldOut {
                function: "bpf_fentry_test3".into(),
                count: 10,
                median_ns: 640.0,
                corrected_median_ns: -60.0,
                uncertainty_ns: 0.0,
            }),
            ..Floor::for_tests(dist)
        };
        f.settle_uncertainty();
        let spread = f.floor.as_ref().expect("floor").spread_ns;
        assert_eq!(spread, 45.0);
        assert!((f.uncertainty_ns - spread.hypot(b)).abs() < 1e-9);
        assert_eq!(
            f.held_out.as_ref().map(|h| h.uncertainty_ns),
            Some(f.uncertainty_ns)
        );
    }

    /// The prediction bound's coverage, simulated with a known answer: four function medians
    /// and a fifth, new one from one normal distribution; the fifth must fall inside
    /// `t(0.975, 3) · s · √(1 + 1/4)` of the four's mean 95 % of the time (10 000 trials: the
    /// standard error of the rate is 0.22 points; the band is ±4.5 of them).
    #[test]
    fn prediction_bound_covers_95_percent_of_new_functions() {
        let mut rng = crate::stats::rng::Rng::new(0x05ee_dca1);
        let trials = 10_000;
        let mut inside = 0;
        for _ in 0..trials {
            let v: Vec<f64> = (0..4).map(|_| 270.0 + 12.0 * rng.normal()).collect();
            let mean = v.iter().sum::<f64>() / 4.0;
            let new = 270.0 + 12.0 * rng.normal();
            if (new - mean).abs() <= prediction_half_width(&v) {
                inside += 1;
            }
        }
        let rate = f64::from(inside) / f64::from(trials);
        eprintln!(
            "prediction bound: {:.2} % of new functions inside",
            rate * 100.0
        );
        assert!((0.94..=0.96).contains(&rate), "coverage {rate}");
    }

    /// The whole floor, simulated with a known answer through the code `calibrate` runs
    /// (`from_durations`, per-function medians, `settle_uncertainty`): eight empty functions
    /// whose probe costs differ by a per-function offset (sd `between`), each call adding
    /// right-skewed noise (gamma, as TCG's floors are); seven are pooled, the eighth is held
    /// out as `vm_calibrate.rs` does. At the stated ± the held-out function's corrected median
    /// must be inside 95 % of the time (less two standard errors of the simulation), and at twice the ± (what the guest test
    /// allows, six checks per run) at least 99.15 % of the time (so that all six pass in at
    /// least 95 % of runs) — both when the per-call spread dominates (as measured under TCG)
    /// and when the between-function term does (where the spread cannot hide a bound that is
    /// too narrow).
    #[test]
    fn floor_uncertainty_covers_a_held_out_function() {
        let mut rng = crate::stats::rng::Rng::new(0x000f_1004);
        // Few calls per function keep the test quick in a debug build; the medians' own
        // noise only widens what the held-out function varies by, so this is the harder case.
        // (sd of the per-function offset, scale of the per-call noise), ns.
        for (between, noise) in [(12.0, 30.0), (60.0, 3.0)] {
            let trials = 1_200;
            let (mut at_1, mut at_2) = (0, 0);
            for _ in 0..trials {
                let mut per_fn: Vec<Vec<u64>> = (0..8)
                    .map(|_| {
                        let offset = between * rng.normal();
                        (0..101)
                            .map(|_| (250.0 + offset + noise * rng.gamma(2.0)).max(1.0) as u64)
                            .collect()
                    })
                    .collect();
                let held = per_fn.pop().expect("eight");
                let pooled: Vec<u64> = per_fn.iter().flatten().copied().collect();
                let mut floor = Floor::for_tests(FloorDistribution::from_durations(&pooled));
                floor.functions = per_fn
                    .iter()
                    .enumerate()
                    .map(|(i, d)| FunctionMedian {
                        function: format!("f{i}"),
                        count: d.len() as u64,
                        median_ns: FloorDistribution::from_durations(d)
                            .expect("calls")
                            .median_ns,
                    })
                    .collect();
                floor.settle_uncertainty();
                let held_median = FloorDistribution::from_durations(&held)
                    .expect("calls")
                    .median_ns;
                let off = floor.correct(held_median).abs();
                at_1 += u32::from(off <= floor.uncertainty_ns);
                at_2 += u32::from(off <= 2.0 * floor.uncertainty_ns);
            }
            let (r1, r2) = (
                f64::from(at_1) / f64::from(trials),
                f64::from(at_2) / f64::from(trials),
            );
            eprintln!(
                "between sd {between} ns, noise scale {noise} ns: held-out inside ± in {:.2} %, \
                 inside 2 × ± in {:.2} %",
                r1 * 100.0,
                r2 * 100.0
            );
            // 95 % less two standard errors of a rate over `trials` (0.63 points).
            assert!(r1 >= 0.937, "between {between}, noise {noise}: {r1} at ±");
            assert!(
                r2 >= 0.9915,
                "between {between}, noise {noise}: {r2} at 2 × ±"
            );
        }
    }
}
