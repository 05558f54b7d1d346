//! In-kernel aggregation (`--mode kernel`) on a real 7.2 kernel:
//! - the kernel's bucketing equals userspace's: with the hidden `--mode both` each call is timed
//!   once, streamed and bucketed, and the records bucketed with `damon_common::hist_bucket` are
//!   the kernel's histogram exactly (count, sum, min, max too);
//! - `record --mode kernel` under the migrate-hot scenario gives a report with all four
//!   functions, their calls, percentiles and error bound, and the accounting identity; a
//!   recorder killed with SIGKILL leaves a capture readable to its last snapshot written before
//!   the kill, the snapshots written about once a second up to it;
//! - a kernel-mode and a stream-mode capture of the same driven workload, back to back, count
//!   the same calls, and `compare` puts them on one bucket grid and says so.
use std::{collections::BTreeMap, fs, time::Duration};

mod common;
use common::{FOUR, assert_traced, auto_attach, function, json, u};
use damon_lab::{
    guest::GuestRun,
    kernel::Kernel,
    script::{STOP_SCENARIO, start_scenario, with_scenario},
};

/// Starts the migrate-hot scenario in the background, waits for its kdamond (failing the
/// script if it does not come on), then a second more.
fn scenario() -> String {
    format!("{}sleep 1\n", start_scenario(300, ""))
}

fn run_script(cmd: &str) -> GuestRun {
    common::run_script(Kernel::DEBIAN_7_2, cmd, Duration::from_secs(400))
}

/// `summary.kernel_hist` of an exported capture, by function name.
fn kernel_hists(export: &serde_json::Value) -> BTreeMap<String, serde_json::Value> {
    let names: BTreeMap<String, String> = export["meta"]["functions"]
        .as_array()
        .expect("functions")
        .iter()
        .map(|f| {
            (
                f["id"].to_string(),
                f["name"].as_str().expect("name").to_owned(),
            )
        })
        .collect();
    export["summary"]["kernel_hist"]
        .as_object()
        .expect("summary.kernel_hist")
        .iter()
        .map(|(id, h)| (names[id].clone(), h.clone()))
        .collect()
}

/// The percentiles a kernel-mode report states, checked against the records of the very calls
/// its histogram holds: a `--mode both` capture, whose metadata says `kernel` in a copy (so
/// that `report` reads it as a kernel-mode capture: its histograms, not its records). For
/// each function and percentile, the true nearest-rank value of the records (read from the
/// file here, not through damon-trace) fixes the kernel bucket it lies in
/// (`damon_common::hist_bucket`); the report must state that bucket's range narrowed by the
/// records' min and max (`lo_ns..=value_ns`), as `pNN_ns` its top, and as `bound_ns` the
/// widest such range of the five percentiles less one ns. A report that picks a neighbouring
/// bucket, or states a range that does not hold the true value, fails.
fn check_kernel_report_against_records(both: &std::path::Path) {
    let as_kernel = both.with_file_name("both-as-kernel.dtcap");
    dtcap::write_with_mode(both, &as_kernel, "kernel");
    let report = common::host_report(&as_kernel);
    let capture = dtcap::read(both);
    for name in FOUR {
        let f = function(&report, name);
        assert_eq!(
            f["mode"], "kernel",
            "{name}: read as a kernel-mode capture: {f}"
        );
        let mut d: Vec<u64> = capture.of(name).iter().map(|r| r.duration_ns).collect();
        d.sort_unstable();
        let (min, max) = (d[0], d[d.len() - 1]);
        assert_eq!(u(f, "count"), d.len() as u64, "{name}: {f}");
        let res = &f["resolution"];
        let width = u(res, "width_ns");
        let mut widest = 0;
        for (p, milli) in [
            ("p50", 50_000),
            ("p90", 90_000),
            ("p95", 95_000),
            ("p99", 99_000),
            ("p999", 99_900),
        ] {
            let exact = dtcap::nearest_rank(&d, milli);
            let b = damon_common::hist_bucket(exact, width);
            let (blo, bhi) = damon_common::hist_bucket_bounds(b, width);
            let (lo, top) = (blo.max(min), bhi.saturating_sub(1).min(max));
            let stated = (u(&res[p], "lo_ns"), u(&res[p], "value_ns"));
            assert!(
                stated == (lo, top) && lo <= exact && exact <= top,
                "{name} {p}: the records' {p} is {exact} ns, in kernel bucket {b} \
                 [{blo}, {bhi}) narrowed to {lo}..={top} by min {min} and max {max}; the report \
                 states {}..={}",
                stated.0,
                stated.1
            );
            if p != "p999" {
                assert_eq!(u(f, &format!("{p}_ns")), top, "{name} {p}: {f}");
            }
            widest = widest.max(top - lo);
        }
        assert_eq!(
            u(res, "bound_ns"),
            widest,
            "{name}: the stated bound is not the widest percentile range: {res}"
        );
        eprintln!(
            "{name}: kernel-mode report of {} calls: p50/p90/p95/p99/p99.9 ranges hold the \
             records' percentiles, bound {widest} ns",
            d.len()
        );
    }
}

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test` or --ignored"]
fn vm_7_2_mode_both_kernel_buckets_equal_the_records_bucketed_in_userspace() {
    let body = "sleep 1
damon-trace record --mode both --ring-size 67108864 -o /out/both.dtcap --duration 10s \
  --no-calibrate 2> /out/record.err
damon-trace export /out/both.dtcap --format json -o /out/both.json";
    let cmd = format!("set -e\n{}", with_scenario(300, "", body));
    let run = run_script(&cmd);
    let dir = run.dir();
    let export = json(dir, "both.json");
    assert_eq!(export["meta"]["mode"], "both");
    let hists = kernel_hists(&export);
    let mut durations: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for r in export["records"].as_array().expect("records") {
        durations
            .entry(r["function"].as_str().expect("function").to_owned())
            .or_default()
            .push(u(r, "duration_ns"));
    }
    for name in FOUR {
        let acc = common::entry(&export["accounting"], "function", name);
        // Both paths see the same timed calls only when the ring lost none.
        assert_eq!(u(acc, "ring_full"), 0, "{name}: {acc}");
        assert_eq!(
            u(acc, "calls"),
            u(acc, "records") + u(acc, "dropped") + u(acc, "in_flight"),
            "{name}: {acc}"
        );
        let h = &hists[name];
        let d = durations.get(name).cloned().unwrap_or_default();
        assert!(!d.is_empty(), "{name}: no call under the scenario");
        let width = u(h, "width_ns");
        let mut mine = vec![0u64; damon_common::HIST_BUCKETS as usize];
        for &v in &d {
            mine[damon_common::hist_bucket(v, width) as usize] += 1;
        }
        let kernel: Vec<u64> = common::u64s(&h["buckets"]);
        assert_eq!(
            kernel, mine,
            "{name}: kernel buckets != records bucketed here"
        );
        assert_eq!(u(h, "count"), d.len() as u64, "{name}");
        assert_eq!(u(h, "sum_ns"), d.iter().sum::<u64>(), "{name}");
        assert_eq!(u(h, "min_ns"), *d.iter().min().expect("min"), "{name}");
        assert_eq!(u(h, "max_ns"), *d.iter().max().expect("max"), "{name}");
        eprintln!(
            "{name}: {} calls, kernel histogram == userspace bucketing ({} non-empty buckets)",
            d.len(),
            mine.iter().filter(|&&n| n > 0).count()
        );
    }
    check_kernel_report_against_records(&dir.join("both.dtcap"));
}

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test` or --ignored"]
fn vm_7_2_record_mode_kernel_reports_every_function_with_its_bound() {
    let scenario = scenario();
    let capture_helpers = common::capture_helpers();
    let cmd = damon_lab::script::fill(
        include_str!("scripts/vm_kmode_record_and_serve.sh"),
        &[
            ("SCENARIO", &scenario),
            ("K_RECORD_S", &K_RECORD_S.to_string()),
            ("CAPTURE_HELPERS", &capture_helpers),
            ("N", &N.to_string()),
            ("BUILTINS", &FOUR.join(",")),
            (
                "UNAME_THEN_SCRAPE",
                &common::uname_then_scrape("m2.txt", "m3.txt", N),
            ),
            ("STOP_SCENARIO", STOP_SCENARIO),
        ],
    );
    let run = run_script(&cmd);
    let dir = run.dir();
    let report = json(dir, "k.json");
    let table = fs::read_to_string(dir.join("k.txt")).expect("k.txt");
    eprintln!("{table}");
    assert_eq!(report["meta"]["mode"], "kernel");
    for name in FOUR {
        let f = function(&report, name);
        assert_eq!(f["mode"], "kernel", "{f}");
        assert_traced(f, auto_attach(&Kernel::DEBIAN_7_2, name, "kernel"));
        assert_eq!(u(f, "ring_full"), 0, "{f}");
        // The percentile ranges and the bound are checked against records of the same calls
        // in vm_7_2_mode_both_kernel_buckets_equal_the_records_bucketed_in_userspace.
        assert_eq!(u(&f["resolution"], "width_ns"), 10, "{f}");
        let rows = f["buckets"]["rows"].as_array().expect("rows");
        let in_rows: u64 = rows.iter().map(|r| u(r, "count")).sum();
        assert_eq!(in_rows, u(f, "count"), "{name}: range rows");
        assert!(
            table.contains(&format!("{name}: percentiles at bucket resolution")),
            "{table}"
        );
    }
    assert!(table.contains("not available"), "{table}");
    // Snapshots: one a second, cumulative.
    let export = json(dir, "k-export.json");
    assert_eq!(
        export["summary"]["end_reason"], "duration",
        "{}",
        export["summary"]
    );
    let snaps = export["snapshots"].as_array().expect("snapshots");
    let per_fn = |name: &str| -> Vec<(u64, u64)> {
        snaps
            .iter()
            .filter(|s| s["function"] == name)
            .map(|s| (u(s, "elapsed_ns"), u(s, "count")))
            .collect()
    };
    let lt = per_fn("lock_timer_base");
    assert!(!lt.is_empty(), "no snapshot");
    assert!(
        lt.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
        "{lt:?}"
    );
    // How many, from this run rather than a count tuned on one host: the recorder's 1 s tick
    // fires at once (the first snapshot) and then every second until the K_RECORD_S deadline,
    // counted from the session's start like `elapsed_ns` — not through the stop that the
    // summary's `duration_ns` also covers, however long detaching took here. A tick handled
    // late is made up (tokio's default `MissedTickBehavior::Burst`), so only the last one or two
    // may lose the race with the deadline on a busy guest.
    let first_s = lt[0].0 as f64 / 1e9;
    let due = (K_RECORD_S as f64 - first_s).ceil() as usize;
    assert!(
        lt.len() + 2 >= due,
        "{} snapshots, {due} ticks due from the first at {first_s:.2} s to the {K_RECORD_S} s \
         deadline: {lt:?}",
        lt.len()
    );
    // And one a second, not one a drain or every few seconds: the median gap is about 1 s.
    let mut gaps: Vec<u64> = lt.windows(2).map(|w| w[1].0 - w[0].0).collect();
    gaps.sort_unstable();
    let median_s = gaps.get(gaps.len() / 2).map_or(0.0, |&g| g as f64 / 1e9);
    assert!(
        (0.5..=1.5).contains(&median_s),
        "median gap between snapshots {median_s:.2} s: {lt:?}"
    );

    // Killed KILL_AFTER_S or more after its first snapshot: incomplete, counts to its last
    // snapshot, snapshots came about once a second until the kill, and the last one written
    // before the kill reads back.
    let killed = json(dir, "killed.json");
    assert_eq!(killed["meta"]["complete"], false);
    let warning = killed["warnings"][0].as_str().expect("warning");
    assert!(warning.contains("last histogram snapshot"), "{killed}");
    assert!(
        u(function(&killed, "lock_timer_base"), "calls") > 0,
        "{killed}"
    );
    common::assert_sigkill_loss_snapshots(
        "SIGKILLed kernel-mode recorder",
        &json(dir, "killed-export.json"),
        &common::KillLog::read(dir, "killed"),
    );

    // serve --mode kernel: histograms from the kernel, growing between scrapes, consistent.
    let metric = |file: &str, series: &str| -> u64 {
        let text = fs::read_to_string(dir.join(file)).expect(file);
        text.lines()
            .find(|l| l.starts_with(series))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{series} not in {file}:\n{text}"))
    };
    let count = "damon_trace_call_duration_seconds_count{function=\"lock_timer_base\"}";
    let calls = "damon_trace_calls_total{function=\"lock_timer_base\"}";
    let (c1, c2) = (metric("m1.txt", count), metric("m2.txt", count));
    assert!(
        c2 > c1,
        "lock_timer_base: {c1} then {c2} calls bucketed (scraped again for 60 s)"
    );
    assert!(metric("m2.txt", calls) >= c2);
    // Against the workload: uname ran N times after the second scrape, and nothing else calls
    // __x64_sys_newuname. The kernel counted N calls more (entries seen plus entries it
    // skipped); the exporter's `_count` and `+Inf` bucket (both summed from the kernel's
    // buckets) hold N calls more but for those the kernel's counters say were dropped (a
    // skipped kprobe run has been seen here) or are still in flight (one whose exit was never
    // seen, likewise).
    let m3 = fs::read_to_string(dir.join("m3.txt")).expect("m3");
    let delta = |series: &str| metric("m3.txt", series) - metric("m2.txt", series);
    let calls = "damon_trace_calls_total{function=\"__x64_sys_newuname\"}";
    assert_eq!(delta(calls), N, "{calls} after {N} uname calls:\n{m3}");
    let dropped = |file: &str| -> u64 {
        fs::read_to_string(dir.join(file))
            .expect(file)
            .lines()
            .filter(|l| l.starts_with("damon_trace_dropped_total{function=\"__x64_sys_newuname\","))
            .map(|l| {
                l.rsplit(' ')
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .expect("count")
            })
            .sum()
    };
    let unaccounted = delta("damon_trace_in_flight{function=\"__x64_sys_newuname\"}")
        + dropped("m3.txt")
        - dropped("m2.txt");
    for series in [
        "damon_trace_call_duration_seconds_count{function=\"__x64_sys_newuname\"}",
        "damon_trace_call_duration_seconds_bucket{function=\"__x64_sys_newuname\",le=\"+Inf\"}",
    ] {
        assert_eq!(
            delta(series) + unaccounted,
            N,
            "{series}: {} more, {unaccounted} more dropped or in flight, after {N} uname \
             calls:\n{m3}",
            delta(series)
        );
    }
    let m2 = fs::read_to_string(dir.join("m2.txt")).expect("m2");
    assert!(m2.contains("mode=\"kernel\""), "{m2}");

    // --cpu needs records: a usage error that says why.
    let status = fs::read_to_string(dir.join("cpu.status")).expect("status");
    let err = fs::read_to_string(dir.join("cpu.err")).expect("cpu.err");
    assert_eq!(status.trim(), "2", "{err}");
    assert!(err.contains("--mode kernel"), "{err}");
}

/// How long `vm_7_2_record_mode_kernel_reports_every_function_with_its_bound` records in kernel
/// mode (its snapshots: one a second of it).
const K_RECORD_S: u64 = 10;

/// `uname` runs `N` times while each recorder traces `__x64_sys_newuname` (the uname(2) system
/// call, which nothing else in the guest calls).
const N: u64 = 300;

fn record_driven(mode: &str, file: &str) -> String {
    format!(
        "damon-trace record --mode {mode} --func __x64_sys_newuname -o /out/{file} --duration 300s 2> /out/{file}.err &
rec=$!
i=0; until grep -q '__x64_sys_newuname' /out/{file}.err; do i=$((i+1)); [ $i -gt 600 ] && break; sleep 0.1; done
n=0; while [ $n -lt {N} ]; do uname > /dev/null; n=$((n+1)); done
kill -INT $rec
wait $rec
"
    )
}

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test` or --ignored"]
fn vm_7_2_kernel_and_stream_captures_of_one_workload_agree() {
    let cmd = format!(
        "set -e
{}{}damon-trace report /out/stream.dtcap --format json > /out/stream.json
damon-trace report /out/kernel.dtcap --format json > /out/kernel.json
damon-trace compare /out/stream.dtcap /out/kernel.dtcap --format json > /out/cmp.json
damon-trace compare /out/stream.dtcap /out/kernel.dtcap > /out/cmp.txt",
        record_driven("stream", "stream.dtcap"),
        record_driven("kernel", "kernel.dtcap")
    );
    let run = run_script(&cmd);
    let dir = run.dir();
    let name = "__x64_sys_newuname";
    let s = json(dir, "stream.json");
    let k = json(dir, "kernel.json");
    let (fs_, fk) = (function(&s, name), function(&k, name));
    eprintln!(
        "{}",
        fs::read_to_string(dir.join("cmp.txt")).expect("cmp.txt")
    );
    assert_eq!(
        (fs_["mode"].as_str(), fk["mode"].as_str()),
        (Some("stream"), Some("kernel"))
    );
    for f in [fs_, fk] {
        let (name, mode) = (
            f["name"].as_str().expect("name"),
            f["mode"].as_str().expect("mode"),
        );
        assert_traced(f, auto_attach(&Kernel::DEBIAN_7_2, name, mode));
        // Deterministic: the workload's calls, every one timed.
        assert_eq!(u(f, "calls"), N, "{f}");
        assert_eq!(u(f, "count"), N, "{f}");
    }
    let cmp = json(dir, "cmp.json");
    let c = common::entry(&cmp["functions"], "name", name);
    assert_eq!((u(&c["before"], "calls"), u(&c["after"], "calls")), (N, N));
    let rows = |side: &str| -> u64 {
        let rows = c["rows"].as_array().expect("rows");
        rows.iter().map(|r| u(r, side)).sum()
    };
    assert_eq!(rows("after"), N);
    assert_eq!(rows("before"), N);
    let verdict = c["verdict"].as_str().expect("verdict");
    assert!(verdict.contains("at bucket resolution: 10 ns"), "{verdict}");
    // The stream capture's percentiles, bucketed, lie on the same grid as the kernel's: each
    // compared percentile is a bucket top of the kernel's grid.
    for p in c["percentiles"].as_array().expect("percentiles") {
        for side in ["before_ns", "after_ns"] {
            let v = u(p, side);
            let b = damon_common::hist_bucket(v, 10);
            let (lo, hi) = damon_common::hist_bucket_bounds(b, 10);
            assert!(v == hi - 1 || hi == u64::MAX && v == lo, "{p}");
        }
    }
}

/// Calls a panel shows for `name` (`damon_hot_score  fentry  619 calls`), if on screen.
fn calls_shown(screen: &str, name: &str) -> Option<u64> {
    common::calls_shown(screen, name)?
        .replace(',', "")
        .parse()
        .ok()
}

/// `live --mode kernel` on the 80x24 serial console: the status line says KERNEL with the
/// bucket width, panels fill from the kernel's histograms, and the `--record` capture is a
/// kernel-mode capture holding at least the calls the screen counted.
#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test` or --ignored"]
fn vm_7_2_live_mode_kernel_panels_from_histograms() {
    let scenario = scenario();
    // With the disturbance counters: the panel shows the share of clean calls, from the
    // kernel's disturbed-call counts beside the histograms.
    let cmd = common::live_script(&scenario, " --mode kernel --disturbance --no-calibrate", "");
    let outcome = common::run_live(
        cmd,
        Duration::from_secs(300),
        (
            "damon_hot_score with 200 calls in kernel mode",
            Duration::from_secs(150),
        ),
        |s| s.contains("KERNEL 10ns") && calls_shown(s, "damon_hot_score").unwrap_or(0) >= 200,
    );
    let shown = common::first_screen(&outcome, "the panels filled");
    eprintln!("{shown}");
    assert_eq!(outcome.status, 0, "{shown}");
    assert!(shown.contains("pct to 10ns buckets"), "{shown}");
    let on_screen = calls_shown(shown, "damon_hot_score").expect("calls");
    let report = json(outcome.dir(), "live.json");
    assert_eq!(report["meta"]["mode"], "kernel");
    let f = function(&report, "damon_hot_score");
    assert_eq!(f["mode"], "kernel");
    assert_traced(
        f,
        auto_attach(&Kernel::DEBIAN_7_2, "damon_hot_score", "kernel"),
    );
    assert!(u(f, "count") >= on_screen, "{f} vs {on_screen} on screen");
    assert!(f["resolution"]["bound_ns"].is_u64(), "{f}");
    let line = shown
        .lines()
        .find(|l| l.contains("damon_hot_score") && l.contains("calls"))
        .expect("damon_hot_score's status line");
    let share: f64 = line
        .split("clean")
        .nth(1)
        .and_then(|r| r.trim_start().split('%').next()?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no clean share on the panel: {line}"));
    assert!((0.0..=100.0).contains(&share), "{line}");
    // The recorded histograms keep the disturbed calls: every call is in one class.
    assert_eq!(report["meta"]["disturbance"]["measured"], true, "{report}");
    let d = &f["disturbance"];
    let classes: u64 = ["clean", "slept", "preempted", "interrupted", "lost"]
        .iter()
        .map(|k| u(d, k))
        .sum();
    assert_eq!(classes, u(f, "count"), "{f}");
    eprintln!("clean share on screen {share}%; recorded {d}");
}
