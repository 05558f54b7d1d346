use std::{collections::BTreeMap, path::Path};

use super::*;
use crate::{capture::format::read_file, cli::ExportFormat};

/// A capture in `tests/data`.
fn data(name: &str) -> Capture {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    read_file(&dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn fixture() -> Capture {
    data("migrate-hot-7.2.dtcap")
}

fn export(format: ExportFormat, opts: ReportOptions) -> String {
    let mut out = Vec::new();
    exporter(format, opts)
        .export(&fixture(), &mut out)
        .expect("export");
    String::from_utf8(out).expect("utf-8")
}

fn opts() -> ReportOptions {
    ReportOptions {
        bucket_ns: 20,
        ..Default::default()
    }
}

/// A minimal OpenMetrics reader: `name{labels} value` lines, comments kept apart.
pub fn parse_samples(text: &str) -> Vec<(String, BTreeMap<String, String>, f64)> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').expect("sample line");
        let (name, labels) = match series.split_once('{') {
            Some((n, rest)) => (n, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        let labels = labels
            .split(',')
            .filter(|l| !l.is_empty())
            .map(|kv| {
                let (k, v) = kv.split_once('=').expect("label");
                (k.to_owned(), v.trim_matches('"').to_owned())
            })
            .collect();
        out.push((name.to_owned(), labels, value.parse().expect("value")));
    }
    out
}

#[test]
fn per_call_csv() {
    let text = export(ExportFormat::Csv, opts());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "function,cpu,pid,tid,entry_ns,duration_ns,value");
    assert_eq!(lines.len(), 3613);
    assert!(lines[1..].iter().all(|l| l.split(',').count() == 7));
    let only = export(
        ExportFormat::Csv,
        ReportOptions {
            functions: vec!["lock_timer_base".into()],
            cpu: vec![1],
            ..opts()
        },
    );
    assert!(
        only.lines()
            .skip(1)
            .all(|l| l.starts_with("lock_timer_base,1,"))
    );
}

/// The fixture as if recorded under the instruction clock.
fn instruction_clock() -> Capture {
    let mut c = fixture();
    c.meta.clock = crate::capture::Clock::Instructions;
    c
}

/// Under the instruction clock the duration column names its unit.
#[test]
fn per_call_csv_names_the_instruction_clock() {
    let text = export_capture(&instruction_clock(), ExportFormat::Csv).expect("export");
    assert_eq!(
        text.lines().next(),
        Some("function,cpu,pid,tid,entry_ns,duration_insn,value")
    );
}

/// Under the instruction clock the guest-clock families count instructions: their names,
/// units and help say so, their bounds and sums are whole instructions, and none of them is
/// left in seconds; the counts are the wall-clock export's.
#[test]
fn openmetrics_names_the_instruction_clock() {
    let text = export_capture(&instruction_clock(), ExportFormat::Openmetrics).expect("export");
    let insn = "damon_trace_call_duration_instructions";
    assert!(
        text.contains(&format!("# UNIT {insn} instructions")),
        "{text}"
    );
    assert!(
        text.contains("under QEMU's instruction clock (not time)"),
        "{text}"
    );
    assert!(
        !text.contains("damon_trace_call_duration_seconds"),
        "{text}"
    );
    assert!(
        !text.contains("damon_trace_interval_cost_seconds"),
        "{text}"
    );
    let samples = parse_samples(&text);
    let wall = parse_samples(&export(ExportFormat::Openmetrics, opts()));
    let count = |s: &[(String, BTreeMap<String, String>, f64)], name: &str| -> f64 {
        s.iter().filter(|(n, ..)| n == name).map(|(.., v)| v).sum()
    };
    assert_eq!(
        count(&samples, &format!("{insn}_count")),
        count(&wall, "damon_trace_call_duration_seconds_count")
    );
    let sum = count(&samples, &format!("{insn}_sum"));
    let wall_sum = count(&wall, "damon_trace_call_duration_seconds_sum");
    assert!(
        (sum - wall_sum * 1e9).abs() < 1.0 && sum.fract() == 0.0,
        "{sum} {wall_sum}"
    );
    assert!(
        samples
            .iter()
            .filter(|(n, ..)| n == &format!("{insn}_bucket"))
            .all(|(_, l, _)| l["le"] == "+Inf" || !l["le"].contains('.')),
        "whole-instruction bounds"
    );
}

#[test]
fn per_bucket_csv_adds_up() {
    let text = export(ExportFormat::CsvBuckets, opts());
    let mut per_fn: BTreeMap<String, u64> = BTreeMap::new();
    for l in text.lines().skip(1) {
        let f: Vec<&str> = l.split(',').collect();
        *per_fn.entry(f[0].to_owned()).or_default() += f[3].parse::<u64>().expect("count");
    }
    assert_eq!(per_fn["damon_hot_score"], 2961);
    assert_eq!(per_fn["lock_timer_base"], 559);
    assert_eq!(per_fn.values().sum::<u64>(), 3612);
}

#[test]
fn json_holds_every_record() {
    let v: serde_json::Value =
        serde_json::from_str(&export(ExportFormat::Json, opts())).expect("valid JSON");
    assert!(
        v["meta"]["kernel"]["release"]
            .as_str()
            .expect("release")
            .starts_with("7.2.")
    );
    let records = v["records"].as_array().expect("records");
    assert_eq!(records.len(), 3612);
    assert!(
        records
            .iter()
            .all(|r| r["duration_ns"].as_u64().is_some_and(|d| d > 0))
    );
    assert!(v["summary"]["counters"].is_object());
}

#[test]
fn openmetrics_histograms_are_cumulative_and_add_up() {
    let text = export(ExportFormat::Openmetrics, opts());
    assert!(text.ends_with("# EOF\n"), "{text}");
    let samples = parse_samples(&text);
    let get = |name: &str, func: &str, extra: Option<(&str, &str)>| {
        samples
            .iter()
            .filter(|(n, l, _)| {
                n == name
                    && l.get("function").map(String::as_str) == Some(func)
                    && extra.is_none_or(|(k, v)| l.get(k).map(String::as_str) == Some(v))
            })
            .map(|s| s.2)
            .collect::<Vec<f64>>()
    };
    for (func, n) in [("damon_hot_score", 2961.0), ("lock_timer_base", 559.0)] {
        let buckets = get("damon_trace_call_duration_seconds_bucket", func, None);
        assert_eq!(buckets.len(), openmetrics::BOUNDS_NS.len() + 1);
        assert!(
            buckets.windows(2).all(|w| w[0] <= w[1]),
            "{func}: {buckets:?}"
        );
        assert_eq!(buckets.last(), Some(&n));
        assert_eq!(
            get("damon_trace_call_duration_seconds_count", func, None),
            vec![n]
        );
        assert_eq!(get("damon_trace_calls_total", func, None), vec![n]);
        assert_eq!(
            get(
                "damon_trace_dropped_total",
                func,
                Some(("reason", "ring_full"))
            ),
            vec![0.0]
        );
        assert_eq!(
            get(
                "damon_trace_function_info",
                func,
                Some(("attach", "fentry"))
            ),
            vec![1.0]
        );
    }
    // lock_timer_base: min 731 ns, so nothing at or below 500 ns and all of it by 2 s.
    let b = get(
        "damon_trace_call_duration_seconds_bucket",
        "lock_timer_base",
        Some(("le", "0.0000005")),
    );
    assert_eq!(b, vec![0.0]);
    let sum = get(
        "damon_trace_call_duration_seconds_sum",
        "lock_timer_base",
        None,
    )[0];
    assert!((sum / 559.0 - 19560.9e-9).abs() < 1e-9, "{sum}");
}

#[test]
fn le_is_inclusive_and_seconds_are_exact() {
    use openmetrics::{FunctionMetrics, MetricsSnapshot, render};
    let status = crate::capture::FunctionStatus {
        name: "f".into(),
        id: 0,
        attach: crate::capture::AttachState::Traced(crate::trace::Attach::Kprobe),
        detail: None,
    };
    let mut m = FunctionMetrics::new(&status);
    for d in [100, 101, 10_000_000_001] {
        m.observe(d);
    }
    let last = openmetrics::BOUNDS_NS.len();
    assert_eq!(
        (
            m.latency.buckets[0],
            m.latency.buckets[1],
            m.latency.buckets[last]
        ),
        (1, 1, 1)
    );
    let s = MetricsSnapshot {
        functions: vec![m],
        ..Default::default()
    };
    let text = render(&s);
    assert!(
        text.contains("_bucket{function=\"f\",le=\"0.0000001\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("_bucket{function=\"f\",le=\"10.0\"} 2\n"),
        "{text}"
    );
    assert!(
        text.contains("_sum{function=\"f\"} 10.000000202\n"),
        "{text}"
    );
}

/// 7.2 guest, `--ring-size 4096`, recorder paused 80 % of the time (see
/// `tui::test_support::overload_fixture`): most calls were dropped.
fn overload() -> Capture {
    data("overload-7.2.dtcap")
}

fn export_overload(format: ExportFormat) -> String {
    let mut out = Vec::new();
    exporter(format, opts())
        .export(&overload(), &mut out)
        .expect("export");
    String::from_utf8(out).expect("utf-8")
}

/// (name, calls, records, dropped) of the overload fixture, from its summary.
const OVERLOAD: [(&str, u64, u64, u64); 4] = [
    ("damon_hot_score", 125_830, 7197, 118_633),
    ("damos_va_migrate_dests_add", 671, 142, 529),
    ("damon_migrate_pages", 660, 146, 514),
    ("lock_timer_base", 846, 604, 242),
];

#[test]
fn overload_json_accounts_for_every_call() {
    let v: serde_json::Value =
        serde_json::from_str(&export_overload(ExportFormat::Json)).expect("valid JSON");
    let accounting = v["accounting"].as_array().expect("accounting");
    assert_eq!(accounting.len(), 4);
    let records = v["records"].as_array().expect("records");
    for (a, (name, calls, kept, dropped)) in accounting.iter().zip(OVERLOAD) {
        let n = |k: &str| a[k].as_u64().unwrap_or_else(|| panic!("{k}: {a}"));
        assert_eq!(a["function"], name);
        assert_eq!(
            (n("calls"), n("records"), n("dropped")),
            (calls, kept, dropped)
        );
        assert_eq!(n("ring_full"), dropped, "{a}");
        assert_eq!(
            n("calls"),
            n("records") + n("dropped") + n("in_flight"),
            "{a}"
        );
        let listed = records.iter().filter(|r| r["function"] == name).count() as u64;
        assert_eq!(listed, kept, "{name}");
    }
}

#[test]
fn overload_csv_buckets_carry_the_drops() {
    let text = export_overload(ExportFormat::CsvBuckets);
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("function,lo_ns,hi_ns,count,percent,calls,records,dropped,in_flight")
    );
    let mut seen: BTreeMap<String, (u64, [u64; 4])> = BTreeMap::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        assert_eq!(f.len(), 9, "{l}");
        let n = |i: usize| f[i].parse::<u64>().unwrap_or_else(|_| panic!("{l}"));
        let acc = [n(5), n(6), n(7), n(8)];
        let e = seen.entry(f[0].to_owned()).or_insert((0, acc));
        assert_eq!(e.1, acc, "accounting differs between rows of {}", f[0]);
        e.0 += n(3);
    }
    for (name, calls, kept, dropped) in OVERLOAD {
        let (rows, [c, r, d, inf]) = seen[name];
        assert_eq!((c, r, d), (calls, kept, dropped), "{name}");
        assert_eq!(c, r + d + inf, "{name}");
        assert_eq!(rows, kept, "{name}: the rows hold every record");
    }
}

#[test]
fn csv_buckets_list_a_function_whose_calls_were_all_dropped() {
    let mut c = overload();
    c.records.retain(|r| r.func != 3);
    let mut out = Vec::new();
    exporter(ExportFormat::CsvBuckets, opts())
        .export(&c, &mut out)
        .expect("export");
    let text = String::from_utf8(out).expect("utf-8");
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("lock_timer_base,"))
        .collect();
    // Records 0 (none left), yet the kernel's calls and drops are still said.
    assert_eq!(rows, ["lock_timer_base,,,0,0.0000,846,0,242,0"]);
}

#[test]
fn overload_openmetrics_counts_drops() {
    let samples = parse_samples(&export_overload(ExportFormat::Openmetrics));
    let get = |name: &str, func: &str, reason: Option<&str>| {
        samples
            .iter()
            .find(|(n, l, _)| {
                n == name
                    && l.get("function").map(String::as_str) == Some(func)
                    && reason.is_none_or(|r| l.get("reason").map(String::as_str) == Some(r))
            })
            .map(|s| s.2 as u64)
            .unwrap_or_else(|| panic!("{name} {func}"))
    };
    for (name, calls, kept, dropped) in OVERLOAD {
        assert_eq!(get("damon_trace_calls_total", name, None), calls);
        assert_eq!(
            get("damon_trace_call_duration_seconds_count", name, None),
            kept
        );
        assert_eq!(
            get("damon_trace_dropped_total", name, Some("ring_full")),
            dropped
        );
        assert_eq!(
            get("damon_trace_dropped_total", name, Some("stamp_full"))
                + get("damon_trace_dropped_total", name, Some("too_deep")),
            0
        );
        assert_eq!(get("damon_trace_in_flight", name, None), 0);
    }
}

fn export_capture(c: &Capture, format: ExportFormat) -> anyhow::Result<String> {
    let mut out = Vec::new();
    exporter(format, opts()).export(c, &mut out)?;
    Ok(String::from_utf8(out).expect("utf-8"))
}

/// Kernel mode: csv-buckets, json and openmetrics come from the histograms and carry the
/// same accounting; per-call csv says it has nothing to write instead of writing nothing.
#[test]
fn kernel_mode_exports_from_buckets() {
    let d: Vec<u64> = (0..500).map(|i| 95 + (i * 13) % 300).collect();
    let c = crate::analysis::test_support::test_capture(&d, true);
    let csv = export_capture(&c, ExportFormat::CsvBuckets).expect("csv-buckets");
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(
        rows.iter()
            .map(|r| r[3].parse::<u64>().expect("count"))
            .sum::<u64>(),
        500
    );
    // calls, records, dropped, in flight: the identity holds.
    assert_eq!(&rows[0][5..], ["502", "500", "1", "1"]);
    let direct = crate::stats::buckets::BucketGrid::plan(
        20,
        None,
        &[&{
            let mut s = d.clone();
            s.sort_unstable();
            s
        }],
    )
    .expect("grid");
    assert_eq!(rows.len(), direct.rows() as usize + 1, "{csv}");

    let json: serde_json::Value =
        serde_json::from_str(&export_capture(&c, ExportFormat::Json).expect("json"))
            .expect("parse");
    assert_eq!(json["accounting"][0]["records"], 500);
    assert_eq!(json["histograms"][0]["count"], 500);
    let buckets = json["histograms"][0]["buckets"]
        .as_array()
        .expect("buckets");
    assert_eq!(
        buckets
            .iter()
            .map(|b| b[2].as_u64().expect("n"))
            .sum::<u64>(),
        500
    );
    assert_eq!(buckets[0][0], 90);
    assert_eq!(buckets[0][1], 100);
    assert_eq!(json["snapshots"][0]["elapsed_ns"], 3_000_000_000u64);
    assert!(json["records"].as_array().expect("records").is_empty());

    let om = export_capture(&c, ExportFormat::Openmetrics).expect("openmetrics");
    let samples = parse_samples(&om);
    let get = |name: &str, le: Option<&str>| {
        samples
            .iter()
            .find(|(n, l, _)| {
                n == name && le.is_none_or(|le| l.get("le").map(String::as_str) == Some(le))
            })
            .map(|s| s.2)
            .expect(name)
    };
    assert_eq!(get("damon_trace_call_duration_seconds_count", None), 500.0);
    assert_eq!(
        get("damon_trace_call_duration_seconds_bucket", Some("+Inf")),
        500.0
    );
    // 95..=99 is the [90, 100) bucket, entirely at or below le=100 ns; [100, 110) is not.
    let at_100 = get(
        "damon_trace_call_duration_seconds_bucket",
        Some("0.0000001"),
    );
    let below = d.iter().filter(|&&v| v < 100).count() as f64;
    assert_eq!(at_100, below);
    assert!(om.contains("kernel mode"), "{om}");

    let err = export_capture(&c, ExportFormat::Csv).expect_err("no records");
    assert!(err.to_string().contains("--mode kernel"), "{err}");
}

/// `serve --mode kernel` replaces each second's histogram by the kernel's cumulative one.
#[test]
fn kernel_histograms_replace_rather_than_add() {
    use crate::{capture::FunctionStatus, export::openmetrics::FunctionMetrics};
    let status = FunctionStatus {
        name: "lock_timer_base".into(),
        id: 3,
        attach: crate::capture::AttachState::Traced(crate::trace::Attach::Fentry),
        detail: None,
    };
    let mut f = FunctionMetrics::new(&status);
    let first = crate::stats::kernel_hist::from_durations(&[50, 150, 999], 10);
    let later = crate::stats::kernel_hist::from_durations(&[50, 150, 999, 20_000], 10);
    f.set_hist(&first);
    f.set_hist(&later);
    assert_eq!((f.latency.count, f.latency.sum_ns), (4, 21_199));
    assert_eq!(f.latency.buckets.iter().sum::<u64>(), 4);
    assert_eq!(f.latency.buckets[0], 1); // le=100 ns: the 50 ns call
}

/// JSON's `damon` block and csv-intervals carry report's per-interval cost and values of the
/// same capture (hot scores in intervals-7.2, pages migrated in overload-7.2).
#[test]
fn damon_numbers_in_json_and_csv_equal_report() {
    let (mut intervals, mut values) = (0, 0);
    for name in [
        "intervals-7.2.dtcap",
        "overload-7.2.dtcap",
        "values-7.2.dtcap",
    ] {
        let c = data(name);
        // Through text like the export, so both floats pass the same parser.
        let report = crate::analysis::build(&c, &opts()).expect("report");
        let report: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&report).expect("report JSON"))
                .expect("parse");
        let json: serde_json::Value =
            serde_json::from_str(&export_capture(&c, ExportFormat::Json).expect("json"))
                .expect("parse");
        let csv = match export_capture(&c, ExportFormat::CsvIntervals) {
            Ok(csv) => {
                assert_eq!(csv.lines().next(), Some("function,interval,calls,ns"));
                csv
            }
            Err(e) => {
                assert!(c.meta.intervals.is_none(), "{name}: {e}");
                String::new()
            }
        };
        for f in report["functions"].as_array().expect("functions") {
            let fname = f["name"].as_str().expect("name");
            let entry = json["damon"]
                .as_array()
                .expect("damon")
                .iter()
                .find(|d| d["function"] == fname);
            let p = &f["per_interval"];
            let value = &f["values"]["value"];
            if p.is_null() && value.is_null() {
                assert!(entry.is_none(), "{name} {fname}");
                continue;
            }
            let entry = entry.unwrap_or_else(|| panic!("{name}: no damon entry for {fname}"));
            if !value.is_null() {
                assert_eq!(&entry["value"], value, "{name} {fname}");
                values += 1;
            }
            let rows: Vec<Vec<u64>> = csv
                .lines()
                .filter_map(|l| l.strip_prefix(&format!("{fname},")))
                .map(|l| l.split(',').map(|n| n.parse().expect("number")).collect())
                .collect();
            if p.is_null() {
                assert!(rows.is_empty(), "{name} {fname}");
                continue;
            }
            assert_eq!(&entry["per_interval"], p, "{name} {fname}");
            let n = |k: &str| p[k].as_u64().expect(k);
            assert_eq!(rows.len() as u64, n("intervals"), "{name} {fname}");
            assert_eq!(
                rows.iter().map(|r| r[1]).sum::<u64>(),
                n("calls_in_intervals")
            );
            assert_eq!(
                rows.iter().map(|r| r[2]).sum::<u64>(),
                n("total_ns_in_intervals")
            );
            assert!(rows.iter().enumerate().all(|(i, r)| r[0] == i as u64 + 1));
            intervals += 1;
        }
    }
    assert!(intervals > 0 && values > 0, "{intervals} {values}");
    let kernel = data("kernel-mode-7.2.dtcap");
    let err = export_capture(&kernel, ExportFormat::CsvIntervals).expect_err("no boundaries");
    assert!(err.to_string().contains("record again"), "{err}");
}

/// A kernel-mode capture that measured disturbance exports its clean and disturbed calls: in
/// JSON with the disturbed calls' buckets, in OpenMetrics as the same counters stream mode has.
#[test]
fn kernel_mode_exports_clean_and_disturbed_calls() {
    let c = crate::analysis::test_support::as_kernel(
        &crate::analysis::test_support::disturbed_capture(),
        10,
    );
    let json: serde_json::Value =
        serde_json::from_str(&export_capture(&c, ExportFormat::Json).expect("json"))
            .expect("parse");
    let h = &json["histograms"][0];
    assert_eq!(h["count"], 20);
    assert_eq!(
        (
            h["disturbance"]["clean"].as_u64(),
            h["disturbance"]["slept"].as_u64()
        ),
        (Some(8), Some(4))
    );
    let disturbed: u64 = h["disturbed_buckets"]
        .as_array()
        .expect("measured")
        .iter()
        .map(|b| b[2].as_u64().expect("n"))
        .sum();
    assert_eq!(disturbed, 12);
    let om = export_capture(&c, ExportFormat::Openmetrics).expect("openmetrics");
    let samples = parse_samples(&om);
    let value = |name: &str, reason: Option<&str>| {
        samples
            .iter()
            .find(|(n, l, _)| {
                n == name && reason.is_none_or(|r| l.get("reason").map(String::as_str) == Some(r))
            })
            .map(|s| s.2)
    };
    assert_eq!(value("damon_trace_calls_clean_total", None), Some(8.0));
    assert_eq!(
        value("damon_trace_calls_disturbed_total", Some("preempted")),
        Some(3.0)
    );
    // serve's cumulative replacement keeps the counts, not their sum over reads.
    let mut f = crate::export::openmetrics::FunctionMetrics::new(&c.meta.functions[0]);
    f.disturbance = Some(Default::default());
    let h = &c.summary.as_ref().expect("summary").kernel_hist[&0];
    f.set_hist(h);
    f.set_hist(h);
    assert_eq!(f.disturbance.map(|d| (d.clean, d.calls())), Some((8, 20)));
}

/// `breakdown_capture` in `format`.
fn export_breakdown(format: ExportFormat, c: &Capture) -> String {
    let mut out = Vec::new();
    exporter(format, opts())
        .export(c, &mut out)
        .expect("export");
    String::from_utf8(out).expect("utf-8")
}

#[test]
fn csv_and_json_carry_the_breakdown_with_unknown_as_empty_and_null() {
    let c = crate::analysis::test_support::breakdown_capture();
    let csv = export_breakdown(ExportFormat::Csv, &c);
    let mut lines = csv.lines();
    assert!(
        lines
            .next()
            .expect("header")
            .ends_with(",off_cpu_ns,irq_ns"),
        "{csv}"
    );
    let rows: Vec<&str> = lines.collect();
    assert!(rows[6].ends_with(",900,0"), "{}", rows[6]);
    assert!(rows[8].ends_with(",0,200"), "{}", rows[8]);
    // Unknown: empty, never 4294967295.
    assert!(rows[9].ends_with(",,"), "{}", rows[9]);
    assert!(!csv.contains("4294967295"));
    let json: serde_json::Value =
        serde_json::from_str(&export_breakdown(ExportFormat::Json, &c)).expect("json");
    let records = &json["records"];
    assert_eq!(
        (
            records[6]["off_cpu_ns"].as_u64(),
            records[6]["irq_ns"].as_u64()
        ),
        (Some(900), Some(0))
    );
    assert!(records[9]["off_cpu_ns"].is_null() && records[9]["irq_ns"].is_null());
    // The kept slow calls, slowest first, with breakdown and stack.
    let slow = &json["slow_calls"]["damon_hot_score"];
    assert_eq!(slow["threshold_ns"], 1000);
    assert_eq!(slow["counters"]["ring_full"], 1);
    assert_eq!(slow["calls"][1]["off_cpu_ns"], 900);
    assert_eq!(slow["calls"][0]["stack"][0], "damon_pa_check_accesses+0x10");
    // A capture without the breakdown has neither column nor field.
    let plain = crate::analysis::test_support::capture(true);
    let csv = export_breakdown(ExportFormat::Csv, &plain);
    assert!(!csv.contains("off_cpu"), "{csv}");
    let json = export_breakdown(ExportFormat::Json, &plain);
    assert!(
        !json.contains("off_cpu_ns") && !json.contains("slow_calls"),
        "{json}"
    );
}

#[test]
fn on_cpu_time_is_for_the_aggregate_formats() {
    let c = crate::analysis::test_support::breakdown_capture();
    let o = ReportOptions {
        time: crate::analysis::TimeBasis::OnCpu,
        ..opts()
    };
    for f in [ExportFormat::Json, ExportFormat::Csv] {
        let err = timed(c.clone(), f, &o).expect_err("per-call format");
        assert!(err.0.contains("off_cpu_ns and irq_ns"), "{}", err.0);
    }
    let err = timed(c.clone(), ExportFormat::Openmetrics, &o).expect_err("durations");
    assert!(err.0.contains("--time wall"), "{}", err.0);
    // csv-buckets over on-CPU times: the nine known calls, all in the 100 ns row.
    let t = timed(c, ExportFormat::CsvBuckets, &o).expect("on-cpu");
    let mut out = Vec::new();
    exporter(ExportFormat::CsvBuckets, o)
        .export(&t, &mut out)
        .expect("export");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(
        text.starts_with("function,lo_on_cpu_ns,hi_on_cpu_ns,"),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.contains(",100,"))
        .unwrap_or_else(|| panic!("no 100 ns row in\n{text}"));
    assert!(row.contains(",9,"), "{row}\n{text}");
}
