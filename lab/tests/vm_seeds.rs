//! The seed measurements (`cargo xtask seed <name>`), run through the very code the command
//! runs ([`damon_lab::seed::run`]) and checked with [`damon_lab::seed::check`]: the structure and
//! invariants of their outputs, never absolute speed. The third seed, `lock-timer-ab` (6.12
//! against 7.2), boots two guests; its checks run inside
//! `vm_ab_6_12_vs_7_2_compare_renders_tables_intervals_and_verdict` in `tests/vm.rs`, which
//! drives the same seed run, so that CI does not boot those two guests twice.
mod common;
use common::{function, u};
use damon_lab::seed::{self, Seed, SeedOptions};

fn run(seed: Seed) -> seed::SeedOutcome {
    let out = tempfile::tempdir().expect("temp dir");
    let opts = SeedOptions::new(out.path().join(seed.name()));
    let outcome = seed::run(seed, &opts).expect("the seed runs");
    println!("{}", outcome.text);
    match seed::check(&outcome) {
        Ok(notes) => println!("{}", notes.join("\n")),
        Err(e) => panic!("{e:#}\n{}", outcome.text),
    }
    // The captures came back with the outputs (the dir is deleted with `out`).
    let captures = std::fs::read_dir(&outcome.out_dir)
        .expect("out dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "dtcap"))
        .count();
    assert_eq!(captures, 1, "one capture in {}", outcome.out_dir.display());
    outcome
}

/// damon_hot_score on 7.2 under migrate-hot: p50 ≤ p95 ≤ p99 ≤ max, the average between min
/// and max, a table of 20 ns rows (the slower calls in one `>= N` row) whose counts add up to
/// the records and percentages to 100, the same rows in text, JSON and Markdown.
#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_seed_hot_score_latency_table_in_20_ns_rows() {
    let o = run(Seed::HotScore);
    assert!(o.releases[0].starts_with("7.2."), "{:?}", o.releases);
    let f = function(&o.json, "damon_hot_score");
    assert_eq!(o.json["functions"].as_array().map(Vec::len), Some(1));
    assert!(u(f, "count") > 0);
    assert!(o.markdown.contains("| Range (ns) | Count | Percent |"));
}

/// migrate-hot with the destination on the workload's own node, on 7.2: for
/// damos_va_migrate_dests_add and damon_migrate_pages the aggregation intervals partition the
/// calls (in intervals + outside + not a kdamond = records), the per-interval times add up to
/// the per-call durations of the CSV export, and no page goes anywhere it was not already.
#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_seed_same_node_time_per_interval_in_the_migration_functions() {
    let o = run(Seed::SameNode);
    assert!(o.releases[0].starts_with("7.2."), "{:?}", o.releases);
    let scheme = &o.json["meta"]["damon"]["start"]["kdamonds"][0]["contexts"][0]["schemes"][0];
    assert_eq!(scheme["target_nid"], 0, "{scheme}");
    for name in ["damos_va_migrate_dests_add", "damon_migrate_pages"] {
        let f = function(&o.json, name);
        assert!(u(&f["per_interval"], "intervals") > 0, "{f}");
    }
}
