//! Each tracer's cost above the floors, paired by round: how much of our added cost is the
//! kernel's attach path and the stamp every exact timing keeps, and how much is our programs'.
use std::fmt::Write as _;

use serde_json::{Value, json};

use super::{
    stats,
    table::{Config, Run},
};

/// A tracer's added cost over a floor's: the mean over rounds of (its ns/call − the floor's in
/// the same round), with a t interval over those paired differences (rounds as the unit).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AboveFloor {
    pub config: Config,
    pub floor: Config,
    pub mean_ns: f64,
    /// Half-width of the 95 % interval of the mean (t with rounds − 1 df).
    pub half_width_ns: f64,
    pub rounds: usize,
}

impl AboveFloor {
    /// Which tracer is compared with which floor: ours with the floor of its attach method
    /// and with the stamp floor (and, kprobe, the record floor); the kprobe floor with the
    /// fentry floor (what the kernel's kprobe path costs over its fentry path, the same two
    /// clock reads in both); each stamp floor with its attach method's floor (what the
    /// per-task stamp costs); and the record floor with the kprobe stamp floor (what a ring
    /// record per call costs); the session floor with the kprobe floor (the kernel's session
    /// path and cookie over its kprobe path) and with the kprobe stamp floor (the two ways to
    /// time a call exactly on a preemptible kernel), the session record floor with the kprobe
    /// record floor, and the fsession floor with the fentry floor (what the cookie costs on
    /// the trampoline) and the fentry stamp floor (the exact fentry timing it replaces); our
    /// session tracers with their session floors (stream: with the record); and each tracer
    /// with `--disturbance` with the same tracer without it (what the snapshots cost); with
    /// `--slow` and no call slow, the same tracer without it (what the check costs), and with
    /// every call slow, the draining tracer without it (what a stack per call costs).
    pub const PAIRS: [(Config, Config); 28] = [
        (Config::StreamFentry, Config::FloorFentry),
        (Config::KernelFentry, Config::FloorFentry),
        (Config::StreamKprobe, Config::FloorKprobe),
        (Config::StreamFentry, Config::FloorFentryStamp),
        (Config::KernelFentry, Config::FloorFentryStamp),
        (Config::StreamKprobe, Config::FloorKprobeStamp),
        (Config::StreamKprobe, Config::FloorKprobeStampRing),
        (Config::FloorKprobe, Config::FloorFentry),
        (Config::FloorFentryStamp, Config::FloorFentry),
        (Config::FloorKprobeStamp, Config::FloorKprobe),
        (Config::FloorKprobeStampRing, Config::FloorKprobeStamp),
        (Config::FloorSession, Config::FloorKprobe),
        (Config::FloorSession, Config::FloorKprobeStamp),
        (Config::FloorSessionRing, Config::FloorKprobeStampRing),
        (Config::FloorFsession, Config::FloorFentry),
        (Config::FloorFsession, Config::FloorFentryStamp),
        (Config::StreamKsession, Config::FloorSessionRing),
        (Config::KernelKsession, Config::FloorSession),
        (Config::StreamFsession, Config::FloorFsession),
        (Config::KernelFsession, Config::FloorFsession),
        (Config::StreamFentryDist, Config::StreamFentry),
        (Config::StreamKsessionDist, Config::StreamKsession),
        (Config::StreamFsessionDist, Config::StreamFsession),
        (Config::KernelFentryDist, Config::KernelFentry),
        (Config::KernelKsessionDist, Config::KernelKsession),
        (Config::KernelFsessionDist, Config::KernelFsession),
        (Config::StreamFentrySlow, Config::StreamFentry),
        (Config::StreamFentrySlowall, Config::StreamFentryReader),
    ];

    pub fn to_json(&self) -> Value {
        json!({
            "config": self.config.name(),
            "floor": self.floor.name(),
            "mean_ns": self.mean_ns,
            "ci95_half_width_ns": self.half_width_ns,
            "rounds": self.rounds,
        })
    }
}

/// [`AboveFloor`] for each of [`AboveFloor::PAIRS`] that ran in at least two rounds.
pub fn above_floor(runs: &[Run]) -> Vec<AboveFloor> {
    let in_round = |c: Config, round: u32| {
        runs.iter()
            .find(|r| r.config == c && r.round == round)
            .map(|r| r.ns_per_call)
    };
    AboveFloor::PAIRS
        .iter()
        .filter_map(|&(config, floor)| {
            let diffs: Vec<f64> = runs
                .iter()
                .filter(|r| r.config == config)
                .filter_map(|r| Some(r.ns_per_call - in_round(floor, r.round)?))
                .filter(|d| d.is_finite())
                .collect();
            let n = diffs.len();
            if n < 2 {
                return None;
            }
            let mean = diffs.iter().sum::<f64>() / n as f64;
            let var = diffs.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            Some(AboveFloor {
                config,
                floor,
                mean_ns: mean,
                half_width_ns: stats::t975(n - 1) * (var / n as f64).sqrt(),
                rounds: n,
            })
        })
        .collect()
}

/// The Markdown table of [`above_floor`], in `unit` (`ns`, or `insn` under the instruction
/// clock).
pub fn markdown(rows: &[AboveFloor], unit: &str) -> String {
    let mut s = format!(
        "| configuration | above | added {unit}/call, mean [95 % interval] | rounds |\n\
         |---|---|---:|---:|\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} [{:.0}, {:.0}] | {} |",
            r.config.describe(),
            r.floor.describe(),
            r.mean_ns,
            r.mean_ns - r.half_width_ns,
            r.mean_ns + r.half_width_ns,
            r.rounds
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run; what the tracer counted plays no part here.
    fn run(round: u32, config: Config, ns_per_call: f64) -> Run {
        let traced = None;
        Run {
            round,
            config,
            ns_per_call,
            traced,
        }
    }

    #[test]
    fn above_floor_pairs_each_round_with_its_own_floor_run() {
        let mut runs = Vec::new();
        // Rounds drift by 100 ns together; ours stays 300, 320, 340 ns above the fentry floor.
        for (round, base, extra) in [(1, 500.0, 300.0), (2, 600.0, 320.0), (3, 700.0, 340.0)] {
            runs.push(run(round, Config::FloorFentry, base));
            runs.push(run(round, Config::StreamFentry, base + extra));
            runs.push(run(round, Config::FloorKprobe, base + 400.0));
            runs.push(run(round, Config::StreamFentryDist, base + extra + 1000.0));
        }
        // A round whose floor run is missing is left out, not paired with another round's.
        runs.push(run(4, Config::StreamFentry, 5000.0));
        let above = above_floor(&runs);
        let stream = above
            .iter()
            .find(|a| a.config == Config::StreamFentry)
            .expect("stream/fentry above its floor");
        assert_eq!(stream.floor, Config::FloorFentry);
        assert_eq!(stream.rounds, 3);
        assert!((stream.mean_ns - 320.0).abs() < 1e-9, "{stream:?}");
        // sd of (300, 320, 340) is 20; t(0.975, 2) = 4.303; 4.303 · 20 / √3 = 49.69.
        assert!((stream.half_width_ns - 49.69).abs() < 0.01, "{stream:?}");
        let kprobe = above
            .iter()
            .find(|a| a.config == Config::FloorKprobe)
            .expect("the kprobe floor above the fentry floor");
        assert_eq!((kprobe.mean_ns, kprobe.half_width_ns), (400.0, 0.0));
        // With --disturbance, over the same tracer without it.
        let dist = above
            .iter()
            .find(|a| a.config == Config::StreamFentryDist)
            .expect("the snapshots' cost");
        assert_eq!(dist.floor, Config::StreamFentry);
        assert!((dist.mean_ns - 1000.0).abs() < 1e-9, "{dist:?}");
        // Configurations that did not run have no row.
        assert!(!above.iter().any(|a| a.config == Config::KernelFentry));
        let md = markdown(&above, "ns");
        assert!(
            md.contains("| damon-trace --mode stream --attach fentry (reader paused) | floor: fentry/fexit pair reading the clock once each | 320 [270, 370] | 3 |"),
            "{md}"
        );
    }
}
