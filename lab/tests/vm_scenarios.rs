//! The scenario presets on the 7.2 guest (two NUMA nodes): `scenario list`, each preset
//! traced by `record` (the functions it claims get calls), every file of DAMON's sysfs
//! unchanged after each one (also when interrupted), and migrate-hot with the destination on
//! the workload's own node against the other node.
use std::{collections::BTreeMap, time::Duration};

mod common;
use common::{DAMON_HELPERS, FOUR, assert_same_damon, function, json, read, u};
use damon_lab::kernel::Kernel;

const PRESETS: [&str; 5] = [
    "migrate-hot",
    "migrate-cold",
    "pageout",
    "lru-prio",
    "lru-deprio",
];

/// `state NAME`: every file of DAMON's sysfs with its value, and DAMON_STAT, into
/// /out/NAME.state (`damon_dump` of [`DAMON_HELPERS`], which the script must come after).
const GUEST_HELPERS: &str =
    damon_lab::script::without_header(include_str!("scripts/vm_scenarios_guest_helpers.sh"));

/// The presets in `list.json` and, for each, the functions it claims.
fn claims(list: &serde_json::Value) -> Vec<(String, Vec<String>)> {
    list["presets"]
        .as_array()
        .expect("presets")
        .iter()
        .map(|p| {
            let fs = p["exercises"].as_array().expect("exercises");
            let fs = fs.iter().filter_map(|f| f.as_str()).map(String::from);
            (p["name"].as_str().expect("name").to_string(), fs.collect())
        })
        .collect()
}

/// `key=value` fields of the one summary line a preset prints on stdout.
fn summary(line: &str) -> BTreeMap<String, String> {
    damon_lab::parse::summary_fields(line)
}

/// Pages on `node` in a `N0:12,N1:3` list (0 when the list does not name it).
fn node_pages(list: &str, node: u32) -> u64 {
    damon_lab::parse::node_pages(list, node).unwrap_or(0)
}

/// Every preset on 7.2 over a stopped kdamond someone left configured (a context, a target
/// region and a scheme with a non-default value in each group of settings): exit 0, a call of
/// each function it claims, and afterwards every file under /sys/kernel/mm/damon/admin (but
/// the scheme counters) and DAMON_STAT read as before — after `scenario list`, each preset,
/// a refused `--dest-node 7`, both `--dest-node` runs and a SIGTERM while the kdamond is on.
/// Also: `--dest-node other` moves the workload's pages to node 1 and `same` does not.
#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_scenario_presets_exercise_what_they_claim_and_restore_state() {
    let cmd = format!(
        "{DAMON_HELPERS}{GUEST_HELPERS}
# A stopped kdamond someone left configured: every preset must put it back.
damon_leave_stopped_kdamond
state initial
damon-trace scenario list > /out/list.txt
damon-trace scenario list --json > /out/list.json
state list.after
for p in {presets}; do run $p $p --duration 5s; done
# A node that does not exist: a usage error before anything changes.
state bad.before
damon-trace scenario migrate-hot --dest-node 7 --duration 1s > /out/bad.out 2> /out/bad.err
echo $? > /out/bad.status
state bad.after
run same migrate-hot --duration 8s --dest-node same
run other migrate-hot --duration 8s --dest-node other
# Interrupted: SIGTERM while the kdamond is on.
state term.before
damon-trace scenario pageout --duration 120s --workload-mib 64 --hot-mib 16 \
  > /out/term.out 2> /out/term.err &
sc=$!
# Once it says the kdamond is on (its stop signals are caught from the start).
while ! grep -q 'kdamond on' /out/term.err; do sleep 0.2; done
kill -TERM $sc
wait $sc; echo $? > /out/term.status
state term.after
exit 0",
        presets = PRESETS.join(" ")
    );
    let outcome = common::run_script(Kernel::DEBIAN_7_2, cmd, Duration::from_secs(600));
    let dir = outcome.dir();

    let list_text = read(dir, "list.txt");
    println!("{list_text}");
    let list = json(dir, "list.json");
    let features = &list["features"];
    assert_eq!(features["has_dests"], true, "{list}");
    assert_eq!(features["has_node1"], true, "{list}");
    let presets = list["presets"].as_array().expect("presets");
    let names: Vec<&str> = presets.iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, PRESETS, "{list}");
    for name in PRESETS {
        assert!(
            list_text
                .lines()
                .any(|l| l.starts_with(name) && l.contains(" yes ")),
            "{name} not runnable in:\n{list_text}"
        );
    }
    // The configuration left in place, and probing for the list left it as it was.
    let left = read(dir, "initial.state");
    common::assert_left_kdamond(&left, "kdamonds/0/contexts/0/schemes/0/action:pageout");
    assert_same_damon("scenario list", &left, &read(dir, "list.after.state"));

    let mut table = Vec::new();
    for p in presets {
        let name = p["name"].as_str().expect("name");
        assert_eq!(p["runnable"], true, "{p}");
        let claims: Vec<&str> = p["exercises"]
            .as_array()
            .expect("exercises")
            .iter()
            .filter_map(|f| f.as_str())
            .collect();
        assert!(claims.contains(&"damon_hot_score"), "{p}");
        let status = read(dir, &format!("{name}.status"));
        assert_eq!(
            status.trim(),
            "0",
            "{name} failed:\n{}",
            read(dir, &format!("{name}.err"))
        );
        let report = json(dir, &format!("{name}.json"));
        let calls: Vec<u64> = FOUR
            .iter()
            .map(|f| u(function(&report, f), "calls"))
            .collect();
        table.push(format!("{name:<13} {calls:?} claims {claims:?}"));
        for claim in &claims {
            assert!(
                u(function(&report, claim), "calls") > 0,
                "{name} claims {claim} but it was not called: {report}\n{}",
                read(dir, &format!("{name}.err"))
            );
        }
        let line = read(dir, &format!("{name}.out"));
        assert!(line.starts_with(&format!("{name}: ")), "{line}");
        assert!(line.contains("restored=yes"), "{line}");
        assert_same_damon(
            name,
            &read(dir, &format!("{name}.before.state")),
            &read(dir, &format!("{name}.after.state")),
        );
    }
    for name in ["same", "other"] {
        assert_same_damon(
            &format!("--dest-node {name}"),
            &read(dir, &format!("{name}.before.state")),
            &read(dir, &format!("{name}.after.state")),
        );
    }
    // The migration presets claim the migration functions on this kernel; the others do not.
    for p in presets {
        let migrates = p["action"]
            .as_str()
            .is_some_and(|a| a.starts_with("migrate"));
        let claims = p["exercises"].to_string();
        assert_eq!(
            claims.contains("damos_va_migrate_dests_add"),
            migrates,
            "{p}"
        );
        assert_eq!(claims.contains("damon_migrate_pages"), migrates, "{p}");
    }

    // --dest-node same against other: both walk and call damon_migrate_pages; only "other"
    // moves the workload's pages to node 1. The workload can hold pages on node 1 before the
    // scenario starts (faulted in before it pinned itself to node 0), so what counts is the
    // change of its node-1 pages over the run, not their number afterwards. The workload
    // prefers node 0 and runs on node 0's CPUs, so only a migration brings a page to node 1;
    // pages can leave node 1 (migrated to node 0, or freed by the workload's refaults).
    let mut node1 = BTreeMap::new();
    for name in ["same", "other"] {
        let report = json(dir, &format!("{name}.json"));
        let mp = function(&report, "damon_migrate_pages");
        let da = function(&report, "damos_va_migrate_dests_add");
        let s = summary(read(dir, &format!("{name}.out")).trim());
        table.push(format!(
            "{name:<13} dests_add calls {} migrate_pages calls {} pages returned {} \
             target_nid {} workload pages {} -> {}",
            u(da, "calls"),
            u(mp, "calls"),
            mp["value"]["sum"],
            s["target_nid"],
            s["workload_pages_before"],
            s["workload_pages_after"]
        ));
        assert!(u(mp, "calls") > 0, "{name}: {mp}");
        assert!(u(da, "calls") > 0, "{name}: {da}");
        let returned = mp["value"]["sum"]
            .as_u64()
            .unwrap_or_else(|| panic!("{name}: no pages_migrated sum: {mp}"));
        let sz_applied: u64 = s["sz_applied"].parse().expect("sz_applied");
        node1.insert(
            name,
            (
                node_pages(&s["workload_pages_before"], 1),
                node_pages(&s["workload_pages_after"], 1),
                returned,
                sz_applied,
            ),
        );
        assert_eq!(
            s["target_nid"],
            if name == "same" { "0" } else { "1" },
            "{s:?}"
        );
    }
    println!("{}", table.join("\n"));
    let (before, after, returned, _) = node1["same"];
    assert!(
        after <= before,
        "dest same: node-1 pages rose {before} -> {after}, pages moved to node 1: {table:?}"
    );
    // Migrating to node 0, damon_migrate_pages can only have moved pages that were on node 1,
    // and nothing else arrives there: at most the `before` pages (not `before - after`: the
    // kdamond still runs between the last numa_maps read and its stop, inside the recording).
    assert!(
        returned <= before,
        "dest same: damon_migrate_pages returned {returned} pages but only {before} were on \
         node 1: {table:?}"
    );
    let (before, after, returned, sz_applied) = node1["other"];
    assert!(
        after > before,
        "dest other moved nothing to node 1 ({before} -> {after}): {table:?}"
    );
    // DAMON's own stats and the traced return values agree that pages were migrated.
    assert!(
        returned > 0 && sz_applied > 0,
        "dest other: damon_migrate_pages returned {returned} pages, sz_applied {sz_applied}: \
         {table:?}"
    );

    assert_eq!(
        read(dir, "bad.status").trim(),
        "2",
        "{}",
        read(dir, "bad.err")
    );
    assert!(read(dir, "bad.err").contains("no NUMA node 7"));
    assert_same_damon(
        "--dest-node 7",
        &read(dir, "bad.before.state"),
        &read(dir, "bad.after.state"),
    );

    // SIGTERM: exit 128+15 and the state found before.
    let term = read(dir, "term.status");
    assert_eq!(term.trim(), "143", "{}", read(dir, "term.err"));
    assert_same_damon(
        "SIGTERM",
        &read(dir, "term.before.state"),
        &read(dir, "term.after.state"),
    );
    assert!(read(dir, "term.err").contains("DAMON state restored"));
}

/// 6.12 has no vaddr migration (no dests/, no damos_va_migrate_dests_add) and no ops-common
/// damon_migrate_pages: every preset runs on paddr, claims damon_hot_score only, gets it
/// called, and leaves every file of DAMON's sysfs as it found it (the same stopped kdamond
/// someone left configured as on 7.2).
#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_6_12_scenario_presets_fall_back_to_paddr_and_claim_only_what_exists() {
    let cmd = format!(
        "{DAMON_HELPERS}{GUEST_HELPERS}
damon_leave_stopped_kdamond
FUNCS=damon_hot_score,lock_timer_base
damon-trace scenario list > /out/list.txt
damon-trace scenario list --json > /out/list.json
for p in {presets}; do run $p $p --duration 3s; done
exit 0",
        presets = PRESETS.join(" ")
    );
    let outcome = common::run_script(Kernel::DEBIAN_6_12, cmd, Duration::from_secs(300));
    let dir = outcome.dir();
    let list = json(dir, "list.json");
    println!("{}", read(dir, "list.txt"));
    assert_eq!(list["features"]["has_dests"], false, "{list}");
    assert_eq!(list["features"]["va_migrate_symbol"], false, "{list}");
    assert_eq!(list["features"]["migrate_pages_symbol"], false, "{list}");
    for p in list["presets"].as_array().expect("presets") {
        assert_eq!(p["ops"], "paddr", "{p}");
        assert_eq!(p["runnable"], true, "{p}");
    }
    for (name, fs) in claims(&list) {
        assert_eq!(fs, ["damon_hot_score"], "{name}");
        let status = read(dir, &format!("{name}.status"));
        assert_eq!(status.trim(), "0", "{}", read(dir, &format!("{name}.err")));
        let line = read(dir, &format!("{name}.out"));
        assert!(
            line.contains("ops=paddr") && line.contains("restored=yes"),
            "{line}"
        );
        let report = json(dir, &format!("{name}.json"));
        let calls = u(function(&report, "damon_hot_score"), "calls");
        println!("{name:<13} damon_hot_score calls {calls}");
        assert!(calls > 0, "{name}: {report}");
        let before = read(dir, &format!("{name}.before.state"));
        assert!(
            before
                .lines()
                .any(|l| l == "kdamonds/0/contexts/0/schemes/0/quotas/ms:17"),
            "{name}: the configuration left in place is missing:\n{before}"
        );
        assert_same_damon(&name, &before, &read(dir, &format!("{name}.after.state")));
    }
}

/// While another tool drives DAMON - here two loops asking the kdamond for its scheme stats
/// (`update_schemes_stats`, which holds DAMON's sysfs lock until the kdamond answers) - a
/// kdamond's `state` and `pid` fail to read with EBUSY (they take the lock with a trylock).
/// `record` waits such reads out: the capture keeps DAMON's configuration at start and end,
/// and nothing is said about it. (Before, the snapshot was dropped silently: in 4 of 4 records
/// under this load, and once in CI under the scenario's own stats updates alone.)
#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_record_keeps_damons_configuration_while_another_tool_holds_its_lock() {
    let body = damon_lab::script::without_header(include_str!("scripts/vm_scenarios_busy_lock.sh"));
    let cmd = format!(
        "set -e\n{}",
        damon_lab::script::with_scenario(300, "", body)
    );
    let outcome = common::run_script(Kernel::DEBIAN_7_2, cmd, Duration::from_secs(600));
    let dir = outcome.dir();
    let busy: u32 = read(dir, "busy-reads").trim().parse().expect("busy-reads");
    assert!(
        busy > 0,
        "the loops never held DAMON's sysfs lock when cat read"
    );
    let err = read(dir, "busy.err");
    assert!(!err.contains("DAMON's configuration"), "{err}");
    let report = json(dir, "busy.json");
    let damon = &report["meta"]["damon"];
    for at in ["start", "end"] {
        let ctx = &damon[at]["kdamonds"][0]["contexts"][0];
        assert!(u(ctx, "sample_us") > 0, "{at}: {damon}");
        assert_eq!(damon[at]["kdamonds"][0]["state"], "on", "{at}: {damon}");
    }
    eprintln!(
        "{busy} of 50 reads of state and pid by cat failed with EBUSY; the capture kept both snapshots"
    );
}
