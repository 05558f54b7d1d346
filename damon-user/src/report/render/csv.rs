//! The report as CSV: one row per function.
use std::fmt::Write as _;

use crate::analysis::Report;

/// One CSV row per function (kernel symbol names and attach states never need quoting).
pub fn csv(r: &Report) -> String {
    let mut out = String::from(
        "name,attach,mode,calls,count,matched,dropped,in_flight,orphan_exits,min_ns,mean_ns,\
         p50_ns,p90_ns,p95_ns,p99_ns,p999_ns,max_ns,percentile_bound_ns,floor_ns,\
         floor_uncertainty_ns,corrected_min_ns,corrected_mean_ns,corrected_p50_ns,corrected_p90_ns,\
         corrected_p95_ns,corrected_p99_ns,corrected_p999_ns,corrected_max_ns,stale_entries,\
         skipped_entries,skipped_exits,\n",
    );
    if r.meta.unit != "ns" || r.meta.time == crate::analysis::TimeBasis::OnCpu {
        // The header names the unit its durations are in, and their time basis.
        let basis = match r.meta.time {
            crate::analysis::TimeBasis::Wall => "",
            crate::analysis::TimeBasis::OnCpu => "on_cpu_",
        };
        out = out.replace("_ns,", &format!("_{basis}{},", r.meta.unit));
    }
    // The time breakdown's shares, and the slow calls' threshold (a wall time, whatever
    // `--time` says) and counts.
    out.pop();
    let _ = writeln!(
        out,
        "breakdown_calls,breakdown_unknown,off_cpu_pct,irq_pct,on_cpu_pct,slow_threshold_{},\
         slow_kept,slow_ring_full,slow_over_limit",
        r.meta.unit
    );
    let o = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
    // The interrupt share is empty where interrupt time was not measured (as `n/a` in text).
    let irq_measured = r.meta.disturbance.irq_time_missing.is_none();
    for f in &r.functions {
        let breakdown = f.breakdown.as_ref().map_or_else(
            || ",".repeat(4),
            |b| {
                let irq = if irq_measured {
                    format!("{:.3}", b.irq_pct)
                } else {
                    String::new()
                };
                format!(
                    "{},{},{:.3},{irq},{:.3}",
                    b.calls, b.unknown, b.off_cpu_pct, b.on_cpu_pct
                )
            },
        );
        let slow = f.slow.as_ref().map_or_else(
            || ",".repeat(3),
            |s| {
                let c = s.counters;
                format!(
                    "{},{},{},{}",
                    s.threshold_ns, c.kept, c.ring_full, c.over_limit
                )
            },
        );
        let corrected = f.corrected.map_or_else(
            || ",".repeat(9),
            |c| {
                [
                    c.floor_ns,
                    c.uncertainty_ns,
                    c.min_ns,
                    c.mean_ns,
                    c.p50_ns,
                    c.p90_ns,
                    c.p95_ns,
                    c.p99_ns,
                    c.p999_ns,
                    c.max_ns,
                ]
                .map(|v| format!("{v:.3}"))
                .join(",")
            },
        );
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{corrected},{},{},{},\
             {breakdown},{slow}",
            f.name,
            f.attach,
            f.mode,
            f.calls,
            f.count,
            f.matched,
            f.dropped,
            f.in_flight,
            f.orphan_exits,
            o(f.min_ns),
            f.mean_ns.map(|m| format!("{m:.3}")).unwrap_or_default(),
            o(f.p50_ns),
            o(f.p90_ns),
            o(f.p95_ns),
            o(f.p99_ns),
            o(f.p999_ns),
            o(f.max_ns),
            o(f.resolution.as_ref().map(|r| r.bound_ns)),
            f.stale_entries,
            o(f.skipped_entries),
            o(f.skipped_exits),
        );
    }
    out
}
