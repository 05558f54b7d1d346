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
//! tests in `lab/tests/vm_seeds.rs` and `lab/tests/vm.rs` call the same [`run`] and
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

use anyhow::{Context as _, Result};
use serde_json::Value;

mod check;
mod same_node;

pub use self::{
    check::{check, check_hot_score, check_lock_timer_ab, check_wide},
    same_node::check_same_node,
};
use crate::{
    guest::{Guest, GuestRun},
    kernel::Kernel,
    parse::{function, num},
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
    /// `lab/tests/vm.rs` adds its other checks this way instead of booting twice more.
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
    let mut ab = AbOptions::new(Kernel::DEBIAN_6_12, Kernel::DEBIAN_7_2);
    ab.runs = opts.runs;
    ab.seconds = RECORD_SECONDS;
    ab.functions = vec!["lock_timer_base".into(), "damon_hot_score".into()];
    ab.out_dir = out.join("runs");
    ab.binary = opts.binary.clone();
    ab.extra_last = opts.extra.clone();
    let outcome = crate::ab::run(&ab)?;
    let binary = crate::vm::guest_binary(&VmOptions {
        binary: opts.binary.clone(),
        ..VmOptions::new(Kernel::DEBIAN_7_2, "")
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

/// Shell for the guests (`grid.sh`). `grid FUNCTION CAPTURE...` prints the range-table arguments: 20 ns
/// rows from the lowest minimum up to the highest p90 (rounded up to a row edge), at most ROWS
/// rows. The CSV report's columns 10 and 13 are min_ns and p90_ns.
fn helpers() -> String {
    script::fill(
        include_str!("grid.sh"),
        &[
            ("BUCKET_NS", &BUCKET_NS.to_string()),
            ("ROWS", &ROWS.to_string()),
        ],
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

/// Boots the one 7.2 guest of hot-score or same-node with `cmd`, and copies its capture (as
/// `<stem>-7.2.dtcap`), its report, `also` and the scenario's output into the out dir.
/// Returns the guest's /out and kernel release.
fn run_7_2(
    opts: &SeedOptions,
    cmd: String,
    stem: &str,
    also: &[&str],
) -> Result<(PathBuf, String)> {
    let out = &opts.out_dir;
    let dir = out.join("guest-7.2");
    let o = guest(Kernel::DEBIAN_7_2, cmd, dir.clone(), opts)?;
    let (capture, kept) = (format!("{stem}.dtcap"), format!("{stem}-7.2.dtcap"));
    let mut names = vec![(capture.as_str(), kept.as_str())];
    for name in ["report.txt", "report.json", "report.md"]
        .iter()
        .chain(also)
        .chain(&["scenario.out"])
    {
        names.push((name, name));
    }
    copy(&dir, out, &names)?;
    Ok((dir, o.outcome.kernel_release.clone()))
}

/// Boots the seed's guest(s), runs the scenario, records, renders, and copies the captures
/// and outputs into `opts.out_dir`.
pub fn run(seed: Seed, opts: &SeedOptions) -> Result<SeedOutcome> {
    fs::create_dir_all(&opts.out_dir)
        .with_context(|| format!("creating {}", opts.out_dir.display()))?;
    let out = &opts.out_dir;
    let h = helpers();
    let extra = &opts.extra;
    let report_names = ("report.txt", "report.json", "report.md");
    let (guests, releases, (text_name, json_name, md_name)) = match seed {
        Seed::HotScore => {
            let body = format!("{}\n{extra}", report("hot-score.dtcap", "damon_hot_score"));
            let cmd = format!(
                "set -e\n{h}{}",
                record("", "hot-score.dtcap", "damon_hot_score", &body),
            );
            let (dir, release) = run_7_2(opts, cmd, "hot-score", &[])?;
            (vec![dir], vec![release], report_names)
        }
        Seed::SameNode => {
            let functions = "damos_va_migrate_dests_add,damon_migrate_pages";
            let cmd = format!(
                "set -e\n{h}{}\n{}\ndamon-trace export /out/same-node.dtcap --format csv -o /out/calls.csv\n{extra}",
                record("--dest-node same", "same-node.dtcap", functions, ""),
                report("same-node.dtcap", "damos_va_migrate_dests_add"),
            );
            let (dir, release) = run_7_2(opts, cmd, "same-node", &["calls.csv"])?;
            (vec![dir], vec![release], report_names)
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
                ("compare.txt", "compare.json", "compare.md"),
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
