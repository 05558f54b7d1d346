//! Where a function's time went (captures with the time breakdown, `record --disturbance`):
//! the share of its calls' summed wall time spent off the CPU, in interrupts and on the CPU,
//! and its on-CPU percentiles beside the wall ones (pure).
use damon_common::CallRecord;
use serde::Serialize;

use crate::stats::LatencyStats;

/// One function's breakdown over the calls `--cpu`/`--pid` select.
#[derive(Debug, Clone, Serialize)]
pub struct BreakdownSummary {
    /// Calls whose breakdown is known: what every number below is over.
    pub calls: u64,
    /// Calls whose breakdown is unknown (no task clock, entry snapshot lost, or a part of
    /// 4.3 s or more): counted here, in none of the numbers.
    pub unknown: u64,
    pub wall_sum_ns: u64,
    pub off_cpu_sum_ns: u64,
    pub irq_sum_ns: u64,
    pub on_cpu_sum_ns: u64,
    /// Shares of `wall_sum_ns`, percent (0 without time).
    pub off_cpu_pct: f64,
    pub irq_pct: f64,
    pub on_cpu_pct: f64,
    /// Wall-time percentiles of these calls.
    pub wall: Option<LatencyStats>,
    /// On-CPU percentiles of the same calls.
    pub on_cpu: Option<LatencyStats>,
}

/// The breakdown of these records (those with an unknown one counted apart); `None` without
/// records.
pub fn summarize<'r>(
    records: impl IntoIterator<Item = &'r CallRecord>,
) -> Option<BreakdownSummary> {
    let (mut unknown, mut wall, mut on) = (0, Vec::new(), Vec::new());
    let (mut off_sum, mut irq_sum) = (0u64, 0u64);
    for r in records {
        match r.breakdown() {
            Some(b) => {
                wall.push(b.wall_ns);
                on.push(b.on_cpu_ns);
                off_sum += b.off_cpu_ns;
                irq_sum += b.irq_ns;
            }
            None => unknown += 1,
        }
    }
    if wall.is_empty() && unknown == 0 {
        return None;
    }
    let wall_sum: u64 = wall.iter().sum();
    let on_sum: u64 = on.iter().sum();
    let pct = |v: u64| {
        if wall_sum == 0 {
            0.0
        } else {
            v as f64 * 100.0 / wall_sum as f64
        }
    };
    Some(BreakdownSummary {
        calls: wall.len() as u64,
        unknown,
        wall_sum_ns: wall_sum,
        off_cpu_sum_ns: off_sum,
        irq_sum_ns: irq_sum,
        on_cpu_sum_ns: on_sum,
        off_cpu_pct: pct(off_sum),
        irq_pct: pct(irq_sum),
        on_cpu_pct: pct(on_sum),
        wall: LatencyStats::from_durations(&mut wall),
        on_cpu: LatencyStats::from_durations(&mut on),
    })
}
