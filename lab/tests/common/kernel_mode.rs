//! Kernel mode's disturbed-call counts against the records of the same calls (`--mode both`,
//! `vm_disturb`): the records, checked there against the task's and the kernel's own counts,
//! are the ground truth for the kernel's histograms.
use super::{function, host_report, u, u64s};

/// A record's class, each call once for its first reason (docs/accuracy.md): 0 slept,
/// 1 preempted, 2 interrupted only, 3 snapshot lost, 4 clean.
pub fn class(r: &dtcap::Record) -> usize {
    match r.disturbance {
        [0, 0, 0, 0] => 4,
        [0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF] => 3,
        [s, ..] if s != 0 => 0,
        [_, p, ..] if p != 0 => 1,
        _ => 2,
    }
}

/// How many records fall in each [`class`].
pub fn classes(records: &[dtcap::Record]) -> [u64; 5] {
    let mut n = [0u64; 5];
    records.iter().for_each(|r| n[class(r)] += 1);
    n
}

/// The classes a report states for function `f` (`disturbance`), in [`class`]'s order.
pub fn stated(f: &serde_json::Value) -> [u64; 5] {
    ["slept", "preempted", "interrupted", "lost", "clean"].map(|k| u(&f["disturbance"], k))
}

/// Kernel mode against the records of the same calls (`--mode both`, recorded as `name`):
/// the kernel's disturbed calls per reason, their buckets and summed time equal the records',
/// and the report of the capture read as a kernel-mode one states them.
pub fn check_kernel_mode(dir: &std::path::Path, name: &str, ctx: &str) {
    let capture = dtcap::read(&dir.join(format!("{name}.dtcap")));
    assert_eq!(capture.meta["mode"], "both", "{ctx}");
    assert!(
        capture.chunks.iter().any(|(kind, _)| *kind == 9),
        "{ctx}: snapshots with the disturbed calls (kind 9)"
    );
    let summary = capture.summary.as_ref().expect("summary");
    let as_kernel = dir.join(format!("{name}-as-kernel.dtcap"));
    dtcap::write_with_mode(&dir.join(format!("{name}.dtcap")), &as_kernel, "kernel");
    let report = host_report(&as_kernel);
    for func in ["hrtimer_nanosleep", "read_zero"] {
        let h = &summary["kernel_hist"][capture.id(func).to_string()];
        let d = &h["disturbed"];
        let width = u(h, "width_ns");
        let records = capture.of(func);
        let want = classes(&records);
        let mut buckets = vec![0u64; u64s(&h["buckets"]).len()];
        let (mut sum, mut clean) = (0u64, Vec::new());
        for r in &records {
            if class(r) == 4 {
                clean.push(r.duration_ns);
            } else {
                buckets[damon_common::hist_bucket(r.duration_ns, width) as usize] += 1;
                sum += r.duration_ns;
            }
        }
        let got = ["slept", "preempted", "interrupted", "lost"].map(|k| u(d, k));
        assert_eq!(
            got,
            want[..4],
            "{ctx} {func}: kernel's disturbed calls by reason"
        );
        assert_eq!(u64s(&d["buckets"]), buckets, "{ctx} {func}: per bucket");
        assert_eq!(u(d, "sum_ns"), sum, "{ctx} {func}: summed time");
        assert!(
            want[..4].iter().sum::<u64>() > 0,
            "{ctx} {func}: nothing disturbed"
        );
        let f = function(&report, func);
        assert_eq!(f["mode"], "kernel", "{ctx}: {f}");
        assert_eq!(
            stated(f),
            want,
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
        let p50 = u(&f["clean_percentiles"], "p50_ns");
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
