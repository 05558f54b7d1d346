//! `damon-trace report`: per-function accounting and latency percentiles of a capture.
use std::{collections::BTreeMap, fmt::Write as _, process::ExitCode};

use damon_common::FunctionId;
use serde::Serialize;

use crate::{
    capture::{Capture, FunctionCounters, format::load_file},
    cli::{ReportArgs, ReportFormat},
    stats::{LatencyStats, ValueStats},
};

#[derive(Debug, Serialize)]
pub struct Report {
    pub meta: ReportMeta,
    pub functions: Vec<FunctionReport>,
    /// Things the reader must know to trust the numbers (incomplete capture, accounting gaps).
    pub warnings: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct ReportMeta {
    pub kernel_release: String,
    pub kernel_version: String,
    pub boot_id: String,
    pub tool_version: String,
    /// Tool version that wrote the capture (may differ from the one reporting).
    pub capture_tool_version: String,
    pub start_unix_ns: u64,
    pub duration_ns: Option<u64>,
    pub end_reason: Option<String>,
    /// False when the capture has no summary (the recorder was killed).
    pub complete: bool,
}

#[derive(Debug, Serialize)]
pub struct FunctionReport {
    pub name: String,
    pub attach: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attach_detail: Option<String>,
    pub mode: &'static str,
    /// Entries the kernel saw.
    pub calls: u64,
    /// Records kept in the capture.
    pub count: u64,
    /// Calls seen but not recorded (ring full, stamp map full, nested too deep).
    pub dropped: u64,
    /// Entered but not exited when tracing stopped.
    pub in_flight: u64,
    pub ring_full: u64,
    pub stamp_full: u64,
    pub too_deep: u64,
    /// Exits of calls that began before the probes were attached (not in `calls`).
    pub orphan_exits: u64,
    pub min_ns: Option<u64>,
    pub mean_ns: Option<f64>,
    pub p50_ns: Option<u64>,
    pub p90_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    pub max_ns: Option<u64>,
    /// What the returned value means, for functions whose value is kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_name: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<ValueStats>,
}

fn value_name(func: FunctionId) -> Option<&'static str> {
    match func {
        FunctionId::DamonHotScore => Some("hotness_score"),
        FunctionId::DamonMigratePages => Some("pages_migrated"),
        _ => None,
    }
}

/// Builds the report of a capture (pure).
pub fn build(capture: &Capture) -> Report {
    let mut durations: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    let mut values: BTreeMap<u32, Vec<i64>> = BTreeMap::new();
    for r in &capture.records {
        durations.entry(r.func).or_default().push(r.duration_ns);
        values.entry(r.func).or_default().push(r.value);
    }
    let mut warnings = Vec::new();
    if capture.summary.is_none() {
        warnings.push(
            "capture is incomplete (the recorder did not finish): calls and drops are unknown, \
             `calls` below counts records only"
                .to_owned(),
        );
    }
    let mut functions = Vec::new();
    for status in &capture.meta.functions {
        let mut d = durations.remove(&status.id).unwrap_or_default();
        let count = d.len() as u64;
        let counters = match &capture.summary {
            Some(s) => s.counters.get(&status.id).copied().unwrap_or_default(),
            None => FunctionCounters {
                calls: count,
                emitted: count,
                ..Default::default()
            },
        };
        let lat = LatencyStats::from_durations(&mut d);
        let func = FunctionId::try_from(status.id).ok();
        let vname = func.and_then(value_name);
        let value = vname
            .and_then(|_| ValueStats::from_values(values.remove(&status.id).unwrap_or_default()));
        let f = FunctionReport {
            name: status.name.clone(),
            attach: status.attach.as_str(),
            attach_detail: status.detail.clone(),
            mode: "stream",
            calls: counters.calls,
            count,
            dropped: counters.dropped(),
            in_flight: counters.in_flight,
            ring_full: counters.ring_full,
            stamp_full: counters.stamp_full,
            too_deep: counters.too_deep,
            orphan_exits: counters.orphan_exits,
            min_ns: lat.map(|l| l.min_ns),
            mean_ns: lat.map(|l| l.mean_ns),
            p50_ns: lat.map(|l| l.p50_ns),
            p90_ns: lat.map(|l| l.p90_ns),
            p99_ns: lat.map(|l| l.p99_ns),
            max_ns: lat.map(|l| l.max_ns),
            value_name: vname,
            value,
        };
        if f.calls != f.count + f.dropped + f.in_flight {
            warnings.push(format!(
                "{}: calls ({}) != records ({}) + dropped ({}) + in flight ({}): {} calls unaccounted",
                f.name,
                f.calls,
                f.count,
                f.dropped,
                f.in_flight,
                f.calls as i128 - (f.count + f.dropped + f.in_flight) as i128
            ));
        }
        if f.dropped > 0 {
            warnings.push(format!(
                "{}: {} calls dropped (ring full {}, stamp map full {}, nested too deep {}); \
                 a larger --ring-size helps with ring drops",
                f.name, f.dropped, f.ring_full, f.stamp_full, f.too_deep
            ));
        }
        functions.push(f);
    }
    if let Some(s) = &capture.summary
        && s.malformed_items > 0
    {
        warnings.push(format!(
            "{} ring items of unexpected size were discarded",
            s.malformed_items
        ));
    }
    let m = &capture.meta;
    Report {
        meta: ReportMeta {
            kernel_release: m.kernel.release.clone(),
            kernel_version: m.kernel.version.clone(),
            boot_id: m.kernel.boot_id.clone(),
            tool_version: env!("CARGO_PKG_VERSION").to_owned(),
            capture_tool_version: m.tool_version.clone(),
            start_unix_ns: m.start_unix_ns,
            duration_ns: capture.summary.as_ref().map(|s| s.duration_ns),
            end_reason: capture.summary.as_ref().map(|s| s.end_reason.clone()),
            complete: capture.summary.is_some(),
        },
        functions,
        warnings,
    }
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// Renders the report as an aligned text table.
pub fn render_table(r: &Report) -> String {
    let mut out = String::new();
    let dur = r.meta.duration_ns.map_or_else(
        || "unknown duration".to_owned(),
        |d| format!("{:.1} s", d as f64 / 1e9),
    );
    let _ = writeln!(
        out,
        "kernel {} · {} · captured by damon-trace {}{}",
        r.meta.kernel_release,
        dur,
        r.meta.capture_tool_version,
        r.meta
            .end_reason
            .as_ref()
            .map(|e| format!(" · ended: {e}"))
            .unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "{:<27} {:<7} {:>9} {:>9} {:>7} {:>6} {:>8} {:>9} {:>8} {:>8} {:>8} {:>9}",
        "function",
        "attach",
        "calls",
        "records",
        "dropped",
        "in-fl",
        "min",
        "mean",
        "p50",
        "p90",
        "p99",
        "max"
    );
    for f in &r.functions {
        if f.attach == "missing" || f.attach == "inlined" || f.attach == "failed" {
            let _ = writeln!(
                out,
                "{:<27} {:<7} {}",
                f.name,
                f.attach,
                f.attach_detail.as_deref().unwrap_or("")
            );
            continue;
        }
        let _ = writeln!(
            out,
            "{:<27} {:<7} {:>9} {:>9} {:>7} {:>6} {:>8} {:>9} {:>8} {:>8} {:>8} {:>9}",
            f.name,
            f.attach,
            f.calls,
            f.count,
            f.dropped,
            f.in_flight,
            opt(f.min_ns),
            opt(f.mean_ns.map(|m| format!("{m:.1}"))),
            opt(f.p50_ns),
            opt(f.p90_ns),
            opt(f.p99_ns),
            opt(f.max_ns),
        );
    }
    let _ = writeln!(
        out,
        "latencies in ns, raw: they include the probe's own cost"
    );
    for f in &r.functions {
        if let (Some(name), Some(v)) = (f.value_name, f.value) {
            let _ = writeln!(
                out,
                "{}: {} min {} mean {:.1} max {} (sum {})",
                f.name, name, v.min, v.mean, v.max, v.sum
            );
        }
    }
    for f in &r.functions {
        if f.orphan_exits > 0 {
            let _ = writeln!(
                out,
                "{}: {} exits of calls that began before attach (not counted)",
                f.name, f.orphan_exits
            );
        }
    }
    for w in &r.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

pub fn run(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    let loaded = load_file(&args.file)?;
    let mut report = build(&loaded.capture);
    if let Some(chunk) = loaded.info.torn_chunk {
        report.warnings.push(format!(
            "the file ends inside chunk {chunk} (the recorder was killed while writing it): \
             the records of the complete chunks before it are shown"
        ));
    }
    match args.format {
        ReportFormat::Table => print!("{}", render_table(&report)),
        ReportFormat::Json => println!("{}", serde_json::to_string_pretty(&report)?),
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::{AttachState, FunctionStatus, Meta, Summary};
    use damon_common::CallRecord;

    fn capture(summary: bool) -> Capture {
        let functions = vec![
            FunctionStatus {
                name: "damon_hot_score".into(),
                id: 0,
                attach: AttachState::Fentry,
                detail: None,
            },
            FunctionStatus {
                name: "damon_migrate_pages".into(),
                id: 2,
                attach: AttachState::Missing,
                detail: Some("not in /proc/kallsyms".into()),
            },
        ];
        let records = (1..=10)
            .map(|i| CallRecord {
                entry_ns: i,
                duration_ns: i * 10,
                value: 10 + i as i64,
                pid: 1,
                tid: 1,
                cpu: 0,
                func: 0,
            })
            .collect();
        let mut counters = BTreeMap::new();
        counters.insert(
            0,
            FunctionCounters {
                calls: 13,
                emitted: 10,
                ring_full: 2,
                in_flight: 1,
                orphan_exits: 4,
                ..Default::default()
            },
        );
        Capture {
            meta: Meta {
                tool_version: "0.1.0".into(),
                kernel: Default::default(),
                hostname: String::new(),
                start_unix_ns: 0,
                start_monotonic_ns: 0,
                command_line: vec![],
                mode: "stream".into(),
                ring_size: 4096,
                functions,
                damon: None,
                cpu_model: String::new(),
                calibration: None,
            },
            records,
            summary: summary.then(|| Summary {
                duration_ns: 1,
                end_reason: "duration".into(),
                counters,
                malformed_items: 0,
                damon_end: None,
            }),
        }
    }

    #[test]
    fn accounts_and_summarises() {
        let r = build(&capture(true));
        let f = &r.functions[0];
        assert_eq!((f.calls, f.count, f.dropped, f.in_flight), (13, 10, 2, 1));
        assert_eq!(
            (f.min_ns, f.p50_ns, f.p90_ns, f.max_ns),
            (Some(10), Some(50), Some(90), Some(100))
        );
        assert_eq!(f.value.map(|v| (v.min, v.max)), Some((11, 20)));
        assert_eq!(r.functions[1].attach, "missing");
        assert_eq!(r.functions[1].count, 0);
        // Accounting holds, so the only warning is about the drops.
        assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
        let json: serde_json::Value = serde_json::to_value(&r).expect("json");
        for key in [
            "name",
            "attach",
            "mode",
            "calls",
            "count",
            "dropped",
            "in_flight",
            "min_ns",
            "mean_ns",
            "p50_ns",
            "p90_ns",
            "p99_ns",
            "max_ns",
        ] {
            assert!(json["functions"][0].get(key).is_some(), "missing {key}");
        }
        assert!(json["meta"]["kernel_release"].is_string());
        let table = render_table(&r);
        assert!(
            table.contains("damon_hot_score")
                && table.contains("missing")
                && table.contains("exits of calls"),
            "{table}"
        );
    }

    #[test]
    fn flags_accounting_gaps_and_incomplete_captures() {
        let mut c = capture(true);
        c.records.pop();
        let r = build(&c);
        assert!(
            r.warnings.iter().any(|w| w.contains("1 calls unaccounted")),
            "{:?}",
            r.warnings
        );
        let r = build(&capture(false));
        assert!(!r.meta.complete);
        assert!(r.warnings[0].contains("incomplete"));
    }
}
