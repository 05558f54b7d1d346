use crate::{
    analysis::{
        build,
        kernel::NOT_AVAILABLE,
        test_support::{opts, test_capture},
    },
    report::render,
};

#[test]
fn same_columns_from_buckets_with_exact_count_mean_min_max() {
    let d: Vec<u64> = (0..1000).map(|i| 100 + (i * 37) % 400).collect();
    let c = test_capture(&d, true);
    let r = build(&c, &opts()).expect("report");
    let f = &r.functions[0];
    assert_eq!(
        (f.mode, f.calls, f.count, f.dropped, f.in_flight),
        (crate::capture::Mode::Kernel, 1002, 1000, 1, 1)
    );
    assert_eq!(f.calls, f.count + f.dropped + f.in_flight);
    assert_eq!((f.min_ns, f.max_ns), (Some(100), Some(499)));
    let mean = d.iter().sum::<u64>() as f64 / 1000.0;
    assert!((f.mean_ns.expect("mean") - mean).abs() < 1e-9);
    let res = f.resolution.as_ref().expect("resolution");
    assert_eq!((res.width_ns, res.linear_range_ns), (10, 5120));
    assert!(res.bound_ns <= 9, "{res:?}");
    let mut sorted = d.clone();
    sorted.sort_unstable();
    let exact = crate::stats::percentile(&sorted, 50.0).expect("p50");
    assert!(res.p50.lo_ns <= exact && exact <= res.p50.value_ns);
    assert_eq!(f.p50_ns, Some(res.p50.value_ns));
    let rows = &f.buckets.as_ref().expect("rows").rows;
    assert_eq!(rows.iter().map(|r| r.count).sum::<u64>(), 1000);
    // The one stamp-map drop is said; the identity holds, so nothing else is.
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(
        r.warnings[0].contains("entry-stamp map"),
        "{:?}",
        r.warnings
    );
    let text = render::table(&r, None);
    assert!(
        text.contains("percentiles at bucket resolution (10 ns buckets"),
        "{text}"
    );
    assert!(text.contains(NOT_AVAILABLE), "{text}");
    let json = serde_json::to_value(&r).expect("json");
    assert_eq!(json["meta"]["mode"], "kernel");
    assert_eq!(json["functions"][0]["resolution"]["bound_ns"], res.bound_ns);
    let csv = render::csv(&r);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let row: Vec<&str> = lines.next().expect("row").split(',').collect();
    let col = header
        .iter()
        .position(|h| *h == "percentile_bound_ns")
        .expect("bound column");
    assert_eq!(header.len(), row.len(), "{csv}");
    assert_eq!(row[col], res.bound_ns.to_string(), "{csv}");
    let md = render::markdown(&r);
    assert!(md.contains("bucket resolution"), "{md}");
}
