//! Command-line definitions (clap derive only; no behaviour here).
use std::{path::PathBuf, time::Duration};

use clap::{Args, Parser, Subcommand, ValueEnum};

mod convert;
#[cfg(test)]
mod docs_tests;
mod help;
#[cfg(any(test, feature = "instruments"))]
pub mod instruments;
mod parse;
mod scenario;
mod time;

pub use parse::{parse_duration, parse_ring_size, parse_speed, parse_whole_seconds};
pub use scenario::{ScenarioArgs, ScenarioCommand};
pub use time::TimeBasis;

#[derive(Debug, Parser)]
#[command(
    name = "damon-trace",
    version,
    about = "Per-call latency of DAMON and timer kernel functions, traced with eBPF",
    long_about = "Per-call latency of DAMON and timer kernel functions, traced with eBPF.\n\n\
        Traces damon_hot_score, damos_va_migrate_dests_add, damon_migrate_pages and \
        lock_timer_base, or any kernel function named with --func, with fentry/fexit \
        (kprobe/kretprobe as fallback): one record per call, or per-CPU histograms in the kernel \
        (--mode kernel). Each session first measures the probes' own cost (the probe floor) so \
        reports can show floor-corrected latencies.\n\
        Start with `damon-trace doctor` to see whether this kernel can be traced."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check whether this machine can trace the target functions, and why not.
    Doctor(DoctorArgs),
    /// Watch per-call latency live: a panel per function with rates, percentiles, histograms.
    Live(LiveArgs),
    /// Trace the selected functions for a while and write a capture file.
    Record(RecordArgs),
    /// Summarise a capture: per-function call counts, drops and latency percentiles.
    Report(ReportArgs),
    /// Compare captures before and after (one or several runs a side): range tables,
    /// percentile deltas, intervals and verdicts over runs, workload checks.
    Compare(CompareArgs),
    /// Write a capture as JSON, per-call or per-bucket CSV, or OpenMetrics text.
    Export(ExportArgs),
    /// Trace and serve OpenMetrics/Prometheus metrics over HTTP (GET /metrics) meanwhile.
    Serve(ServeArgs),
    /// Measure the probe floor: what the probes add to every latency, per attach method and
    /// trace mode, timing empty kernel functions (and check it on a held-out one).
    Calibrate(CalibrateArgs),
    /// Drive a reproducible DAMON experiment through sysfs, then restore what was there.
    #[command(subcommand, after_long_help = help::SCENARIO)]
    Scenario(ScenarioCommand),
    /// Print a shell completion script to stdout (bash, zsh, fish, elvish, powershell).
    Completions(CompletionsArgs),
    /// Print the man page (roff) to stdout, or write one page per command into a folder.
    Man(ManArgs),
    /// Memory workload used by `scenario` (a child process; not for direct use).
    #[command(hide = true, name = "__workload")]
    Workload(WorkloadArgs),
    /// Benchmark helper (the project's benchmarks): times a tight loop of getppid system calls.
    #[cfg(any(test, feature = "instruments"))]
    #[command(hide = true, name = "bench-loop")]
    BenchLoop(instruments::LoopArgs),
    /// Test helper: calls made sleeping, preempted or interrupted on purpose (ground truth).
    #[cfg(any(test, feature = "instruments"))]
    #[command(hide = true, name = "disturb-loop")]
    DisturbLoop(instruments::DisturbArgs),
    /// Test helper: vfs_read from a long and a short caller (slow calls' ground truth).
    #[cfg(any(test, feature = "instruments"))]
    #[command(hide = true, name = "read-mix")]
    ReadMix(instruments::ReadMixArgs),
    /// Benchmark helper: context switches between two threads on one CPU (what a program on
    /// `sched_switch` costs).
    #[cfg(any(test, feature = "instruments"))]
    #[command(hide = true, name = "switch-loop")]
    SwitchLoop(instruments::SwitchArgs),
    /// Benchmark helper (the project's benchmarks): userspace decode/aggregate/write throughput.
    #[cfg(any(test, feature = "instruments"))]
    #[command(hide = true, name = "bench-decode")]
    BenchDecode(instruments::DecodeArgs),
    /// Benchmark helper (the project's benchmarks): the heatmaps' cost as a capture grows.
    #[cfg(any(test, feature = "instruments"))]
    #[command(hide = true, name = "bench-heatmap")]
    BenchHeatmap(instruments::HeatmapArgs),
    /// Benchmark helper (the project's benchmarks): attaches the floor programs (an
    /// fentry/fexit or kprobe/kretprobe pair that only reads the clock, once each) to one
    /// function until interrupted.
    #[cfg(any(test, feature = "instruments"))]
    #[command(hide = true, name = "bench-floor")]
    BenchFloor(instruments::FloorArgs),
}

/// `--format text|json` of the commands that print a text or one JSON object; `--json` is
/// its hidden alias (the older spelling).
#[derive(Debug, Args, Clone, Copy)]
pub struct FormatArgs {
    /// text for people, or json: one JSON object (with a schema_version) for programs.
    #[arg(long = "format", value_enum, default_value_t = TextFormat::Text)]
    pub format: TextFormat,
    /// Same as --format json.
    #[arg(long, hide = true, conflicts_with = "format")]
    pub json: bool,
}

impl FormatArgs {
    pub fn json(&self) -> bool {
        self.json || self.format == TextFormat::Json
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TextFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
#[command(after_long_help = help::DOCTOR)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub format: FormatArgs,
    #[command(flatten)]
    pub selection: Selection,
    /// Only the `leftovers` check: the kernel's BPF programs, maps and links, damon-trace's own
    /// marked with the processes holding them. Loads nothing (no attach trial, no self-test),
    /// so it answers at once; exit status 1 while an object of damon-trace is loaded. For
    /// scripts that wait for a stopped tracer's objects to go
    #[arg(long, conflicts_with_all = ["functions", "func", "attach"])]
    pub leftovers: bool,
    #[command(flatten)]
    pub timing: DebugTimingArgs,
}

/// `--debug-timing` of the commands that start probes (`record`, `live`, `serve`, `doctor`,
/// `calibrate`).
#[derive(Debug, Args, Clone, Copy, Default)]
pub struct DebugTimingArgs {
    /// Print on stderr where the start went: each phase (diagnosis, BTF and kallsyms parsing,
    /// calibration, each program's load and attach, ...) with when it began and how long it
    /// took, once the first record arrived (or at the end). Off, nothing is timed.
    /// DAMON_TRACE_DEBUG_TIMING=1 (or true, yes, on) does the same.
    #[arg(long, env = "DAMON_TRACE_DEBUG_TIMING", value_parser = clap::builder::BoolishValueParser::new())]
    pub debug_timing: bool,
}

/// What `record`, `live` and `serve` trace and how, and whether they measure the probe floor
/// first.
#[derive(Debug, Args, Clone)]
pub struct TraceArgs {
    #[command(flatten)]
    pub selection: Selection,
    #[command(flatten)]
    pub mode: ModeArgs,
    #[command(flatten)]
    pub calibration: CalibrationArgs,
    #[command(flatten)]
    pub tasks: TaskFilterArgs,
    /// Show the probes' own diagnostics of their rare paths, with task, CPU and frame: debug
    /// (the default level): orphan exits, stale stamps, a full stamp map or ring, a zero
    /// cookie at a session's return; trace: also each call of a task the filter leaves out.
    /// Off, the log calls are removed when the programs load.
    #[arg(long, value_enum, value_name = "LEVEL", num_args = 0..=1, default_value_t = DebugProbesArg::Off, default_missing_value = "debug", hide_default_value = true)]
    pub debug_probes: DebugProbesArg,
    /// The clock this machine's time runs on, stored in the capture and named by every view:
    /// wall (time, ns) or instructions (a QEMU guest started with `-icount shift=0`, whose
    /// clock advances one ns per instruction executed: durations are path lengths, shown in
    /// insn). A harness that starts such a guest sets DAMON_TRACE_CLOCK=instructions in it.
    #[arg(long, value_enum, env = "DAMON_TRACE_CLOCK", default_value_t = ClockArg::Wall)]
    pub clock: ClockArg,
    #[command(flatten)]
    pub timing: DebugTimingArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ClockArg {
    /// Time: nanoseconds.
    Wall,
    /// Instructions executed, in a guest under QEMU's instruction counter.
    Instructions,
}

/// Whose calls are timed. The filters apply in the kernel, at each entry before any stamp is
/// taken; calls of other tasks are only counted (`filtered` in the report). Several filters:
/// a call must pass all of them.
#[derive(Debug, Args, Clone, Default)]
pub struct TaskFilterArgs {
    /// Only calls made by this process, all its threads (thread group id: the pid `ps` shows).
    #[arg(long, value_name = "TGID", value_parser = clap::value_parser!(u32).range(1..))]
    pub tgid: Option<u32>,
    /// Only calls made by this one task: a thread id (the kernel's pid, as in
    /// /proc/TGID/task/PID; a single-threaded process's pid). Use --tgid for all threads.
    #[arg(long, value_name = "PID", value_parser = clap::value_parser!(u32).range(1..))]
    pub pid: Option<u32>,
    /// Only calls made by tasks directly in this cgroup v2 directory (not its descendants):
    /// absolute, or relative to /sys/fs/cgroup (e.g. system.slice/nginx.service).
    #[arg(long, value_name = "PATH")]
    pub cgroup: Option<PathBuf>,
}

/// Which functions to trace and how.
#[derive(Debug, Args, Clone)]
pub struct Selection {
    /// Comma-separated subset of the built-in functions (default: all four).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub functions: Vec<String>,
    /// Attach method. auto: the cheapest that is exact on this kernel, the others as fallback.
    /// On a preemptible kernel (preempt=full, lazy, rt: the kernel skips a trampoline program
    /// on a CPU while a task is preempted inside it) a kprobe session (Linux 6.10+), else
    /// kprobe/kretprobe (also for damon_hot_score in stream mode: its arguments do not fit in
    /// a session's cookie); elsewhere an fsession (Linux 7.x), else fentry/fexit. Or force
    /// one. `doctor` shows the preemption model and which sessions work.
    #[arg(long, value_enum, default_value_t = AttachArg::Auto)]
    pub attach: AttachArg,
    /// Trace this kernel function (repeatable, up to 11): any function in /proc/kallsyms that
    /// fentry or kprobe can attach to, or a glob (`*`, `?`, `[a-z]`; quote it) over the
    /// functions the kernel can trace (available_filter_functions, minus the kprobe
    /// blacklist), e.g. --func 'vfs_rea?'. With --func only the named functions are traced;
    /// add --functions to trace built-in ones as well.
    #[arg(long = "func", value_name = "NAME")]
    pub func: Vec<String>,
}

/// What the kernel does with each timed call.
#[derive(Debug, Args, Clone, Copy)]
pub struct ModeArgs {
    /// stream: one record per call to userspace; kernel: per-CPU histograms in the kernel, no
    /// per-call records (for very hot functions).
    #[arg(long, value_enum, default_value_t = ModeArg::Stream)]
    pub mode: ModeArg,
    /// Width of the kernel histograms' linear buckets in ns (--mode kernel): 512 of them, then
    /// 32 doubling ones.
    #[arg(long, value_name = "NS", default_value_t = damon_common::DEFAULT_HIST_WIDTH_NS, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000), allow_hyphen_values = true)]
    pub hist_width: u64,
    /// Also read switch and interrupt counts around each call (clean calls; costs, see guide).
    #[arg(long)]
    pub disturbance: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Stream,
    Kernel,
    /// Both for every call (tests: the kernel's buckets against the records).
    #[value(hide = true)]
    Both,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DebugProbesArg {
    Off,
    /// Orphan exits, stale stamps, a full stamp map or ring, zero cookies.
    Debug,
    /// Those and each call of a task the filter leaves out.
    Trace,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AttachArg {
    Auto,
    Fentry,
    Kprobe,
    /// One kprobe-session program per function (Linux ≥ 6.10): exact like kprobes, no stamp
    /// map.
    KprobeSession,
    /// One fsession program per function (Linux 7.x): the trampoline, no stamp map.
    Fsession,
}

#[derive(Debug, Args)]
#[command(after_long_help = help::RECORD)]
pub struct RecordArgs {
    /// Capture file to write (created mode 0600; refused if it exists, unless --force), or
    /// `-` for stdout (not a terminal).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// How long to trace (e.g. 30s, 1m30s, 1.5m, 500ms; a bare number is seconds). Ctrl-C
    /// ends earlier and still writes the file.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration, allow_hyphen_values = true)]
    pub duration: Duration,
    /// Ring buffer size: bytes, or 512K, 8M, 1G (a power of two, at least 4K).
    #[arg(long, value_name = "SIZE", default_value_t = damon_common::DEFAULT_RING_BYTES, value_parser = parse_ring_size, allow_hyphen_values = true)]
    pub ring_size: u32,
    /// Overwrite FILE if it exists.
    #[arg(long)]
    pub force: bool,
    /// json: at the end, a summary on stdout (path, duration, exit reason, mode, per function
    /// calls, records, dropped, in flight, attach method; the probe floor).
    #[command(flatten)]
    pub format: FormatArgs,
    #[command(flatten)]
    pub slow: SlowArgs,
    #[command(flatten)]
    pub trace: TraceArgs,
}

/// Slow calls kept with their kernel stacks (`record`, `live`).
#[derive(Debug, Args, Clone, Copy, Default)]
pub struct SlowArgs {
    /// Also keep every call at least this long (e.g. 1ms, 200us, 0.5s) with its kernel stack
    /// at return (its callers, symbolized from /proc/kallsyms), besides its record: in the
    /// capture, with CPU, task, arguments, return value and time breakdown. Stream mode
    /// only. At the end, how many were kept and lost, per function.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true)]
    pub slow: Option<Duration>,
    /// With --slow: slow calls kept per function at most; later ones are only counted
    /// (`over limit` at the end).
    #[arg(long, value_name = "N", requires = "slow", default_value_t = DEFAULT_SLOW_MAX, value_parser = clap::value_parser!(u64).range(1..))]
    pub slow_max: u64,
}

/// `--slow-max`'s default: slow calls kept per function (each about 330 bytes of stack names
/// in the capture); later ones are only counted.
pub const DEFAULT_SLOW_MAX: u64 = 1000;

#[derive(Debug, Args)]
#[command(after_long_help = help::LIVE)]
pub struct LiveArgs {
    /// Also write what is traced to FILE: the same capture `record` writes.
    #[arg(long, value_name = "FILE", conflicts_with = "replay")]
    pub record: Option<PathBuf>,
    /// Overwrite the --record FILE if it exists.
    #[arg(long, requires = "record")]
    pub force: bool,
    /// Play a capture through the screen instead of tracing (no kernel access needed).
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,
    /// Replay speed: 1 is real time, 10 ten times faster, 0 as fast as possible.
    #[arg(long, default_value_t = 1.0, requires = "replay", value_parser = parse_speed, allow_hyphen_values = true)]
    pub speed: f64,
    /// Width of the linear histogram buckets in ns (`+`/`-` change it on screen).
    #[arg(long, value_name = "NS", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=10_000_000_000), allow_hyphen_values = true)]
    pub bucket_ns: u64,
    /// Length of the sliding window: seconds, or a duration such as 2m (1 s to 1 h; `w`
    /// switches between it and since-start).
    #[arg(long, value_name = "DURATION", default_value_t = 10, value_parser = |s: &str| parse_whole_seconds(s, 1, 3600), allow_hyphen_values = true)]
    pub window: u32,
    /// Ring buffer size: bytes, or 512K, 8M, 1G (a power of two, at least 4K).
    #[arg(long, value_name = "SIZE", default_value_t = damon_common::DEFAULT_RING_BYTES, value_parser = parse_ring_size, allow_hyphen_values = true, conflicts_with = "replay")]
    pub ring_size: u32,
    /// What the histograms, percentiles and heatmaps measure: wall (each call's whole
    /// duration) or on-cpu (its wall time minus its time off the CPU and in interrupts; the
    /// header says so). on-cpu traces with --disturbance (implied) in stream mode; a replayed
    /// capture must have been recorded so. Calls whose breakdown is not known are set aside
    /// and counted on their panel.
    #[arg(long, value_enum, value_name = "BASIS", default_value_t = TimeBasis::Wall)]
    pub time: TimeBasis,
    #[command(flatten)]
    pub slow: SlowArgs,
    #[command(flatten)]
    pub trace: TraceArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Table,
    Json,
    Csv,
    Markdown,
}

#[derive(Debug, Args)]
#[command(after_long_help = help::REPORT)]
pub struct ReportArgs {
    /// Capture file written by `record`.
    pub file: PathBuf,
    #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
    pub format: ReportFormat,
    /// Also draw latency over time into this SVG file: per function a heatmap (calls per time
    /// column and latency row) with p50/p99 lines and DAMON interval ends marked, the clean
    /// calls apart (captures with disturbance), time per aggregation interval (DAMON functions).
    /// `-`: the SVG alone on stdout. Needs a stream-mode capture.
    #[arg(long, value_name = "FILE.svg")]
    pub heatmap: Option<PathBuf>,
    /// Overwrite the --heatmap file if it exists.
    #[arg(long, requires = "heatmap")]
    pub force: bool,
    /// Slow calls (kept by `record --slow`) shown per function in the table and Markdown,
    /// slowest first, each with its breakdown, arguments, CPU, task and stack; 0: none. JSON
    /// holds every kept one.
    #[arg(long, value_name = "N", default_value_t = crate::analysis::slow::DEFAULT_SLOWEST)]
    pub slowest: usize,
    #[command(flatten)]
    pub buckets: BucketArgs,
    #[command(flatten)]
    pub filter: RecordFilter,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompareFormat {
    Table,
    Json,
    Markdown,
}

#[derive(Debug, Args)]
#[command(after_long_help = help::COMPARE)]
pub struct CompareArgs {
    /// The reference capture (e.g. the unpatched kernel), one run.
    #[arg(
        value_name = "BEFORE",
        required_unless_present = "before_runs",
        conflicts_with_all = ["before_runs", "after_runs"],
        requires = "after"
    )]
    pub before: Option<PathBuf>,
    /// The capture to judge against it, one run.
    #[arg(value_name = "AFTER")]
    pub after: Option<PathBuf>,
    /// Captures of the reference side, one per run (separate boots): --before a.dtcap b.dtcap …
    #[arg(long = "before", id = "before_runs", value_name = "FILE", num_args = 1.., requires = "after_runs")]
    pub before_runs: Vec<PathBuf>,
    /// Captures of the side to judge, one per run: --after x.dtcap y.dtcap …
    #[arg(long = "after", id = "after_runs", value_name = "FILE", num_args = 1.., requires = "before_runs")]
    pub after_runs: Vec<PathBuf>,
    #[arg(long, value_enum, default_value_t = CompareFormat::Table)]
    pub format: CompareFormat,
    /// Also draw both distributions, one chart per function, into this SVG file, and below
    /// them each function's before and after heatmaps (latency over time) on one colour scale.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Overwrite the --plot file if it exists.
    #[arg(long, requires = "plot")]
    pub force: bool,
    /// Judge on clean calls only: no switch, no interrupt during the call (captures must say).
    #[arg(long)]
    pub clean: bool,
    #[command(flatten)]
    pub buckets: BucketArgs,
    #[command(flatten)]
    pub filter: RecordFilter,
}

impl CompareArgs {
    /// The captures of each side, whichever form was used.
    pub fn sides(&self) -> (Vec<PathBuf>, Vec<PathBuf>) {
        match (&self.before, &self.after) {
            (Some(b), Some(a)) => (vec![b.clone()], vec![a.clone()]),
            _ => (self.before_runs.clone(), self.after_runs.clone()),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// The whole capture: metadata, summary and every record.
    Json,
    /// One line per call.
    Csv,
    /// One line per range-table row (--bucket-ns, --max-ns).
    CsvBuckets,
    /// One line per DAMON aggregation interval and DAMON function: its calls and the time
    /// they took in that interval (the numbers behind report's per-interval cost).
    CsvIntervals,
    /// Histograms (`_bucket{le=…}`, `_sum`, `_count`), the kernel's counters, DAMON's cost
    /// per interval, pages migrated and hot scores.
    Openmetrics,
}

#[derive(Debug, Args)]
#[command(after_long_help = help::EXPORT)]
pub struct ExportArgs {
    /// Capture file written by `record`.
    pub file: PathBuf,
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// Where to write: a file (created mode 0600), or `-` for stdout.
    #[arg(short, long, value_name = "OUT", default_value = "-")]
    pub output: PathBuf,
    /// Overwrite OUT if it exists.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub buckets: BucketArgs,
    #[command(flatten)]
    pub filter: RecordFilter,
}

#[derive(Debug, Args)]
#[command(after_long_help = help::SERVE)]
pub struct ServeArgs {
    /// Address to listen on: HOST:PORT with an address or a host name (127.0.0.1:9464,
    /// localhost:9464, [::1]:9464), or :PORT for every IPv4 interface (reachable from other
    /// machines: mind the firewall).
    #[arg(long, value_name = "ADDR", default_value = crate::listen::DEFAULT_LISTEN)]
    pub listen: crate::listen::Listen,
    /// Stop after this long (e.g. 10m, 1h30m; default: until SIGINT/SIGTERM).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// After tracing ends, keep answering scrapes this long with the session's final numbers,
    /// so that a scrape can see its last seconds too (e.g. 2x the scrape interval); SIGINT or
    /// SIGTERM ends it early.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true)]
    pub linger: Option<Duration>,
    /// Also write what is traced to FILE: the capture `record` writes, of the same session
    /// the scrapes see (so `report FILE` can be set beside the scraped histograms).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Overwrite the --output FILE if it exists.
    #[arg(long, requires = "output")]
    pub force: bool,
    /// Ring buffer size: bytes, or 512K, 8M, 1G (a power of two, at least 4K).
    #[arg(long, value_name = "SIZE", default_value_t = damon_common::DEFAULT_RING_BYTES, value_parser = parse_ring_size, allow_hyphen_values = true)]
    pub ring_size: u32,
    #[command(flatten)]
    pub trace: TraceArgs,
}

/// Measuring the probe floor when a session starts (`record`, `live`, `serve`).
#[derive(Debug, Args, Clone, Copy)]
pub struct CalibrationArgs {
    /// Do not measure the probe floor (by default measured beside the session's first
    /// seconds): the capture then says calibration was skipped, and only raw latencies can be
    /// shown.
    #[arg(long)]
    pub no_calibrate: bool,
    /// Test runs per probe floor (each calls every calibration function once).
    #[arg(long, value_name = "N", default_value_t = crate::probe::calibrate::DEFAULT_CALLS, value_parser = clap::value_parser!(u64).range(100..=10_000_000), conflicts_with = "no_calibrate", allow_hyphen_values = true)]
    pub calibrate_calls: u64,
}

#[derive(Debug, Args)]
#[command(after_long_help = help::CALIBRATE)]
pub struct CalibrateArgs {
    /// Test runs per floor (each calls every calibration function once).
    #[arg(long, value_name = "N", default_value_t = crate::probe::calibrate::DEFAULT_CALLS, value_parser = clap::value_parser!(u64).range(100..=10_000_000), allow_hyphen_values = true)]
    pub calls: u64,
    /// Attach method to calibrate, or auto for every method this kernel has.
    #[arg(long, value_enum, default_value_t = AttachArg::Auto)]
    pub attach: AttachArg,
    /// Trace modes to calibrate, comma-separated (stream, kernel).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "stream")]
    pub mode: Vec<ModeArg>,
    /// Width of the kernel histograms' linear buckets in ns (kernel mode), as the session
    /// will use it.
    #[arg(long, value_name = "NS", default_value_t = damon_common::DEFAULT_HIST_WIDTH_NS, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000), allow_hyphen_values = true)]
    pub hist_width: u64,
    /// The clock this machine's time runs on: wall (ns) or instructions (a QEMU guest under
    /// `-icount shift=0`: floors are instructions, shown in insn). Set by
    /// DAMON_TRACE_CLOCK as for record.
    #[arg(long, value_enum, env = "DAMON_TRACE_CLOCK", default_value_t = ClockArg::Wall)]
    pub clock: ClockArg,
    /// json: the shape of a capture's meta.calibration, with the clock beside it.
    #[command(flatten)]
    pub format: FormatArgs,
    #[command(flatten)]
    pub timing: DebugTimingArgs,
}

/// How the `Range (ns) | Count | Percent` tables are cut.
#[derive(Debug, Args, Clone, Copy)]
pub struct BucketArgs {
    /// Width of the range table's rows in ns.
    #[arg(long, value_name = "NS", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..), allow_hyphen_values = true)]
    pub bucket_ns: u64,
    /// Upper edge of the last row (larger values share one `>= NS` row). Without it the rows
    /// reach past the p99, and widen (×2, ×5, ×10, …) if that would take over 40 lines.
    #[arg(long, value_name = "NS", allow_hyphen_values = true)]
    pub max_ns: Option<u64>,
}

/// Which records of a capture to look at.
#[derive(Debug, Args, Clone, Default)]
pub struct RecordFilter {
    /// Only these functions (comma-separated names, as the capture lists them).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub functions: Vec<String>,
    /// Only calls that ran on these CPUs (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "CPUS")]
    pub cpu: Vec<u32>,
    /// Only calls made by these processes (thread group ids, comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "PIDS")]
    pub pid: Vec<u32>,
    /// The time every statistic is over: wall (entry to return) or on-cpu (wall minus the
    /// time off the CPU and in interrupts: the function's own work). on-cpu needs a capture
    /// recorded with --disturbance in stream mode; calls whose breakdown is unknown are set
    /// aside and counted. export: csv-buckets and csv-intervals only.
    #[arg(long, value_enum, value_name = "BASIS", default_value_t = TimeBasis::Wall)]
    pub time: TimeBasis,
}

impl crate::analysis::ReportOptions {
    /// What the filter and bucket flags ask of the analysis.
    pub fn new(filter: &RecordFilter, buckets: &BucketArgs) -> Self {
        Self {
            functions: filter.functions.clone(),
            cpu: filter.cpu.clone(),
            pid: filter.pid.clone(),
            bucket_ns: buckets.bucket_ns,
            max_ns: buckets.max_ns,
            clean_only: false,
            time: filter.time.into(),
            slowest: crate::analysis::slow::DEFAULT_SLOWEST,
        }
    }
}

#[derive(Debug, Args)]
#[command(after_long_help = help::COMPLETIONS)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
#[command(after_long_help = help::MAN)]
pub struct ManArgs {
    /// Write damon-trace.1 and one page per command (damon-trace-record.1, …) into DIR
    /// instead of printing the main page.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct WorkloadArgs {
    #[arg(long)]
    pub total_mib: u64,
    #[arg(long)]
    pub hot_mib: u64,
}

#[cfg(test)]
mod tests;
