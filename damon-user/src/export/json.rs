//! `--format json`: the whole capture as one JSON object, streamed record by record so a
//! capture of millions of calls never sits in memory twice.
//!
//! `{"meta", "summary", "accounting", "records"}`: `accounting` has one entry per exported
//! function with the kernel's totals (`calls == records + dropped + in_flight`), so a reader
//! of `records` knows how many calls are not in it and why. `damon` has, per DAMON function,
//! the cost per aggregation interval and the returned values as `report` states them.
use std::io::Write;

use serde::Serialize;

use super::{Exporter, keeps};
use crate::{
    analysis::ReportOptions,
    capture::{Capture, DisturbanceStatus},
};

pub struct Json(pub ReportOptions);

#[derive(Serialize)]
struct Call<'a> {
    function: &'a str,
    cpu: u32,
    pid: u32,
    tid: u32,
    entry_ns: u64,
    duration_ns: u64,
    value: i64,
    /// `[slept, preempted, hardirqs, softirqs]`, `null` where not known; absent when the
    /// capture did not measure disturbance.
    #[serde(skip_serializing_if = "Option::is_none")]
    disturbance: Option<[Option<u16>; 4]>,
    /// Time off the CPU and in interrupts during the call, `null` where not known (or 4.3 s
    /// and more); absent when the capture has no time breakdown.
    #[serde(skip_serializing_if = "Option::is_none")]
    off_cpu_ns: Option<Option<u32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    irq_ns: Option<Option<u32>>,
}

/// One function's accounting: `calls == records + dropped + in_flight`.
#[derive(Serialize)]
struct Accounting<'a> {
    function: &'a str,
    calls: u64,
    /// Records of the function in the capture (before `--cpu`/`--pid`).
    records: u64,
    dropped: u64,
    ring_full: u64,
    stamp_full: u64,
    too_deep: u64,
    /// Entries whose exit run the kernel skipped (discarded).
    stale_entries: u64,
    /// Entry and exit runs the kernel skipped; `null`: not counted by this kernel.
    skipped_entries: Option<u64>,
    skipped_exits: Option<u64>,
    in_flight: u64,
    orphan_exits: u64,
}

impl Exporter for Json {
    fn export(&self, c: &Capture, out: &mut dyn Write) -> anyhow::Result<()> {
        write!(
            out,
            "{{\"schema_version\":{},\"meta\":",
            crate::output::SCHEMA_VERSION
        )?;
        serde_json::to_writer(&mut *out, &c.meta)?;
        out.write_all(b",\"summary\":")?;
        serde_json::to_writer(&mut *out, &c.summary)?;
        let mut counts = std::collections::BTreeMap::<u32, u64>::new();
        for r in &c.records {
            *counts.entry(r.func).or_default() += 1;
        }
        let end = c.final_hists();
        let accounting: Vec<Accounting> = c
            .meta
            .functions
            .iter()
            .filter(|f| self.0.functions.is_empty() || self.0.functions.contains(&f.name))
            .map(|f| {
                let mut records = counts.get(&f.id).copied().unwrap_or(0);
                let mut k = crate::analysis::counters(c, f.id, records);
                // Kernel mode: the counters of the last snapshot when there is no summary, and
                // `records` = calls counted in the histograms.
                if let Some((kc, _)) = end.as_ref().and_then(|e| e.functions.get(&f.id)) {
                    k = *kc;
                    records = kc.emitted;
                }
                Accounting {
                    function: &f.name,
                    calls: k.made(),
                    records,
                    dropped: k.dropped(),
                    ring_full: k.ring_full,
                    stamp_full: k.stamp_full,
                    too_deep: k.too_deep,
                    stale_entries: k.stale_entries,
                    skipped_entries: k.skipped_entries,
                    skipped_exits: k.skipped_exits,
                    in_flight: k.in_flight,
                    orphan_exits: k.orphan_exits,
                }
            })
            .collect();
        out.write_all(b",\"accounting\":")?;
        serde_json::to_writer(&mut *out, &accounting)?;
        if c.is_kernel_mode() {
            out.write_all(b",\"histograms\":")?;
            serde_json::to_writer(&mut *out, &kernel::histograms(c, &self.0, end.as_ref()))?;
            out.write_all(b",\"snapshots\":")?;
            serde_json::to_writer(&mut *out, &kernel::snapshots(c, &self.0))?;
        }
        out.write_all(b",\"damon\":")?;
        serde_json::to_writer(&mut *out, &damon::functions(c, &self.0)?)?;
        out.write_all(b",\"records\":[")?;
        let measured = DisturbanceStatus::measured(&c.meta);
        let breakdown = DisturbanceStatus::breakdown(&c.meta);
        let mut first = true;
        for r in c.records.iter().filter(|r| keeps(c, &self.0, r)) {
            if !first {
                out.write_all(b",")?;
            }
            first = false;
            let name = c
                .meta
                .functions
                .iter()
                .find(|f| f.id == r.func)
                .map_or("", |f| f.name.as_str());
            serde_json::to_writer(
                &mut *out,
                &Call {
                    function: name,
                    cpu: r.cpu,
                    pid: r.pid,
                    tid: r.tid,
                    entry_ns: r.entry_ns,
                    duration_ns: r.duration_ns,
                    value: r.value,
                    disturbance: measured.then(|| known(r)),
                    off_cpu_ns: breakdown.then(|| known_ns(r.off_cpu_ns)),
                    irq_ns: breakdown.then(|| known_ns(r.irq_ns)),
                },
            )?;
        }
        out.write_all(b"]")?;
        if c.meta.slow.is_some() {
            out.write_all(b",\"slow_calls\":")?;
            serde_json::to_writer(&mut *out, &slow_calls(c, &self.0, breakdown))?;
        }
        out.write_all(b"}\n")?;
        Ok(())
    }
}

/// Per function, every kept slow call (selected by `--cpu`/`--pid`) with its breakdown,
/// arguments and stack, as `report --format json` has them.
fn slow_calls<'c>(
    c: &'c Capture,
    opts: &ReportOptions,
    breakdown: bool,
) -> std::collections::BTreeMap<&'c str, crate::analysis::slow::SlowReport> {
    c.meta
        .functions
        .iter()
        .filter(|f| opts.functions.is_empty() || opts.functions.contains(&f.name))
        .filter_map(|f| {
            let s = crate::analysis::slow::function(c, f.id, opts, breakdown)?;
            Some((f.name.as_str(), s))
        })
        .collect()
}

/// A breakdown field as exported: `None` where not known or saturated.
pub(super) fn known_ns(v: u32) -> Option<u32> {
    (v < damon_common::breakdown::SATURATED_NS).then_some(v)
}

/// A record's disturbance fields, `None` where not known.
pub(super) fn known(r: &damon_common::CallRecord) -> [Option<u16>; 4] {
    r.disturbance()
        .map(|v| (v != damon_common::disturb::UNKNOWN).then_some(v))
}

/// Kernel mode: the histograms (non-empty buckets with their bounds) and, per snapshot, the
/// cumulative counts, for rates over time.
mod kernel {
    use serde::Serialize;

    use crate::{
        analysis::{ReportOptions, disturbance::Disturbance},
        capture::{Capture, HistSnapshot},
    };

    #[derive(Serialize)]
    pub struct Histogram<'a> {
        function: &'a str,
        count: u64,
        sum_ns: u64,
        min_ns: u64,
        max_ns: u64,
        width_ns: u64,
        /// `[lo_ns, hi_ns, count]` of each non-empty bucket, `lo <= duration < hi`.
        buckets: Vec<[u64; 3]>,
        /// Clean and disturbed calls by reason (`null` unless measured).
        disturbance: Option<Disturbance>,
        /// `[lo_ns, hi_ns, count]` of each bucket with disturbed calls (`null` unless measured).
        disturbed_buckets: Option<Vec<[u64; 3]>>,
    }

    /// `[lo_ns, hi_ns, count]` of each non-empty bucket of `counts` at `width_ns`.
    fn non_empty(counts: &[u64], width_ns: u64) -> Vec<[u64; 3]> {
        counts
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(b, &n)| {
                let (lo, hi) = damon_common::hist_bucket_bounds(b as u32, width_ns);
                [lo, hi, n]
            })
            .collect()
    }

    #[derive(Serialize)]
    pub struct Point<'a> {
        function: &'a str,
        elapsed_ns: u64,
        calls: u64,
        count: u64,
        sum_ns: u64,
        dropped: u64,
    }

    fn selected<'a>(
        c: &'a Capture,
        opts: &'a ReportOptions,
    ) -> impl Iterator<Item = (u32, &'a str)> {
        c.meta
            .functions
            .iter()
            .filter(|f| opts.functions.is_empty() || opts.functions.contains(&f.name))
            .map(|f| (f.id, f.name.as_str()))
    }

    pub fn histograms<'a>(
        c: &'a Capture,
        opts: &'a ReportOptions,
        end: Option<&'a HistSnapshot>,
    ) -> Vec<Histogram<'a>> {
        selected(c, opts)
            .filter_map(|(id, name)| {
                let (_, h) = end?.functions.get(&id)?;
                Some(Histogram {
                    function: name,
                    count: h.count,
                    sum_ns: h.sum_ns,
                    min_ns: h.min_ns,
                    max_ns: h.max_ns,
                    width_ns: h.width_ns,
                    buckets: non_empty(&h.buckets, h.width_ns),
                    disturbance: h.disturbance(),
                    disturbed_buckets: h
                        .disturbed
                        .as_ref()
                        .map(|d| non_empty(&d.buckets, h.width_ns)),
                })
            })
            .collect()
    }

    pub fn snapshots<'a>(c: &'a Capture, opts: &'a ReportOptions) -> Vec<Point<'a>> {
        let mut out = Vec::new();
        for s in &c.hist_snapshots {
            for (id, name) in selected(c, opts) {
                if let Some((k, h)) = s.functions.get(&id) {
                    out.push(Point {
                        function: name,
                        elapsed_ns: s.elapsed_ns,
                        calls: k.made(),
                        count: h.count,
                        sum_ns: h.sum_ns,
                        dropped: k.dropped(),
                    });
                }
            }
        }
        out
    }
}

/// The DAMON numbers of `report`: per function, its cost per aggregation interval and the
/// distribution of its returned value (hotness score, pages migrated).
mod damon {
    use serde::Serialize;

    use crate::{
        analysis::{FunctionReport, ReportOptions, values::ValueDist},
        capture::Capture,
        stats::intervals::PerInterval,
    };

    #[derive(Serialize)]
    pub struct DamonFunction {
        function: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        per_interval: Option<PerInterval>,
        #[serde(skip_serializing_if = "Option::is_none")]
        value_name: Option<&'static str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        value: Option<ValueDist>,
    }

    pub fn functions(c: &Capture, opts: &ReportOptions) -> anyhow::Result<Vec<DamonFunction>> {
        let report = crate::analysis::build(c, opts)?;
        Ok(report
            .functions
            .into_iter()
            .filter_map(|f: FunctionReport| {
                let value = f.values.and_then(|v| v.value);
                (f.per_interval.is_some() || value.is_some()).then_some(DamonFunction {
                    function: f.name,
                    per_interval: f.per_interval,
                    value_name: f.value_name,
                    value,
                })
            })
            .collect())
    }
}
