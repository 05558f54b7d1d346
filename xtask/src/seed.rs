//! `cargo xtask seed <name>`: the three measurements kernel patches in this area post,
//! reproduced with damon-trace on the Debian kernels in QEMU guests, one command each.
//!
//! - `hot-score`: per-call latency of `damon_hot_score` on 7.2 under the migrate-hot scenario
//!   (average, p95, p99 and a `Range (ns) | Count | Percent` table in 20 ns rows);
//! - `lock-timer-ab`: `lock_timer_base` on 6.12 against 7.2, both distributions side by side
//!   on one grid of 20 ns rows (the 6.12 capture is carried into the 7.2 guest and compared
//!   there);
//! - `same-node`: time per DAMON aggregation interval in `damos_va_migrate_dests_add` and
//!   `damon_migrate_pages` on 7.2 under migrate-hot whose destination is the node the workload's
//!   memory is already on (`scenario migrate-hot --dest-node same`).
//!
//! Every seed records ~20 s; the captures and the rendered outputs (text, JSON, Markdown) are
//! copied into the out dir, and [`check`] verifies their structure and invariants (the guest
//! tests in `xtask/tests/vm_seeds.rs` and `xtask/tests/vm.rs` call the same [`run`] and
//! [`check`]).
//!
//! The rows are 20 ns wide, as in patch mails, and reach the p90 (at most [`ROWS`] rows above
//! the lowest minimum); the slower calls share the last `>= N` row. Under TCG a call takes
//! 10–100× its hardware time: for damon_hot_score that window holds ~90 % of the calls, for
//! lock_timer_base (median ~20 µs in the guest) only its fastest ones, so lock-timer-ab also
//! renders the whole distribution on the default grid (`compare-wide.*`).
use std::{
    fs,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context as _, Result, ensure};
use serde_json::Value;

use crate::{
    guest::{Guest, GuestRun},
    kernel::Kernel,
    script,
    util::{self, status},
    vm::VmOptions,
};

/// Width of the range tables' rows.
pub const BUCKET_NS: u64 = 20;
/// At most this many 20 ns rows (a 2 µs window) before the `>= N` row.
pub const ROWS: u64 = 100;
/// How long each seed records.
pub const RECORD_SECONDS: u64 = 20;

/// The seed measurements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Seed {
    /// damon_hot_score per-call latency on 7.2 under migrate-hot.
    HotScore,
    /// lock_timer_base on 6.12 against 7.2, side by side.
    LockTimerAb,
    /// Time per aggregation interval in the migration functions, destination = same node.
    SameNode,
}

impl Seed {
    pub fn name(self) -> &'static str {
        match self {
            Seed::HotScore => "hot-score",
            Seed::LockTimerAb => "lock-timer-ab",
            Seed::SameNode => "same-node",
        }
    }

    /// Default out dir: `target/seed/<name>`.
    pub fn default_out_dir(self) -> PathBuf {
        util::target_dir().join("seed").join(self.name())
    }
}

/// How to run a seed.
#[derive(Debug, Clone)]
pub struct SeedOptions {
    /// Receives the captures and rendered outputs; each guest's /out lands in a `guest-*`
    /// subdirectory of it.
    pub out_dir: PathBuf,
    /// The static damon-trace for the guests (None: as [`crate::vm::run`] chooses).
    pub binary: Option<PathBuf>,
    /// More shell for the last guest, run after the seed's own commands (under `set -e`; for
    /// hot-score and lock-timer-ab while the scenario still runs). The A/B test in
    /// `xtask/tests/vm.rs` adds its other checks this way instead of booting twice more.
    pub extra: String,
    /// lock-timer-ab: boots per kernel (interleaved, as `cargo xtask ab`).
    pub runs: u32,
}

impl SeedOptions {
    pub fn new(out_dir: impl Into<PathBuf>) -> Self {
        Self {
            out_dir: out_dir.into(),
            binary: None,
            extra: String::new(),
            runs: LOCK_TIMER_AB_RUNS,
        }
    }
}

/// lock-timer-ab's boots per kernel unless `--runs` says otherwise.
pub const LOCK_TIMER_AB_RUNS: u32 = 5;

/// lock-timer-ab: `cargo xtask ab --before 6.12 --after 7.2` recording lock_timer_base and
/// damon_hot_score, then the multi-run compare on the host, on the seed grid (20 ns rows from
/// the lowest minimum to the highest p90 of every run) and on the default grid, with a plot.
fn lock_timer_ab(opts: &SeedOptions) -> Result<crate::ab::AbOutcome> {
    use crate::ab::{AbOptions, run_compare};
    let out = &opts.out_dir;
    let mut ab = AbOptions::new(Kernel::Debian612, Kernel::Debian72);
    ab.runs = opts.runs;
    ab.seconds = RECORD_SECONDS;
    ab.functions = vec!["lock_timer_base".into(), "damon_hot_score".into()];
    ab.out_dir = out.join("runs");
    ab.binary = opts.binary.clone();
    ab.extra_last = opts.extra.clone();
    let outcome = crate::ab::run(&ab)?;
    let binary = crate::vm::guest_binary(&VmOptions {
        binary: opts.binary.clone(),
        ..VmOptions::new(Kernel::Debian72, "")
    })?;
    let binary = fs::canonicalize(&binary)?;
    let dir = &outcome.out_dir;
    // The grid: from each run's min and p90 of lock_timer_base.
    let (mut lo, mut hi) = (u64::MAX, 0);
    for f in outcome.before.iter().chain(&outcome.after) {
        let json = util::output(
            std::process::Command::new(&binary)
                .arg("report")
                .arg(f)
                .args(["--format", "json", "--functions", "lock_timer_base"]),
        )?;
        let report: Value = serde_json::from_str(&json).context("report --format json")?;
        let f = function(&report, "lock_timer_base")?;
        lo = lo.min(num(f, "min_ns")?);
        hi = hi.max(num(f, "p90_ns")?);
    }
    let (_, hi) = grid_bounds(lo, hi);
    let max = hi.to_string();
    let grid = ["--bucket-ns", "20", "--max-ns", max.as_str()];
    fs::write(
        out.join("grid.txt"),
        format!("range table: {}\n", grid.join(" ")),
    )?;
    let timer = ["--functions", "lock_timer_base"];
    let cmp = |extra: &[&str]| -> Result<String> {
        let args: Vec<&str> = timer.iter().chain(extra).copied().collect();
        run_compare(&binary, dir, &outcome.before, &outcome.after, &args)
    };
    let plot = out.join("compare.svg");
    let _ = fs::remove_file(&plot);
    let plot_arg = plot.to_string_lossy().into_owned();
    for (name, extra) in [
        (
            "compare.txt",
            [&grid[..], &["--plot", plot_arg.as_str()]].concat(),
        ),
        ("compare.json", [&grid[..], &["--format", "json"]].concat()),
        (
            "compare.md",
            [&grid[..], &["--format", "markdown"]].concat(),
        ),
        ("compare-wide.txt", Vec::new()),
        ("compare-wide.json", vec!["--format", "json"]),
        ("compare-wide.md", vec!["--format", "markdown"]),
    ] {
        fs::write(out.join(name), cmp(&extra)?).with_context(|| format!("writing {name}"))?;
    }
    Ok(outcome)
}

/// The seed grid's edges: the lowest minimum rounded down to a row, the highest p90 rounded up,
/// at most [`ROWS`] rows (the `grid` shell helper's rule).
fn grid_bounds(lo: u64, hi: u64) -> (u64, u64) {
    let lo = lo - lo % BUCKET_NS;
    let mut hi = hi + (BUCKET_NS - hi % BUCKET_NS) % BUCKET_NS;
    if hi <= lo {
        hi = lo + BUCKET_NS;
    }
    (lo, hi.min(lo + ROWS * BUCKET_NS))
}

/// What a seed produced.
#[derive(Debug, Clone)]
pub struct SeedOutcome {
    pub seed: Seed,
    pub out_dir: PathBuf,
    /// Each guest's /out, in boot order.
    pub guests: Vec<PathBuf>,
    /// Kernel release of each guest, in boot order.
    pub releases: Vec<String>,
    /// The rendered text (report or compare), as printed.
    pub text: String,
    pub json: Value,
    pub markdown: String,
    /// lock-timer-ab: the same comparison on the default grid (rows widened until the p99 fits
    /// in 40 lines), since 20 ns rows from the minimum reach only the fastest calls under TCG.
    pub wide: Option<(String, Value)>,
}

/// Shell for the guests. `grid FUNCTION CAPTURE...` prints the range-table arguments: 20 ns
/// rows from the lowest minimum up to the highest p90 (rounded up to a row edge), at most ROWS
/// rows. The CSV report's columns 10 and 13 are min_ns and p90_ns.
fn helpers() -> String {
    format!(
        r#"grid() {{
  f=$1; shift
  for c in "$@"; do damon-trace report "$c" --format csv --functions "$f" | awk -F, 'NR==2 {{print $10, $13}}'; done |
  awk -v w={BUCKET_NS} -v rows={ROWS} '
    $1 != "" {{ if (n == 0 || $1 < lo) lo = $1; if ($2 > hi) hi = $2; n++ }}
    END {{
      lo -= lo % w; hi += (w - hi % w) % w
      if (hi <= lo) hi = lo + w
      if (hi > lo + rows * w) hi = lo + rows * w
      printf "--bucket-ns %d --max-ns %d\n", w, hi
    }}'
}}
"#
    )
}

/// A seed's recording under migrate-hot (SCENARIO_ARGS): RECORD_SECONDS of FUNCTIONS with
/// fentry into /out/CAPTURE, then BODY while the scenario still runs, then the scenario stopped.
fn record(scenario_args: &str, capture: &str, functions: &str, body: &str) -> String {
    script::with_scenario(
        90,
        scenario_args,
        &format!(
            "{}\n{body}",
            script::record_settled(
                capture,
                &format!("--duration {RECORD_SECONDS}s --functions {functions} --attach fentry"),
            )
        ),
    )
}

/// `report` of CAPTURE on the seed grid into /out/report.{txt,json,md}.
fn report(capture: &str, function: &str) -> String {
    format!(
        "G=$(grid {function} /out/{capture})
echo \"range table: $G\" > /out/grid.txt
damon-trace report /out/{capture} $G > /out/report.txt
damon-trace report /out/{capture} $G --format json > /out/report.json
damon-trace report /out/{capture} $G --format markdown > /out/report.md"
    )
}

fn guest(kernel: Kernel, cmd: String, dir: PathBuf, opts: &SeedOptions) -> Result<GuestRun> {
    Guest::new(kernel, cmd)
        .out_dir(dir)
        .timeout(Duration::from_secs(360))
        .binary(opts.binary.clone())
        .run_ok()
}

fn copy(from: &Path, to: &Path, names: &[(&str, &str)]) -> Result<()> {
    for (src, dst) in names {
        fs::copy(from.join(src), to.join(dst))
            .with_context(|| format!("copying {} from {}", src, from.display()))?;
    }
    Ok(())
}

fn read(dir: &Path, name: &str) -> Result<String> {
    fs::read_to_string(dir.join(name)).with_context(|| format!("reading {name}"))
}

fn read_json(dir: &Path, name: &str) -> Result<Value> {
    serde_json::from_str(&read(dir, name)?).with_context(|| format!("parsing {name}"))
}

/// Boots the seed's guest(s), runs the scenario, records, renders, and copies the captures
/// and outputs into `opts.out_dir`.
pub fn run(seed: Seed, opts: &SeedOptions) -> Result<SeedOutcome> {
    fs::create_dir_all(&opts.out_dir)
        .with_context(|| format!("creating {}", opts.out_dir.display()))?;
    let out = &opts.out_dir;
    let h = helpers();
    let extra = &opts.extra;
    let (guests, releases, text_name, json_name, md_name) = match seed {
        Seed::HotScore => {
            let body = format!("{}\n{extra}", report("hot-score.dtcap", "damon_hot_score"));
            let cmd = format!(
                "set -e\n{h}{}",
                record("", "hot-score.dtcap", "damon_hot_score", &body),
            );
            let dir = out.join("guest-7.2");
            let o = guest(Kernel::Debian72, cmd, dir.clone(), opts)?;
            copy(
                &dir,
                out,
                &[
                    ("hot-score.dtcap", "hot-score-7.2.dtcap"),
                    ("report.txt", "report.txt"),
                    ("report.json", "report.json"),
                    ("report.md", "report.md"),
                    ("scenario.out", "scenario.out"),
                ],
            )?;
            (
                vec![dir],
                vec![o.outcome.kernel_release],
                "report.txt",
                "report.json",
                "report.md",
            )
        }
        Seed::SameNode => {
            let functions = "damos_va_migrate_dests_add,damon_migrate_pages";
            let cmd = format!(
                "set -e\n{h}{}\n{}\ndamon-trace export /out/same-node.dtcap --format csv -o /out/calls.csv\n{extra}",
                record("--dest-node same", "same-node.dtcap", functions, ""),
                report("same-node.dtcap", "damos_va_migrate_dests_add"),
            );
            let dir = out.join("guest-7.2");
            let o = guest(Kernel::Debian72, cmd, dir.clone(), opts)?;
            copy(
                &dir,
                out,
                &[
                    ("same-node.dtcap", "same-node-7.2.dtcap"),
                    ("report.txt", "report.txt"),
                    ("report.json", "report.json"),
                    ("report.md", "report.md"),
                    ("calls.csv", "calls.csv"),
                    ("scenario.out", "scenario.out"),
                ],
            )?;
            (
                vec![dir],
                vec![o.outcome.kernel_release],
                "report.txt",
                "report.json",
                "report.md",
            )
        }
        Seed::LockTimerAb => {
            let ab = lock_timer_ab(opts)?;
            let releases = ab.runs.iter().map(|r| r.kernel_release.clone()).collect();
            let guests = ab
                .runs
                .iter()
                .map(|r| {
                    ab.out_dir
                        .join(format!("guest-{}-{}", r.side.name(), r.index))
                })
                .collect();
            (
                guests,
                releases,
                "compare.txt",
                "compare.json",
                "compare.md",
            )
        }
    };
    Ok(SeedOutcome {
        seed,
        out_dir: out.clone(),
        guests,
        releases,
        text: read(out, text_name)?,
        json: read_json(out, json_name)?,
        markdown: read(out, md_name)?,
        wide: if seed == Seed::LockTimerAb {
            Some((
                read(out, "compare-wide.txt")?,
                read_json(out, "compare-wide.json")?,
            ))
        } else {
            None
        },
    })
}

fn num(v: &Value, key: &str) -> Result<u64> {
    v[key]
        .as_u64()
        .with_context(|| format!("`{key}` is not a number in {v}"))
}

fn float(v: &Value, key: &str) -> Result<f64> {
    v[key]
        .as_f64()
        .with_context(|| format!("`{key}` is not a number in {v}"))
}

fn function<'a>(report: &'a Value, name: &str) -> Result<&'a Value> {
    report["functions"]
        .as_array()
        .context("no functions array")?
        .iter()
        .find(|f| f["name"] == name)
        .with_context(|| format!("{name} is not in the output"))
}

/// The rows (lo, hi) of a grid: every bounded row `BUCKET_NS` wide and contiguous, one
/// overflow row last.
fn check_rows(name: &str, rows: &[(u64, Option<u64>)]) -> Result<()> {
    check_grid(name, rows, BUCKET_NS, ROWS)
}

/// The rows (lo, hi) of a grid: every bounded row `width` wide and contiguous, at most
/// `max_rows` of them, one overflow row last.
fn check_grid(name: &str, rows: &[(u64, Option<u64>)], width: u64, max_rows: u64) -> Result<()> {
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

/// The `| a | b | c |` cells of the Markdown table rows that follow `header` (up to the
/// first line that is not a table row), separator line skipped.
fn markdown_rows(md: &str, header: &str) -> Result<Vec<Vec<String>>> {
    let start = md
        .find(header)
        .with_context(|| format!("no `{header}` table in the Markdown"))?;
    Ok(md[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect())
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
    let edges: Vec<(u64, Option<u64>)> = rows
        .iter()
        .map(|r| Ok((num(r, "lo_ns")?, r["hi_ns"].as_u64())))
        .collect::<Result<_>>()?;
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
    let md_rows = markdown_rows(md, "| Range (ns) | Count | Percent |")?;
    ensure!(
        md_rows.len() == rows.len(),
        "Markdown has {} rows, JSON {}",
        md_rows.len(),
        rows.len()
    );
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
    let edges: Vec<(u64, Option<u64>)> = rows
        .iter()
        .map(|r| Ok((num(r, "lo_ns")?, r["hi_ns"].as_u64())))
        .collect::<Result<_>>()?;
    check_rows("lock_timer_base", &edges)?;
    let sum = |side: &str| -> Result<u64> { rows.iter().map(|r| num(r, side)).sum() };
    let (sb, sa) = (sum("before")?, sum("after")?);
    ensure!(
        (sb, sa) == (nb, na),
        "rows add up to {sb}/{sa}, not {nb}/{na}"
    );
    let md_rows = markdown_rows(md, "| Range (ns) | Before | % | After | % |")?;
    ensure!(
        md_rows.len() == rows.len(),
        "Markdown has {} rows, JSON {}",
        md_rows.len(),
        rows.len()
    );
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
    let edges: Vec<(u64, Option<u64>)> = rows
        .iter()
        .map(|r| Ok((num(r, "lo_ns")?, r["hi_ns"].as_u64())))
        .collect::<Result<_>>()?;
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

/// `key=value` fields of the scenario's summary line.
fn summary_field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .filter_map(|f| f.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

/// Pages on `node` in `N0:12,N1:3`.
fn node_pages(list: &str, node: u32) -> Option<u64> {
    list.split(',')
        .filter_map(|p| p.split_once(':'))
        .find(|(n, _)| *n == format!("N{node}"))
        .and_then(|(_, v)| v.parse().ok())
}

/// (calls, summed duration) per function and per (function, tid) in the per-call CSV export.
type CsvSums = (
    std::collections::BTreeMap<String, (u64, u64)>,
    std::collections::BTreeMap<(String, u64), (u64, u64)>,
);

fn csv_sums(csv: &str) -> Result<CsvSums> {
    let mut lines = csv.lines();
    ensure!(
        lines.next() == Some("function,cpu,pid,tid,entry_ns,duration_ns,value"),
        "unexpected CSV header"
    );
    let (mut all, mut by_tid) = CsvSums::default();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        ensure!(f.len() == 7, "CSV line {line:?}");
        let tid: u64 = f[3].parse().context("tid")?;
        let ns: u64 = f[5].parse().context("duration")?;
        for e in [
            all.entry(f[0].to_owned()).or_default(),
            by_tid.entry((f[0].to_owned(), tid)).or_default(),
        ] {
            e.0 += 1;
            e.1 += ns;
        }
    }
    Ok((all, by_tid))
}

fn u64s(v: &Value) -> Result<Vec<u64>> {
    v.as_array()
        .with_context(|| format!("{v} is not an array"))?
        .iter()
        .map(|x| x.as_u64().with_context(|| format!("{x} is not a u64")))
        .collect()
}

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
    let (all, by_tid) = csv_sums(csv)?;
    let mut notes = Vec::new();
    for name in ["damos_va_migrate_dests_add", "damon_migrate_pages"] {
        let f = function(report, name)?;
        ensure!(f["attach"] == "fentry", "{name}: {}", f["attach"]);
        let count = num(f, "count")?;
        ensure!(count > 0, "{name} was never called");
        let p = &f["per_interval"];
        ensure!(p.is_object(), "{name} has no per_interval: {f}");
        let (inside, outside, foreign) = (
            num(p, "calls_in_intervals")?,
            num(p, "calls_outside")?,
            num(p, "calls_not_kdamond")?,
        );
        ensure!(
            inside + outside + foreign == count,
            "{name}: {inside} in intervals + {outside} outside + {foreign} not kdamond != {count}"
        );
        let (csv_calls, csv_ns) = all.get(name).copied().unwrap_or_default();
        ensure!(
            csv_calls == count,
            "{name}: CSV has {csv_calls} calls, report {count}"
        );
        let (ns_in, ns_out, ns_foreign) = (
            num(p, "total_ns_in_intervals")?,
            num(p, "total_ns_outside")?,
            num(p, "total_ns_not_kdamond")?,
        );
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
        let (p50, p99, pmax) = (
            num(p, "p50_total_ns")?,
            num(p, "p99_total_ns")?,
            num(p, "max_total_ns")?,
        );
        ensure!(p50 <= p99 && p99 <= pmax, "{name}: {p}");
        ensure!(
            text.contains(&format!("\n{name:<27} {intervals:>9} ")),
            "{name} missing from the text's per-interval block"
        );
        notes.push(format!(
            "{name}: {count} calls, {intervals} intervals ({} with calls), per interval mean \
             {:.0} ns, p50 {p50}, p99 {p99}, max {pmax} ns; total {csv_ns} ns",
            calls.iter().filter(|&&c| c > 0).count(),
            float(p, "mean_total_ns")?,
        ));
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

/// `cargo xtask seed`: runs, checks, prints the outputs and where they are.
pub fn main(seed: Seed, opts: &SeedOptions) -> Result<bool> {
    let o = run(seed, opts)?;
    println!("{}", o.text);
    if let Some((text, _)) = &o.wide {
        println!(
            "--- the whole distribution: rows widened until the p99 fits in 40 lines ---\n{text}"
        );
    }
    let ok = match check(&o) {
        Ok(notes) => {
            for n in notes {
                status("seed", n);
            }
            true
        }
        Err(e) => {
            status("seed", format!("FAILED the {} checks: {e:#}", seed.name()));
            false
        }
    };
    status(
        "seed",
        format!(
            "{} on {}: captures and outputs (text, JSON, Markdown) in {}",
            seed.name(),
            {
                let mut r = o.releases.clone();
                r.dedup();
                r.join(" and ")
            },
            o.out_dir.display()
        ),
    );
    Ok(ok)
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

    #[test]
    fn scenario_summary_fields_and_node_pages() {
        let line = "migrate-hot: ops=vaddr target_nid=0 workload_pages_before=N0:65596,N1:529";
        assert_eq!(summary_field(line, "target_nid"), Some("0"));
        let before = summary_field(line, "workload_pages_before").expect("field");
        assert_eq!(node_pages(before, 1), Some(529));
        assert_eq!(node_pages(before, 2), None);
    }
}
