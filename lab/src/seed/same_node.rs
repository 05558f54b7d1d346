//! Seed 3's check: the same-node run's per-interval times against its per-call CSV export and
//! the scenario's page counts.
use anyhow::{Context as _, Result, ensure};
use serde_json::Value;

use crate::parse::{
    CsvSums, csv_sums, float, function, node_pages, num, nums, summary_field, u64s,
};

/// Seed 3: the scenario ran with the destination on the workload's node; for both migration
/// functions the intervals partition the calls, the per-interval times add up to the per-call
/// durations of the CSV export (which knows nothing of intervals), one entry per interval;
/// and no page of the workload went to the other node.
pub fn check_same_node(
    report: &Value,
    text: &str,
    csv: &str,
    scenario: &str,
) -> Result<Vec<String>> {
    let line = scenario
        .lines()
        .find(|l| l.starts_with("migrate-hot: "))
        .context("no migrate-hot summary line in scenario.out")?;
    let field = |k: &str| summary_field(line, k).with_context(|| format!("no {k}= in {line}"));
    ensure!(field("action")? == "migrate_hot", "{line}");
    ensure!(field("restored")? == "yes", "{line}");
    let target: u32 = field("target_nid")?.parse().context("target_nid")?;
    let (before, after) = (
        field("workload_pages_before")?,
        field("workload_pages_after")?,
    );
    // The destination is the node holding most of the workload's pages.
    let other = 1 - target.min(1);
    let on = |list: &str, n| node_pages(list, n).unwrap_or(0);
    ensure!(
        on(before, target) > on(before, other),
        "destination node {target} is not where the workload is: {before}"
    );
    ensure!(
        on(after, other) <= on(before, other),
        "pages went to node {other}, away from the destination {target}: {before} -> {after}"
    );
    let kd = &report["meta"]["damon"]["start"]["kdamonds"][0];
    let scheme = &kd["contexts"][0]["schemes"][0];
    ensure!(scheme["action"] == "migrate_hot", "{scheme}");
    ensure!(
        scheme["target_nid"].as_u64() == Some(u64::from(target)),
        "the scheme's target_nid is not {target}: {scheme}"
    );
    let kdamond = num(kd, "pid")?;
    let iv = &report["intervals"];
    ensure!(iv["attached"] == true, "no interval boundaries: {iv}");
    ensure!(num(iv, "markers_dropped")? == 0, "{iv}");
    let sums = csv_sums(csv)?;
    let mut notes = Vec::new();
    for name in ["damos_va_migrate_dests_add", "damon_migrate_pages"] {
        notes.push(check_per_interval(report, text, name, kdamond, &sums)?);
    }
    // Pages can only have moved from the other node: migrating a folio already on its
    // destination (a copy within the node) is what 7.2's damos_va_migrate_dests_add skips.
    // So the pages damon_migrate_pages moved are pages that left the other node. Nothing
    // arrives there (the workload prefers the destination node and runs on its CPUs; the
    // check above holds its count from rising), and the recording lies between the two
    // numa_maps reads (it starts after the kdamond is on and ends before the scenario's stop makes the
    // scenario read `after`), so at most `before - after` of them can have moved. Adding
    // `after` instead, as this once did, counted pages that stayed put as movable.
    let mp = function(report, "damon_migrate_pages")?;
    let returned = mp["value"]["sum"]
        .as_i64()
        .with_context(|| format!("no pages_migrated sum: {mp}"))?;
    let movable = on(before, other).saturating_sub(on(after, other));
    ensure!(
        returned >= 0 && returned as u64 <= movable,
        "damon_migrate_pages returned {returned} pages with the destination on the memory's \
         node (only {movable} pages left node {other}): {before} -> {after}"
    );
    notes.push(format!(
        "damon_migrate_pages returned {returned} pages in {} calls; target node {target}; \
         workload pages {before} -> {after}",
        num(mp, "count")?
    ));
    Ok(notes)
}

/// One migration function of seed 3: its calls partitioned into intervals (the kdamond's),
/// outside them and by other threads; the per-interval times adding up to the CSV export's
/// per-call durations, the kdamond's to those of its tid; one entry per interval.
fn check_per_interval(
    report: &Value,
    text: &str,
    name: &str,
    kdamond: u64,
    (all, by_tid): &CsvSums,
) -> Result<String> {
    let f = function(report, name)?;
    ensure!(f["attach"] == "fentry", "{name}: {}", f["attach"]);
    let count = num(f, "count")?;
    ensure!(count > 0, "{name} was never called");
    let p = &f["per_interval"];
    ensure!(p.is_object(), "{name} has no per_interval: {f}");
    let [inside, outside, foreign] = nums(
        p,
        ["calls_in_intervals", "calls_outside", "calls_not_kdamond"],
    )?;
    ensure!(
        inside + outside + foreign == count,
        "{name}: {inside} in intervals + {outside} outside + {foreign} not kdamond != {count}"
    );
    let (csv_calls, csv_ns) = all.get(name).copied().unwrap_or_default();
    ensure!(
        csv_calls == count,
        "{name}: CSV has {csv_calls} calls, report {count}"
    );
    let [ns_in, ns_out, ns_foreign] = nums(
        p,
        [
            "total_ns_in_intervals",
            "total_ns_outside",
            "total_ns_not_kdamond",
        ],
    )?;
    ensure!(
        ns_in + ns_out + ns_foreign == csv_ns,
        "{name}: per-interval time {} != per-call sum {csv_ns}",
        ns_in + ns_out + ns_foreign
    );
    let (kd_calls, kd_ns) = by_tid
        .get(&(name.to_owned(), kdamond))
        .copied()
        .unwrap_or_default();
    ensure!(
        (inside + outside, ns_in + ns_out) == (kd_calls, kd_ns),
        "{name}: the kdamond's calls/time differ from the CSV's tid {kdamond}"
    );
    let intervals = num(p, "intervals")?;
    let (calls, ns) = (
        u64s(&p["calls_per_interval"])?,
        u64s(&p["ns_per_interval"])?,
    );
    ensure!(
        calls.len() as u64 == intervals && ns.len() as u64 == intervals,
        "{name}: {} / {} entries for {intervals} intervals",
        calls.len(),
        ns.len()
    );
    ensure!(
        calls.iter().sum::<u64>() == inside,
        "{name}: calls per interval"
    );
    ensure!(ns.iter().sum::<u64>() == ns_in, "{name}: ns per interval");
    ensure!(
        intervals > 0 && inside > 0,
        "{name}: no call in an interval"
    );
    let [p50, p99, pmax] = nums(p, ["p50_total_ns", "p99_total_ns", "max_total_ns"])?;
    ensure!(p50 <= p99 && p99 <= pmax, "{name}: {p}");
    ensure!(
        text.contains(&format!("\n{name:<27} {intervals:>9} ")),
        "{name} missing from the text's per-interval block"
    );
    Ok(format!(
        "{name}: {count} calls, {intervals} intervals ({} with calls), per interval mean \
         {:.0} ns, p50 {p50}, p99 {p99}, max {pmax} ns; total {csv_ns} ns",
        calls.iter().filter(|&&c| c > 0).count(),
        float(p, "mean_total_ns")?,
    ))
}
