//! The analysis of a capture: per-function accounting, latency percentiles (raw, clean and
//! corrected), range tables, disturbance, values, time per DAMON interval and kernel-mode
//! histograms, as a [`Report`] model (pure). The `report` command renders it; compare,
//! export, tui, serve and the heatmaps build on the same pieces.
pub mod breakdown;
pub(crate) mod build;
pub mod damon;
pub mod disturbance;
pub mod kernel;
pub mod slow;
#[cfg(test)]
pub(crate) mod test_support;
pub mod time;
pub mod values;

pub use build::build;
use std::collections::BTreeMap;
pub use time::TimeBasis;

use damon_common::{CallRecord, FunctionId};
use serde::Serialize;

use crate::{
    capture::{Capture, Clock, DisturbanceStatus, FunctionCounters, FunctionStatus},
    error::UsageError,
    stats::{
        LatencyStats, ValueStats,
        buckets::{BucketGrid, BucketRow},
        calibration::Corrected,
    },
};

#[derive(Debug, Serialize)]
pub struct Report {
    pub meta: ReportMeta,
    pub functions: Vec<FunctionReport>,
    /// DAMON aggregation-interval boundaries (captures that recorded the hook).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intervals: Option<damon::IntervalsReport>,
    /// Things the reader must know to trust the numbers (incomplete capture, accounting gaps).
    pub warnings: Vec<String>,
    /// What this capture cannot show and why (kernel mode: everything that needs records).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct ReportMeta {
    pub kernel_release: String,
    pub kernel_version: String,
    pub boot_id: String,
    pub tool_version: String,
    /// Tool version that wrote the capture (may differ from the one reporting).
    pub capture_tool_version: String,
    pub cpu_model: String,
    pub start_unix_ns: u64,
    pub duration_ns: Option<u64>,
    pub end_reason: Option<String>,
    /// `stream` (one record per call) or `kernel` (in-kernel histograms).
    pub mode: crate::capture::Mode,
    /// Ring buffer size the capture was recorded with (bytes).
    pub ring_size: u32,
    /// False when the capture has no summary (the recorder was killed).
    pub complete: bool,
    /// The probe's own cost per attach mode, as the capture holds it (see
    /// `stats::calibration::Calibration`); absent in captures written before calibration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration: Option<serde_json::Value>,
    /// Which latencies the report shows: `min_ns` … `max_ns` are always raw (they include the
    /// probe's cost); `corrected` (per function) has them minus the floor, when calibrated.
    pub latencies: String,
    /// `--cpu`/`--pid` in force: percentiles and tables describe `matched` records only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<FilterEcho>,
    /// DAMON's sysfs configuration at start and end, and what changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub damon: Option<damon::DamonContext>,
    /// Whether the records say which calls were disturbed (`measured`), why not
    /// (`why_not`), and what the hard-interrupt count sums (`hardirq_sources`).
    pub disturbance: DisturbanceStatus,
    /// The clock the durations were read from (`wall` or `instructions`), and the unit of
    /// every `*_ns` value under it: `ns`, or `insn` (instructions executed) under the
    /// instruction clock, where the fields keep their names but hold path lengths.
    pub clock: Clock,
    pub unit: &'static str,
    /// `--time`: `wall`, or `on-cpu` (every duration is the call's on-CPU time: wall minus
    /// off-CPU and interrupt time; the first note says whether interrupt time is in it).
    pub time: TimeBasis,
}

#[derive(Debug, Clone, Serialize)]
pub struct FilterEcho {
    pub cpu: Vec<u32>,
    pub pid: Vec<u32>,
}

#[derive(Debug, Serialize)]
pub struct FunctionReport {
    pub name: String,
    pub attach: crate::capture::AttachState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attach_detail: Option<String>,
    pub mode: crate::capture::Mode,
    /// Calls the kernel made while the entry probe was attached: entries the probe saw plus
    /// entry runs the kernel skipped (`skipped_entries`).
    pub calls: u64,
    /// Records kept in the capture (`calls == count + dropped + in_flight`).
    pub count: u64,
    /// Records the kernel wrote into the ring buffer (equals `count` unless records were lost
    /// between the ring and the file, which the warnings then say).
    pub emitted: u64,
    /// Calls made but not recorded, every reason added up: ring full, stamp map full, nested
    /// too deep (older captures), exit skipped (`stale_entries`), entry skipped
    /// (`skipped_entries`).
    pub dropped: u64,
    /// Entered but not exited when tracing stopped.
    pub in_flight: u64,
    pub ring_full: u64,
    pub stamp_full: u64,
    pub too_deep: u64,
    /// Exits without an entry of their invocation: calls that began before the probes were
    /// attached, or whose entry run the kernel skipped (those are in `skipped_entries`).
    pub orphan_exits: u64,
    /// Entries whose exit run the kernel skipped: discarded, never timed.
    pub stale_entries: u64,
    /// Entry runs the kernel skipped (its own count); `null`: this kernel does not count them.
    pub skipped_entries: Option<u64>,
    /// Exit runs the kernel skipped (its own count); `null`: this kernel does not count them.
    pub skipped_exits: Option<u64>,
    /// Entries of tasks the recording's task filter (`--tgid`/`--pid`/`--cgroup`) left out,
    /// counted in the kernel: not part of `calls`.
    pub filtered: u64,
    /// Records selected by `--cpu`/`--pid` (all of `count` without them): what the
    /// latencies below describe.
    pub matched: u64,
    pub min_ns: Option<u64>,
    pub mean_ns: Option<f64>,
    pub p50_ns: Option<u64>,
    pub p90_ns: Option<u64>,
    pub p95_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    pub p999_ns: Option<u64>,
    pub max_ns: Option<u64>,
    /// Of the `matched` records: how many were clean and why the others were not; `null`
    /// when the capture did not measure disturbance (`meta.disturbance.why_not` says why).
    pub disturbance: Option<disturbance::Disturbance>,
    /// The latencies above over the clean calls only (same fields as `corrected`'s); `null`
    /// when not measured or no call was clean.
    pub clean_percentiles: Option<LatencyStats>,
    /// The latencies above minus the calibration floor of this function's attach method and
    /// trace mode (absent without a matching floor, or without records).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrected: Option<Corrected>,
    /// What the returned value means, for functions whose value is kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_name: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<ValueStats>,
    /// Distributions of the returned value and of the recorded arguments (`values.args`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub values: Option<values::FunctionValues>,
    /// The range table; absent for functions without records.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buckets: Option<BucketTable>,
    /// Cost per DAMON aggregation interval (DAMON functions, when boundaries were recorded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_interval: Option<crate::stats::intervals::PerInterval>,
    /// Kernel mode: the percentiles above are bucket tops; their ranges and error bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolution: Option<kernel::BucketResolution>,
    /// `--time on-cpu`: records `--cpu`/`--pid` select whose breakdown is unknown, so are in
    /// no statistic (`matched` excludes them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set_aside: Option<u64>,
    /// Where the time went (captures with the time breakdown), over the wall times.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breakdown: Option<breakdown::BreakdownSummary>,
    /// The slow calls kept whole (`record --slow`), slowest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow: Option<slow::SlowReport>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BucketTable {
    pub grid: BucketGrid,
    pub rows: Vec<BucketRow>,
}

/// What to report on, and how to cut the range tables.
#[derive(Debug, Clone, Default)]
pub struct ReportOptions {
    pub functions: Vec<String>,
    pub cpu: Vec<u32>,
    pub pid: Vec<u32>,
    pub bucket_ns: u64,
    pub max_ns: Option<u64>,
    /// Only clean calls (`compare --clean`): the others are counted, never timed.
    pub clean_only: bool,
    /// `--time`: wall or on-CPU durations (see [`time`]).
    pub time: TimeBasis,
    /// `--slowest`: slow calls a function's text and Markdown show.
    pub slowest: usize,
}

// (`ReportOptions::new`, from the command line's filter and bucket flags, is the CLI
// layer's: `cli/mod.rs`.)
impl ReportOptions {
    pub fn keeps(&self, cpu: u32, pid: u32) -> bool {
        (self.cpu.is_empty() || self.cpu.contains(&cpu))
            && (self.pid.is_empty() || self.pid.contains(&pid))
    }

    /// Whether a record is timed: its CPU and pid are selected, with
    /// [`Self::clean_only`] it is clean, and under on-CPU time its breakdown is known.
    pub fn keeps_record(&self, r: &CallRecord) -> bool {
        self.keeps(r.cpu, r.pid)
            && (!self.clean_only || r.is_clean())
            && time::timed_record(self.time, r)
    }
}

pub fn value_name(func: FunctionId) -> Option<&'static str> {
    match func {
        FunctionId::DamonHotScore => Some("hotness_score"),
        FunctionId::DamonMigratePages => Some("pages_migrated"),
        _ => None,
    }
}

/// The records of each function: all kept (for accounting), and the durations (sorted) and
/// values of those the options select.
#[derive(Debug, Default, Clone)]
pub struct Selected {
    pub count: u64,
    pub durations: Vec<u64>,
    pub values: Vec<i64>,
    /// In a capture that measured disturbance: the disturbance of the records `--cpu`/`--pid`
    /// select (all zero otherwise).
    pub disturbance: disturbance::Disturbance,
    /// In a capture that measured disturbance: the durations (sorted) of the clean records
    /// among those (empty otherwise).
    pub clean_durations: Vec<u64>,
}

/// Splits a capture's records by function id, applying `--cpu`/`--pid` (and
/// [`ReportOptions::clean_only`]); durations sorted.
pub fn select(capture: &Capture, opts: &ReportOptions) -> BTreeMap<u32, Selected> {
    let measured = DisturbanceStatus::measured(&capture.meta);
    let mut by_func: BTreeMap<u32, Selected> = BTreeMap::new();
    for r in &capture.records {
        let s = by_func.entry(r.func).or_default();
        s.count += 1;
        // Under on-CPU time, the calls set aside (breakdown unknown) are in no statistic.
        if measured && opts.keeps(r.cpu, r.pid) && time::timed_record(opts.time, r) {
            s.disturbance.add(r);
            if r.is_clean() {
                s.clean_durations.push(r.duration_ns);
            }
        }
        if opts.keeps_record(r) {
            s.durations.push(r.duration_ns);
            s.values.push(r.value);
        }
    }
    for s in by_func.values_mut() {
        s.durations.sort_unstable();
        s.clean_durations.sort_unstable();
    }
    by_func
}

/// Checks `--functions` against what the capture holds; unknown names are bad input.
pub fn check_functions(capture: &Capture, names: &[String]) -> Result<(), UsageError> {
    for name in names {
        if !capture.meta.functions.iter().any(|f| f.name == *name) {
            let have: Vec<&str> = capture
                .meta
                .functions
                .iter()
                .map(|f| f.name.as_str())
                .collect();
            return Err(UsageError(format!(
                "function `{name}` is not in this capture; it has: {}",
                have.join(", ")
            )));
        }
    }
    Ok(())
}

/// The kernel's counters for a function, or — for a capture without summary — what the
/// records alone can say.
pub fn counters(capture: &Capture, id: u32, count: u64) -> FunctionCounters {
    match &capture.summary {
        Some(s) => s.counters.get(&id).copied().unwrap_or_default(),
        None => FunctionCounters::all_recorded(count),
    }
}

impl FunctionReport {
    /// A function's accounting (`k`, `count` records kept) and raw latencies over `matched`
    /// records, in `mode`; everything else empty, for the caller to fill.
    pub fn new(
        status: &FunctionStatus,
        mode: crate::capture::Mode,
        k: &FunctionCounters,
        count: u64,
        matched: u64,
        lat: Option<LatencyStats>,
    ) -> FunctionReport {
        FunctionReport {
            name: status.name.clone(),
            attach: status.attach,
            attach_detail: status.detail.clone(),
            mode,
            calls: k.made(),
            count,
            emitted: k.emitted,
            dropped: k.dropped(),
            in_flight: k.in_flight,
            ring_full: k.ring_full,
            stamp_full: k.stamp_full,
            too_deep: k.too_deep,
            orphan_exits: k.orphan_exits,
            stale_entries: k.stale_entries,
            skipped_entries: k.skipped_entries,
            skipped_exits: k.skipped_exits,
            filtered: k.filtered,
            matched,
            min_ns: lat.map(|l| l.min_ns),
            mean_ns: lat.map(|l| l.mean_ns),
            p50_ns: lat.map(|l| l.p50_ns),
            p90_ns: lat.map(|l| l.p90_ns),
            p95_ns: lat.map(|l| l.p95_ns),
            p99_ns: lat.map(|l| l.p99_ns),
            p999_ns: lat.map(|l| l.p999_ns),
            max_ns: lat.map(|l| l.max_ns),
            disturbance: None,
            clean_percentiles: None,
            corrected: None,
            value_name: None,
            value: None,
            values: None,
            buckets: None,
            per_interval: None,
            resolution: None,
            set_aside: None,
            breakdown: None,
            slow: None,
        }
    }
}

#[cfg(test)]
mod tests;
