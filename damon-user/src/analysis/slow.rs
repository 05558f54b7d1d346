//! The slow calls a capture kept whole (`record --slow`), per function: each with its
//! breakdown, arguments, return value, CPU, task and symbolized stack, slowest first, and what
//! was lost (pure).
use damon_common::{CallRecord, FunctionId};
use serde::Serialize;

use super::{ReportOptions, value_name, values};
use crate::capture::{Capture, SlowCounters};

/// Slow calls shown per function in text and Markdown unless `--slowest` says otherwise.
pub const DEFAULT_SLOWEST: usize = 5;

/// One function's slow calls.
#[derive(Debug, Clone, Serialize)]
pub struct SlowReport {
    /// A call was slow when its wall time was at least this.
    pub threshold_ns: u64,
    /// Every slow call the kernel saw: kept, lost to a full ring, or past the per-function
    /// limit (zeros when the capture has no summary).
    pub counters: SlowCounters,
    /// The kept calls `--cpu`/`--pid` select, slowest (wall time) first: every one of them.
    pub calls: Vec<SlowCallReport>,
    /// How many of `calls` text and Markdown show (`--slowest`).
    pub shown: usize,
}

/// A named argument of a slow call.
#[derive(Debug, Clone, Serialize)]
pub struct NamedValue {
    pub name: &'static str,
    pub value: i64,
}

/// One slow call.
#[derive(Debug, Clone, Serialize)]
pub struct SlowCallReport {
    pub wall_ns: u64,
    /// Time off the CPU, in interrupts, and the rest; `null` where the breakdown is unknown
    /// (or the capture has none).
    pub off_cpu_ns: Option<u64>,
    pub irq_ns: Option<u64>,
    pub on_cpu_ns: Option<u64>,
    /// Entry time (the capture's clock).
    pub entry_ns: u64,
    pub cpu: u32,
    pub pid: u32,
    pub tid: u32,
    /// The recorded arguments by name (`meta.args`).
    pub args: Vec<NamedValue>,
    /// The returned value, for functions whose value means something.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<NamedValue>,
    /// The kernel stack at the return, innermost first.
    pub stack: Vec<String>,
}

impl SlowCallReport {
    fn new(capture: &Capture, breakdown: bool, r: &CallRecord, stack: &[String]) -> Self {
        let func = FunctionId::try_from(r.func).ok();
        let b = r.breakdown().filter(|_| breakdown);
        let args = func.map_or_else(Vec::new, |f| {
            values::recorded_args(capture, f)
                .into_iter()
                .map(|(col, name)| NamedValue {
                    name,
                    value: values::arg(r, col),
                })
                .collect()
        });
        SlowCallReport {
            wall_ns: r.duration_ns,
            off_cpu_ns: b.map(|b| b.off_cpu_ns),
            irq_ns: b.map(|b| b.irq_ns),
            on_cpu_ns: b.map(|b| b.on_cpu_ns),
            entry_ns: r.entry_ns,
            cpu: r.cpu,
            pid: r.pid,
            tid: r.tid,
            args,
            value: func.and_then(value_name).map(|name| NamedValue {
                name,
                value: r.value,
            }),
            stack: stack.to_vec(),
        }
    }

    /// `nr_accesses=3 age=7 → hotness_score=12` (empty without either).
    pub fn values_text(&self) -> String {
        let mut parts: Vec<String> = self
            .args
            .iter()
            .map(|a| format!("{}={}", a.name, a.value))
            .collect();
        if let Some(v) = &self.value {
            parts.push(format!("→ {}={}", v.name, v.value));
        }
        parts.join(" ")
    }
}

/// The slow calls of function `id` (`None` when the capture kept none: recorded without
/// `--slow`). `breakdown`: the capture measured the breakdown.
pub fn function(
    capture: &Capture,
    id: u32,
    opts: &ReportOptions,
    breakdown: bool,
) -> Option<SlowReport> {
    let settings = capture.meta.slow?;
    let counters = capture
        .summary
        .as_ref()
        .and_then(|s| s.slow.get(&id).copied())
        .unwrap_or_default();
    let mut calls: Vec<SlowCallReport> = capture
        .slow_calls
        .iter()
        .filter(|s| s.call.func == id && opts.keeps(s.call.cpu, s.call.pid))
        .map(|s| SlowCallReport::new(capture, breakdown, &s.call, &s.stack))
        .collect();
    calls.sort_by(|a, b| b.wall_ns.cmp(&a.wall_ns).then(a.entry_ns.cmp(&b.entry_ns)));
    Some(SlowReport {
        threshold_ns: settings.threshold_ns,
        counters,
        shown: calls.len().min(opts.slowest),
        calls,
    })
}

impl SlowReport {
    /// `kept 12 of 15 slow calls (≥ 1000 ns): 2 lost (ring full), 1 over the per-function
    /// limit`.
    pub fn counts_text(&self, unit: &str) -> String {
        let c = &self.counters;
        format!(
            "{} slow calls (wall time ≥ {} {unit}): {} kept, {} lost (slow-call ring full), {} \
             over the per-function limit",
            c.total(),
            self.threshold_ns,
            c.kept,
            c.ring_full,
            c.over_limit
        )
    }
}
