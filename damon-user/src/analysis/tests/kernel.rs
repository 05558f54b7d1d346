use crate::{
    analysis::{
        ReportOptions, build,
        test_support::{opts, test_capture},
    },
    capture::KernelHist,
};

#[test]
fn filters_are_refused_and_a_killed_recorder_reads_to_its_last_snapshot() {
    let c = test_capture(&[100, 200], true);
    let err = build(
        &c,
        &ReportOptions {
            cpu: vec![0],
            ..opts()
        },
    )
    .expect_err("no records to filter");
    assert!(err.0.contains("--mode kernel"), "{}", err.0);
    let c = test_capture(&[100, 200], false);
    let r = build(&c, &opts()).expect("report");
    assert_eq!(r.functions[0].count, 2);
    assert!(
        r.warnings[0].contains("last histogram snapshot, 3.0 s"),
        "{:?}",
        r.warnings
    );
    // Nothing recorded at all.
    let mut c = test_capture(&[], false);
    c.hist_snapshots.clear();
    let r = build(&c, &opts()).expect("report");
    assert_eq!(r.functions[0].p50_ns, None);
    let _ = KernelHist::default();
}

/// The real kernel-mode capture (7.2 guest, migrate-hot, 10.5 s): every function's
/// histogram holds exactly its counted calls, snapshots are cumulative, the accounting
/// identity holds, and the report gives every column with its bound.
#[test]
fn real_kernel_mode_capture() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/kernel-mode-7.2.dtcap"
    );
    let c = crate::capture::format::read_file(std::path::Path::new(path)).expect("fixture");
    assert!(c.is_kernel_mode() && c.records.is_empty());
    let s = c.summary.as_ref().expect("finished");
    assert_eq!(s.kernel_hist.len(), 4);
    for (id, h) in &s.kernel_hist {
        assert_eq!(h.buckets.iter().sum::<u64>(), h.count, "function {id}");
        assert_eq!(h.buckets.len(), damon_common::HIST_BUCKETS as usize);
        assert!(h.count > 0 && h.min_ns <= h.max_ns);
    }
    assert!(c.hist_snapshots.len() >= 9, "{}", c.hist_snapshots.len());
    for w in c.hist_snapshots.windows(2) {
        assert!(w[0].elapsed_ns < w[1].elapsed_ns);
        for (id, (k, h)) in &w[1].functions {
            let (k0, h0) = &w[0].functions[id];
            assert!(k.calls >= k0.calls && h.count >= h0.count);
            assert!(h.buckets.iter().zip(&h0.buckets).all(|(a, b)| a >= b));
        }
    }
    let r = build(&c, &opts()).expect("report");
    assert_eq!(r.functions.len(), 4);
    for f in &r.functions {
        assert_eq!(f.mode, crate::capture::Mode::Kernel);
        assert!(f.calls > 0, "{}", f.name);
        assert_eq!(f.calls, f.count + f.dropped + f.in_flight, "{}", f.name);
        let res = f.resolution.as_ref().expect("resolution");
        assert_eq!(f.p50_ns, Some(res.p50.value_ns));
        assert!(f.min_ns <= f.p50_ns && f.p50_ns <= f.p99_ns && f.p99_ns <= f.max_ns);
        let rows = &f.buckets.as_ref().expect("rows").rows;
        assert_eq!(
            rows.iter().map(|r| r.count).sum::<u64>(),
            f.count,
            "{}",
            f.name
        );
    }
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}
