//! Cost per DAMON aggregation interval, on real kernels: the `damon:damon_aggregated` boundary
//! markers come from the scenario's kdamond (the pid sysfs names), the intervals partition the
//! DAMON calls (checked against the per-call CSV export, which knows nothing of intervals), the
//! per-interval sums equal the per-call sums, and each interval the report counts holds exactly
//! one round of the kdamond's scheme work, as the per-call export shows it apart from the
//! boundaries (the kdamond's samples delimit its rounds).
use std::{collections::BTreeMap, fs, time::Duration};

mod common;
use common::{FOUR, function, json, u};
use damon_lab::{
    kernel::Kernel,
    script::{spawn_scenario, with_scenario},
};

/// The operations' `check_accesses` (vaddr on 7.2, paddr on 6.12, as the scenario sets them
/// up): kdamond_fn calls it once per sample interval, and an aggregation interval is
/// `aggr_us / sample_us` of those (DAMON counts intervals in samples, not in time), so its calls
/// delimit the kdamond's rounds whatever the host's speed.
fn sample_fn(operations: &str) -> String {
    format!("damon_{}_check_accesses", &operations[..2])
}

/// Record 15 s under the migrate-hot scenario (the four built-ins and `sample`); report (JSON,
/// table and heatmap SVG) and export the calls.
fn cmd(sample: &str) -> String {
    let body = format!(
        "sleep 1
damon-trace record -o /out/iv.dtcap --duration 15s --no-calibrate --functions {} --func {sample} \\
  2> /out/record.err
damon-trace report /out/iv.dtcap --format json > /out/iv.json
damon-trace report /out/iv.dtcap > /out/iv.txt
damon-trace export /out/iv.dtcap --format csv -o /out/iv.csv
damon-trace report /out/iv.dtcap --heatmap /out/iv.svg > /dev/null 2>> /out/record.err",
        FOUR.join(",")
    );
    format!("set -e\n{}", with_scenario(180, "", &body))
}

/// The kdamond `tid`'s rounds in the per-call export, which knows nothing of boundaries: its
/// calls of `damon_hot_score` and of `sample` (see [`sample_fn`]) in entry order, cut into runs
/// of each.
/// Returns the sizes of the hot-score runs (one per scheme round: kdamond_apply_schemes scores
/// the regions once per aggregation interval, with no sample in between), from the first
/// sample on, and the number of samples between each two consecutive such runs.
fn rounds(csv: &str, tid: u64, sample: &str) -> (Vec<u64>, Vec<u64>) {
    let mut calls: Vec<(u64, bool)> = csv
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            let is_sample = f[0] == sample;
            (f[3].parse::<u64>().ok()? == tid && (is_sample || f[0] == "damon_hot_score"))
                .then(|| (f[4].parse().expect("entry_ns"), is_sample))
        })
        .collect();
    calls.sort_unstable();
    // Hot-score calls before the first sample cannot be told apart: the rounds start there.
    let start = calls.iter().position(|c| c.1).unwrap_or(calls.len());
    let calls = calls.split_off(start);
    let (mut bursts, mut between) = (Vec::new(), Vec::new());
    let (mut hot, mut samples) = (0u64, 0u64);
    for (_, is_sample) in calls {
        if is_sample {
            if hot > 0 {
                bursts.push(hot);
                hot = 0;
                samples = 0;
            }
            samples += 1;
        } else {
            if hot == 0 && !bursts.is_empty() {
                between.push(samples);
            }
            hot += 1;
        }
    }
    if hot > 0 {
        bursts.push(hot);
    }
    (bursts, between)
}

/// Per function: (rows, summed duration) of all calls, and of the calls by thread `tid`.
#[derive(Debug, Default, Clone, Copy)]
struct Sums {
    calls: u64,
    ns: u64,
    by_tid_calls: u64,
    by_tid_ns: u64,
}

fn csv_sums(text: &str, tid: u64) -> BTreeMap<String, Sums> {
    let (all, by_tid) = damon_lab::parse::csv_sums(text).expect("the per-call CSV export");
    all.into_iter()
        .map(|(name, (calls, ns))| {
            let (by_tid_calls, by_tid_ns) = by_tid
                .get(&(name.clone(), tid))
                .copied()
                .unwrap_or_default();
            let sums = Sums {
                calls,
                ns,
                by_tid_calls,
                by_tid_ns,
            };
            (name, sums)
        })
        .collect()
}

/// Runs the scenario on `kernel` and checks every traced DAMON function's `per_interval`;
/// returns the report for kernel-specific checks.
fn run_and_check(
    kernel: Kernel,
    operations: &str,
    traced: &[&str],
    missing: &[&str],
) -> serde_json::Value {
    let sample = sample_fn(operations);
    let run = common::run_script(kernel, cmd(&sample), Duration::from_secs(300));
    let dir = run.dir();
    let report = json(dir, "iv.json");
    let table = fs::read_to_string(dir.join("iv.txt")).expect("iv.txt");
    eprintln!("{table}");

    // The DAMON context at start names the scenario's kdamond; the end snapshot exists and
    // the configuration did not change while recording.
    let damon = &report["meta"]["damon"];
    let kd = &damon["start"]["kdamonds"][0];
    assert_eq!(kd["state"], "on", "{damon}");
    let kdamond_pid = u(kd, "pid");
    let ctx = &kd["contexts"][0];
    let aggr_us = u(ctx, "aggr_us");
    assert_eq!(ctx["schemes"][0]["action"], "migrate_hot", "{ctx}");
    assert_eq!(ctx["operations"], operations, "{ctx}");
    assert!(damon["end"].is_object(), "no end snapshot: {damon}");
    assert_eq!(damon["changed_at_end"], false, "{damon}");
    assert!(
        table.contains("DAMON at start:\n  kdamond 0 on pid "),
        "{table}"
    );

    // Boundaries: attached, none lost, every marker the kernel wrote is in the capture, and
    // the scenario's kdamond (by the pid sysfs gives) is the one that ended intervals.
    let iv = &report["intervals"];
    assert_eq!(iv["hook"], "tracepoint:damon:damon_aggregated", "{iv}");
    assert_eq!(iv["attached"], true, "{iv}");
    assert_eq!(u(iv, "markers_dropped"), 0, "{iv}");
    assert_eq!(u(iv, "kernel_emitted"), u(iv, "markers"), "{iv}");
    assert_eq!(u(iv, "kernel_markers"), u(iv, "markers"), "{iv}");
    let kdamonds = iv["kdamonds"].as_array().expect("kdamonds");
    let ours = kdamonds
        .iter()
        .find(|k| u(k, "tid") == kdamond_pid)
        .unwrap_or_else(|| panic!("kdamond {kdamond_pid} ended no interval: {iv}"));
    let intervals = u(ours, "intervals");

    // Length of the intervals. DAMON counts an interval in samples (aggr_us / sample_us
    // sleeps of sample_us, plus the work between them), so an interval is never shorter than
    // configured (the 5 % covers timer slack): a kernel property. How much longer depends on
    // the host: for 100 ms, under TCG, the README's run measured a mean of 125.7 ms (max
    // 381 ms), a loaded 2-core host 285.5 ms (max 2.1 s; 76 intervals in 19.2 s) on 7.2 and
    // 258.2 ms on 6.12, where the former bounds (mean ≤ 2 × aggr, count ≥ 0.5 × elapsed/aggr)
    // both failed. So there is no upper bound in time: the rounds below check the count.
    let aggr_ns = aggr_us as f64 * 1000.0;
    let mean = ours["mean_interval_ns"].as_f64().expect("mean");
    assert!(
        mean >= aggr_ns * 0.95,
        "mean interval {mean} ns for aggr {aggr_us} us"
    );
    let (min, max) = (u(ours, "min_interval_ns"), u(ours, "max_interval_ns"));
    assert!(
        min as f64 >= aggr_ns * 0.95 && min as f64 <= mean && mean <= max as f64,
        "intervals {min}..{max} ns, mean {mean} ns, aggr {aggr_us} us"
    );
    // Every boundary the capture holds ended an interval of some kdamond.
    let boundaries: u64 = kdamonds.iter().map(|k| u(k, "boundaries")).sum();
    assert_eq!(boundaries, u(iv, "markers"), "{iv}");
    assert_eq!(u(ours, "boundaries"), intervals + 1, "{ours}");

    // The count, against the kdamond's own rounds: with apply_interval_us 0 the scheme runs
    // once per aggregation interval, just before the boundary, so each complete interval
    // holds exactly one run of damon_hot_score calls, and consecutive runs are aggr/sample
    // samples apart. The tracker's per-interval counts must be those runs, one for one, in
    // order: an interval merged with the next, a dropped boundary or a split interval changes
    // them (merging every other pair leaves sums of two runs that are no window of the export).
    let text = fs::read_to_string(dir.join("iv.csv")).expect("iv.csv");
    assert_eq!(ctx["schemes"][0]["apply_interval_us"], 0, "{ctx}");
    let per_aggr = aggr_us / u(ctx, "sample_us");
    let (rounds, between) = rounds(&text, kdamond_pid, &sample);
    eprintln!(
        "{} scheme rounds in the export, samples between them {:?}..{:?} (aggr/sample {per_aggr})",
        rounds.len(),
        between.iter().min(),
        between.iter().max()
    );
    // The last gap may be cut by the probes' detach order. A sample whose entry probe the
    // kernel skipped is counted but not recorded (its `calls` less its `count`): it shortens
    // its gap by one, and the gaps fall short by no more than those (seen once in 122 rounds).
    let last = between.len().saturating_sub(1);
    let s = function(&report, &sample);
    let unrecorded = u(s, "calls") - u(s, "count");
    let short: u64 = between[..last]
        .iter()
        .map(|&n| per_aggr.saturating_sub(n))
        .sum();
    assert!(
        between.len() >= 10
            && between[..last].iter().all(|&n| n <= per_aggr)
            && short <= unrecorded
            && between[last] <= per_aggr,
        "samples between scheme rounds, {per_aggr} expected ({unrecorded} of {sample}'s \
         calls counted, not recorded): {between:?}"
    );
    let hot = &function(&report, "damon_hot_score")["per_interval"];
    let per_iv = common::u64s(&hot["calls_per_interval"]);
    // The first intervals may end before the per-sample probe is attached (the boundaries
    // are attached first): the export's rounds start after the first sample, so the tracker's
    // intervals from some `skip` on must be a window of them that starts at round 0 or 1
    // (round 0 may end before the first boundary).
    let (skip, at) = (0..per_iv.len())
        .find_map(|i| {
            let tail = &per_iv[i..];
            rounds
                .windows(tail.len())
                .position(|w| w == tail)
                .map(|j| (i, j))
        })
        .unwrap_or_else(|| {
            panic!("no tail of the per-interval calls {per_iv:?} is in the rounds {rounds:?}")
        });
    eprintln!(
        "intervals {skip}.. are rounds {at}..{} of the export",
        at + per_iv.len() - skip
    );
    assert!(
        at <= 1 && per_iv.len() - skip >= 10,
        "intervals {skip}.. of {per_iv:?} are rounds {at}.. of {rounds:?}"
    );

    let csv = csv_sums(&text, kdamond_pid);
    for name in missing {
        let f = function(&report, name);
        assert_eq!(f["attach"], "missing", "{name}: {f}");
        assert!(f.get("per_interval").is_none(), "{name}: {f}");
    }
    for name in traced {
        let f = function(&report, name);
        let p = &f["per_interval"];
        assert!(p.is_object(), "{name} has no per_interval: {f}");
        let sums = csv.get(*name).copied().unwrap_or_default();
        // Partition: every call is in one interval, outside (before the first / after the last
        // boundary of its kdamond) or not a kdamond's, and nothing is lost.
        let (inside, outside, foreign) = (
            u(p, "calls_in_intervals"),
            u(p, "calls_outside"),
            u(p, "calls_not_kdamond"),
        );
        assert_eq!(inside + outside + foreign, u(f, "count"), "{name}: {p}");
        assert_eq!(inside + outside + foreign, sums.calls, "{name}: {p}");
        assert_eq!(inside + outside, sums.by_tid_calls, "{name}: {p}");
        assert_eq!(
            u(p, "total_ns_in_intervals") + u(p, "total_ns_outside"),
            sums.by_tid_ns,
            "{name}: {p}"
        );
        assert_eq!(
            u(p, "total_ns_in_intervals") + u(p, "total_ns_outside") + u(p, "total_ns_not_kdamond"),
            sums.ns,
            "{name}: per-interval time differs from the per-call sum: {p}"
        );
        // The per-interval series add up to the in-interval totals, one entry per interval.
        let calls: Vec<u64> = common::u64s(&p["calls_per_interval"]);
        let ns: Vec<u64> = common::u64s(&p["ns_per_interval"]);
        assert_eq!(u(p, "intervals"), intervals, "{name}: {p}");
        assert_eq!(calls.len() as u64, intervals, "{name}");
        assert_eq!(ns.len() as u64, intervals, "{name}");
        assert_eq!(calls.iter().sum::<u64>(), inside, "{name}");
        assert_eq!(
            ns.iter().sum::<u64>(),
            u(p, "total_ns_in_intervals"),
            "{name}"
        );
        assert_eq!(
            p["kdamonds"],
            serde_json::json!([kdamond_pid]),
            "{name}: {p}"
        );
        let order = [
            u(p, "p50_total_ns"),
            u(p, "p99_total_ns"),
            u(p, "max_total_ns"),
        ];
        assert!(order[0] <= order[1] && order[1] <= order[2], "{name}: {p}");
        assert_eq!(order[2], *ns.iter().max().expect("max"), "{name}");
        let mean_total = p["mean_total_ns"].as_f64().expect("mean_total_ns");
        let want = u(p, "total_ns_in_intervals") as f64 / intervals as f64;
        assert!(
            (mean_total - want).abs() <= want * 1e-9 + 1e-6,
            "{name}: {p}"
        );
        assert!(inside > 0, "{name}: no call inside an interval: {p}");
        assert!(
            table.contains(&format!("\n{name:<27} {intervals:>9} ")),
            "{name} missing from the table's per-interval block:\n{table}"
        );
    }
    check_heatmap(
        &fs::read_to_string(dir.join("iv.svg")).expect("iv.svg"),
        &report,
    );
    report
}

/// Each `<g class="{class}" data-function="{name}" data-panel="all" …>` of `svg`: its opening
/// tag and what it holds up to its `</g>` (these groups hold no groups).
fn svg_groups<'s>(svg: &'s str, class: &str, name: &str) -> Vec<(&'s str, &'s str)> {
    let open = format!("<g class=\"{class}\" data-function=\"{name}\" data-panel=\"all\"");
    svg.match_indices(&open)
        .map(|(at, _)| {
            let rest = &svg[at..];
            let head_end = rest.find('>').expect("a tag ends");
            let body_end = rest.find("</g>").expect("a group ends");
            (&rest[..head_end], &rest[head_end..body_end])
        })
        .collect()
}

/// The sum of every `{attr}="N"` in `text`.
fn sum_attr(text: &str, attr: &str) -> u64 {
    let key = format!("{attr}=\"");
    text.match_indices(&key)
        .map(|(at, _)| {
            let v = &text[at + key.len()..];
            v[..v.find('"').expect("a value ends")]
                .parse::<u64>()
                .expect("a number")
        })
        .sum()
}

/// `report --heatmap` of the guest's capture against the JSON report of the same capture: per
/// traced function, the cells count exactly its calls, the ticks count every boundary marker,
/// and DAMON functions' per-interval series cover the intervals the report counts.
fn check_heatmap(svg: &str, report: &serde_json::Value) {
    let markers = u(&report["intervals"], "markers");
    assert!(markers > 0, "{}", report["intervals"]);
    for f in report["functions"].as_array().expect("functions") {
        let name = f["name"].as_str().expect("name");
        let heat = svg_groups(svg, "heatmap", name);
        if u(f, "matched") == 0 {
            continue;
        }
        assert_eq!(heat.len(), 1, "{name}: one heatmap");
        assert_eq!(
            sum_attr(heat[0].1, "data-count"),
            u(f, "matched"),
            "{name}: cells"
        );
        let marks = svg_groups(svg, "marks", name);
        assert_eq!(marks.len(), 1, "{name}: one row of ticks");
        assert_eq!(sum_attr(marks[0].1, "data-marks"), markers, "{name}: ticks");
        // One step line per kdamond, each tag carrying its interval count.
        let series = format!("class=\"per-interval\" data-function=\"{name}\"");
        let intervals: u64 = svg
            .match_indices(&series)
            .map(|(at, _)| {
                sum_attr(
                    &svg[at..at + svg[at..].find('>').expect("a tag ends")],
                    "data-intervals",
                )
            })
            .sum();
        let p = &f["per_interval"];
        let want = if p.is_null() || name == "lock_timer_base" {
            0
        } else {
            u(p, "intervals")
        };
        assert_eq!(intervals, want, "{name}: per-interval series");
    }
}

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_intervals_partition_damon_calls_under_migrate_hot() {
    run_and_check(
        Kernel::DEBIAN_7_2,
        "vaddr",
        &[
            "damon_hot_score",
            "damos_va_migrate_dests_add",
            "damon_migrate_pages",
        ],
        &[],
    );
}

/// 6.12 lacks two of the four functions: they have no `per_interval`; `damon_hot_score`'s
/// intervals still come from the same tracepoint.
#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_6_12_intervals_without_the_missing_functions() {
    run_and_check(
        Kernel::DEBIAN_6_12,
        "paddr",
        &["damon_hot_score"],
        &["damos_va_migrate_dests_add", "damon_migrate_pages"],
    );
}

/// The `(N)` of each `per interval (N):` line on the screen, top to bottom.
fn intervals_shown(screen: &str) -> Vec<u64> {
    screen
        .lines()
        .filter_map(|l| {
            let rest = l.split("per interval (").nth(1)?;
            rest.split(')').next()?.parse().ok()
        })
        .collect()
}

/// `damon-trace live` on the 80x24 serial console: the DAMON panels grow a per-interval line
/// once the scenario's kdamond has ended intervals, and the `--record` capture holds the
/// boundaries.
#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_live_shows_time_per_interval() {
    let cmd = common::live_script(&spawn_scenario(300, ""), " --no-calibrate", "");
    let outcome = common::run_live(
        cmd,
        Duration::from_secs(300),
        ("a DAMON panel with 10 intervals", Duration::from_secs(150)),
        |s| intervals_shown(s).iter().any(|&n| n >= 10),
    );
    let shown = common::first_screen(&outcome, "a per-interval line showed");
    eprintln!("{shown}");
    assert_eq!(outcome.status, 0, "{shown}");
    // The line sits under damon_hot_score's percentiles (the panel called every interval).
    let lines: Vec<&str> = shown.lines().collect();
    let hot = lines
        .iter()
        .position(|l| l.contains("damon_hot_score"))
        .expect("hot score panel");
    assert!(
        lines[hot + 2].trim_start().starts_with("per interval ("),
        "{shown}"
    );
    assert!(
        !shown.contains("lock_timer_base") || {
            let timer = lines
                .iter()
                .position(|l| l.contains("lock_timer_base"))
                .expect("timer");
            !lines[timer..].iter().any(|l| l.contains("per interval ("))
        },
        "lock_timer_base is not a DAMON function: {shown}"
    );
    let on_screen = intervals_shown(shown)[0];
    let report = json(outcome.dir(), "live.json");
    let iv = &report["intervals"];
    assert_eq!(iv["attached"], true, "{iv}");
    assert_eq!(u(iv, "kernel_emitted"), u(iv, "markers"), "{iv}");
    let p = &function(&report, "damon_hot_score")["per_interval"];
    assert!(
        u(p, "intervals") >= on_screen,
        "the capture ({}) holds at least the intervals the screen counted ({on_screen})",
        u(p, "intervals")
    );
}
