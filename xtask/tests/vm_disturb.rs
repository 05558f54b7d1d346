//! Disturbed calls against ground truth the tool does not produce (`damon-trace disturb-loop`,
//! whose worker, pinned to CPU 0, reads its own context-switch counts with `getrusage` before
//! and after every system call), in every attach method of 7.2 and 6.12, with `--attach auto`;
//! the captures read by the tests' own reader (`dtcap`), the export checked against it:
//! - **sleeping**: every `nanosleep` is flagged `slept` in `hrtimer_nanosleep`, exactly as
//!   often as the task itself saw it switch out;
//! - **preempted**: with a spinning thread on the same CPU, most long `read` calls of
//!   /dev/zero (`read_zero`, 16 MiB) are flagged `preempted`, and only calls the task itself
//!   saw switched out are (a switch at the system call's exit is outside the function);
//! - **interrupted**: the local timer interrupts a call `HZ` times a second (Debian's kernels
//!   are built with HZ=250): calls that stayed on the CPU count that many hard interrupts per
//!   second of their duration, and 64 KiB calls, 400 times shorter than a tick, are almost all
//!   clean;
//! - **clean calls stay put**: 1 MiB calls, alone and beside the spinning thread in turn (so
//!   both see the same load of the host), have the same clean median;
//! - **kernel mode**: with `--mode both` every call is both recorded and counted in the
//!   kernel's histograms with the same counts, so the records (checked as above) are ground
//!   truth for the kernel's disturbed-call counts: per reason, per bucket and in sum they must
//!   equal the records', and a kernel-mode report of the capture must state the records'
//!   fractions and the clean calls' percentiles in their buckets.
use std::time::Duration;

mod common;
use common::read;
use xtask::kernel::Kernel;

/// Debian's CONFIG_HZ on every kernel the tests boot.
const HZ: f64 = 250.0;

const SCRIPT: &str = r#"
set -e
one() {
  a=$1 name=${2:-$1} mode=${3:-stream}
  taskset -c 1 damon-trace record --func hrtimer_nanosleep --func read_zero --attach $a \
    --mode $mode --disturbance --no-calibrate --duration 600s -o /out/$name.dtcap \
    2> /out/$name.err &
  rec=$!
  attached $name
  a=$name
  damon-trace disturb-loop --work sleep --calls 30 > /out/$a-sleep.json
  damon-trace disturb-loop --work zero --bytes 16777216 --calls 30 > /out/$a-long.json
  damon-trace disturb-loop --work zero --bytes 16777216 --calls 30 --hog > /out/$a-long-hog.json
  damon-trace disturb-loop --work zero --bytes 1048576 --calls 200 --hog-odd > /out/$a-mid.json
  damon-trace disturb-loop --work zero --bytes 65536 --calls 100 > /out/$a-short.json
  kill -INT $rec
  wait $rec
  damon-trace export /out/$a.dtcap --format csv > /out/$a.csv
  damon-trace report /out/$a.dtcap --format json > /out/$a.report.json
}
METHODS
"#;

/// One call of the worker, as the tool recorded it.
#[derive(Debug)]
struct Call {
    entry_ns: u64,
    duration_ns: u64,
    /// `[slept, preempted, hardirqs, softirqs]`, `None` where not known.
    dist: [Option<u64>; 4],
}

impl Call {
    fn switched(&self) -> bool {
        self.dist[0] != Some(0) || self.dist[1] != Some(0)
    }
    fn clean(&self) -> bool {
        self.dist == [Some(0); 4]
    }
}

/// The worker's calls in a capture, read by the tests' own reader, in call order.
fn calls_of(capture: &dtcap::Capture, tid: u64) -> Vec<Call> {
    let mut calls: Vec<Call> = capture
        .records
        .iter()
        .filter(|r| u64::from(r.tid) == tid)
        .map(|r| Call {
            entry_ns: r.entry_ns,
            duration_ns: r.duration_ns,
            dist: r.disturbance.map(|v| (v != 0xFFFF).then_some(v)),
        })
        .collect();
    calls.sort_by_key(|c| c.entry_ns);
    calls
}

/// The export's per-call lines of task `tid`, in capture order, state the same disturbance as
/// the capture: `slept,preempted,hardirqs,softirqs` last, empty where not known.
fn export_agrees(csv: &str, capture: &dtcap::Capture, tid: u64, ctx: &str) {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    assert_eq!(
        header[7..],
        ["slept", "preempted", "hardirqs", "softirqs"],
        "{ctx}"
    );
    let exported: Vec<[Option<u64>; 4]> = lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[3].parse::<u64>() == Ok(tid))
        .map(|f| [7, 8, 9, 10].map(|i| f[i].parse().ok()))
        .collect();
    let recorded: Vec<[Option<u64>; 4]> = capture
        .records
        .iter()
        .filter(|r| u64::from(r.tid) == tid)
        .map(|r| r.disturbance.map(|v| (v != 0xFFFF).then_some(v)))
        .collect();
    assert_eq!(exported, recorded, "{ctx}: export --format csv");
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// The worker's tid in workload `name`'s output.
fn tid_of(dir: &std::path::Path, name: &str) -> u64 {
    let w: serde_json::Value = serde_json::from_str(&read(dir, name)).expect(name);
    w["tid"].as_u64().expect("tid")
}

/// The worker's calls of workload `name` and the switches it saw per call.
fn workload(
    dir: &std::path::Path,
    capture: &dtcap::Capture,
    name: &str,
) -> (Vec<Call>, Vec<[u64; 2]>) {
    let w: serde_json::Value = serde_json::from_str(&read(dir, name)).expect(name);
    let seen: Vec<[u64; 2]> = serde_json::from_value(w["switches"].clone()).expect("switches");
    let calls = calls_of(capture, tid_of(dir, name));
    assert_eq!(calls.len(), seen.len(), "{name}: one record per call made");
    (calls, seen)
}

fn check_method(dir: &std::path::Path, method: &str, ctx: &str) {
    let capture = dtcap::read(&dir.join(format!("{method}.dtcap")));
    let ctx = format!("{method} on {ctx}");
    export_agrees(
        &read(dir, &format!("{method}.csv")),
        &capture,
        tid_of(dir, &format!("{method}-long-hog.json")),
        &ctx,
    );
    // Sleeping: each nanosleep slept once in the function, as the task saw.
    let (calls, seen) = workload(dir, &capture, &format!("{method}-sleep.json"));
    for (c, s) in calls.iter().zip(&seen) {
        assert_eq!(
            c.dist[0],
            Some(s[0]),
            "{ctx}: slept as the task saw: {c:?} {s:?}"
        );
        assert!(s[0] >= 1, "{ctx}: the task slept: {s:?}");
    }
    // Preempted: the spinner takes the CPU from most long calls; a call flagged was seen
    // switched by the task too (the other way round, a switch may fall outside the function).
    let (calls, seen) = workload(dir, &capture, &format!("{method}-long-hog.json"));
    for (c, s) in calls.iter().zip(&seen) {
        assert!(
            !c.switched() || s[1] > 0,
            "{ctx}: preempted only if the task saw it: {c:?} {s:?}"
        );
    }
    // How many the spinner preempts depends on the preemption model (a lazy one waits for a
    // second tick); at least half of those the task saw are flagged (the rest were switched at
    // the system call's exit, outside the function).
    let preempted = calls.iter().filter(|c| c.dist[1].unwrap_or(0) > 0).count();
    let saw = seen.iter().filter(|s| s[1] > 0).count();
    assert!(
        saw >= 5 && preempted * 2 >= saw,
        "{ctx}: {preempted} long calls beside a spinner flagged preempted, {saw} of {} seen \
         preempted by the task",
        calls.len()
    );
    // Interrupted: the timer's ticks, HZ per second of the calls that kept their CPU.
    let (calls, seen) = workload(dir, &capture, &format!("{method}-long.json"));
    let kept: Vec<&Call> = calls.iter().filter(|c| !c.switched()).collect();
    assert!(
        kept.len() * 10 >= calls.len() * 8,
        "{ctx}: long calls alone mostly keep the CPU: {seen:?}"
    );
    let ticks: u64 = kept
        .iter()
        .map(|c| c.dist[2].expect("hardirqs known"))
        .sum();
    let seconds: f64 = kept.iter().map(|c| c.duration_ns as f64 / 1e9).sum();
    let rate = ticks as f64 / seconds;
    assert!(
        (0.6 * HZ..=1.6 * HZ).contains(&rate),
        "{ctx}: {ticks} hard interrupts in {seconds:.3} s of calls: {rate:.0}/s, the tick is {HZ}/s"
    );
    let (calls, _) = workload(dir, &capture, &format!("{method}-short.json"));
    let clean = calls.iter().filter(|c| c.clean()).count();
    assert!(
        clean * 100 >= calls.len() * 95,
        "{ctx}: {clean} of {} short calls clean",
        calls.len()
    );
    // Clean calls stay put beside the spinner.
    let (mid, _) = workload(dir, &capture, &format!("{method}-mid.json"));
    let alone: Vec<&Call> = mid.iter().step_by(2).collect();
    let hogged: Vec<&Call> = mid.iter().skip(1).step_by(2).collect();
    let clean_median = |v: &[&Call]| {
        median(
            v.iter()
                .filter(|c| c.clean())
                .map(|c| c.duration_ns)
                .collect(),
        )
    };
    let (a, h) = (clean_median(&alone), clean_median(&hogged));
    assert!(
        (h as f64 / a as f64 - 1.0).abs() < 0.15,
        "{ctx}: clean median {a} ns alone, {h} ns beside the spinner"
    );
    eprintln!(
        "{ctx}: {preempted} long calls preempted ({saw} seen); {rate:.0} ticks/s; \
         short clean {clean}/100; mid clean median {a} / {h} ns"
    );
}

/// Kernel mode against the records of the same calls (`--mode both`, recorded as `name`):
/// the kernel's disturbed calls per reason, their buckets and summed time equal the records',
/// and the report of the capture read as a kernel-mode one states them.
fn check_kernel_mode(dir: &std::path::Path, name: &str, ctx: &str) {
    let capture = dtcap::read(&dir.join(format!("{name}.dtcap")));
    assert_eq!(capture.meta["mode"], "both", "{ctx}");
    assert!(
        capture.chunks.iter().any(|(kind, _)| *kind == 9),
        "{ctx}: snapshots with the disturbed calls (kind 9)"
    );
    let summary = capture.summary.as_ref().expect("summary");
    let as_kernel = dir.join(format!("{name}-as-kernel.dtcap"));
    dtcap::write_with_mode(&dir.join(format!("{name}.dtcap")), &as_kernel, "kernel");
    let report = common::host_report(&as_kernel);
    for func in ["hrtimer_nanosleep", "read_zero"] {
        let h = &summary["kernel_hist"][capture.id(func).to_string()];
        let d = &h["disturbed"];
        let width = common::u(h, "width_ns");
        let records = capture.of(func);
        // The records' classes, each call once for its first reason (docs/accuracy.md).
        let mut want = [0u64; 5]; // slept, preempted, interrupted, lost, clean
        let mut buckets = vec![0u64; common::u64s(&h["buckets"]).len()];
        let (mut sum, mut clean) = (0u64, Vec::new());
        for r in &records {
            let class = match r.disturbance {
                [0, 0, 0, 0] => 4,
                [0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF] => 3,
                [s, ..] if s != 0 => 0,
                [_, p, ..] if p != 0 => 1,
                _ => 2,
            };
            want[class] += 1;
            if class == 4 {
                clean.push(r.duration_ns);
            } else {
                buckets[damon_common::hist_bucket(r.duration_ns, width) as usize] += 1;
                sum += r.duration_ns;
            }
        }
        let got = ["slept", "preempted", "interrupted", "lost"].map(|k| common::u(d, k));
        assert_eq!(
            got,
            want[..4],
            "{ctx} {func}: kernel's disturbed calls by reason"
        );
        assert_eq!(
            common::u64s(&d["buckets"]),
            buckets,
            "{ctx} {func}: per bucket"
        );
        assert_eq!(common::u(d, "sum_ns"), sum, "{ctx} {func}: summed time");
        assert!(
            want[..4].iter().sum::<u64>() > 0,
            "{ctx} {func}: nothing disturbed"
        );
        let f = common::function(&report, func);
        assert_eq!(f["mode"], "kernel", "{ctx}: {f}");
        let fd = &f["disturbance"];
        let stated =
            ["slept", "preempted", "interrupted", "lost", "clean"].map(|k| common::u(fd, k));
        assert_eq!(
            stated, want,
            "{ctx} {func}: the kernel-mode report's fractions"
        );
        if clean.is_empty() {
            assert!(f["clean_percentiles"].is_null(), "{ctx} {func}: {f}");
            continue;
        }
        clean.sort_unstable();
        let exact = dtcap::nearest_rank(&clean, 50_000);
        let (lo, hi) =
            damon_common::hist_bucket_bounds(damon_common::hist_bucket(exact, width), width);
        let p50 = common::u(&f["clean_percentiles"], "p50_ns");
        assert!(
            (lo..hi).contains(&p50),
            "{ctx} {func}: clean p50 {p50} ns stated, the clean records' is {exact} ns in [{lo}, {hi})"
        );
        eprintln!(
            "{ctx} {func}: kernel mode's disturbed calls (slept, preempted, interrupted, lost) \
             {got:?} == the records'; clean p50 {p50} ns (records {exact} ns)"
        );
    }
}

/// Runs the workloads under each method of `methods` (an attach method, or `both:METHOD` for
/// `--mode both` with that method) and checks every capture.
fn disturbed(kernel: Kernel, methods: &[&str]) {
    let line = |m: &&str| match m.strip_prefix("both:") {
        Some(a) => format!("one {a} both-{a} both"),
        None => format!("one {m}"),
    };
    let script = format!("{}{SCRIPT}", common::RECORDER_HELPERS).replace(
        "METHODS",
        &methods.iter().map(line).collect::<Vec<_>>().join("\n"),
    );
    let outcome = common::boot_ok(common::guest(kernel, script, Duration::from_secs(900)));
    let dir = outcome.dir();
    for m in methods {
        let both = m.strip_prefix("both:").map(|a| format!("both-{a}"));
        let m = both.as_deref().unwrap_or(m);
        if both.is_some() {
            check_kernel_mode(dir, m, &format!("{m} on {}", outcome.kernel_release));
        }
        check_method(dir, m, &outcome.kernel_release);
        let report = common::json(dir, &format!("{m}.report.json"));
        assert_eq!(
            report["meta"]["disturbance"]["measured"], true,
            "{m}: {report}"
        );
        // `report` classifies the same calls: every nanosleep (ours and the shell's) slept.
        let sleep = common::function(&report, "hrtimer_nanosleep");
        assert!(
            common::u(&sleep["disturbance"], "slept") >= 30,
            "{m}: {sleep}"
        );
        assert_eq!(common::u(&sleep["disturbance"], "clean"), 0, "{m}: {sleep}");
    }
}

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_flags_sleeping_preempted_and_interrupted_calls_in_every_attach_method() {
    disturbed(
        Kernel::Debian72,
        &[
            "auto",
            "fentry",
            "kprobe",
            "kprobe-session",
            "fsession",
            "both:auto",
        ],
    );
}

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_6_12_flags_sleeping_preempted_and_interrupted_calls_in_every_attach_method() {
    disturbed(
        Kernel::Debian612,
        &["auto", "fentry", "kprobe", "kprobe-session", "both:auto"],
    );
}
