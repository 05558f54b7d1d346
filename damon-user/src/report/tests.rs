use std::{collections::BTreeMap, path::Path};

use damon_common::CallRecord;

use super::*;
use crate::capture::{AttachState, FunctionStatus, Meta, Summary, format::read_file};

fn opts() -> ReportOptions {
    ReportOptions {
        bucket_ns: 20,
        ..Default::default()
    }
}

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
            pid: 100 + (i % 2) as u32,
            tid: 1,
            cpu: (i % 3) as u32,
            func: 0,
            arg0: (i % 5) as i64,
            arg1: i as i64,
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
            intervals: None,
            args: Vec::new(),
        },
        records,
        summary: summary.then(|| Summary {
            duration_ns: 1,
            end_reason: "duration".into(),
            counters,
            malformed_items: 0,
            damon_end: None,
            intervals: None,
            kernel_hist: Default::default(),
        }),
        marks: Vec::new(),
    }
}

#[test]
fn accounts_and_summarises() {
    let r = build(&capture(true), &opts()).expect("report");
    let f = &r.functions[0];
    assert_eq!((f.calls, f.count, f.dropped, f.in_flight), (13, 10, 2, 1));
    assert_eq!(
        (f.min_ns, f.p50_ns, f.p90_ns, f.p95_ns, f.p999_ns, f.max_ns),
        (
            Some(10),
            Some(50),
            Some(90),
            Some(100),
            Some(100),
            Some(100)
        )
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
        "p95_ns",
        "p99_ns",
        "p999_ns",
        "max_ns",
        "buckets",
    ] {
        assert!(json["functions"][0].get(key).is_some(), "missing {key}");
    }
    assert!(json["meta"]["kernel_release"].is_string());
    let table = render::table(&r, None);
    assert!(
        table.contains("damon_hot_score")
            && table.contains("missing")
            && table.contains("exits without a traced entry")
            && table.contains("p99.9"),
        "{table}"
    );
}

#[test]
fn range_table_counts_every_record_once() {
    let r = build(&capture(true), &opts()).expect("report");
    let t = r.functions[0].buckets.as_ref().expect("table");
    // Durations 10..=100 step 10 in 20 ns rows from 0: 0-19 holds 10, 20-39 holds 20 and 30…
    // and the rows reach past the p99 (100), so the overflow row starts at 120.
    let counts: Vec<u64> = t.rows.iter().map(|r| r.count).collect();
    assert_eq!(counts, vec![1, 2, 2, 2, 2, 1, 0], "{:?}", t.rows);
    assert_eq!(t.rows.last().map(BucketRow::label), Some(">= 120".into()));
    let text = render::table(&r, None);
    assert!(text.contains("Range (ns)") && text.contains("0-19") && text.contains("20.00%"));
    let o = ReportOptions {
        bucket_ns: 50,
        max_ns: Some(50),
        ..opts()
    };
    let r = build(&capture(true), &o).expect("report");
    let rows = &r.functions[0].buckets.as_ref().expect("table").rows;
    assert_eq!(rows.iter().map(|r| r.count).collect::<Vec<_>>(), vec![4, 6]);
}

#[test]
fn filters_select_records_but_keep_the_accounting() {
    let o = ReportOptions {
        cpu: vec![0],
        ..opts()
    };
    let r = build(&capture(true), &o).expect("report");
    let f = &r.functions[0];
    // cpu = i % 3 == 0 for i in 3, 6, 9.
    assert_eq!(
        (f.count, f.matched, f.min_ns, f.max_ns),
        (10, 3, Some(30), Some(90))
    );
    assert_eq!(f.calls, f.count + f.dropped + f.in_flight);
    let o = ReportOptions {
        pid: vec![101],
        functions: vec!["damon_hot_score".into()],
        ..opts()
    };
    let r = build(&capture(true), &o).expect("report");
    assert_eq!(r.functions.len(), 1);
    assert_eq!(r.functions[0].matched, 5);
    assert!(r.meta.filter.is_some());
    let o = ReportOptions {
        functions: vec!["nope".into()],
        ..opts()
    };
    let e = build(&capture(true), &o).expect_err("unknown name");
    assert!(e.to_string().contains("damon_hot_score"), "{e}");
}

#[test]
fn flags_accounting_gaps_and_incomplete_captures() {
    let mut c = capture(true);
    c.records.pop();
    let r = build(&c, &opts()).expect("report");
    assert!(
        r.warnings.iter().any(|w| w.contains("1 calls unaccounted")),
        "{:?}",
        r.warnings
    );
    let r = build(&capture(false), &opts()).expect("report");
    assert!(!r.meta.complete);
    assert!(r.warnings[0].contains("incomplete"));
}

#[test]
fn csv_and_markdown() {
    let r = build(&capture(true), &opts()).expect("report");
    let csv = render::csv(&r);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 3);
    let cols = lines[0].split(',').count();
    assert!(lines.iter().all(|l| l.split(',').count() == cols), "{csv}");
    assert!(lines[1].starts_with("damon_hot_score,fentry,stream,13,10,10,2,1,4,10,55.000,50,"));
    let md = render::markdown(&r);
    assert!(md.contains("| `damon_hot_score` | fentry | 13 |"), "{md}");
    assert!(md.contains("| Range (ns) | Count | Percent |"), "{md}");
}

/// The real 7.2 capture: the numbers the README shows, and tables that add up.
#[test]
fn real_capture() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/migrate-hot-7.2.dtcap");
    let c = read_file(&path).expect("fixture");
    let r = build(&c, &opts()).expect("report");
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    let hot = &r.functions[0];
    assert_eq!(hot.name, "damon_hot_score");
    assert_eq!(
        (hot.count, hot.p50_ns, hot.p99_ns),
        (2961, Some(1051), Some(24356))
    );
    for f in &r.functions {
        let t = f.buckets.as_ref().expect("every function has records");
        assert_eq!(t.rows.iter().map(|r| r.count).sum::<u64>(), f.matched);
        assert!(t.rows.len() <= 42, "{}: {} rows", f.name, t.rows.len());
        let p = [
            f.min_ns, f.p50_ns, f.p90_ns, f.p95_ns, f.p99_ns, f.p999_ns, f.max_ns,
        ];
        assert!(p.windows(2).all(|w| w[0] <= w[1]), "{p:?}");
    }
}

/// The overloaded 7.2 capture (`--ring-size 4096`): the table, JSON and warnings show the drops,
/// and `calls == records + dropped + in_flight` holds per function and in total.
#[test]
fn overload_capture_shows_drops_and_accounts_for_every_call() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/overload-7.2.dtcap");
    let c = read_file(&path).expect("overload fixture");
    let r = build(&c, &opts()).expect("report");
    assert_eq!(r.meta.ring_size, 4096);
    let (mut calls, mut kept, mut dropped, mut in_flight) = (0, 0, 0, 0);
    for f in &r.functions {
        assert_eq!(f.calls, f.count + f.dropped + f.in_flight, "{}", f.name);
        assert_eq!(f.dropped, f.ring_full, "{}", f.name);
        calls += f.calls;
        kept += f.count;
        dropped += f.dropped;
        in_flight += f.in_flight;
    }
    assert_eq!(
        (calls, kept, dropped, in_flight),
        (128_007, 8089, 119_918, 0)
    );
    assert_eq!(calls, kept + dropped + in_flight);
    assert!(
        calls >= 10 * kept,
        "dropped dominates: {calls} calls, {kept} records"
    );
    assert!(
        !r.warnings.iter().any(|w| w.contains("unaccounted")),
        "{:?}",
        r.warnings
    );
    assert_eq!(
        r.warnings[0],
        "118633 of 125830 calls of damon_hot_score were not recorded: the ring buffer (4096 B) \
         was full; use --ring-size 4194304 (or larger) to keep more"
    );
    assert_eq!(r.warnings.len(), 4, "{:?}", r.warnings);

    let table = render::table(&r, None);
    let hot = table
        .lines()
        .find(|l| l.starts_with("damon_hot_score "))
        .expect("hot score row");
    let cells: Vec<&str> = hot.split_whitespace().collect();
    assert_eq!(cells[2..6], ["125830", "7197", "118633", "0"], "{hot}");
    assert!(
        table.contains("warning: 118633 of 125830 calls of damon_hot_score"),
        "{table}"
    );

    let json: serde_json::Value =
        serde_json::from_str(&serde_json::to_string(&r).expect("serialise")).expect("json");
    let f = &json["functions"][0];
    assert_eq!(
        (f["calls"].as_u64(), f["count"].as_u64()),
        (Some(125_830), Some(7197))
    );
    assert_eq!(
        (f["dropped"].as_u64(), f["ring_full"].as_u64()),
        (Some(118_633), Some(118_633))
    );
    assert_eq!(json["meta"]["ring_size"], 4096);

    let md = render::markdown(&r);
    assert!(
        md.contains("| `damon_hot_score` | fentry | 125830 | 7197 | 118633 | 0 |"),
        "{md}"
    );
    assert!(render::csv(&r).contains("damon_hot_score,fentry,stream,125830,7197,7197,118633,0,"));
}
