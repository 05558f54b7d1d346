//! OpenMetrics text: what `export --format openmetrics` writes and `serve` answers.
//!
//! Per function: a latency histogram in seconds (Prometheus' base unit) over fixed bounds,
//! ten per decade from 100 ns to 10 s ([`BOUNDS_NS`]), so that series from different machines
//! and runs aggregate and `histogram_quantile` lands within a bucket's ~26 % of the truth;
//! the kernel's counters (calls, drops by reason, in flight); and an info metric with the
//! attach mode.
//!
//! Hand-written on purpose: the output is a short text format with a fixed grid, written from
//! captured data by `export` and from a live snapshot by `serve`, with no registry or global
//! state; the prometheus-client crate would add a metric registry and a dependency tree to
//! produce a few hundred lines of text that the tests check line by line (both formats).
use std::fmt::Write as _;

use damon_common::CallRecord;

pub use self::{damon::DamonMetrics, process::ProcessMetrics};
use crate::{
    analysis::disturbance::Disturbance,
    capture::{Clock, FunctionCounters, FunctionStatus},
};

pub mod damon;
pub mod process;

/// Mantissas of the bounds in each decade, ns: a log grid of ten per decade (each about 1.26
/// times the last, the Renard R10 series rounded to whole 10 ns so that a kernel-mode
/// histogram's 10 ns linear buckets map onto it exactly).
const DECADE: [u64; 10] = [100, 130, 160, 200, 250, 320, 400, 500, 630, 800];

/// Decades from 100 ns up; the grid ends with 10 s.
const DECADES: usize = 8;

/// Upper bounds (ns, inclusive as `le` means) of the histogram buckets before `+Inf`:
/// 100 ns to 10 s, ten per decade. Fixed, so every scrape, machine and run has the same `le`
/// series; with `+Inf`, `_sum` and `_count`, 84 series per function.
pub const BOUNDS_NS: [u64; DECADES * DECADE.len() + 1] = bounds();

const fn bounds() -> [u64; DECADES * DECADE.len() + 1] {
    let mut out = [0; DECADES * DECADE.len() + 1];
    let mut scale = 1;
    let mut d = 0;
    while d < DECADES {
        let mut m = 0;
        while m < DECADE.len() {
            out[d * DECADE.len() + m] = DECADE[m] * scale;
            m += 1;
        }
        scale *= 10;
        d += 1;
    }
    out[DECADES * DECADE.len()] = DECADE[0] * scale;
    out
}

/// A histogram of durations over [`BOUNDS_NS`].
#[derive(Debug, Clone, PartialEq)]
pub struct DurationHistogram {
    /// Observations per bucket (not cumulative); the last is `+Inf` only.
    pub buckets: [u64; BOUNDS_NS.len() + 1],
    pub sum_ns: u128,
    pub count: u64,
}

impl Default for DurationHistogram {
    fn default() -> Self {
        DurationHistogram {
            buckets: [0; BOUNDS_NS.len() + 1],
            sum_ns: 0,
            count: 0,
        }
    }
}

impl DurationHistogram {
    pub fn observe(&mut self, duration_ns: u64) {
        // `le` is inclusive: a call of exactly 100 ns belongs to le="1e-07".
        let i = BOUNDS_NS.partition_point(|&b| b < duration_ns);
        self.buckets[i] += 1;
        self.sum_ns += u128::from(duration_ns);
        self.count += 1;
    }
}

/// One function's metrics.
#[derive(Debug, Clone)]
pub struct FunctionMetrics {
    pub id: u32,
    pub name: String,
    pub attach: crate::capture::AttachState,
    pub counters: FunctionCounters,
    /// Per-call latency.
    pub latency: DurationHistogram,
    /// Which recorded calls were clean, when the records say (see [`MetricsSnapshot::
    /// with_disturbance`]).
    pub disturbance: Option<Disturbance>,
}

impl FunctionMetrics {
    pub fn new(status: &FunctionStatus) -> FunctionMetrics {
        FunctionMetrics {
            id: status.id,
            name: status.name.clone(),
            attach: status.attach,
            counters: FunctionCounters::default(),
            latency: DurationHistogram::default(),
            disturbance: None,
        }
    }

    pub fn observe(&mut self, duration_ns: u64) {
        self.latency.observe(duration_ns);
    }

    /// Adds a kernel-mode histogram: each kernel bucket `[lo, hi)` goes to the first bound at
    /// or above its top value `hi - 1`, so a cumulative count at `le=B` holds only calls known
    /// to be at most `B` (never one above it; with the 10 ns linear buckets, every bound up to
    /// the linear range is a bucket edge and nothing is lost). The count is the buckets'
    /// total, so `+Inf` always equals `_count`: while tracing, the kernel's bucket and count
    /// maps are read a moment apart and can differ by the calls in between (at the end they
    /// are equal).
    pub fn observe_hist(&mut self, h: &crate::capture::KernelHist) {
        let l = &mut self.latency;
        for (b, &n) in h.buckets.iter().enumerate().filter(|(_, n)| **n > 0) {
            let (_, hi) = damon_common::hist_bucket_bounds(b as u32, h.width_ns);
            let top = hi.saturating_sub(1);
            let i = BOUNDS_NS.partition_point(|&bound| bound < top);
            l.buckets[i] += n;
            l.count += n;
        }
        l.sum_ns += u128::from(h.sum_ns);
        if let (Some(d), Some(k)) = (&mut self.disturbance, h.disturbance()) {
            d.merge(&k);
        }
    }

    /// Replaces the latency histogram (and the clean and disturbed counts) by a cumulative
    /// kernel-mode one (`serve --mode kernel` reads the kernel's running totals each second).
    pub fn set_hist(&mut self, h: &crate::capture::KernelHist) {
        self.latency = DurationHistogram::default();
        if let Some(d) = &mut self.disturbance {
            *d = Disturbance::default();
        }
        self.observe_hist(h);
    }
}

/// Everything one scrape or export shows.
#[derive(Debug, Clone, Default)]
pub struct MetricsSnapshot {
    pub kernel_release: String,
    pub mode: crate::capture::Mode,
    pub functions: Vec<FunctionMetrics>,
    /// Ring items of unexpected size, discarded.
    pub malformed_items: u64,
    /// DAMON's cost per aggregation interval and the values it returned.
    pub damon: DamonMetrics,
    /// The tool's own cost and probe floor; each rendered when set.
    pub process: ProcessMetrics,
    /// The clock the durations were read from: under the instruction clock the families of
    /// guest-clock values are `_instructions`, not `_seconds`.
    pub clock: Clock,
}

impl MetricsSnapshot {
    pub fn new(
        kernel_release: &str,
        mode: crate::capture::Mode,
        functions: &[FunctionStatus],
    ) -> Self {
        MetricsSnapshot {
            kernel_release: kernel_release.to_owned(),
            mode,
            functions: functions.iter().map(FunctionMetrics::new).collect(),
            ..Default::default()
        }
    }

    /// Counts clean and disturbed calls too, when `measured` (the capture's or session's
    /// metadata says the records carry the counts).
    pub fn with_disturbance(mut self, measured: bool) -> Self {
        for f in &mut self.functions {
            f.disturbance = measured.then(Disturbance::default);
        }
        self
    }

    /// One call: its latency, whether it was disturbed, and for the DAMON functions whose
    /// value is kept the value (`damon_hot_score`'s score, `damon_migrate_pages`' pages moved).
    pub fn observe(&mut self, r: &CallRecord) {
        if let Some(f) = self.functions.iter_mut().find(|f| f.id == r.func) {
            f.observe(r.duration_ns);
            if let Some(d) = &mut f.disturbance {
                d.add(r);
            }
            self.damon.observe_value(r.func, r.value);
        }
    }
}

/// The text format a scrape is answered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposition {
    /// OpenMetrics 1.0: `# TYPE`/`# UNIT`/`# HELP` per family, `# EOF` at the end.
    OpenMetrics,
    /// Prometheus text 0.0.4: `# HELP`/`# TYPE` naming the sample (a counter's `_total`),
    /// no units, info metrics as gauges, no end marker.
    PrometheusText004,
}

impl Exposition {
    /// The `Content-Type` of a response in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Exposition::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Exposition::PrometheusText004 => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// Label values escape `\`, `"` and newlines (function names never need it; kernel releases
/// come from a file we do not control). Both formats escape label values alike.
fn escape(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', r#"\""#)
        .replace('\n', r"\n")
}

/// Seconds as OpenMetrics writes floats: shortest exact decimal.
fn seconds(ns: u128) -> String {
    let whole = ns / 1_000_000_000;
    let frac = ns % 1_000_000_000;
    if frac == 0 {
        return format!("{whole}.0");
    }
    let digits = format!("{frac:09}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// A family's kind, as OpenMetrics names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
    Info,
}

/// The exposition being written: the text, its format, and the clock its guest times were
/// read from.
struct Text {
    out: String,
    format: Exposition,
    clock: Clock,
}

impl Text {
    /// A family of guest-clock values: `{stem}_seconds` in seconds, or under the instruction
    /// clock `{stem}_instructions` in instructions executed (so that no scrape can take a path
    /// length for a time), with its unit and what its help says the values are.
    fn timed(&self, stem: &str) -> (String, &'static str, &'static str) {
        match self.clock {
            Clock::Wall => (format!("{stem}_seconds"), "seconds", "time"),
            Clock::Instructions => (
                format!("{stem}_instructions"),
                "instructions",
                "instructions executed, under QEMU's instruction clock (not time)",
            ),
        }
    }

    /// A guest-clock value (ns of the clock) as this exposition writes it: seconds, or whole
    /// instructions.
    fn time_value(&self, ns: u128) -> String {
        match self.clock {
            Clock::Wall => seconds(ns),
            Clock::Instructions => ns.to_string(),
        }
    }

    /// A family's metadata. `name` is the OpenMetrics family name (a counter's without
    /// `_total`, an info's without `_info`); 0.0.4 names the sample series instead, calls an
    /// info metric a gauge, has no units and escapes only `\\` and newlines in help.
    fn family(&mut self, name: &str, kind: Kind, unit: Option<&str>, help: &str) {
        let out = &mut self.out;
        match self.format {
            Exposition::OpenMetrics => {
                let kind = match kind {
                    Kind::Counter => "counter",
                    Kind::Gauge => "gauge",
                    Kind::Histogram => "histogram",
                    Kind::Info => "info",
                };
                let _ = writeln!(out, "# TYPE {name} {kind}");
                if let Some(u) = unit {
                    let _ = writeln!(out, "# UNIT {name} {u}");
                }
                let _ = writeln!(out, "# HELP {name} {}", escape(help));
            }
            Exposition::PrometheusText004 => {
                let (series, kind) = match kind {
                    Kind::Counter => (format!("{name}_total"), "counter"),
                    Kind::Gauge => (name.to_owned(), "gauge"),
                    Kind::Histogram => (name.to_owned(), "histogram"),
                    Kind::Info => (format!("{name}_info"), "gauge"),
                };
                let help = help.replace('\\', r"\\").replace('\n', r"\n");
                let _ = writeln!(out, "# HELP {series} {help}");
                let _ = writeln!(out, "# TYPE {series} {kind}");
            }
        }
    }
}

/// Renders the OpenMetrics exposition, `# EOF` included.
pub fn render(s: &MetricsSnapshot) -> String {
    render_as(s, Exposition::OpenMetrics)
}

/// Renders the snapshot in the given text format.
pub fn render_as(s: &MetricsSnapshot, format: Exposition) -> String {
    let mut t = Text {
        out: String::new(),
        format,
        clock: s.clock,
    };
    histogram(&mut t, s);
    counters(&mut t, s);
    disturbance(&mut t, s);
    info(&mut t, s);
    damon::render(&mut t, &s.damon);
    process::render(&mut t, &s.process);
    counter_single(
        &mut t,
        "damon_trace_malformed_items",
        "Ring buffer items of unexpected size, discarded.",
        s.malformed_items,
    );
    if format == Exposition::OpenMetrics {
        t.out.push_str("# EOF\n");
    }
    t.out
}

/// One sample per function: `{metric}{function="…"<labels>} <value>`, where `sample` gives
/// the further labels (each with its leading comma) and the value.
fn per_function(
    t: &mut Text,
    s: &MetricsSnapshot,
    metric: &str,
    sample: &dyn Fn(&FunctionMetrics) -> (String, String),
) {
    for f in &s.functions {
        let (labels, value) = sample(f);
        let _ = writeln!(
            t.out,
            "{metric}{{function=\"{}\"{labels}}} {value}",
            escape(&f.name)
        );
    }
}

/// The latency histogram of every function.
fn histogram(t: &mut Text, s: &MetricsSnapshot) {
    let (h, unit, what) = t.timed("damon_trace_call_duration");
    let help = if s.mode == crate::capture::Mode::Kernel {
        format!(
            "Per-call latency of traced kernel functions, in {what} (raw: includes the probe's \
             own cost; kernel mode: from in-kernel buckets, each counted at the first `le` its \
             whole bucket lies under)."
        )
    } else {
        format!(
            "Per-call latency of traced kernel functions, in {what} (raw: includes the probe's \
             own cost)."
        )
    };
    t.family(&h, Kind::Histogram, Some(unit), &help);
    for f in &s.functions {
        duration_samples(
            t,
            &h,
            &format!("function=\"{}\"", escape(&f.name)),
            &f.latency,
        );
    }
}

/// The samples of one histogram over [`BOUNDS_NS`], in seconds (instructions under the
/// instruction clock).
fn duration_samples(t: &mut Text, name: &str, labels: &str, d: &DurationHistogram) {
    let les = BOUNDS_NS
        .iter()
        .map(|&b| t.time_value(u128::from(b)))
        .chain(std::iter::once("+Inf".to_owned()));
    let buckets: Vec<(String, u64)> = les.zip(d.buckets.iter().copied()).collect();
    let sum = t.time_value(d.sum_ns);
    histogram_samples(t, name, labels, &buckets, &sum, d.count);
}

/// The samples of one histogram: `buckets` are `(le, observations in the bucket)` in order,
/// `+Inf` last, written cumulative; then `_sum` and `_count`. `labels` come before `le`.
fn histogram_samples(
    t: &mut Text,
    name: &str,
    labels: &str,
    buckets: &[(String, u64)],
    sum: &str,
    count: u64,
) {
    let sep = if labels.is_empty() { "" } else { "," };
    let mut cumulative = 0;
    for (le, n) in buckets {
        cumulative += n;
        let _ = writeln!(
            t.out,
            "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}"
        );
    }
    let braced = if labels.is_empty() {
        String::new()
    } else {
        format!("{{{labels}}}")
    };
    let _ = writeln!(t.out, "{name}_sum{braced} {sum}");
    let _ = writeln!(t.out, "{name}_count{braced} {count}");
}

/// Calls, drops by reason, orphan exits and calls in flight of every function.
fn counters(t: &mut Text, s: &MetricsSnapshot) {
    let counter = |t: &mut Text, name: &str, help: &str, value: fn(&FunctionCounters) -> u64| {
        t.family(name, Kind::Counter, None, help);
        per_function(t, s, &format!("{name}_total"), &|f| {
            (String::new(), value(&f.counters).to_string())
        });
    };
    counter(
        t,
        "damon_trace_calls",
        "Calls the kernel made while traced (entries seen plus entry runs it skipped).",
        |c| c.made(),
    );
    t.family(
        "damon_trace_dropped",
        Kind::Counter,
        None,
        "Calls made but not recorded, by reason (exit_skipped, entry_skipped: the kernel \
         skipped the probe).",
    );
    for f in &s.functions {
        let c = &f.counters;
        for (reason, v) in [
            ("ring_full", c.ring_full),
            ("stamp_full", c.stamp_full),
            ("too_deep", c.too_deep),
            ("exit_skipped", c.stale_entries),
            ("entry_skipped", c.skipped_entries.unwrap_or(0)),
        ] {
            let _ = writeln!(
                t.out,
                "damon_trace_dropped_total{{function=\"{}\",reason=\"{reason}\"}} {v}",
                escape(&f.name)
            );
        }
    }
    counter(
        t,
        "damon_trace_orphan_exits",
        "Exits without their invocation's entry: calls that began before the probes were \
         attached, or whose entry run the kernel skipped.",
        |c| c.orphan_exits,
    );
    t.family(
        "damon_trace_in_flight",
        Kind::Gauge,
        None,
        "Calls entered and not yet exited.",
    );
    per_function(t, s, "damon_trace_in_flight", &|f| {
        (String::new(), f.counters.in_flight.to_string())
    });
}

/// Recorded calls clean and disturbed, by reason, of every function whose records or kernel
/// histograms say (none of it when no function's do: recorded without `--disturbance`, an
/// older capture).
fn disturbance(t: &mut Text, s: &MetricsSnapshot) {
    let measured: Vec<(&str, &Disturbance)> = s
        .functions
        .iter()
        .filter_map(|f| Some((f.name.as_str(), f.disturbance.as_ref()?)))
        .collect();
    if measured.is_empty() {
        return;
    }
    t.family(
        "damon_trace_calls_clean",
        Kind::Counter,
        None,
        "Recorded calls nothing took the CPU from: the task was not switched out and its CPU \
         handled no interrupt during the call.",
    );
    for (name, d) in &measured {
        let _ = writeln!(
            t.out,
            "damon_trace_calls_clean_total{{function=\"{}\"}} {}",
            escape(name),
            d.clean
        );
    }
    t.family(
        "damon_trace_calls_disturbed",
        Kind::Counter,
        None,
        "Recorded calls the CPU was taken from, by reason: slept, preempted, interrupted (the \
         task kept its CPU, which handled interrupts), lost (a session call whose entry \
         snapshot another call took).",
    );
    for (name, d) in &measured {
        for (reason, v) in [
            ("slept", d.slept),
            ("preempted", d.preempted),
            ("interrupted", d.interrupted),
            ("lost", d.lost),
        ] {
            let _ = writeln!(
                t.out,
                "damon_trace_calls_disturbed_total{{function=\"{}\",reason=\"{reason}\"}} {v}",
                escape(name)
            );
        }
    }
}

/// How each function is traced, and the build and kernel.
fn info(t: &mut Text, s: &MetricsSnapshot) {
    t.family(
        "damon_trace_function",
        Kind::Info,
        None,
        "How each function is traced (fentry, kprobe) or why not (missing, inlined, failed).",
    );
    per_function(t, s, "damon_trace_function_info", &|f| {
        (
            format!(
                ",attach=\"{}\",mode=\"{}\"",
                f.attach,
                escape(s.mode.as_str())
            ),
            "1".to_owned(),
        )
    });
    t.family(
        "damon_trace_build",
        Kind::Info,
        None,
        "The damon-trace version and the traced kernel.",
    );
    let _ = writeln!(
        t.out,
        "damon_trace_build_info{{version=\"{}\",kernel=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION"),
        escape(&s.kernel_release)
    );
}

fn counter_single(t: &mut Text, name: &str, help: &str, v: u64) {
    t.family(name, Kind::Counter, None, help);
    let _ = writeln!(t.out, "{name}_total {v}");
}

#[cfg(test)]
mod tests;
