//! Exact accounting under overload, in a real 7.2 guest: a 4 KiB ring buffer, damon_hot_score
//! driven in bursts of thousands of calls, and a reader that cannot keep up. Most calls are
//! dropped, and every one of them is counted: `calls == records + dropped + in_flight` per
//! function and in total, in `record`'s end warning, `report` and every `export` format.
use std::{fs, time::Duration};

mod common;
use common::{FOUR, function, json, u};
use damon_lab::{kernel::Kernel, script::with_scenario};

/// The scenario scores its 8000+ regions every 20 ms aggregation: bursts no 4 KiB ring
/// (about 85 records) can hold. Under TCG the producer is slowed as much as the reader, so a
/// free-running reader still gets about one call in eight; pausing the recorder 90 % of the
/// time (SIGSTOP/SIGCONT, as a reader on a saturated machine) makes the ring, not the reader,
/// the bottleneck. Without calibration: its floors are measured beside the session, in the
/// same process, which the pauses would stop too (the test took 104 s instead of 37).
fn script() -> String {
    let body = "damon-trace record -o /out/ov.dtcap --duration 10s --ring-size 4096 --attach fentry --no-calibrate \
  2> /out/record.err &
rec=$!
# The capture file appears once the probes are attached.
while [ ! -s /out/ov.dtcap ]; do sleep 0.2; done
zombie() { grep -q '^State:.*Z' /proc/$1/status 2>/dev/null; }
while kill -STOP $rec 2>/dev/null && ! zombie $rec; do
  sleep 0.45
  kill -CONT $rec 2>/dev/null || break
  sleep 0.05
done
kill -CONT $rec 2>/dev/null || true
wait $rec
damon-trace report /out/ov.dtcap --format json > /out/report.json
damon-trace report /out/ov.dtcap > /out/report.txt
damon-trace export /out/ov.dtcap --format json -o /out/export.json
damon-trace export /out/ov.dtcap --format csv-buckets -o /out/buckets.csv
damon-trace export /out/ov.dtcap --format openmetrics -o /out/metrics.txt";
    let args = "--regions 8000 --sample-interval 1ms --aggr-interval 20ms";
    format!("set -e\n{}", with_scenario(300, args, body))
}

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_overload_counts_every_dropped_call() {
    let outcome = common::run_script(Kernel::DEBIAN_7_2, script(), Duration::from_secs(300));
    let dir = outcome.dir();
    let read = |name: &str| fs::read_to_string(dir.join(name)).expect(name);
    let scenario = read("scenario.err");
    assert!(scenario.contains("ops=vaddr"), "{scenario}");

    let report = json(dir, "report.json");
    assert_eq!(report["meta"]["complete"], true, "{}", report["meta"]);
    assert_eq!(u(&report["meta"], "ring_size"), 4096);
    let secs = u(&report["meta"], "duration_ns") as f64 / 1e9;
    let (mut calls, mut records, mut dropped, mut in_flight) = (0, 0, 0, 0);
    for name in FOUR {
        let f = function(&report, name);
        assert_eq!(f["attach"], "fentry", "{f}");
        // Exact, per function: every call is a record, a counted drop, or still running.
        assert_eq!(
            u(f, "calls"),
            u(f, "count") + u(f, "dropped") + u(f, "in_flight"),
            "{name}: {f}"
        );
        calls += u(f, "calls");
        records += u(f, "count");
        dropped += u(f, "dropped");
        in_flight += u(f, "in_flight");
    }
    assert_eq!(calls, records + dropped + in_flight, "in total");
    let hot = function(&report, "damon_hot_score");
    let (hot_calls, hot_records, hot_dropped) =
        (u(hot, "calls"), u(hot, "count"), u(hot, "dropped"));
    eprintln!(
        "damon_hot_score: {hot_calls} calls ({:.0}/s), {hot_records} records ({:.0}/s), \
         {hot_dropped} dropped in {secs:.1} s; all four: {calls} calls, {records} records",
        hot_calls as f64 / secs,
        hot_records as f64 / secs
    );
    // Dropped dominates: at least 10 calls for every record kept.
    assert!(
        hot_calls >= 10 * hot_records,
        "damon_hot_score was not overloaded: {hot}"
    );
    assert!(
        calls >= 10 * records,
        "{calls} calls, {records} records in total"
    );
    assert_eq!(u(hot, "ring_full"), hot_dropped, "the ring is why: {hot}");

    // The end of `record` says so, with the numbers the capture holds.
    let warning = format!(
        "damon-trace: warning: {hot_dropped} of {hot_calls} calls of damon_hot_score were not \
         recorded: the ring buffer (4096 B) was full; use --ring-size 4194304 (or larger) to \
         keep more"
    );
    let record_err = read("record.err");
    assert!(
        record_err.lines().any(|l| l == warning),
        "expected `{warning}` in:\n{record_err}"
    );
    assert!(
        record_err.contains(&format!("wrote {records} records ({calls} calls made)")),
        "{record_err}"
    );
    assert!(!record_err.contains("unaccounted"), "{record_err}");

    // The report's table and warnings.
    let table = read("report.txt");
    let row = common::row(&table, "damon_hot_score");
    assert_eq!(
        row[2..5],
        [
            hot_calls.to_string(),
            hot_records.to_string(),
            hot_dropped.to_string()
        ],
        "{table}"
    );
    assert!(
        table.contains(&format!(
            "warning: {hot_dropped} of {hot_calls} calls of damon_hot_score were not recorded"
        )),
        "{table}"
    );

    // Every export format says how many were dropped.
    let export = json(dir, "export.json");
    let acc = common::entry(&export["accounting"], "function", "damon_hot_score");
    assert_eq!(
        (u(acc, "calls"), u(acc, "records"), u(acc, "dropped")),
        (hot_calls, hot_records, hot_dropped),
        "{acc}"
    );
    let listed = export["records"].as_array().expect("records").len() as u64;
    assert_eq!(listed, records);

    let buckets = read("buckets.csv");
    let expect_tail = format!(",{hot_calls},{hot_records},{hot_dropped},");
    let hot_rows: Vec<&str> = buckets
        .lines()
        .filter(|l| l.starts_with("damon_hot_score,"))
        .collect();
    assert!(!hot_rows.is_empty(), "{buckets}");
    assert!(
        hot_rows.iter().all(|l| l.contains(&expect_tail)),
        "{buckets}"
    );

    let metrics = read("metrics.txt");
    for line in [
        format!("damon_trace_calls_total{{function=\"damon_hot_score\"}} {hot_calls}"),
        format!(
            "damon_trace_dropped_total{{function=\"damon_hot_score\",reason=\"ring_full\"}} \
             {hot_dropped}"
        ),
        format!(
            "damon_trace_call_duration_seconds_count{{function=\"damon_hot_score\"}} {hot_records}"
        ),
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line}:\n{metrics}");
    }
}
