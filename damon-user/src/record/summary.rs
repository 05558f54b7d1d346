//! `record --format json`: what a session wrote, as one JSON object on stdout at the end, so a
//! script needs no second pass over the capture (`report --format json` has the latencies).
use std::{collections::BTreeMap, path::Path};

use serde::Serialize;

use crate::capture::{Meta, Summary, stdio::is_stdio};

#[derive(Debug, Serialize)]
pub struct RecordSummary<'a> {
    /// The capture written (`-`: stdout).
    pub path: String,
    pub duration_ns: u64,
    /// "duration", "interrupted" (SIGINT) or "terminated" (SIGTERM/SIGHUP).
    pub exit_reason: &'a str,
    /// `stream`, `kernel` or `both`.
    pub mode: crate::capture::Mode,
    pub ring_size: u32,
    pub functions: Vec<FunctionSummary<'a>>,
    /// `--slow`: the threshold and bounds (absent without it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow: Option<crate::capture::SlowSettings>,
    /// The probe floor measured beside the session (`meta.calibration` of the capture read
    /// back), or why not.
    pub calibration: Option<&'a serde_json::Value>,
}

/// One function: `calls == records + dropped + in_flight`.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct FunctionSummary<'a> {
    pub name: &'a str,
    /// "fentry", "kprobe", or why it is not traced ("missing", "inlined", "failed").
    pub attach: &'a str,
    /// Calls the kernel made while the probes were attached.
    pub calls: u64,
    /// Calls timed: records in the capture (stream), calls in the kernel's histogram (kernel).
    pub records: u64,
    pub dropped: u64,
    pub in_flight: u64,
    /// `--slow`: this function's slow calls kept with their stacks and lost (absent without
    /// `--slow`; all zero when none was slow).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow: Option<crate::capture::SlowCounters>,
}

/// The summary of a finished session; `records` holds the records written per function id
/// (stream mode), the kernel histograms count the rest.
pub fn summarise<'a>(
    path: &Path,
    meta: &'a Meta,
    summary: &'a Summary,
    records: &BTreeMap<u32, u64>,
) -> RecordSummary<'a> {
    let functions = meta
        .functions
        .iter()
        .map(|f| {
            let c = summary.counters.get(&f.id).copied().unwrap_or_default();
            let streamed = records.get(&f.id).copied().unwrap_or(0);
            let bucketed = summary.kernel_hist.get(&f.id).map_or(0, |h| h.count);
            FunctionSummary {
                name: &f.name,
                attach: f.attach.as_str(),
                calls: c.made(),
                records: if meta.mode == crate::capture::Mode::Kernel {
                    bucketed
                } else {
                    streamed
                },
                dropped: c.dropped(),
                in_flight: c.in_flight,
                slow: meta
                    .slow
                    .map(|_| summary.slow.get(&f.id).copied().unwrap_or_default()),
            }
        })
        .collect();
    RecordSummary {
        path: if is_stdio(path) {
            "-".to_owned()
        } else {
            path.display().to_string()
        },
        duration_ns: summary.duration_ns,
        exit_reason: &summary.end_reason,
        mode: meta.mode,
        ring_size: meta.ring_size,
        functions,
        slow: meta.slow,
        calibration: meta.calibration.as_ref(),
    }
}

/// `record --slow`'s end-of-run lines: per function with slow calls, how many were kept and
/// lost (and why), so that none is lost silently; one line when no call was slow.
pub fn slow_lines(
    settings: &crate::capture::SlowSettings,
    summary: &Summary,
    name: impl Fn(u32) -> String,
) -> Vec<String> {
    let threshold = threshold_label(settings.threshold_ns);
    let slow: Vec<_> = summary.slow.iter().filter(|(_, c)| c.total() > 0).collect();
    if slow.is_empty() {
        return vec![format!("slow calls (>= {threshold}): none")];
    }
    let mut out = vec![format!(
        "slow calls (>= {threshold}), kept with their stacks and lost:"
    )];
    for (&id, c) in slow {
        let lost = c.ring_full + c.over_limit;
        let mut line = format!("  {:<27} {} kept, {lost} lost", name(id), c.kept);
        if lost > 0 {
            line.push_str(&format!(
                " ({} ring full: the reader was behind; {} over --slow-max {})",
                c.ring_full, c.over_limit, settings.max_per_function
            ));
        }
        out.push(line);
    }
    out
}

/// `--slow`'s threshold as given: `2ms`, `150us`, `0.5s` style (the largest whole unit).
fn threshold_label(ns: u64) -> String {
    match ns {
        n if n >= 1_000_000_000 && n % 1_000_000 == 0 => format!("{}s", n as f64 / 1e9),
        n if n >= 1_000_000 && n % 1_000 == 0 => format!("{}ms", n as f64 / 1e6),
        n if n >= 1_000 => format!("{}us", n as f64 / 1e3),
        n => format!("{n}ns"),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::capture::format::read_file;

    /// A real capture's meta and summary give the summary `record` would have printed: the
    /// identity holds per function, and the document carries its schema version.
    #[test]
    fn a_real_session_summarised() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/ab-after-7.2.dtcap");
        let cap = read_file(Path::new(path)).expect("fixture");
        let summary = cap.summary.as_ref().expect("summary");
        let mut records = BTreeMap::new();
        for r in &cap.records {
            *records.entry(r.func).or_default() += 1;
        }
        let s = summarise(Path::new("run.dtcap"), &cap.meta, summary, &records);
        assert_eq!(s.path, "run.dtcap");
        assert_eq!(s.exit_reason, summary.end_reason);
        assert_eq!(s.functions.len(), cap.meta.functions.len());
        let traced: Vec<_> = s.functions.iter().filter(|f| f.calls > 0).collect();
        assert!(!traced.is_empty(), "the fixture traced something");
        for f in &s.functions {
            assert_eq!(f.calls, f.records + f.dropped + f.in_flight, "{f:?}");
        }
        let text = crate::output::json_document(&s).expect("json");
        let v: serde_json::Value = serde_json::from_str(&text).expect("parses");
        assert_eq!(v["schema_version"], 1);
        assert_eq!(v["mode"], "stream");
        assert_eq!(
            v["functions"][0]["name"],
            cap.meta.functions[0].name.as_str()
        );
        assert_eq!(
            summarise(Path::new("-"), &cap.meta, summary, &records).path,
            "-"
        );
    }

    /// Every slow call is in a line, kept or lost with its reason; no slow call, one line.
    #[test]
    fn slow_lines_say_kept_and_lost_per_function() {
        use crate::capture::{SlowCounters, SlowSettings};
        let settings = SlowSettings {
            threshold_ns: 2_000_000,
            stack_depth: 32,
            max_per_function: 10,
        };
        let mut s = Summary::new(1, "duration", BTreeMap::new());
        let name = |id: u32| format!("f{id}");
        assert_eq!(
            slow_lines(&settings, &s, name),
            ["slow calls (>= 2ms): none"]
        );
        s.slow.insert(
            1,
            SlowCounters {
                kept: 10,
                ring_full: 3,
                over_limit: 4,
            },
        );
        s.slow.insert(
            2,
            SlowCounters {
                kept: 5,
                ..Default::default()
            },
        );
        let lines = slow_lines(&settings, &s, name);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(
            lines[1].contains("f1") && lines[1].contains("10 kept, 7 lost"),
            "{lines:?}"
        );
        assert!(lines[1].contains("3 ring full") && lines[1].contains("4 over --slow-max 10"));
        assert!(lines[2].ends_with("5 kept, 0 lost"), "{lines:?}");
        assert_eq!(threshold_label(150_000), "150us");
        assert_eq!(threshold_label(500_000_000), "500ms");
        assert_eq!(threshold_label(1_500_000_000), "1.5s");
    }
}
