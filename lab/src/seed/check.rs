//! The seeds' checks of their outputs: grids of 20 ns rows, Markdown tables, percentages.
use anyhow::{Context as _, Result, ensure};
use serde_json::Value;

use super::{BUCKET_NS, ROWS, Seed, SeedOutcome, read, same_node::check_same_node};
use crate::parse::{float, function, num};

/// The rows (lo, hi) of a grid: every bounded row `BUCKET_NS` wide and contiguous, one
/// overflow row last.
fn check_rows(name: &str, rows: &[(u64, Option<u64>)]) -> Result<()> {
    check_grid(name, rows, BUCKET_NS, ROWS)
}

/// The rows (lo, hi) of a grid: every bounded row `width` wide and contiguous, at most
/// `max_rows` of them, one overflow row last.
pub(super) fn check_grid(
    name: &str,
    rows: &[(u64, Option<u64>)],
    width: u64,
    max_rows: u64,
) -> Result<()> {
    ensure!(rows.len() >= 2, "{name}: {} rows", rows.len());
    let (last, bounded) = rows.split_last().expect("two rows");
    ensure!(last.1.is_none(), "{name}: the last row is not `>= N`");
    for (i, (lo, hi)) in bounded.iter().enumerate() {
        let hi = hi.with_context(|| format!("{name}: row {i} is open"))?;
        ensure!(
            hi - lo == width,
            "{name}: row {lo}-{hi} is not {width} ns wide"
        );
        if let Some((next, _)) = rows.get(i + 1) {
            ensure!(*next == hi, "{name}: gap after row {lo}-{hi}");
        }
    }
    ensure!(
        bounded.len() as u64 <= max_rows,
        "{name}: {} rows of {width} ns (at most {max_rows})",
        bounded.len()
    );
    Ok(())
}

/// The (lo, hi) edges of a range table's rows.
fn edges(rows: &[Value]) -> Result<Vec<(u64, Option<u64>)>> {
    rows.iter()
        .map(|r| Ok((num(r, "lo_ns")?, r["hi_ns"].as_u64())))
        .collect()
}

/// The `| a | b | c |` cells of the Markdown table rows that follow `header` (up to the
/// first line that is not a table row), separator line skipped: as many as the JSON's rows.
fn markdown_rows(md: &str, header: &str, json_rows: usize) -> Result<Vec<Vec<String>>> {
    let start = md
        .find(header)
        .with_context(|| format!("no `{header}` table in the Markdown"))?;
    let rows: Vec<Vec<String>> = md[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect();
    ensure!(
        rows.len() == json_rows,
        "Markdown has {} rows, JSON {json_rows}",
        rows.len()
    );
    Ok(rows)
}

/// `12.50%`, or `12.50% [10.1–14.2]` with the per-run spread: the pooled percentage.
fn percent(cell: &str) -> Result<f64> {
    cell.split_whitespace()
        .next()
        .unwrap_or("")
        .trim_end_matches('%')
        .parse()
        .with_context(|| format!("`{cell}` is not a percentage"))
}

/// Percent cells add up to 100 within their rounding (0.005 per row).
fn check_percent_sum(name: &str, cells: &[f64]) -> Result<()> {
    let sum: f64 = cells.iter().sum();
    let slack = 0.005 * cells.len() as f64 + 1e-9;
    ensure!(
        (sum - 100.0).abs() <= slack,
        "{name}: percentages add up to {sum:.2}, not 100"
    );
    Ok(())
}

/// Checks a seed's outputs; returns the numbers worth stating.
pub fn check(o: &SeedOutcome) -> Result<Vec<String>> {
    match o.seed {
        Seed::HotScore => check_hot_score(&o.json, &o.text, &o.markdown),
        Seed::LockTimerAb => {
            let mut notes = check_lock_timer_ab(&o.json, &o.text, &o.markdown)?;
            let (text, wide) = o.wide.as_ref().context("no wide comparison")?;
            notes.extend(check_wide(wide, text)?);
            Ok(notes)
        }
        Seed::SameNode => {
            let csv = read(&o.out_dir, "calls.csv")?;
            let scenario = read(&o.out_dir, "scenario.out")?;
            check_same_node(&o.json, &o.text, &csv, &scenario)
        }
    }
}

/// Seed 1: damon_hot_score's percentiles in order, the average between min and max, its
/// range table of 20 ns rows adds up to the count (JSON) and to 100 % (Markdown), and the text
/// shows the same table.
pub fn check_hot_score(report: &Value, text: &str, md: &str) -> Result<Vec<String>> {
    let f = function(report, "damon_hot_score")?;
    ensure!(f["attach"] == "fentry", "damon_hot_score: {}", f["attach"]);
    let (calls, count) = (num(f, "calls")?, num(f, "count")?);
    ensure!(count > 0, "damon_hot_score was never recorded");
    ensure!(
        calls == count + num(f, "dropped")? + num(f, "in_flight")?,
        "damon_hot_score: calls != count + dropped + in_flight: {f}"
    );
    ensure!(num(f, "matched")? == count, "a filter is in force: {f}");
    let (min, p50, p95, p99, max) = (
        num(f, "min_ns")?,
        num(f, "p50_ns")?,
        num(f, "p95_ns")?,
        num(f, "p99_ns")?,
        num(f, "max_ns")?,
    );
    ensure!(
        min <= p50 && p50 <= p95 && p95 <= p99 && p99 <= max,
        "percentiles out of order: min {min} p50 {p50} p95 {p95} p99 {p99} max {max}"
    );
    let mean = float(f, "mean_ns")?;
    ensure!(
        min as f64 <= mean && mean <= max as f64,
        "average {mean} outside [{min}, {max}]"
    );
    let t = &f["buckets"];
    ensure!(t["grid"]["widened_from"].is_null(), "rows widened: {t}");
    ensure!(num(&t["grid"], "width_ns")? == BUCKET_NS, "{t}");
    let rows = t["rows"].as_array().context("no rows")?;
    let edges = edges(rows)?;
    check_rows("damon_hot_score", &edges)?;
    ensure!(
        edges[0].0 <= min && min < edges[0].0 + BUCKET_NS,
        "the first row does not hold the minimum {min}"
    );
    let counts: Vec<u64> = rows
        .iter()
        .map(|r| num(r, "count"))
        .collect::<Result<_>>()?;
    ensure!(
        counts.iter().sum::<u64>() == count,
        "rows add up to {}, not {count}",
        counts.iter().sum::<u64>()
    );
    let md_rows = markdown_rows(md, "| Range (ns) | Count | Percent |", rows.len())?;
    let mut cells = Vec::new();
    for (cells_md, c) in md_rows.iter().zip(&counts) {
        ensure!(cells_md.len() == 3, "Markdown row {cells_md:?}");
        ensure!(
            cells_md[1] == c.to_string(),
            "Markdown row {cells_md:?} vs {c}"
        );
        cells.push(percent(&cells_md[2])?);
    }
    check_percent_sum("damon_hot_score", &cells)?;
    ensure!(
        text.contains("Range (ns)") && text.contains("Count") && text.contains("Percent"),
        "the text has no range table:\n{text}"
    );
    let first = format!("{}-{}", edges[0].0, edges[0].0 + BUCKET_NS - 1);
    ensure!(text.contains(&first), "row {first} missing from the text");
    let beyond = counts.last().copied().unwrap_or(0);
    Ok(vec![format!(
        "damon_hot_score on {}: {count} calls, average {mean:.1} ns, p50 {p50}, p95 {p95}, p99 \
         {p99}, max {max} ns; {} rows of {BUCKET_NS} ns from {} ns, {beyond} calls ({:.1}%) \
         at >= {} ns",
        report["meta"]["kernel_release"].as_str().unwrap_or("?"),
        rows.len() - 1,
        edges[0].0,
        beyond as f64 * 100.0 / count as f64,
        edges.last().map_or(0, |e| e.0),
    )])
}

/// Seed 2: both kernels named (6.12 before, 7.2 after), lock_timer_base compared on one grid
/// of 20 ns rows whose counts add up to each side's records, percentages to 100 per side.
pub fn check_lock_timer_ab(cmp: &Value, text: &str, md: &str) -> Result<Vec<String>> {
    let release = |side: &str| {
        cmp[side]["kernel_release"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    let (kb, ka) = (release("before"), release("after"));
    ensure!(kb.starts_with("6.12."), "before is not 6.12: {kb:?}");
    ensure!(ka.starts_with("7.2."), "after is not 7.2: {ka:?}");
    ensure!(
        text.contains(&kb) && text.contains(&ka),
        "the text does not name both kernels:\n{text}"
    );
    let f = function(cmp, "lock_timer_base")?;
    let functions = cmp["functions"].as_array().context("functions")?;
    ensure!(functions.len() == 1, "not only lock_timer_base: {cmp}");
    let (rb, ra) = (num(&cmp["before"], "runs")?, num(&cmp["after"], "runs")?);
    ensure!(
        rb == ra && rb >= 1,
        "runs per side: {rb} before, {ra} after"
    );
    let verdict = f["verdict"].as_str().context("verdict")?;
    if rb == 1 {
        ensure!(
            verdict.starts_with("one run a side") && f["significant"] == false,
            "one run a side must not be judged: {verdict}"
        );
    } else {
        let test = &f["test"];
        ensure!(test.is_object(), "{rb} runs a side but no test: {f}");
        ensure!(
            f["significant"].as_bool() == Some(f["p_holm"].as_f64().unwrap_or(1.0) < 0.05),
            "significance must follow the Holm-adjusted p: {verdict}"
        );
        ensure!(
            verdict.contains(&format!("over {rb} and {ra} runs")),
            "the verdict does not say its runs: {verdict}"
        );
    }
    let (nb, na) = (num(&f["before"], "matched")?, num(&f["after"], "matched")?);
    ensure!(nb > 0 && na > 0, "lock_timer_base: {nb} before, {na} after");
    ensure!(
        f["grid"]["widened_from"].is_null(),
        "rows widened: {}",
        f["grid"]
    );
    ensure!(num(&f["grid"], "width_ns")? == BUCKET_NS, "{}", f["grid"]);
    let rows = f["rows"].as_array().context("rows")?;
    let edges = edges(rows)?;
    check_rows("lock_timer_base", &edges)?;
    let sum = |side: &str| -> Result<u64> { rows.iter().map(|r| num(r, side)).sum() };
    let (sb, sa) = (sum("before")?, sum("after")?);
    ensure!(
        (sb, sa) == (nb, na),
        "rows add up to {sb}/{sa}, not {nb}/{na}"
    );
    let md_rows = markdown_rows(md, "| Range (ns) | Before | % | After | % |", rows.len())?;
    let (mut pb, mut pa) = (Vec::new(), Vec::new());
    for (cells, r) in md_rows.iter().zip(rows) {
        ensure!(cells.len() == 5, "Markdown row {cells:?}");
        ensure!(
            cells[1] == num(r, "before")?.to_string() && cells[3] == num(r, "after")?.to_string(),
            "Markdown row {cells:?} vs {r}"
        );
        pb.push(percent(&cells[2])?);
        pa.push(percent(&cells[4])?);
    }
    check_percent_sum("lock_timer_base before", &pb)?;
    check_percent_sum("lock_timer_base after", &pa)?;
    let stat = |side: &str, k: &str| f[side]["stats"][k].as_u64().unwrap_or(0);
    let last = rows.last().context("rows")?;
    let (lb, la) = (num(last, "before")?, num(last, "after")?);
    Ok(vec![format!(
        "lock_timer_base {kb} -> {ka}: {nb} -> {na} calls, p50 {} -> {} ns, p99 {} -> {} ns; \
         {} rows of {BUCKET_NS} ns from {} ns; at >= {} ns: {lb} before ({:.1}%), {la} after \
         ({:.1}%); verdict: {}",
        stat("before", "p50_ns"),
        stat("after", "p50_ns"),
        stat("before", "p99_ns"),
        stat("after", "p99_ns"),
        rows.len() - 1,
        edges[0].0,
        edges.last().map_or(0, |e| e.0),
        lb as f64 * 100.0 / nb as f64,
        la as f64 * 100.0 / na as f64,
        f["verdict"].as_str().unwrap_or("?"),
    )])
}

/// Seed 2, whole distribution: the default grid (20 ns asked, widened to at most 40 rows up
/// to the p99) of equal contiguous rows adding up to each side's records.
pub fn check_wide(cmp: &Value, text: &str) -> Result<Vec<String>> {
    let f = function(cmp, "lock_timer_base")?;
    let g = &f["grid"];
    let width = num(g, "width_ns")?;
    ensure!(
        g["widened_from"].is_null() || num(g, "widened_from")? == BUCKET_NS,
        "asked for {BUCKET_NS} ns rows: {g}"
    );
    let rows = f["rows"].as_array().context("rows")?;
    let edges = edges(rows)?;
    check_grid("lock_timer_base (whole)", &edges, width, 40)?;
    for side in ["before", "after"] {
        let sum: u64 = rows.iter().map(|r| num(r, side)).sum::<Result<_>>()?;
        ensure!(
            sum == num(&f[side], "matched")?,
            "lock_timer_base (whole): {side} rows add up to {sum}"
        );
    }
    ensure!(text.contains("Range (ns)"), "no range table:\n{text}");
    Ok(vec![format!(
        "lock_timer_base whole distribution: {} rows of {width} ns",
        rows.len() - 1
    )])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A report with damon_hot_score's numbers and a 20 ns table over `counts`.
    fn hot_report(p: [u64; 5], counts: &[u64]) -> (Value, String) {
        let n: u64 = counts.iter().sum();
        let last = counts.len() - 1;
        let rows: Vec<Value> = counts
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let lo = 600 + 20 * i as u64;
                json!({"lo_ns": lo, "hi_ns": if i == last { None } else { Some(lo + 20) }, "count": c})
            })
            .collect();
        let md_rows: String = rows
            .iter()
            .map(|r| {
                let c = r["count"].as_u64().unwrap_or(0);
                format!("| x | {c} | {:.2}% |\n", c as f64 * 100.0 / n as f64)
            })
            .collect();
        let report = json!({"meta": {"kernel_release": "7.2.0"}, "functions": [{
            "name": "damon_hot_score", "attach": "fentry", "calls": n, "count": n, "matched": n,
            "dropped": 0, "in_flight": 0, "min_ns": p[0], "p50_ns": p[1], "p95_ns": p[2],
            "p99_ns": p[3], "max_ns": p[4], "mean_ns": (p[0] + p[4]) as f64 / 2.0,
            "buckets": {"grid": {"width_ns": 20, "lo_ns": 600, "hi_ns": 600 + 20 * last as u64,
                                  "widened_from": null}, "rows": rows}}]});
        let md = format!("| Range (ns) | Count | Percent |\n|---|--:|--:|\n{md_rows}");
        (report, md)
    }

    const TEXT: &str = "Range (ns) Count Percent\n600-619 1";

    #[test]
    fn hot_score_checks_accept_a_consistent_report_and_catch_each_break() {
        let (r, md) = hot_report([605, 650, 900, 1000, 5000], &[1, 5, 3, 1]);
        check_hot_score(&r, TEXT, &md).expect("consistent");
        let (r, md) = hot_report([605, 650, 1000, 900, 5000], &[1, 5, 3, 1]);
        assert!(check_hot_score(&r, TEXT, &md).is_err(), "p95 > p99");
        let (mut r, md) = hot_report([605, 650, 900, 1000, 5000], &[1, 5, 3, 1]);
        r["functions"][0]["count"] = json!(11);
        assert!(check_hot_score(&r, TEXT, &md).is_err(), "rows != count");
        let (mut r, md) = hot_report([605, 650, 900, 1000, 5000], &[1, 5, 3, 1]);
        r["functions"][0]["buckets"]["rows"][1]["hi_ns"] = json!(660);
        assert!(check_hot_score(&r, TEXT, &md).is_err(), "a 40 ns row");
    }

    #[test]
    fn rows_must_be_20_ns_contiguous_and_end_open() {
        check_rows("f", &[(0, Some(20)), (20, Some(40)), (40, None)]).expect("ok");
        assert!(check_rows("f", &[(0, Some(20)), (20, Some(40))]).is_err());
        assert!(check_rows("f", &[(0, Some(20)), (40, Some(60)), (60, None)]).is_err());
        assert!(check_rows("f", &[(0, Some(50)), (50, None)]).is_err());
    }

    #[test]
    fn percentages_add_up_within_rounding() {
        check_percent_sum("f", &[33.33, 33.33, 33.33]).expect("rounding");
        assert!(check_percent_sum("f", &[50.0, 40.0]).is_err());
    }
}
