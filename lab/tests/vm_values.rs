//! Returned and argument values on real kernels, under `scenario migrate-hot`: the scores
//! `damon_hot_score` returns and the region `nr_accesses`/`age` read through its argument (at
//! offsets found in the guest kernel's BTF), the pages `damon_migrate_pages` moved and its
//! `target_nid` argument, the node of each folio `damos_va_migrate_dests_add` sees against its
//! destination, the same with every attach method (a kprobe session keeps no
//! `nr_accesses`/`age`, and says so). Every recorded `nr_accesses`/`age`
//! pair is checked against the score the kernel returned for it: the test recomputes
//! `damon_hot_score` from them, so a field read at a wrong offset (zeros, or a neighbouring
//! field) shows as scores that do not match.
use std::{fs, path::Path, time::Duration};

mod common;
use common::{function, json, u};
use damon_lab::kernel::Kernel;

/// One capture per attach method, each under a scenario of its own (a kdamond that stopped
/// before the second capture once cost a whole run), each reported as JSON and table; the
/// fentry capture is kept (`values-7.2.dtcap` in damon-user/tests/data is one).
fn cmd(methods: &[&str]) -> String {
    let capture = |mode: &str| {
        damon_lab::script::with_scenario(
            240,
            "",
            &format!(
                "sleep 1\ndamon-trace record -o /out/{mode}.dtcap --attach {mode} --duration 20s --no-calibrate \
                 2> /out/{mode}.err\n"
            ),
        )
    };
    let captures: Vec<String> = methods.iter().map(|m| capture(m)).collect();
    format!(
        "set -e\n{}\nfor m in {}; do
  damon-trace report /out/$m.dtcap --format json > /out/$m.json
  damon-trace report /out/$m.dtcap > /out/$m.txt
done\n",
        captures.join("\n"),
        methods.join(" ")
    )
}

fn i(v: &serde_json::Value, key: &str) -> i64 {
    v[key]
        .as_i64()
        .unwrap_or_else(|| panic!("{key} not an integer in {v}"))
}

/// The histogram accounts for every value, rows in order.
fn check_dist(name: &str, d: &serde_json::Value) {
    let rows = d["histogram"].as_array().expect("histogram");
    assert!(!rows.is_empty() && rows.len() <= 10, "{name}: {d}");
    let total: u64 = rows.iter().map(|r| u(r, "count")).sum();
    assert_eq!(
        total,
        u(d, "count"),
        "{name}: histogram does not add up: {d}"
    );
    assert!(i(&rows[0], "lo") <= i(d, "min"), "{name}: {d}");
    assert!(i(&rows[rows.len() - 1], "hi") >= i(d, "max"), "{name}: {d}");
    assert!(
        i(d, "min") <= i(d, "p50") && i(d, "p50") <= i(d, "max"),
        "{name}: {d}"
    );
}

/// Checks the values of one report; returns (hot_score calls, migrate calls).
/// The `values` of `function` in a report: present, their return value named `value_name`, its
/// histogram whole (see [`check_dist`]).
fn values<'a>(
    report: &'a serde_json::Value,
    name: &str,
    value_name: &str,
) -> &'a serde_json::Value {
    let f = function(report, name);
    let v = &f["values"];
    assert!(v.is_object(), "{name} has no values: {f}");
    assert_eq!(v["value_name"], value_name);
    check_dist(value_name, &v["value"]);
    v
}

/// `hot_args`: whether damon_hot_score's `nr_accesses`/`age` are recorded (not by a kprobe
/// session, whose cookie has no room for them: then the report must say they are not).
fn check_report(
    report: &serde_json::Value,
    table: &str,
    with_migrate: bool,
    hot_args: bool,
) -> (u64, u64) {
    let ctx = &report["meta"]["damon"]["start"]["kdamonds"][0]["contexts"][0];
    let (sample_us, aggr_us) = (u(ctx, "sample_us"), u(ctx, "aggr_us"));
    let scheme = &ctx["schemes"][0];
    assert_eq!(scheme["action"], "migrate_hot", "{ctx}");

    let v = values(report, "damon_hot_score", "hotness_score");
    let score = &v["value"];
    // DAMOS_MAX_SCORE is 99.
    assert!(i(score, "min") >= 0 && i(score, "max") <= 99, "{score}");
    if hot_args {
        check_hot_args(v, table, sample_us, aggr_us);
    } else {
        assert!(v["args"]["nr_accesses"].is_null(), "not recorded: {v}");
        let f = function(report, "damon_hot_score");
        assert!(
            f.to_string().contains("no room for nr_accesses and age"),
            "the report says why: {f}"
        );
    }
    let hot_calls = u(score, "count");

    let mut migrate_calls = 0;
    if with_migrate {
        let target = scheme["target_nid"]
            .as_i64()
            .unwrap_or_else(|| panic!("scheme has no target_nid: {scheme}"));
        let v = values(report, "damon_migrate_pages", "pages_migrated");
        let pages = &v["value"];
        assert!(i(pages, "min") >= 0, "{pages}");
        let nid = &v["args"]["target_nid"];
        assert_eq!((i(nid, "min"), i(nid, "max")), (target, target), "{v}");
        let by = v["by_target_nid"].as_array().expect("by_target_nid");
        assert_eq!(by.len(), 1, "{v}");
        assert_eq!(i(&by[0], "arg"), target);
        assert_eq!(u(&by[0], "calls"), u(pages, "count"));
        assert_eq!(i(&by[0], "value_sum"), i(pages, "sum"));
        assert!(
            table.contains("  per target node: node | calls | pages migrated"),
            "{table}"
        );
        migrate_calls = u(pages, "count");

        // damos_va_migrate_dests_add: the folio's node (from its pfn) and the single
        // destination (the scheme's dests/0), for every call.
        let d = function(report, "damos_va_migrate_dests_add");
        let v = &d["values"];
        assert!(
            v.is_object(),
            "damos_va_migrate_dests_add has no values: {d}"
        );
        let folio = &v["args"]["folio_nid"];
        let dest = &v["args"]["dest_nid"];
        check_dist("folio_nid", folio);
        check_dist("dest_nid", dest);
        // Two nodes in the guest; -1 would be a folio outside every node's pfns.
        assert!(i(folio, "min") >= 0 && i(folio, "max") <= 1, "{folio}");
        assert_eq!((i(dest, "min"), i(dest, "max")), (target, target), "{dest}");
        let on = &v["already_on_destination"];
        assert_eq!(u(on, "known"), u(on, "calls"), "{on}");
        assert_eq!(u(on, "calls"), u(folio, "count"), "{on}");
        // Folios not on their destination are isolated and handed to damon_migrate_pages:
        // pages moved means some folio was elsewhere.
        if i(pages, "sum") > 0 {
            assert!(u(on, "on_destination") < u(on, "calls"), "{on} {pages}");
        }
        assert!(table.contains("  already on destination: "), "{table}");
    }
    (hot_calls, migrate_calls)
}

/// damon_hot_score's recorded `nr_accesses` and `age`: whole distributions, within bounds.
fn check_hot_args(v: &serde_json::Value, table: &str, sample_us: u64, aggr_us: u64) {
    let na = &v["args"]["nr_accesses"];
    let age = &v["args"]["age"];
    assert!(
        na.is_object() && age.is_object(),
        "nr_accesses/age not recorded: {v}"
    );
    check_dist("nr_accesses", na);
    check_dist("age", age);
    // At most one access counted per sample of an aggregation interval.
    let max_acc = (aggr_us / sample_us) as i64;
    assert!(
        i(na, "min") >= 0 && i(na, "max") <= max_acc,
        "nr_accesses outside 0..={max_acc}: {na}"
    );
    assert!(i(age, "min") >= 0, "{age}");
    assert!(
        table.contains("damon_hot_score: values\n  hotness_score: n "),
        "{table}"
    );
    assert!(table.contains("  nr_accesses: n "), "{table}");
}

/// `damon_hot_score(ctx, region, scheme)` of mm/damon/ops-common.c (6.7 and later, as in the
/// 6.12 and 7.2 guests), in the kernel's integer arithmetic: the region's access frequency as
/// a share of the most accesses an aggregation interval can count (`aggr / sample`, capped at
/// 100 as the stable fix of 2026 does; below the cap the same), its age in seconds as a log2
/// subscore (negated when the region was not accessed), weighted by the scheme's quota weights
/// and scaled to `0..=DAMOS_MAX_SCORE` (99).
fn hot_score(
    nr_accesses: u32,
    age: u32,
    sample_us: u64,
    aggr_us: u64,
    w_freq: u64,
    w_age: u64,
) -> i64 {
    const DAMON_MAX_SUBSCORE: u64 = 100;
    const DAMON_MAX_AGE_IN_LOG: i64 = 32;
    const DAMOS_MAX_SCORE: i64 = 99;
    let max_nr_accesses = (aggr_us / sample_us).min(u64::from(u32::MAX));
    let freq_subscore =
        (u64::from(nr_accesses) * DAMON_MAX_SUBSCORE / max_nr_accesses).min(DAMON_MAX_SUBSCORE);
    let mut age_in_sec = u64::from(age) * aggr_us / 1_000_000;
    let mut age_in_log = 0i64;
    while age_in_log < DAMON_MAX_AGE_IN_LOG && age_in_sec != 0 {
        age_in_log += 1;
        age_in_sec >>= 1;
    }
    if freq_subscore == 0 {
        age_in_log = -age_in_log;
    }
    age_in_log += DAMON_MAX_AGE_IN_LOG;
    let age_subscore = age_in_log as u64 * DAMON_MAX_SUBSCORE / DAMON_MAX_AGE_IN_LOG as u64 / 2;
    let hotness = w_freq * freq_subscore + w_age * age_subscore;
    // Divided by the weights' sum unless both are 0.
    let hotness = hotness.checked_div(w_freq + w_age).unwrap_or(hotness);
    hotness as i64 * DAMOS_MAX_SCORE / DAMON_MAX_SUBSCORE as i64
}

/// Every `damon_hot_score` record of the capture: the score recomputed from its recorded
/// `nr_accesses` (arg0) and `age` (arg1) with the intervals and weights of the scheme (from the
/// capture's DAMON snapshot, read here from the file, not through damon-trace) equals the
/// score the kernel returned. Not vacuous: some records have accesses, some an age of a
/// second or more, and the scores differ.
fn check_scores(capture: &Path) {
    check_scores_of(&dtcap::read(capture), &capture.display().to_string());
}

fn check_scores_of(c: &dtcap::Capture, label: &str) {
    let ctx = &c.meta["damon"]["kdamonds"][0]["contexts"][0];
    let scheme = &ctx["schemes"][0];
    let (sample_us, aggr_us) = (u(ctx, "sample_us"), u(ctx, "aggr_us"));
    let (w_freq, w_age) = (
        u(scheme, "weight_nr_accesses_permil"),
        u(scheme, "weight_age_permil"),
    );
    let records = c.of("damon_hot_score");
    assert!(!records.is_empty(), "{label}: no damon_hot_score records");
    let wrong: Vec<_> = records
        .iter()
        .filter(|r| {
            r.value
                != hot_score(
                    r.arg0 as u32,
                    r.arg1 as u32,
                    sample_us,
                    aggr_us,
                    w_freq,
                    w_age,
                )
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "{label}: {} of {} scores differ from damon_hot_score(nr_accesses = arg0, age = arg1; sample \
         {sample_us} us, aggr {aggr_us} us, weights {w_freq}/{w_age}), e.g. {:?} (recomputed {})",
        wrong.len(),
        records.len(),
        wrong[0],
        hot_score(
            wrong[0].arg0 as u32,
            wrong[0].arg1 as u32,
            sample_us,
            aggr_us,
            w_freq,
            w_age
        )
    );
    let accessed = records.iter().filter(|r| r.arg0 > 0).count();
    let aged = records
        .iter()
        .filter(|r| r.arg1 as u64 * aggr_us >= 1_000_000)
        .count();
    let mut scores: Vec<i64> = records.iter().map(|r| r.value).collect();
    scores.sort_unstable();
    scores.dedup();
    assert!(
        accessed > 0 && aged > 0 && scores.len() > 1,
        "{label}: too uniform to check the fields: {accessed} records with accesses, {aged} aged \
         1 s or more, scores {scores:?}"
    );
    eprintln!(
        "{label}: {} scores recomputed exactly ({accessed} with accesses, {aged} aged >= 1 s, {} \
         distinct scores)",
        records.len(),
        scores.len()
    );
}

fn run(kernel: Kernel, with_migrate: bool, methods: &[&str]) {
    let run = common::run_script(kernel, cmd(methods), Duration::from_secs(900));
    let dir = run.dir();
    // VM_VALUES_KEEP=DIR keeps the captures (how the host fixture was made).
    if let Some(keep) = std::env::var_os("VM_VALUES_KEEP").filter(|k| !k.is_empty()) {
        for mode in methods {
            let name = format!("{mode}.dtcap");
            fs::copy(dir.join(&name), std::path::Path::new(&keep).join(&name)).expect("keep");
        }
    }
    for &mode in methods {
        let report = json(dir, &format!("{mode}.json"));
        let table = fs::read_to_string(dir.join(format!("{mode}.txt"))).expect("table");
        eprintln!("--- {mode}\n{table}");
        let hot = function(&report, "damon_hot_score");
        assert_eq!(hot["attach"], mode, "{hot}");
        // A kprobe session keeps no nr_accesses/age (see `check_report`).
        let hot_args = mode != "kprobe-session";
        if hot_args {
            check_scores(&dir.join(format!("{mode}.dtcap")));
        }
        let (h, m) = check_report(&report, &table, with_migrate, hot_args);
        assert!(h > 0, "{mode}: no damon_hot_score calls");
        if with_migrate {
            assert!(m > 0, "{mode}: no damon_migrate_pages calls");
        }
    }
}

#[test]
#[ignore = "boots a QEMU guest"]
fn vm_7_2_values_of_hot_score_and_migrate_pages_with_every_attach_method() {
    run(
        Kernel::DEBIAN_7_2,
        true,
        &["fentry", "kprobe", "kprobe-session", "fsession"],
    );
}

#[test]
#[ignore = "boots a QEMU guest"]
fn vm_6_12_values_of_hot_score_with_fentry_kprobe_and_kprobe_session() {
    run(
        Kernel::DEBIAN_6_12,
        false,
        &["fentry", "kprobe", "kprobe-session"],
    );
}

/// The recomputation on the host, against the committed 7.2 capture (`values-7.2.dtcap`, made by
/// this test): every score matches; and it fails when a field reads zeros, or reads the field
/// after `age` (`last_nr_accesses`, what an offset 4 bytes too far gives), as the guest tests
/// would for a wrong BTF offset.
#[test]
fn hot_score_recomputation_matches_the_fixture_and_catches_wrong_fields() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../damon-user/tests/data/values-7.2.dtcap");
    let c = dtcap::read(&path);
    check_scores_of(&c, "values-7.2.dtcap");
    let hot = c.id("damon_hot_score");
    for (what, edit) in [
        (
            "nr_accesses read as 0",
            (|r: &mut dtcap::Record| r.arg0 = 0) as fn(&mut dtcap::Record),
        ),
        ("age read as 0", |r: &mut dtcap::Record| r.arg1 = 0),
        ("age read as nr_accesses", |r: &mut dtcap::Record| {
            r.arg1 = r.arg0
        }),
    ] {
        let mut wrong = dtcap::read(&path);
        wrong
            .records
            .iter_mut()
            .filter(|r| r.func == hot)
            .for_each(edit);
        let caught = std::panic::catch_unwind(|| check_scores_of(&wrong, what)).is_err();
        assert!(caught, "{what}: not caught");
    }
}
