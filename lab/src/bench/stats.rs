//! The benchmark's statistics: a 95 % interval for the ratio of two added costs measured in the
//! same rounds, and the verdict on a target.
//!
//! Rounds are the unit. In round i a configuration added `a_i` ns/call over the same round's
//! untraced loop and bpftrace added `b_i`; the quantity of interest is the ratio of the mean
//! added costs, R = E[a] / E[b]. Its interval is Fieller's: the set of R for which the paired
//! differences `d_i = a_i − R·b_i` are consistent with mean 0 by a two-sided t-test at 5 %
//! (n − 1 degrees of freedom). It uses each round's pairing (a slow round slows both loops and
//! cancels out), needs no log of a possibly negative per-round difference, and is exact for
//! normal round-to-round noise. When bpftrace's own added cost is not clearly above 0 the set
//! is unbounded, and the verdict is "unresolved".

/// A ratio's point estimate (ratio of the mean added costs) and its interval; `lo`/`hi` are
/// infinite when the interval is unbounded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatioInterval {
    pub estimate: f64,
    pub lo: f64,
    pub hi: f64,
    /// Units the interval rests on: rounds of one boot ([`ratio_interval`]) or boots
    /// ([`mean_interval`]).
    pub rounds: usize,
}

/// What an interval says about a target (an upper bound on the ratio).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The whole interval is under the target.
    Met,
    /// The whole interval is over the target.
    NotMet,
    /// The interval straddles the target (or is unbounded).
    Unresolved,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::NotMet => "not met",
            Verdict::Unresolved => "unresolved — run more rounds",
        }
    }
}

/// Two-sided 95 % quantile of Student's t with `df` degrees of freedom (`t_{0.975, df}`):
/// tabulated up to 30, Cornish–Fisher's expansion around the normal quantile beyond (error
/// < 1e-4 there).
pub fn t975(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => TABLE[df - 1],
        _ => {
            let z: f64 = 1.959_964;
            let n = df as f64;
            z + (z.powi(3) + z) / (4.0 * n)
                + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * n * n)
        }
    }
}

/// Fieller's 95 % interval for E[a] / E[b] from paired per-round values (see the module
/// documentation); `None` with fewer than two pairs.
pub fn ratio_interval(a: &[f64], b: &[f64]) -> Option<RatioInterval> {
    let n = a.len().min(b.len());
    if n < 2 {
        return None;
    }
    let (a, b) = (&a[..n], &b[..n]);
    let nf = n as f64;
    let ma = a.iter().sum::<f64>() / nf;
    let mb = b.iter().sum::<f64>() / nf;
    let cov = |x: &[f64], mx: f64, y: &[f64], my: f64| {
        x.iter()
            .zip(y)
            .map(|(x, y)| (x - mx) * (y - my))
            .sum::<f64>()
            / (nf - 1.0)
    };
    let (saa, sbb, sab) = (cov(a, ma, a, ma), cov(b, mb, b, mb), cov(a, ma, b, mb));
    let q = t975(n - 1).powi(2) / nf;
    // (ma − R·mb)² ≤ q·(saa − 2R·sab + R²·sbb)  ⇔  A·R² − 2B·R + C ≤ 0
    let qa = mb * mb - q * sbb;
    let qb = ma * mb - q * sab;
    let qc = ma * ma - q * saa;
    let estimate = if mb != 0.0 { ma / mb } else { f64::NAN };
    let (lo, hi) = if qa > 0.0 {
        // At R = ma/mb the left side is −q·(…) ≤ 0, so the roots are real.
        let root = (qb * qb - qa * qc).max(0.0).sqrt();
        ((qb - root) / qa, (qb + root) / qa)
    } else {
        (f64::NEG_INFINITY, f64::INFINITY)
    };
    Some(RatioInterval {
        estimate,
        lo,
        hi,
        rounds: n,
    })
}

/// The mean of one estimate per boot and its 95 % t interval over boots (B − 1 degrees of
/// freedom): boots as the unit, so whatever moves a whole boot (the host's load, where the
/// kernel landed in memory, the emulator's translation cache) is in the interval, which no
/// interval over the rounds of one boot can hold. Non-finite estimates are left out; `None`
/// with fewer than two boots left.
pub fn mean_interval(estimates: &[f64]) -> Option<RatioInterval> {
    let v: Vec<f64> = estimates
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .collect();
    let n = v.len();
    if n < 2 {
        return None;
    }
    let nf = n as f64;
    let mean = v.iter().sum::<f64>() / nf;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (nf - 1.0);
    let half = t975(n - 1) * (var / nf).sqrt();
    Some(RatioInterval {
        estimate: mean,
        lo: mean - half,
        hi: mean + half,
        rounds: n,
    })
}

/// The verdict of `interval` on the target "ratio ≤ `target`".
pub fn verdict(interval: &RatioInterval, target: f64) -> Verdict {
    if interval.hi < target {
        Verdict::Met
    } else if interval.lo > target {
        Verdict::NotMet
    } else {
        Verdict::Unresolved
    }
}

/// Roughly how many rounds would make an interval like `interval` clear `target` (its
/// half-width shrinks as 1/√rounds): rounds × (half-width / distance to the target)², rounded
/// up. `None` when the interval is unbounded or its estimate sits on the target.
pub fn rounds_to_resolve(interval: &RatioInterval, target: f64) -> Option<usize> {
    let half = (interval.hi - interval.lo) / 2.0;
    let gap = (interval.estimate - target).abs();
    if !half.is_finite() || gap == 0.0 || !gap.is_finite() {
        return None;
    }
    Some((interval.rounds as f64 * (half / gap).powi(2)).ceil() as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64 and Box–Muller: reproducible normal noise without a dependency.
    struct Noise(u64);

    impl Noise {
        fn uniform(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }

        fn normal(&mut self) -> f64 {
            let (u, v) = (self.uniform(), self.uniform());
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        }
    }

    /// One simulated benchmark: per round an untraced, a bpftrace and a configuration run of
    /// the loop, sharing the round's base time (which drifts a lot between rounds, as on a
    /// loaded host), each with its own run noise. Returns the per-round added costs (a, b).
    fn simulate(
        noise: &mut Noise,
        rounds: usize,
        cost_config: f64,
        cost_bpftrace: f64,
    ) -> (Vec<f64>, Vec<f64>) {
        let mut a = Vec::new();
        let mut b = Vec::new();
        for _ in 0..rounds {
            let base = 700.0 + 200.0 * noise.normal();
            let run = |noise: &mut Noise, cost: f64| base + cost + 25.0 * noise.normal();
            let untraced = run(noise, 0.0);
            b.push(run(noise, cost_bpftrace) - untraced);
            a.push(run(noise, cost_config) - untraced);
        }
        (a, b)
    }

    /// Several simulated boots of one benchmark: each boot's true ratio is `ratio` moved by
    /// a boot effect (relative sd `boot_sd`) that all of the boot's rounds share; returns each
    /// boot's Fieller interval from `rounds` rounds.
    fn simulate_boots(
        noise: &mut Noise,
        boots: usize,
        rounds: usize,
        ratio: f64,
        boot_sd: f64,
    ) -> Vec<RatioInterval> {
        (0..boots)
            .map(|_| {
                let boot_ratio = ratio * (1.0 + boot_sd * noise.normal());
                let (a, b) = simulate(noise, rounds, boot_ratio * 150.0, 150.0);
                ratio_interval(&a, &b).unwrap()
            })
            .collect()
    }

    /// With a boot effect larger than the rounds' noise, one boot's interval misses the
    /// ratio a kernel really has far more often than 5 %; the interval over three boots'
    /// estimates covers it at the stated rate.
    #[test]
    fn across_boots_the_interval_covers_what_one_boots_interval_misses() {
        let mut noise = Noise(2026);
        let trials = 4000;
        let (mut one_boot, mut across) = (0, 0);
        for _ in 0..trials {
            let boots = simulate_boots(&mut noise, 3, 10, 0.4, 0.3);
            if boots[0].lo <= 0.4 && 0.4 <= boots[0].hi {
                one_boot += 1;
            }
            let est: Vec<f64> = boots.iter().map(|b| b.estimate).collect();
            let iv = mean_interval(&est).unwrap();
            assert_eq!(iv.rounds, 3);
            if iv.lo <= 0.4 && 0.4 <= iv.hi {
                across += 1;
            }
        }
        let rate = |k: i32| f64::from(k) / f64::from(trials);
        assert!(rate(one_boot) < 0.85, "one boot covered {}", rate(one_boot));
        assert!(
            (0.935..=0.965).contains(&rate(across)),
            "three boots covered {}",
            rate(across)
        );
    }

    /// A/A over boots: a configuration that costs what bpftrace does in every boot is called
    /// "met" or "not met" on a target of 1.0 at most at the stated rate.
    #[test]
    fn equal_configurations_across_boots_are_wrongly_decided_at_most_at_the_stated_rate() {
        let mut noise = Noise(31337);
        assert_wrong_at_most_at_the_stated_rate((0..4000).map(|_| {
            let est: Vec<f64> = simulate_boots(&mut noise, 3, 8, 1.0, 0.0)
                .iter()
                .map(|b| b.estimate)
                .collect();
            mean_interval(&est).unwrap()
        }));
    }

    #[test]
    fn a_mean_over_boots_needs_two_finite_estimates() {
        assert!(mean_interval(&[0.5]).is_none());
        assert!(mean_interval(&[0.5, f64::NAN]).is_none());
        // Mean 0.5, sd 0.1, t(0.975, 2) = 4.303: ± 4.303 · 0.1 / √3 = 0.2484.
        let iv = mean_interval(&[0.4, 0.5, 0.6]).unwrap();
        assert!((iv.estimate - 0.5).abs() < 1e-12);
        assert!((iv.hi - 0.5 - 0.248_43).abs() < 1e-4, "{iv:?}");
        assert_eq!(iv.rounds, 3);
    }

    #[test]
    fn t_quantiles_match_the_tables() {
        assert_eq!(t975(1), 12.706);
        assert_eq!(t975(9), 2.262);
        // Published values for 40, 60 and 120 degrees of freedom.
        for (df, t) in [(40, 2.021), (60, 2.000), (120, 1.980)] {
            assert!((t975(df) - t).abs() < 1e-3, "df {df}: {}", t975(df));
        }
        assert!(t975(0).is_infinite());
    }

    #[test]
    fn an_exact_ratio_gives_a_point_interval_and_clear_verdicts() {
        let b = [100.0, 120.0, 80.0, 110.0];
        let a: Vec<f64> = b.iter().map(|x| x * 0.3).collect();
        let iv = ratio_interval(&a, &b).unwrap();
        assert!((iv.estimate - 0.3).abs() < 1e-12);
        assert!(
            (iv.lo - 0.3).abs() < 1e-9 && (iv.hi - 0.3).abs() < 1e-9,
            "{iv:?}"
        );
        assert_eq!(verdict(&iv, 0.4), Verdict::Met);
        assert_eq!(verdict(&iv, 0.2), Verdict::NotMet);
        assert!(ratio_interval(&a[..1], &b[..1]).is_none());
    }

    #[test]
    fn rounds_to_resolve_scale_with_the_squared_width() {
        let iv = RatioInterval {
            estimate: 0.35,
            lo: 0.25,
            hi: 0.45,
            rounds: 10,
        };
        // Half-width 0.1 at 10 rounds, 0.05 from the target: four times the rounds.
        assert_eq!(rounds_to_resolve(&iv, 0.4), Some(40));
        let unbounded = RatioInterval {
            lo: f64::NEG_INFINITY,
            hi: f64::INFINITY,
            ..iv
        };
        assert_eq!(rounds_to_resolve(&unbounded, 0.4), None);
        assert_eq!(rounds_to_resolve(&iv, 0.35), None);
    }

    #[test]
    fn a_reference_that_added_nothing_clearly_leaves_the_ratio_unbounded() {
        let b = [5.0, -5.0, 4.0, -4.0];
        let a = [50.0, 52.0, 48.0, 51.0];
        let iv = ratio_interval(&a, &b).unwrap();
        assert!(iv.lo.is_infinite() && iv.hi.is_infinite(), "{iv:?}");
        assert_eq!(verdict(&iv, 0.4), Verdict::Unresolved);
    }

    #[test]
    fn the_interval_covers_the_true_ratio_95_percent_of_the_time() {
        let mut noise = Noise(17);
        let trials = 4000;
        let covered = (0..trials)
            .filter(|_| {
                let (a, b) = simulate(&mut noise, 10, 60.0, 150.0);
                let iv = ratio_interval(&a, &b).unwrap();
                iv.lo <= 0.4 && 0.4 <= iv.hi
            })
            .count();
        let rate = covered as f64 / trials as f64;
        // Binomial sd at 95 % over 4000 trials is 0.34 %: 93.5–96.5 % is ±4 sd.
        assert!((0.935..=0.965).contains(&rate), "coverage {rate}");
    }

    /// A/A: a configuration that costs exactly what bpftrace does, judged against a target
    /// of 1.0, must be called "met" or "not met" at most at the stated 5 % (2.5 % each way).
    #[test]
    fn equal_configurations_are_wrongly_decided_at_most_at_the_stated_rate() {
        let mut noise = Noise(4242);
        assert_wrong_at_most_at_the_stated_rate((0..4000).map(|_| {
            let (a, b) = simulate(&mut noise, 8, 150.0, 150.0);
            ratio_interval(&a, &b).unwrap()
        }));
    }

    /// A/A intervals (true ratio 1.0) judged on a target of 1.0: "met" and "not met" each at
    /// most 3.5 % of the time (2.5 % stated), both together at most 6 % (5 % stated).
    fn assert_wrong_at_most_at_the_stated_rate(intervals: impl Iterator<Item = RatioInterval>) {
        let (mut met, mut not_met, mut trials) = (0, 0, 0);
        for iv in intervals {
            trials += 1;
            match verdict(&iv, 1.0) {
                Verdict::Met => met += 1,
                Verdict::NotMet => not_met += 1,
                Verdict::Unresolved => {}
            }
        }
        let rate = |k: i32| f64::from(k) / f64::from(trials);
        assert!(
            rate(met) <= 0.035 && rate(not_met) <= 0.035,
            "{met} met, {not_met} not met of {trials}"
        );
        assert!(
            rate(met + not_met) <= 0.06,
            "{met} met, {not_met} not met of {trials}"
        );
    }

    /// With enough rounds, a configuration clearly under or over its target is decided so
    /// almost always, and a wrong way never.
    #[test]
    fn clear_cases_are_decided_the_right_way() {
        let mut noise = Noise(99);
        for (cost, want) in [(30.0, Verdict::Met), (100.0, Verdict::NotMet)] {
            let got: Vec<Verdict> = (0..500)
                .map(|_| {
                    let (a, b) = simulate(&mut noise, 15, cost, 150.0);
                    verdict(&ratio_interval(&a, &b).unwrap(), 0.4)
                })
                .collect();
            let right = got.iter().filter(|v| **v == want).count();
            let wrong = got
                .iter()
                .filter(|v| **v != want && **v != Verdict::Unresolved)
                .count();
            assert!(
                right >= 475 && wrong == 0,
                "cost {cost}: {right} right, {wrong} wrong"
            );
        }
    }
}
