//! Command-line definitions (clap derive only; no behaviour here).
use std::{path::PathBuf, time::Duration};

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "damon-trace",
    version,
    about = "Per-call latency of DAMON and timer kernel functions, traced with eBPF",
    long_about = "Per-call latency of DAMON and timer kernel functions, traced with eBPF.\n\n\
        Traces damon_hot_score, damos_va_migrate_dests_add, damon_migrate_pages and \
        lock_timer_base with fentry/fexit (kprobe/kretprobe as fallback), one record per call.\n\
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
    /// Trace the selected functions for a while and write a capture file.
    Record(RecordArgs),
    /// Summarise a capture: per-function call counts, drops and latency percentiles.
    Report(ReportArgs),
    /// Drive a reproducible DAMON experiment through sysfs, then restore what was there.
    #[command(subcommand)]
    Scenario(ScenarioCommand),
    /// Memory workload used by `scenario` (a child process; not for direct use).
    #[command(hide = true, name = "__workload")]
    Workload(WorkloadArgs),
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print the diagnosis as one JSON object.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub selection: Selection,
}

/// Which functions to trace and how.
#[derive(Debug, Args, Clone)]
pub struct Selection {
    /// Comma-separated subset of the built-in functions (default: all four).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub functions: Vec<String>,
    /// Attach method: fentry/fexit with kprobe fallback (auto), or force one.
    #[arg(long, value_enum, default_value_t = AttachChoice::Auto)]
    pub attach: AttachChoice,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AttachChoice {
    Auto,
    Fentry,
    Kprobe,
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Capture file to write.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// How long to trace (e.g. 30s, 2m, 500ms). Ctrl-C ends earlier and still writes the file.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Ring buffer size in bytes (power of two, at least one page).
    #[arg(long, value_name = "BYTES", default_value_t = damon_common::DEFAULT_RING_BYTES, value_parser = parse_ring_size)]
    pub ring_size: u32,
    /// Overwrite FILE if it exists.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub selection: Selection,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Table,
    Json,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Capture file written by `record`.
    pub file: PathBuf,
    #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
    pub format: ReportFormat,
}

#[derive(Debug, Subcommand)]
pub enum ScenarioCommand {
    /// Hot/cold workload under a DAMON `migrate_hot` scheme with a quota: exercises
    /// damon_hot_score, damos_va_migrate_dests_add and damon_migrate_pages.
    MigrateHot(ScenarioArgs),
}

#[derive(Debug, Args)]
pub struct ScenarioArgs {
    /// How long to keep DAMON running before restoring the previous state.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Size of the workload's mapping in MiB.
    #[arg(long, default_value_t = 256)]
    pub workload_mib: u64,
    /// Size of its hot (repeatedly written) part in MiB.
    #[arg(long, default_value_t = 32)]
    pub hot_mib: u64,
}

#[derive(Debug, Args)]
pub struct WorkloadArgs {
    #[arg(long)]
    pub total_mib: u64,
    #[arg(long)]
    pub hot_mib: u64,
}

/// Parses `1500ms`, `30s`, `2m`, `1h`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (examples: 500ms, 30s, 2m)"))?;
    let secs = match unit {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => {
            return Err(format!(
                "unknown unit `{unit}` in `{s}` (use ms, s, m or h)"
            ));
        }
    };
    if !secs.is_finite() || secs <= 0.0 || secs > 7.0 * 86400.0 {
        return Err(format!(
            "duration `{s}` must be positive and at most a week"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Ring buffer sizes must be a power of two and a multiple of the page size.
pub fn parse_ring_size(s: &str) -> Result<u32, String> {
    let v: u32 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a size in bytes"))?;
    if v < 4096 || !v.is_power_of_two() {
        return Err(format!(
            "ring size {v} must be a power of two and at least 4096"
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("3 fortnights").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn ring_sizes() {
        assert_eq!(parse_ring_size("4096"), Ok(4096));
        assert!(parse_ring_size("4095").is_err());
        assert!(parse_ring_size("6144").is_err());
        assert!(parse_ring_size("2048").is_err());
        assert!(parse_ring_size("big").is_err());
    }

    #[test]
    fn cli_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
