use std::path::Path;

use crate::{
    analysis::{ReportOptions, build},
    capture::{Capture, format::read_file},
};

fn load(name: &str) -> Capture {
    read_file(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name),
    )
    .expect("fixture reads")
}

/// A capture written before arguments existed: the scores and pages are shown, no
/// argument is (its records' argument columns are absent, read as 0).
#[test]
fn old_capture_shows_returned_values_only() {
    let c = load("migrate-hot-7.2.dtcap");
    assert!(c.meta.args.is_empty());
    let opts = ReportOptions {
        bucket_ns: 20,
        ..Default::default()
    };
    let r = build(&c, &opts).expect("report");
    let hot = r
        .functions
        .iter()
        .find(|f| f.name == "damon_hot_score")
        .unwrap();
    let v = hot.values.as_ref().expect("values");
    assert!(v.args.is_empty() && v.by_target_nid.is_empty());
    let score = v.value.as_ref().expect("scores");
    assert_eq!(score.count, hot.matched);
    assert!(score.min >= 0 && score.max <= 99, "{score:?}");
    assert_eq!(
        score.histogram.iter().map(|r| r.count).sum::<u64>(),
        score.count
    );
    let old = hot.value.expect("min/mean/max kept");
    assert_eq!(
        (old.min, old.max, old.sum),
        (score.min, score.max, score.sum)
    );
    let table = crate::report::render::table(&r, None);
    assert!(
        table.contains("damon_hot_score: values\n  hotness_score: n "),
        "{table}"
    );
}

/// A real 7.2 capture (`lab/tests/vm_values.rs` under `scenario migrate-hot`, fentry):
/// scores, region inputs, pages per target node, folios on their destination.
#[test]
fn real_capture_with_arguments() {
    let c = load("values-7.2.dtcap");
    let names: Vec<_> = c.meta.args.iter().map(|a| a.function.as_str()).collect();
    assert_eq!(
        names,
        [
            "damon_hot_score",
            "damos_va_migrate_dests_add",
            "damon_migrate_pages"
        ]
    );
    assert!(c.meta.args.iter().all(|a| a.missing.is_empty()));
    let opts = ReportOptions {
        bucket_ns: 20,
        ..Default::default()
    };
    let r = build(&c, &opts).expect("report");
    let f = |name: &str| {
        r.functions
            .iter()
            .find(|f| f.name == name)
            .and_then(|f| f.values.clone())
            .unwrap_or_else(|| panic!("{name} has no values"))
    };
    let ctx = &c.meta.damon.as_ref().expect("damon")["kdamonds"][0]["contexts"][0];
    let max_acc = (ctx["aggr_us"].as_i64().unwrap() / ctx["sample_us"].as_i64().unwrap()).max(1);
    let target = ctx["schemes"][0]["target_nid"].as_i64().unwrap();

    let hot = f("damon_hot_score");
    let score = hot.value.as_ref().unwrap();
    assert!(score.min >= 0 && score.max <= 99);
    assert_eq!(score.count, 2244);
    let acc = &hot.args["nr_accesses"];
    assert!(acc.min >= 0 && acc.max <= max_acc, "{acc:?} max {max_acc}");
    assert!(hot.args["age"].min >= 0);

    let mig = f("damon_migrate_pages");
    assert_eq!(mig.args["target_nid"].min, target);
    assert_eq!(mig.args["target_nid"].max, target);
    assert_eq!(mig.by_target_nid.len(), 1);
    assert_eq!(
        mig.by_target_nid[0].value_sum,
        mig.value.as_ref().unwrap().sum
    );

    let add = f("damos_va_migrate_dests_add");
    let on = add.already_on_destination.as_ref().unwrap();
    assert_eq!((on.on_destination, on.calls, on.known), (11, 34, 34));
    assert_eq!(add.args["dest_nid"].min, target);
    // Every folio not already on node 1 was a 2 MiB THP that damon_migrate_pages moved.
    assert_eq!(
        mig.value.as_ref().unwrap().sum,
        (on.calls - on.on_destination) as i64 * 512
    );

    let table = crate::report::render::table(&r, None);
    assert!(
        table.contains(
            "  already on destination: 11 of 34 calls (node and destination known for 34)"
        ),
        "{table}"
    );
    assert!(
        table.contains(
            "  per target node: node | calls | pages migrated\n       1 |      22 | 11776"
        )
    );
    let json = serde_json::to_value(&r).unwrap();
    let v = &json["functions"][0]["values"];
    assert_eq!(v["value_name"], "hotness_score");
    assert!(v["args"]["nr_accesses"]["histogram"].is_array(), "{v}");
}
