//! The runs of each side: which functions they traced, each run's selected calls, counters,
//! histogram and summary, and the side pooled (pure).
use std::collections::BTreeMap;

use damon_common::{FunctionId, attach::Attach};

use super::{CaptureSide, PERCENTILES, SideMeta, SideStats, intervals, kernel, runs};
use crate::{
    analysis::{
        Selected, counters,
        disturbance::{self, Disturbance},
    },
    capture::{Capture, FunctionCounters, KernelHist},
    stats::{
        LatencyStats,
        calibration::{Calibration, Corrected},
        intervals::PerInterval,
    },
};

pub fn side_meta(runs: &[(&str, &Capture)]) -> SideMeta {
    let captures: Vec<CaptureSide> = runs
        .iter()
        .map(|&(file, c)| CaptureSide {
            file: file.to_owned(),
            kernel_release: c.meta.kernel.release.clone(),
            cpu_model: c.meta.cpu_model.clone(),
            duration_ns: c.summary.as_ref().map(|s| s.duration_ns),
            complete: c.summary.is_some(),
            disturbance: disturbance::status(c),
        })
        .collect();
    SideMeta {
        runs: captures.len(),
        kernel_release: distinct(captures.iter().map(|c| c.kernel_release.as_str())).join(", "),
        cpu_model: distinct(captures.iter().map(|c| c.cpu_model.as_str())).join(", "),
        captures,
    }
}

/// The different values, in order of first appearance.
pub fn distinct<T: PartialEq>(values: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut v = Vec::new();
    for x in values {
        if !v.contains(&x) {
            v.push(x);
        }
    }
    v
}

/// Names of the functions a capture traced (attached one way or another), with id and method.
pub fn traced(c: &Capture) -> Vec<(&str, u32, Attach)> {
    c.meta
        .functions
        .iter()
        .filter_map(|f| Some((f.name.as_str(), f.id, f.attach.attach()?)))
        .collect()
}

/// One run of one function, ready to compare.
pub struct Run<'a> {
    pub file: &'a str,
    pub capture: &'a Capture,
    pub id: u32,
    pub attach: Attach,
    pub selected: Selected,
    pub counters: FunctionCounters,
    /// The run's histogram on the kernel's grid (a kernel-mode capture on either side).
    pub kernel: Option<KernelHist>,
    /// Cost per DAMON aggregation interval (DAMON functions, per-call records, boundaries).
    pub per_interval: Option<PerInterval>,
}

impl Run<'_> {
    /// The per-interval numbers of the runs that have them.
    pub fn intervals<'r>(runs: &'r [Run]) -> Vec<&'r PerInterval> {
        runs.iter()
            .filter_map(|r| r.per_interval.as_ref())
            .collect()
    }

    pub fn summary(&self) -> runs::RunSummary {
        let d = &self.selected.durations;
        let seconds = self
            .capture
            .summary
            .as_ref()
            .map(|s| s.duration_ns as f64 / 1e9)
            .filter(|&s| s > 0.0);
        let mean_ns = match &self.kernel {
            Some(h) if h.count > 0 => Some(h.sum_ns as f64 / h.count as f64),
            _ if !d.is_empty() => Some(d.iter().map(|&v| v as f64).sum::<f64>() / d.len() as f64),
            _ => None,
        };
        let calls = self.counters.made();
        runs::RunSummary {
            file: self.file.to_owned(),
            calls,
            matched: d.len() as u64,
            dropped: self.counters.dropped(),
            seconds,
            calls_per_s: seconds.map(|s| calls as f64 / s),
            calls_per_interval: self.per_interval.as_ref().map(|p| p.mean_calls),
            percentiles: PERCENTILES
                .iter()
                .map(|&(p, _)| {
                    crate::stats::runs::enough_tail(d.len(), p)
                        .then(|| crate::stats::percentile(d, p))
                        .flatten()
                })
                .collect(),
            p50_ns: crate::stats::percentile(d, 50.0),
            mean_ns,
        }
    }
}

/// The runs of one side that traced `name`, with their selected calls.
pub fn side_runs<'a>(
    name: &str,
    side: &[(&'a str, &'a Capture)],
    selected: &mut [BTreeMap<u32, Selected>],
    resolution: Option<kernel::Resolution>,
) -> Vec<Run<'a>> {
    side.iter()
        .zip(selected.iter_mut())
        .filter_map(|(&(file, c), sel)| {
            let &(_, id, attach) = traced(c).iter().find(|f| f.0 == name)?;
            let selected = sel.remove(&id).unwrap_or_default();
            let (selected, counters, kernel) = match resolution {
                Some(res) => {
                    let k = kernel::side(c, id, selected, res);
                    (k.selected, k.counters, Some(k.hist))
                }
                None => {
                    let counters = counters(c, id, selected.count);
                    (selected, counters, None)
                }
            };
            let per_interval = FunctionId::from_symbol(name)
                .filter(|f| f.is_damon() && kernel.is_none())
                .and_then(|_| intervals::of_run(c, id));
            Some(Run {
                file,
                capture: c,
                id,
                attach,
                selected,
                counters,
                kernel,
                per_interval,
            })
        })
        .collect()
}

/// The pooled side: counters added, calls put together (sorted), histograms added on the
/// grid.
pub fn pooled(runs: &[Run], attach: Attach) -> (SideStats, Vec<u64>, Option<KernelHist>) {
    let mut durations: Vec<u64> = runs
        .iter()
        .flat_map(|r| r.selected.durations.iter().copied())
        .collect();
    let hists: Option<Vec<&KernelHist>> = runs.iter().map(|r| r.kernel.as_ref()).collect();
    let merged = hists.map(|h| kernel::merge(&h));
    let stats = match &merged {
        Some(h) => kernel::stats(&mut durations, h),
        None => LatencyStats::from_durations(&mut durations),
    };
    let corrected = runs
        .iter()
        .find_map(|r| corrected(r.capture, attach, stats.as_ref()));
    let (disturbance, clean_percentiles) = pooled_disturbance(runs);
    (
        SideStats {
            attach: attach.as_str(),
            calls: runs.iter().map(|r| r.counters.made()).sum(),
            count: runs.iter().map(|r| r.selected.count).sum(),
            dropped: runs.iter().map(|r| r.counters.dropped()).sum(),
            matched: durations.len() as u64,
            corrected,
            stats,
            disturbance,
            clean_percentiles,
            set_aside: None,
        },
        durations,
        merged,
    )
}

/// The runs' disturbance added up and the latencies of their clean calls pooled, when every
/// run measured disturbance (a side partly measured would mix clean and unknown calls).
fn pooled_disturbance(runs: &[Run]) -> (Option<Disturbance>, Option<LatencyStats>) {
    if runs.is_empty()
        || !runs
            .iter()
            .all(|r| disturbance::not_measured(r.capture).is_none())
    {
        return (None, None);
    }
    let mut d = Disturbance::default();
    runs.iter().for_each(|r| d.merge(&r.selected.disturbance));
    let mut clean: Vec<u64> = runs
        .iter()
        .flat_map(|r| r.selected.clean_durations.iter().copied())
        .collect();
    (Some(d), LatencyStats::from_durations(&mut clean))
}

/// Each run's share of its calls in each row (min and max over runs, percent), when a side has
/// several runs.
pub fn row_spread(rows: &[(u64, Option<u64>)], runs: &[Run]) -> Vec<Option<[f64; 2]>> {
    rows.iter()
        .map(|&(lo, hi)| {
            let shares: Vec<f64> = runs
                .iter()
                .filter(|r| !r.selected.durations.is_empty())
                .map(|r| {
                    let d = &r.selected.durations;
                    let below = |x: u64| d.partition_point(|&v| v < x);
                    let n = hi.map_or(d.len(), below) - below(lo);
                    n as f64 * 100.0 / d.len() as f64
                })
                .collect();
            runs::spread(&shares)
        })
        .collect()
}

/// A side's latencies minus its own capture's probe floor (for the attach method and the
/// capture's trace mode), when it was calibrated.
fn corrected(c: &Capture, attach: Attach, stats: Option<&LatencyStats>) -> Option<Corrected> {
    let floor = Calibration::from_meta(c.meta.calibration.as_ref())?
        .floor(attach, c.meta.mode)
        .cloned()?;
    Some(Corrected::new(&floor, stats?))
}
