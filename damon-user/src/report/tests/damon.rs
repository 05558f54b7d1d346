use serde_json::json;

use crate::report::render::context_lines;

#[test]
fn context_line_names_ops_intervals_and_scheme() {
    let snap = json!({
        "damon_stat_enabled": false,
        "kdamonds": [{"index": 0, "state": "on", "pid": 88, "contexts": [{
            "operations": "vaddr", "sample_us": 5000, "aggr_us": 100000,
            "update_us": 1000000, "nr_regions_min": 10, "nr_regions_max": 1000,
            "targets": [{"pid": 321, "regions": []}],
            "schemes": [{"action": "migrate_hot", "target_nid": 1, "dests": [[1, 1]],
                "quota_ms": 100, "quota_bytes": 33554432, "quota_reset_interval_ms": 1000,
                "weight_sz_permil": 0, "weight_nr_accesses_permil": 700,
                "weight_age_permil": 300, "apply_interval_us": 0, "filters": []}]
        }]}]
    });
    assert_eq!(
        context_lines(&snap),
        vec![
            "kdamond 0 on pid 88: vaddr sample 5 ms aggr 100 ms update 1 s regions 10..1000; \
             target pid 321; scheme migrate_hot target_nid 1 dests 1:1 quota 100 ms \
             33554432 B / 1000 ms weights sz 0 acc 700 age 300 filters 0"
                .to_owned()
        ]
    );
}

/// The real 15 s capture of the migrate-hot scenario in the 7.2 guest, with boundaries.
mod real_capture {
    use std::path::Path;

    use crate::{
        analysis::{ReportOptions, build},
        capture::format::read_file,
        report::render,
        stats::intervals::{Boundaries, per_interval},
    };

    const FILE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/intervals-7.2.dtcap"
    );

    #[test]
    fn intervals_partition_the_real_calls() {
        let c = read_file(Path::new(FILE)).expect("capture");
        let bounds = Boundaries::from_marks(&c.marks);
        assert_eq!(c.marks.len(), 130);
        assert_eq!(bounds.intervals_of(133), 129);
        for id in 0..3 {
            let calls: Vec<_> = c.records.iter().filter(|r| r.func == id).copied().collect();
            let p = per_interval(&calls, &bounds).expect("boundaries");
            p.check(&calls).expect("partition");
            assert_eq!(p.kdamonds, vec![133]);
            assert_eq!(p.calls_not_kdamond, 0, "every DAMON call is the kdamond's");
        }
        let opts = ReportOptions {
            bucket_ns: 20,
            ..ReportOptions::default()
        };
        let r = build(&c, &opts).expect("report");
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        let hot = r.functions[0].per_interval.as_ref().expect("per_interval");
        assert_eq!(
            (hot.intervals, hot.calls_in_intervals, hot.calls_outside),
            (129, 1993, 16)
        );
        assert_eq!(
            (hot.p50_total_ns, hot.p99_total_ns, hot.max_total_ns),
            (29667, 90926, 309974)
        );
        assert!(
            r.functions[3].per_interval.is_none(),
            "lock_timer_base is not DAMON's"
        );
        let iv = r.intervals.as_ref().expect("intervals");
        assert_eq!((iv.markers, iv.markers_dropped), (130, 0));
        assert_eq!(
            (iv.kernel_markers, iv.kernel_emitted),
            (Some(130), Some(130))
        );
        let ctx = r.meta.damon.as_ref().expect("damon context");
        assert!(
            !ctx.changed_at_end && ctx.stats_changes.len() == 5,
            "{ctx:?}"
        );
        let json = serde_json::to_value(&r).expect("json");
        let f = &json["functions"][1]["per_interval"];
        assert_eq!(f["intervals"], 129);
        assert_eq!(f["ns_per_interval"].as_array().map(Vec::len), Some(129));
        for key in ["mean_total_ns", "p99_total_ns", "max_total_ns"] {
            assert!(f[key].is_number(), "{key}: {f}");
        }
        let md = render::markdown(&r);
        assert!(
            md.contains(
                "| `damon_hot_score` | 129 | 129 | 15.4 | 34743 | 29667 | 90926 | 309974 | 16 |"
            ),
            "{md}"
        );
        let table = render::table(&r, None);
        for line in [
            "DAMON at start:",
            "  kdamond 0 on pid 133: vaddr sample 5 ms aggr 100 ms update 1 s regions 10..1000; \
             target pid 131; scheme migrate_hot target_nid 1 dests 1:1",
            "DAMON at end: configuration unchanged (5 scheme stats advanced)",
            "per aggregation interval (tracepoint:damon:damon_aggregated; 130 boundaries, 0 lost)",
            "  kdamond tid 133: 129 intervals, length mean 117.8 ms min 103.9 max 363.0",
        ] {
            assert!(table.contains(line), "{line:?} missing from\n{table}");
        }
        let block = table
            .split("per aggregation interval")
            .nth(1)
            .expect("per-interval block");
        let row: Vec<&str> = block
            .lines()
            .find(|l| l.starts_with("damon_hot_score "))
            .expect("hot score row")
            .split_whitespace()
            .collect();
        assert_eq!(
            row,
            [
                "damon_hot_score",
                "129",
                "129",
                "15.4",
                "34743",
                "29667",
                "90926",
                "309974",
                "16"
            ]
        );
    }

    #[test]
    fn a_scheme_with_its_own_apply_interval_is_pointed_out() {
        let mut c = read_file(Path::new(FILE)).expect("capture");
        let opts = ReportOptions {
            bucket_ns: 20,
            ..ReportOptions::default()
        };
        let pointer = "/kdamonds/0/contexts/0/schemes/0/apply_interval_us";
        let damon = c.meta.damon.as_ref().expect("damon");
        assert_eq!(damon.pointer(pointer), Some(&0.into()), "{damon}");
        let quiet = build(&c, &opts).expect("report");
        assert!(quiet.warnings.is_empty(), "{:?}", quiet.warnings);
        *c.meta
            .damon
            .as_mut()
            .and_then(|d| d.pointer_mut(pointer))
            .expect("apply interval") = 500_000.into();
        let r = build(&c, &opts).expect("report");
        assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
        assert!(
            r.warnings[0].starts_with(
                "kdamond 0 applies its migrate_hot scheme every 500000 us, not every aggregation \
                 interval (100000 us)"
            ),
            "{:?}",
            r.warnings
        );
    }
}
