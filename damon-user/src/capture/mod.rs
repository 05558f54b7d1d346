//! Captures: what `record` writes and `report` reads.
//!
//! A capture holds the metadata of a tracing session, every call record, and the kernel's
//! counters at the end, so that every call the kernel saw is accounted for. The on-disk layout
//! is in [`format`] (and `docs/capture-format.md`).
//!
//! This module depends on nothing else in the crate (only `damon-common`, serde and the
//! codecs), so that the fuzz target can compile it on its own.
mod attach;
mod chunk;
mod columns;
#[cfg(test)]
mod density;
mod error;
pub mod format;
mod header;
mod hist;
mod slow;
pub mod stdio;
pub mod stream;
mod v1;

pub use attach::{AttachState, Mode};
pub use slow::{SlowCall, SlowCounters, SlowSettings};

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use damon_common::CallRecord;
use serde::{Deserialize, Serialize};

/// The clock a session's durations were read from. Under QEMU's instruction counter
/// (`-icount shift=0`) the guest's clock advances one nanosecond per instruction executed, so
/// a "duration" is a path length, counted in instructions (`insn`), not a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Clock {
    /// The kernel's monotonic clock: nanoseconds.
    #[default]
    Wall,
    /// A guest clock driven by QEMU's instruction counter: instructions executed.
    Instructions,
}

impl Clock {
    pub fn as_str(self) -> &'static str {
        match self {
            Clock::Wall => "wall",
            Clock::Instructions => "instructions",
        }
    }

    /// The unit of a duration under this clock, as every view prints it: `ns` or `insn`.
    pub fn unit(self) -> &'static str {
        match self {
            Clock::Wall => "ns",
            Clock::Instructions => "insn",
        }
    }

    /// The header line of the live screen and replay: the kernel release, and the clock
    /// unless it is the wall clock.
    pub fn with_release(self, release: &str) -> String {
        match self {
            Clock::Wall => release.to_owned(),
            Clock::Instructions => format!("{release} · instruction clock (insn)"),
        }
    }

    /// The clock as a headline states it: `wall clock (ns)` or `instruction clock (insn:
    /// instructions executed, QEMU icount)`.
    pub fn describe(self) -> &'static str {
        match self {
            Clock::Wall => "wall clock (ns)",
            Clock::Instructions => {
                "instruction clock (insn: instructions executed under QEMU's icount, not time)"
            }
        }
    }
}

/// Release, version string, boot id and command line of the running kernel.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct KernelIdentity {
    pub release: String,
    pub version: String,
    pub boot_id: String,
    /// `/proc/cmdline` (absent in older captures: `compare` then cannot
    /// check that both sides booted alike).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cmdline: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionStatus {
    pub name: String,
    /// Function id used in the records.
    pub id: u32,
    pub attach: AttachState,
    /// Why the function is not traced, or why the fallback was used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Written once at the start of a capture.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    pub tool_version: String,
    pub kernel: KernelIdentity,
    #[serde(default)]
    pub hostname: String,
    /// Wall-clock start, Unix ns.
    pub start_unix_ns: u64,
    /// CLOCK_MONOTONIC at start, ns: the time base of the records' `entry_ns`.
    pub start_monotonic_ns: u64,
    pub command_line: Vec<String>,
    /// `stream`: one record per call; `kernel`: the kernel's histograms; `both`.
    pub mode: Mode,
    pub ring_size: u32,
    pub functions: Vec<FunctionStatus>,
    /// DAMON configuration found in sysfs at start, if DAMON was present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damon: Option<serde_json::Value>,
    /// `model name` of the first CPU in /proc/cpuinfo: `compare` warns when two captures differ.
    #[serde(default)]
    pub cpu_model: String,
    /// The probe floor per attach method and trace mode, or why it was not measured; the
    /// shape is `stats::calibration::Calibration` (kept as JSON here so this module depends on
    /// nothing else in the crate). Absent in captures written before calibration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<serde_json::Value>,
    /// The aggregation-interval hook and whether it was attached (absent in captures written
    /// before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intervals: Option<IntervalHook>,
    /// Arguments the records carry (`arg0`, `arg1`), per function that has some; empty in
    /// captures written before arguments were recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<ArgStatus>,
    /// Whose calls were timed (`--tgid`, `--pid`, `--cgroup`, applied in the kernel); absent:
    /// every task's, as in captures written before the filter existed.
    #[serde(default, skip_serializing_if = "TaskFilter::is_off")]
    pub filter: TaskFilter,
    /// Whether the records say which calls were disturbed (switched out, interrupted; see
    /// `damon_common::disturb`); absent in captures written before it existed, whose records
    /// carry no such fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disturbance: Option<DisturbanceStatus>,
    /// The clock the durations were read from; `wall` in captures written before the
    /// instruction clock existed.
    #[serde(default)]
    pub clock: Clock,
    /// `record --slow`: which calls were kept with their stacks; `None`: none were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow: Option<SlowSettings>,
}

/// What a session's records say about disturbance.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisturbanceStatus {
    /// The records carry the counts (stream mode on a kernel where every counter was found).
    pub measured: bool,
    /// Why not, when not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why_not: Option<String>,
    /// The kernel counters the hard-interrupt count sums (e.g. `kstat.irqs_sum`,
    /// `irq_stat` (21 counts)).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hardirq_sources: Vec<String>,
    /// Each record also has its time breakdown (`damon_common::breakdown`: off the CPU, in
    /// interrupts, on it); `false` in captures written before it existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub breakdown: bool,
    /// Why the breakdown has no interrupt time (the kernel has no IRQ time accounting, or has
    /// it off): a call's interrupt time is then part of its on-CPU time. `None`: measured (or
    /// no breakdown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq_time_missing: Option<String>,
    /// Where the kernel has no IRQ time accounting and damon-trace kept the CPUs' interrupt
    /// time itself (`damon_common::breakdown::IrqClock`): what from (the tracepoints), in
    /// words. `None`: the kernel's accounting, or no interrupt time (`irq_time_missing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq_clock: Option<String>,
}

impl DisturbanceStatus {
    /// Whether `meta`'s records carry the time breakdown.
    pub fn breakdown(meta: &Meta) -> bool {
        meta.disturbance
            .as_ref()
            .is_some_and(|d| d.measured && d.breakdown)
    }

    /// Whether `meta`'s records carry disturbance counts.
    pub fn measured(meta: &Meta) -> bool {
        meta.disturbance.as_ref().is_some_and(|d| d.measured)
    }
}

/// Which tasks' calls a session times, decided in the kernel at each entry; all `None`: every
/// task. Calls of other tasks are only counted ([`FunctionCounters::filtered`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskFilter {
    /// Thread group id (the process id `ps` shows): all its threads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tgid: Option<u32>,
    /// One task (thread id; the kernel's `pid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tid: Option<u32>,
    /// Tasks directly in this cgroup v2 directory (not its descendants).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<CgroupFilter>,
}

/// A cgroup v2 directory and its id (the directory's inode number, what
/// `bpf_get_current_cgroup_id` gives for a task in it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupFilter {
    pub path: String,
    pub id: u64,
}

impl TaskFilter {
    /// No filter: every task's calls are timed.
    pub fn is_off(&self) -> bool {
        self.tgid.is_none() && self.tid.is_none() && self.cgroup.is_none()
    }

    /// The filter as the options that set it: `--tgid 4242 --cgroup /sys/fs/cgroup/w (id 9)`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(t) = self.tgid {
            parts.push(format!("--tgid {t}"));
        }
        if let Some(t) = self.tid {
            parts.push(format!("--pid {t}"));
        }
        if let Some(c) = &self.cgroup {
            parts.push(format!("--cgroup {} (id {})", c.path, c.id));
        }
        parts.join(" ")
    }
}

/// Which of a function's arguments (see `FunctionId::arg_names`) its records carry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgStatus {
    pub function: String,
    /// Argument names read and stored, e.g. `["nr_accesses", "age"]`.
    pub recorded: Vec<String>,
    /// Argument names that could not be read in this kernel (their column stays 0).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// Why they could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The hook that marks DAMON aggregation-interval boundaries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntervalHook {
    /// "tracepoint:damon:damon_aggregated".
    pub hook: String,
    pub attached: bool,
    /// Why it is not attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The kernel's counters of interval boundary markers at the end of a session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkCounters {
    /// Boundaries the kernel saw (one per kdamond per aggregation interval).
    pub markers: u64,
    /// Markers written into the ring buffer.
    pub emitted: u64,
    /// Markers lost because the ring buffer was full.
    pub ring_full: u64,
}

/// The CPU model of this machine, for [`Meta::cpu_model`]; empty when unknown.
pub fn host_cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_default()
}

/// The kernel's counters for one function at the end of a session.
///
/// Every call the kernel made while the entry probe was attached ([`Self::made`]) is exactly one
/// of: a record (`emitted`), a drop with its reason ([`Self::dropped`]), or in flight.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCounters {
    /// Entries the entry probe saw (runs of the entry program).
    pub calls: u64,
    /// Records written into the ring buffer.
    pub emitted: u64,
    /// Completed calls lost because the ring buffer was full.
    pub ring_full: u64,
    /// Entries not timed because the stamp map was full.
    pub stamp_full: u64,
    /// Retired (pairing by depth): entries not timed because they nested too deep on one
    /// task. Only older captures have it.
    pub too_deep: u64,
    /// Exits without an entry of their invocation: calls that began before the probes were
    /// attached, or whose entry probe the kernel skipped (not part of `calls`).
    pub orphan_exits: u64,
    /// Entered, not exited when tracing stopped.
    pub in_flight: u64,
    /// Entries whose exit never came (the kernel skipped the exit probe): found stale and
    /// discarded, never timed.
    #[serde(default)]
    pub stale_entries: u64,
    /// Runs of the entry probe the kernel skipped (its own count: `recursion_misses` of the
    /// program, plus the kprobe's `missed`). `None`: this kernel does not count them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped_entries: Option<u64>,
    /// Runs of the exit probe the kernel skipped, as above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped_exits: Option<u64>,
    /// Entries of tasks the session's [`TaskFilter`] left out (not part of `calls`: neither
    /// timed nor dropped). 0 without a filter and in captures written before it existed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub filtered: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl FunctionCounters {
    /// `calls` calls, each written into the ring as a record, nothing lost or open.
    pub fn all_recorded(calls: u64) -> FunctionCounters {
        FunctionCounters {
            calls,
            emitted: calls,
            ..Default::default()
        }
    }

    /// The counts since `base` was read (the in-flight gauge as it is now).
    pub fn since(&self, base: &FunctionCounters) -> FunctionCounters {
        FunctionCounters {
            calls: self.calls.saturating_sub(base.calls),
            emitted: self.emitted.saturating_sub(base.emitted),
            ring_full: self.ring_full.saturating_sub(base.ring_full),
            stamp_full: self.stamp_full.saturating_sub(base.stamp_full),
            too_deep: self.too_deep.saturating_sub(base.too_deep),
            orphan_exits: self.orphan_exits.saturating_sub(base.orphan_exits),
            in_flight: self.in_flight,
            stale_entries: self.stale_entries.saturating_sub(base.stale_entries),
            filtered: self.filtered.saturating_sub(base.filtered),
            skipped_entries: self
                .skipped_entries
                .map(|n| n.saturating_sub(base.skipped_entries.unwrap_or(0))),
            skipped_exits: self
                .skipped_exits
                .map(|n| n.saturating_sub(base.skipped_exits.unwrap_or(0))),
        }
    }

    /// Calls the kernel made while the entry probe was attached: those the probe saw and those
    /// whose probe run the kernel skipped (as far as this kernel counts them).
    pub fn made(&self) -> u64 {
        self.calls + self.skipped_entries.unwrap_or(0)
    }

    /// Calls made but that have no record and are not in flight: every reason added up.
    pub fn dropped(&self) -> u64 {
        self.ring_full
            + self.stamp_full
            + self.too_deep
            + self.stale_entries
            + self.skipped_entries.unwrap_or(0)
    }
}

/// Written once at the end of a capture.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub duration_ns: u64,
    /// Why the session ended: "duration", "interrupted" (SIGINT), "terminated" (SIGTERM/SIGHUP).
    pub end_reason: String,
    /// Keyed by function id.
    pub counters: BTreeMap<u32, FunctionCounters>,
    /// Ring items of unexpected size (never expected; kept so nothing vanishes unseen).
    #[serde(default)]
    pub malformed_items: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damon_end: Option<serde_json::Value>,
    /// Interval boundary markers' counters, when the interval hook was attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intervals: Option<MarkCounters>,
    /// Kernel mode: each function's in-kernel histogram at the end, keyed by function id
    /// (empty in stream mode).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kernel_hist: BTreeMap<u32, KernelHist>,
    /// The probe floor measured beside the session (`meta.calibration` said `pending` when the
    /// header was written); reading the capture puts it in `meta.calibration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<serde_json::Value>,
    /// `record --slow`: each function's slow calls, kept and lost, keyed by function id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub slow: BTreeMap<u32, SlowCounters>,
}

impl Summary {
    /// A session's end: how long it ran, why it ended and its counters, with nothing
    /// malformed, no DAMON state, interval counters, kernel histograms or calibration (set
    /// them after).
    pub fn new(
        duration_ns: u64,
        end_reason: &str,
        counters: BTreeMap<u32, FunctionCounters>,
    ) -> Summary {
        Summary {
            duration_ns,
            end_reason: end_reason.to_owned(),
            counters,
            malformed_items: 0,
            damon_end: None,
            intervals: None,
            kernel_hist: BTreeMap::new(),
            calibration: None,
            slow: BTreeMap::new(),
        }
    }
}

/// One function's in-kernel histogram (kernel mode), summed over CPUs, cumulative since the
/// probes were loaded: exact count, sum, min and max, and counts per bucket of
/// `damon_common::hist_bucket` with linear width `width_ns`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelHist {
    pub count: u64,
    pub sum_ns: u64,
    /// Meaningful only when `count > 0`.
    pub min_ns: u64,
    pub max_ns: u64,
    pub width_ns: u64,
    /// `damon_common::HIST_BUCKETS` counts, bucket `i` as `damon_common::hist_bucket_bounds`.
    pub buckets: Vec<u64>,
    /// Of these calls, the disturbed ones (`record --disturbance`); `None`: not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disturbed: Option<KernelDisturbed>,
}

/// The disturbed calls of a kernel-mode histogram (see `damon_common::disturb::Class`): by
/// reason, their summed durations and their counts per bucket (the same buckets as the
/// histogram's). The clean calls are the difference (`KernelHist::clean`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelDisturbed {
    pub slept: u64,
    pub preempted: u64,
    pub interrupted: u64,
    pub lost: u64,
    pub sum_ns: u64,
    pub buckets: Vec<u64>,
}

/// What the kernel had counted at one moment of a kernel-mode session: written about every
/// second (chunk kind 6), so a killed recorder's capture is readable to its last snapshot and
/// rates over time can be shown. Cumulative: the calls of a period are the difference of two
/// snapshots.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistSnapshot {
    /// Time since the session started, ns.
    pub elapsed_ns: u64,
    /// Keyed by function id.
    pub functions: BTreeMap<u32, (FunctionCounters, KernelHist)>,
}

/// A whole capture in memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Capture {
    pub meta: Meta,
    pub records: Vec<CallRecord>,
    /// `None` when the session was killed before it could write its summary.
    pub summary: Option<Summary>,
    /// Aggregation-interval boundary markers (records whose `func` is
    /// [`damon_common::AGGREGATION_MARK`]), in arrival order; stored in their own chunks.
    pub marks: Vec<CallRecord>,
    /// Kernel mode: periodic cumulative histogram snapshots, oldest first.
    pub hist_snapshots: Vec<HistSnapshot>,
    /// The slow calls kept with their stacks (`record --slow`), in arrival order.
    pub slow_calls: Vec<SlowCall>,
}

impl Capture {
    /// Whether the capture was recorded in kernel mode (histograms, no per-call records).
    pub fn is_kernel_mode(&self) -> bool {
        self.meta.mode == Mode::Kernel
    }

    /// Kernel mode: the final histograms and counters, from the summary when the recorder
    /// finished, else from its last snapshot (a killed recorder); `None` for none of either.
    pub fn final_hists(&self) -> Option<HistSnapshot> {
        if let Some(s) = &self.summary
            && !s.kernel_hist.is_empty()
        {
            let functions = s
                .kernel_hist
                .iter()
                .map(|(&id, h)| {
                    let c = s.counters.get(&id).copied().unwrap_or_default();
                    (id, (c, h.clone()))
                })
                .collect();
            return Some(HistSnapshot {
                elapsed_ns: s.duration_ns,
                functions,
            });
        }
        self.hist_snapshots.last().cloned()
    }
}
