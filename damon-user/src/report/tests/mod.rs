mod calibration;
mod damon;
mod disturbance;
mod kernel;
mod slow;
mod values;

use std::path::Path;

use damon_common::attach::Attach;

use super::render;
use crate::{
    analysis::{test_support::*, *},
    capture::{AttachState, FunctionCounters, format::read_file},
    stats::buckets::BucketRow,
};

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
    assert_eq!(r.functions[1].attach, AttachState::Missing);
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
            && table.contains("exits without their call's entry")
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

/// A capture of the instruction clock: every format names it and its unit (`insn`), the CSV
/// header's duration columns too; the real wall-clock capture reads as `wall` (captures written
/// before the clock existed have no field) and its text is as before.
#[test]
fn the_clock_and_its_unit_are_named_in_every_format() {
    let mut c = capture(true);
    c.meta.clock = crate::capture::Clock::Instructions;
    let r = build(&c, &opts()).expect("report");
    let text = render::table(&r, None);
    for want in [
        "· instruction clock (insn",
        "latencies in insn",
        "Range (insn)",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    let md = render::markdown(&r);
    assert!(
        md.contains("Latencies in insn") && md.contains("| Range (insn) |"),
        "{md}"
    );
    let csv = render::csv(&r);
    let header = csv.lines().next().expect("header");
    assert!(
        header.contains(",min_insn,mean_insn,") && !header.contains("_ns"),
        "{header}"
    );
    let json = serde_json::to_value(&r).expect("json");
    assert_eq!(json["meta"]["clock"], "instructions");
    assert_eq!(json["meta"]["unit"], "insn");

    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/migrate-hot-7.2.dtcap");
    let wall = build(&read_file(&path).expect("fixture"), &opts()).expect("report");
    assert_eq!(
        serde_json::to_value(&wall).expect("json")["meta"]["clock"],
        "wall"
    );
    let text = render::table(&wall, None);
    assert!(
        !text.contains("clock") && text.contains("Range (ns)"),
        "{text}"
    );
    assert!(render::csv(&wall).starts_with(
        "name,attach,mode,calls,count,matched,dropped,in_flight,orphan_exits,min_ns,"
    ));
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

/// A calibrated capture: every format shows raw and corrected latencies and says which is
/// which; the JSON keeps `meta.calibration` as the capture holds it.
#[test]
fn corrected_latencies_next_to_raw_ones() {
    use crate::stats::calibration::{Calibration, CalibrationStatus, Floor, FloorDistribution};
    let mut c = capture(true);
    // A floor with median 25 ns and p5..p95 = 21..29 (uncertainty 4).
    let floor = FloorDistribution::from_durations(&(21..=29).collect::<Vec<u64>>()).expect("f");
    assert_eq!((floor.median_ns, floor.spread_ns), (25.0, 4.0));
    let cal = Calibration::for_tests(9, vec![Floor::for_tests(Some(floor))]);
    c.meta.calibration = Some(serde_json::to_value(&cal).expect("json"));
    let r = build(&c, &opts()).expect("report");
    let f = &r.functions[0];
    // Raw durations 10..=100: p50 = 50, min 10, max 100, mean 55.
    let k = f.corrected.expect("fentry/stream floor applies");
    assert_eq!((f.p50_ns, k.p50_ns), (Some(50), 25.0));
    assert_eq!((k.min_ns, k.max_ns, k.mean_ns), (-15.0, 75.0, 30.0));
    assert_eq!(k.uncertainty_ns, 4.0);
    assert!(r.functions[1].corrected.is_none(), "missing function");
    let json = serde_json::to_value(&r).expect("json");
    assert_eq!(
        json["meta"]["calibration"]["floors"][0]["floor"]["median_ns"],
        25.0
    );
    assert_eq!(json["functions"][0]["corrected"]["p50_ns"], 25.0);
    assert!(
        json["meta"]["latencies"]
            .as_str()
            .expect("note")
            .contains("corrected")
    );
    let table = render::table(&r, None);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("  corrected") && l.contains("±4") && l.contains("-15")),
        "{table}"
    );
    assert!(
        table.contains("fentry/stream floor 25 ± 4 ns (9 calls of an empty function)"),
        "{table}"
    );
    let csv = render::csv(&r);
    let lines: Vec<&str> = csv.lines().collect();
    let cols = lines[0].split(',').count();
    assert!(lines.iter().all(|l| l.split(',').count() == cols), "{csv}");
    assert!(
        lines[1].ends_with(
            ",25.000,4.000,-15.000,30.000,25.000,65.000,75.000,75.000,75.000,75.000,0,,,,,,,,,,,"
        ),
        "{csv}"
    );
    assert!(render::markdown(&r).contains("| ↳ corrected | |"));

    // A kprobe floor does not correct an fentry function; a skipped calibration says so.
    let mut other = cal.clone();
    other.floors[0].attach = Attach::Kprobe;
    c.meta.calibration = Some(serde_json::to_value(&other).expect("json"));
    assert!(
        build(&c, &opts()).expect("r").functions[0]
            .corrected
            .is_none()
    );
    let skipped = Calibration::not_run(CalibrationStatus::Skipped, "--no-calibrate".into());
    c.meta.calibration = Some(serde_json::to_value(&skipped).expect("json"));
    let r = build(&c, &opts()).expect("r");
    assert!(r.functions[0].corrected.is_none());
    assert!(
        r.meta
            .latencies
            .contains("calibration was skipped (--no-calibrate)"),
        "{}",
        r.meta.latencies
    );
    // Captures from before calibration: raw only, no warning.
    c.meta.calibration = None;
    let r = build(&c, &opts()).expect("r");
    assert!(r.meta.latencies.contains("no calibration"));
    assert!(r.warnings.iter().all(|w| !w.contains("calibration")));
}

/// Runs the kernel skipped: a skipped entry is a call made (in `calls`) and a drop; an entry
/// whose exit was skipped is a drop; each has its own field, the identity holds, and the
/// warning names the cause, the remedy and the bound on durations that may span two calls.
#[test]
fn skipped_probe_runs_are_calls_and_drops_with_their_reasons() {
    let mut c = capture(true);
    let summary = c.summary.as_mut().expect("summary");
    // 13 entries seen: 10 records, 1 stale (exit skipped), 2 in flight; 5 entries skipped.
    summary.counters.insert(
        0,
        FunctionCounters {
            calls: 13,
            emitted: 10,
            in_flight: 2,
            stale_entries: 1,
            skipped_entries: Some(5),
            skipped_exits: Some(3),
            orphan_exits: 5,
            ..Default::default()
        },
    );
    let r = build(&c, &opts()).expect("report");
    let f = &r.functions[0];
    assert_eq!((f.calls, f.count, f.dropped, f.in_flight), (18, 10, 6, 2));
    assert_eq!(
        (f.stale_entries, f.skipped_entries, f.skipped_exits),
        (1, Some(5), Some(3))
    );
    assert!(
        r.warnings.iter().all(|w| !w.contains("unaccounted")),
        "{:?}",
        r.warnings
    );
    let w = warning(&r.warnings, "damon_hot_score were not recorded");
    assert!(w.starts_with("6 of 18 calls"), "{w}");
    for part in [
        "skipped the entry probe of 5",
        "skipped the exit probe of 1",
        "--attach kprobe",
        "up to 3 of the recorded durations may span two calls",
    ] {
        assert!(w.contains(part), "{part}: {w}");
    }
    let json = serde_json::to_value(&r).expect("json");
    assert_eq!(json["functions"][0]["skipped_entries"], 5);
    assert_eq!(json["functions"][0]["stale_entries"], 1);
    let csv = render::csv(&r);
    assert!(
        csv.lines()
            .nth(1)
            .expect("row")
            .ends_with(",1,5,3,,,,,,,,,"),
        "{csv}"
    );
    // With kprobes the same counts mean another program was running, and skips come as whole
    // calls: no remedy of switching to kprobe, no durations that may span two calls.
    c.meta.functions[0].attach = AttachState::Traced(Attach::Kprobe);
    let r = build(&c, &opts()).expect("report");
    let w = warning(&r.warnings, "damon_hot_score were not recorded");
    assert!(w.contains("another kprobe or tracepoint program"), "{w}");
    assert!(
        !w.contains("--attach kprobe") && !w.contains("span two calls"),
        "{w}"
    );
    // Counts the kernel does not give are said to be unavailable, not shown as 0.
    let table = render::table(&build(&capture(true), &opts()).expect("report"), None);
    assert!(
        table.contains("count of skipped probe runs is not available"),
        "{table}"
    );
}

/// A capture recorded with a task filter: `calls` are the selected tasks' (the identity holds
/// on them), each function's filtered count is reported, and a note says which filter left
/// how many calls out; without a filter, no such note.
#[test]
fn a_task_filter_is_stated_with_what_it_left_out() {
    let mut c = capture(true);
    assert!(
        !build(&c, &opts())
            .expect("report")
            .notes
            .iter()
            .any(|n| n.contains("filter"))
    );
    c.meta.filter = crate::capture::TaskFilter {
        tgid: Some(100),
        ..Default::default()
    };
    if let Some(s) = c.summary.as_mut() {
        s.counters.get_mut(&0).expect("function 0").filtered = 2000;
    }
    let r = build(&c, &opts()).expect("report");
    let f = &r.functions[0];
    assert_eq!((f.calls, f.filtered), (13, 2000));
    assert_eq!(f.calls, f.count + f.dropped + f.in_flight);
    assert_eq!(
        r.notes,
        [
            "recorded with the task filter --tgid 100: calls are those of the selected tasks; \
          2000 calls of other tasks were filtered out in the kernel (damon_hot_score 2000)"
        ]
    );
    let text = crate::report::render::table(&r, None);
    assert!(
        text.contains("2000 calls of other tasks were filtered out"),
        "{text}"
    );
}
