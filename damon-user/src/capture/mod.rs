//! Captures: what `record` writes and `report` reads.
//!
//! A capture holds the metadata of a tracing session, every call record, and the kernel's
//! counters at the end, so that every call the kernel saw is accounted for. The on-disk layout
//! is in [`format`] (and `docs/capture-format.md`).
//!
//! This module depends on nothing else in the crate (only `damon-common`, serde and the
//! codecs), so that the fuzz target can compile it on its own.
mod chunk;
mod columns;
mod error;
pub mod format;
mod v1;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use damon_common::CallRecord;
use serde::{Deserialize, Serialize};

/// Release, version string and boot id of the running kernel.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct KernelIdentity {
    pub release: String,
    pub version: String,
    pub boot_id: String,
}

/// How a function was traced, or why it was not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttachState {
    Fentry,
    Kprobe,
    /// The kernel does not have the function.
    Missing,
    /// Only compiler clones of the function exist.
    Inlined,
    /// It exists but neither attach method worked.
    Failed,
}

impl AttachState {
    pub fn as_str(self) -> &'static str {
        match self {
            AttachState::Fentry => "fentry",
            AttachState::Kprobe => "kprobe",
            AttachState::Missing => "missing",
            AttachState::Inlined => "inlined",
            AttachState::Failed => "failed",
        }
    }
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
    /// "stream": one record per call.
    pub mode: String,
    pub ring_size: u32,
    pub functions: Vec<FunctionStatus>,
    /// DAMON configuration found in sysfs at start, if DAMON was present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damon: Option<serde_json::Value>,
    /// `model name` of the first CPU in /proc/cpuinfo: `compare` warns when two captures differ.
    #[serde(default)]
    pub cpu_model: String,
    /// The probe's own cost per attach mode, once calibration exists (absent until then).
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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCounters {
    /// Entries the kernel saw.
    pub calls: u64,
    /// Records written into the ring buffer.
    pub emitted: u64,
    /// Completed calls lost because the ring buffer was full.
    pub ring_full: u64,
    /// Entries not timed because the stamp map was full.
    pub stamp_full: u64,
    /// Entries not timed because they nested too deep on one task.
    pub too_deep: u64,
    /// Exits whose entry happened before the probes were attached (not part of `calls`).
    pub orphan_exits: u64,
    /// Entered, not exited when tracing stopped.
    pub in_flight: u64,
}

impl FunctionCounters {
    /// Calls the kernel saw but that have no record.
    pub fn dropped(&self) -> u64 {
        self.ring_full + self.stamp_full + self.too_deep
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
    /// The kernel's histograms at the end (kernel mode), keyed by function id: cumulative since
    /// the probes were loaded, summed over CPUs. Empty in stream mode.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kernel_hist: BTreeMap<u32, KernelHist>,
}

/// One function's in-kernel histogram (kernel mode), summed over CPUs: exact count, sum, min
/// and max of the timed calls, and the bucket counts (`damon_common::hist_bucket` with
/// `width_ns`; `HIST_BUCKETS` of them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelHist {
    pub count: u64,
    pub sum_ns: u64,
    /// Meaningful only when `count > 0`.
    pub min_ns: u64,
    pub max_ns: u64,
    pub width_ns: u64,
    pub buckets: Vec<u64>,
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
}
