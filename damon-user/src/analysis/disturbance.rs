//! Which calls the CPU was taken from (see `damon_common::disturb`): each record sorted into
//! clean or the one reason it was disturbed, counted per function, so that `report`,
//! `compare`, `export`, `serve` and `live` state the same fractions and can set the disturbed
//! calls apart from the clean ones.
use damon_common::CallRecord;
use serde::Serialize;

use crate::capture::{Capture, DisturbanceStatus, KernelDisturbed, KernelHist};

pub use damon_common::disturb::Class;

/// How many of a function's calls were clean, and why the others were not.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(into = "Shown")]
pub struct Disturbance {
    pub clean: u64,
    pub slept: u64,
    pub preempted: u64,
    /// Interrupted only: the call kept its task on the CPU.
    pub interrupted: u64,
    /// Disturbed, the reason unknown (the entry snapshot was lost).
    pub lost: u64,
}

impl Disturbance {
    /// Counts one record.
    pub fn add(&mut self, r: &CallRecord) {
        *match r.class() {
            Class::Clean => &mut self.clean,
            Class::Lost => &mut self.lost,
            Class::Slept => &mut self.slept,
            Class::Preempted => &mut self.preempted,
            Class::Interrupted => &mut self.interrupted,
        } += 1;
    }

    /// Adds another count (the runs of a side, pooled).
    pub fn merge(&mut self, o: &Disturbance) {
        self.clean += o.clean;
        self.slept += o.slept;
        self.preempted += o.preempted;
        self.interrupted += o.interrupted;
        self.lost += o.lost;
    }

    /// The counts of `records` (tests; the commands count as they select records).
    #[cfg(test)]
    pub fn of<'a>(records: impl IntoIterator<Item = &'a CallRecord>) -> Disturbance {
        let mut d = Disturbance::default();
        records.into_iter().for_each(|r| d.add(r));
        d
    }

    /// Calls counted.
    pub fn calls(&self) -> u64 {
        self.clean + self.disturbed()
    }

    /// Calls not clean, every reason added up.
    pub fn disturbed(&self) -> u64 {
        self.slept + self.preempted + self.interrupted + self.lost
    }

    /// Clean calls over all calls; `None` without calls.
    pub fn clean_fraction(&self) -> Option<f64> {
        let n = self.calls();
        (n > 0).then(|| self.clean as f64 / n as f64)
    }

    /// `disturbed 3.20% of 1000 calls (slept 10, preempted 5, interrupted only 17, snapshot
    /// lost 0)`: the text every renderer shows.
    pub fn describe(&self) -> String {
        format!(
            "disturbed {} of {} calls (slept {}, preempted {}, interrupted only {}, snapshot \
             lost {})",
            crate::render::percent(self.disturbed(), self.calls()),
            self.calls(),
            self.slept,
            self.preempted,
            self.interrupted,
            self.lost
        )
    }
}

impl KernelHist {
    /// The histogram's calls sorted into clean and the reasons (kernel mode); `None` when the
    /// capture did not measure disturbance.
    pub fn disturbance(&self) -> Option<Disturbance> {
        let d = self.disturbed.as_ref()?;
        let disturbed = d.slept + d.preempted + d.interrupted + d.lost;
        Some(Disturbance {
            clean: self.buckets.iter().sum::<u64>().saturating_sub(disturbed),
            slept: d.slept,
            preempted: d.preempted,
            interrupted: d.interrupted,
            lost: d.lost,
        })
    }

    /// The clean calls' histogram: the buckets less the disturbed calls', count and sum less
    /// theirs (exact). Their min and max are known to their buckets only: the edges of the
    /// first and last non-empty clean bucket, narrowed by the whole histogram's exact min and
    /// max. `None` when not measured.
    pub fn clean(&self) -> Option<KernelHist> {
        let d = self.disturbed.as_ref()?;
        let disturbed = d.slept + d.preempted + d.interrupted + d.lost;
        let buckets: Vec<u64> = self
            .buckets
            .iter()
            .enumerate()
            .map(|(i, &n)| n.saturating_sub(d.buckets.get(i).copied().unwrap_or(0)))
            .collect();
        let edge = |i: usize| damon_common::hist_bucket_bounds(i as u32, self.width_ns);
        let (min_ns, max_ns) = match (
            buckets.iter().position(|&n| n > 0),
            buckets.iter().rposition(|&n| n > 0),
        ) {
            (Some(f), Some(l)) => (
                edge(f).0.max(self.min_ns),
                edge(l).1.saturating_sub(1).min(self.max_ns),
            ),
            _ => (0, 0),
        };
        Some(KernelHist {
            count: self.count.saturating_sub(disturbed),
            sum_ns: self.sum_ns.saturating_sub(d.sum_ns),
            min_ns,
            max_ns,
            width_ns: self.width_ns,
            buckets,
            disturbed: None,
        })
    }
}

impl KernelDisturbed {
    /// Adds another histogram's disturbed calls (bucket for bucket).
    pub fn merge(&mut self, o: &KernelDisturbed) {
        self.slept += o.slept;
        self.preempted += o.preempted;
        self.interrupted += o.interrupted;
        self.lost += o.lost;
        self.sum_ns += o.sum_ns;
        if self.buckets.len() < o.buckets.len() {
            self.buckets.resize(o.buckets.len(), 0);
        }
        for (b, &n) in self.buckets.iter_mut().zip(&o.buckets) {
            *b += n;
        }
    }

    /// `self - earlier` (two cumulative snapshots), never below zero.
    pub fn since(&self, earlier: Option<&KernelDisturbed>) -> KernelDisturbed {
        let Some(e) = earlier else {
            return self.clone();
        };
        KernelDisturbed {
            slept: self.slept.saturating_sub(e.slept),
            preempted: self.preempted.saturating_sub(e.preempted),
            interrupted: self.interrupted.saturating_sub(e.interrupted),
            lost: self.lost.saturating_sub(e.lost),
            sum_ns: self.sum_ns.saturating_sub(e.sum_ns),
            buckets: self
                .buckets
                .iter()
                .enumerate()
                .map(|(i, &n)| n.saturating_sub(e.buckets.get(i).copied().unwrap_or(0)))
                .collect(),
        }
    }
}

/// [`Disturbance`] as JSON: the counts and the clean fraction.
#[derive(Serialize)]
struct Shown {
    clean: u64,
    slept: u64,
    preempted: u64,
    interrupted: u64,
    lost: u64,
    /// `clean` over all five; `null` without calls.
    clean_fraction: Option<f64>,
}

impl From<Disturbance> for Shown {
    fn from(d: Disturbance) -> Shown {
        Shown {
            clean: d.clean,
            slept: d.slept,
            preempted: d.preempted,
            interrupted: d.interrupted,
            lost: d.lost,
            clean_fraction: d.clean_fraction(),
        }
    }
}

/// Why a capture's records say nothing about disturbance (`None`: they do).
pub fn not_measured(capture: &Capture) -> Option<String> {
    if DisturbanceStatus::measured(&capture.meta) {
        return None;
    }
    Some(
        capture
            .meta
            .disturbance
            .as_ref()
            .and_then(|d| d.why_not.clone())
            .unwrap_or_else(|| {
                if capture.meta.disturbance.is_none() {
                    "the capture was written before damon-trace measured it".to_owned()
                } else {
                    "the recorder did not say why".to_owned()
                }
            }),
    )
}

/// The capture's disturbance status as reports state it: the metadata's, with `why_not`
/// filled in for captures written before it existed.
pub fn status(capture: &Capture) -> DisturbanceStatus {
    let stated = capture.meta.disturbance.clone().unwrap_or_default();
    DisturbanceStatus {
        measured: DisturbanceStatus::measured(&capture.meta),
        why_not: not_measured(capture),
        breakdown: DisturbanceStatus::breakdown(&capture.meta),
        ..stated
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(d: [u16; 4]) -> CallRecord {
        let mut r = CallRecord::default();
        r.set_disturbance(d);
        r
    }

    #[test]
    fn each_call_counts_once_for_its_first_reason() {
        use damon_common::disturb::{LOST, SATURATED, UNKNOWN};
        let records = [
            rec([0, 0, 0, 0]),
            rec([0, 0, 0, 0]),
            rec([1, 2, UNKNOWN, UNKNOWN]),
            rec([SATURATED, 0, UNKNOWN, UNKNOWN]),
            rec([0, 1, UNKNOWN, UNKNOWN]),
            rec([0, 0, 3, 0]),
            rec([0, 0, 0, SATURATED]),
            rec(LOST),
        ];
        let d = Disturbance::of(&records);
        assert_eq!(
            d,
            Disturbance {
                clean: 2,
                slept: 2,
                preempted: 1,
                interrupted: 2,
                lost: 1,
            }
        );
        assert_eq!((d.calls(), d.disturbed()), (8, 6));
        assert_eq!(d.clean_fraction(), Some(0.25));
        assert_eq!(
            d.describe(),
            "disturbed 75.00% of 8 calls (slept 2, preempted 1, interrupted only 2, snapshot \
             lost 1)"
        );
        let json = serde_json::to_value(d).expect("json");
        assert_eq!(json["clean_fraction"], 0.25);
        assert_eq!(json["interrupted"], 2);
        let mut twice = d;
        twice.merge(&d);
        assert_eq!((twice.calls(), twice.clean_fraction()), (16, Some(0.25)));
        assert_eq!(Disturbance::default().clean_fraction(), None);
    }

    #[test]
    fn a_kernel_histogram_is_split_into_clean_and_disturbed_calls() {
        let mut h = crate::stats::kernel_hist::from_durations(&[100, 105, 230, 5_000, 9_000], 10);
        assert_eq!((h.disturbance(), h.clean()), (None, None));
        let mut buckets = vec![0; h.buckets.len()];
        buckets[damon_common::hist_bucket(5_000, 10) as usize] = 1;
        buckets[damon_common::hist_bucket(9_000, 10) as usize] = 1;
        h.disturbed = Some(KernelDisturbed {
            slept: 1,
            interrupted: 1,
            sum_ns: 14_000,
            buckets,
            ..Default::default()
        });
        let d = h.disturbance().expect("measured");
        assert_eq!((d.clean, d.slept, d.interrupted, d.calls()), (3, 1, 1, 5));
        let clean = h.clean().expect("measured");
        assert_eq!((clean.count, clean.sum_ns), (3, 435));
        // Min and max to their buckets: 100 exact (the whole's min), 239 the bucket's top.
        assert_eq!((clean.min_ns, clean.max_ns), (100, 239));
        assert_eq!(clean.buckets.iter().sum::<u64>(), 3);
        let p = crate::stats::kernel_hist::latency(&clean).expect("calls");
        assert_eq!(p.p99.label(), "230-239");
        let mut twice = h.disturbed.clone().expect("measured");
        twice.merge(&twice.clone());
        assert_eq!((twice.slept, twice.sum_ns), (2, 28_000));
        assert_eq!(
            twice.since(h.disturbed.as_ref()),
            h.disturbed.clone().expect("measured")
        );
    }
}
