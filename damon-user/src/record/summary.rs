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
        calibration: meta.calibration.as_ref(),
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
}
