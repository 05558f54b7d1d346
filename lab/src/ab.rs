//! `cargo xtask ab`: A/B data for comparing two kernels, with the run (one fresh boot) as the
//! unit of replication.
//!
//! One capture per boot says little about a kernel under TCG: the run-to-run spread (what the
//! emulator, the scheduler and DAMON's own adaptive regions did that time) is as large as many
//! of the differences a patch claims. So `ab` boots the two kernels interleaved, A B B A …
//! (`--runs` boots each; a drift linear in time cancels, see `damon_common::order`), records
//! the same functions with the same probe on both under the migrate-hot scenario, keeps every
//! capture as `before-N.dtcap` / `after-N.dtcap` with `runs.json` describing the runs, and
//! runs the multi-run `damon-trace compare --before F… --after F…` on the host (compare is
//! pure; the host kernel need not be traceable) into `compare.{txt,json,md}`.
//!
//! The probe defaults to fentry on both sides: `--attach auto` would pick kprobe on the
//! preemptible 7.x kernels and fentry on 6.x, and the two probes cost differently.
use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use anyhow::{Context as _, Result, ensure};
use serde_json::{Value, json};

use crate::{
    guest::Guest,
    kernel::Kernel,
    script,
    util::{self, status},
    vm::{self, VmOptions},
};

/// Boots per side unless `--runs` says otherwise.
pub const DEFAULT_RUNS: u32 = 5;
/// Seconds each run records unless `--duration` says otherwise.
pub const DEFAULT_SECONDS: u64 = 20;
/// The scenario runs this much longer than the recording: waiting for its kdamond (at most
/// 60 s) and attaching the probes (3–4 s under TCG) come first; its stop ends it anyway.
const SCENARIO_SLACK_SECONDS: u64 = 90;
/// Where each guest writes its capture under /out.
const CAPTURE: &str = "run.dtcap";

/// The probe both sides use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Attach {
    /// fentry/fexit (BPF trampolines).
    Fentry,
    /// kprobe/kretprobe.
    Kprobe,
    /// One kprobe session program per function (Linux ≥ 6.10): exact on preemptible kernels.
    KprobeSession,
}

impl Attach {
    pub fn name(self) -> &'static str {
        match self {
            Attach::Fentry => "fentry",
            Attach::Kprobe => "kprobe",
            Attach::KprobeSession => "kprobe-session",
        }
    }
}

/// How the guests record (`damon-trace record --mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// One record per call through the ring buffer.
    Stream,
    /// Histograms aggregated in the kernel.
    Kernel,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Stream => "stream",
            Mode::Kernel => "kernel",
        }
    }
}

/// Which kernel a run booted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Before,
    After,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Before => "before",
            Side::After => "after",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "before" => Some(Side::Before),
            "after" => Some(Side::After),
            _ => None,
        }
    }
}

/// What `cargo xtask ab` does.
#[derive(Debug, Clone)]
pub struct AbOptions {
    /// The reference kernel.
    pub before: Kernel,
    /// The kernel judged against it (may equal `before`: an A/A run).
    pub after: Kernel,
    /// Boots per side.
    pub runs: u32,
    /// Extra arguments for `damon-trace scenario migrate-hot`.
    pub scenario_args: String,
    /// Seconds each run records.
    pub seconds: u64,
    /// The functions to record; empty: record's default (the four built-ins).
    pub functions: Vec<String>,
    pub attach: Attach,
    /// None: record's default mode.
    pub mode: Option<Mode>,
    /// Receives the captures, runs.json and the compare outputs; its old captures are removed.
    pub out_dir: PathBuf,
    /// The static damon-trace for the guests and the host-side compare (None: as
    /// [`vm::guest_binary`] chooses).
    pub binary: Option<PathBuf>,
    /// Boot nothing: compare the captures already in `out_dir` again.
    pub compare_only: bool,
    /// More shell for the last boot, run after its recording while the scenario still runs
    /// (its capture is /out/run.dtcap); the seeds and tests add their checks this way.
    pub extra_last: String,
    /// The guests' clock (`--clock`).
    pub clock: vm::GuestClock,
}

impl AbOptions {
    /// The defaults: [`DEFAULT_RUNS`] runs of [`DEFAULT_SECONDS`] s, the four built-in
    /// functions, fentry, into [`default_out_dir`].
    pub fn new(before: Kernel, after: Kernel) -> Self {
        let out_dir = default_out_dir(&before, &after);
        Self {
            before,
            after,
            runs: DEFAULT_RUNS,
            scenario_args: String::new(),
            seconds: DEFAULT_SECONDS,
            functions: Vec::new(),
            attach: Attach::Fentry,
            mode: None,
            out_dir,
            binary: None,
            compare_only: false,
            extra_last: String::new(),
            clock: vm::GuestClock::Wall,
        }
    }

    fn kernel(&self, side: Side) -> &Kernel {
        match side {
            Side::Before => &self.before,
            Side::After => &self.after,
        }
    }
}

/// `target/ab/<before>-vs-<after>`.
pub fn default_out_dir(before: &Kernel, after: &Kernel) -> PathBuf {
    util::target_dir()
        .join("ab")
        .join(format!("{}-vs-{}", before.short_name(), after.short_name()))
}

/// One boot.
#[derive(Debug, Clone)]
pub struct AbRun {
    pub side: Side,
    /// 1-based, per side.
    pub index: u32,
    /// `uname -r` in the guest.
    pub kernel_release: String,
    /// The capture, `<out>/<side>-<index>.dtcap`.
    pub file: PathBuf,
    /// 1-based position in the boot sequence.
    pub boot: u32,
    /// From starting QEMU until it exited.
    pub seconds: f64,
}

/// The multi-run compare's outputs, as written to `compare.{txt,json,md}`.
#[derive(Debug, Clone)]
pub struct Compared {
    pub text: String,
    pub json: Value,
    pub markdown: String,
}

/// What `ab` produced.
#[derive(Debug)]
pub struct AbOutcome {
    pub out_dir: PathBuf,
    /// The boots in order (empty with `compare_only`).
    pub runs: Vec<AbRun>,
    /// The captures compared, by run index.
    pub before: Vec<PathBuf>,
    pub after: Vec<PathBuf>,
    /// The compare step; an error (e.g. a damon-trace that does not know `compare --before
    /// F… --after F…`) leaves the captures in place.
    pub compare: Result<Compared>,
}

/// The boot sequence: (side, run index), in the drift-cancelling order before, after, after,
/// before, … (`damon_common::order`).
pub fn schedule(runs: u32) -> Vec<(Side, u32)> {
    damon_common::order::schedule(runs)
        .map(|(before, i)| (if before { Side::Before } else { Side::After }, i))
        .collect()
}

/// `damon-trace record`'s arguments for every run.
fn record_args(opts: &AbOptions) -> String {
    let mut args = format!(
        "--duration {}s --attach {}",
        opts.seconds,
        opts.attach.name()
    );
    if !opts.functions.is_empty() {
        args.push_str(&format!(" --functions {}", opts.functions.join(",")));
    }
    if let Some(m) = opts.mode {
        args.push_str(&format!(" --mode {}", m.name()));
    }
    // Stream mode: both sides pay the same reads; `compare --clean` can use the captures.
    if opts.mode != Some(Mode::Kernel) {
        args.push_str(" --disturbance");
    }
    args
}

/// The guest's command: the scenario in the background, the recording, `extra`, the scenario
/// stopped.
fn guest_cmd(opts: &AbOptions, extra: &str) -> String {
    let body = format!(
        "{}\n{extra}",
        script::record_settled(CAPTURE, &record_args(opts))
    );
    format!(
        "set -e\n{}",
        script::with_scenario(
            opts.seconds + SCENARIO_SLACK_SECONDS,
            &opts.scenario_args,
            &body
        )
    )
}

fn capture_name(side: Side, index: u32) -> String {
    format!("{}-{index}.dtcap", side.name())
}

/// `before-3.dtcap` → (Before, 3).
fn parse_capture_name(name: &str) -> Option<(Side, u32)> {
    let (side, index) = name.strip_suffix(".dtcap")?.split_once('-')?;
    Some((Side::parse(side)?, index.parse().ok().filter(|&i| i > 0)?))
}

/// The `before-N.dtcap` and `after-N.dtcap` in `dir`, each side ordered by N.
fn captures(dir: &Path) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if let Some((side, index)) = name.as_deref().and_then(parse_capture_name) {
            found.push((side == Side::After, index, path));
        }
    }
    found.sort();
    let (after, before): (Vec<_>, Vec<_>) = found.into_iter().partition(|(a, _, _)| *a);
    let paths = |v: Vec<(bool, u32, PathBuf)>| v.into_iter().map(|(_, _, p)| p).collect();
    Ok((paths(before), paths(after)))
}

/// Removes what an earlier `ab` left in `dir`: captures, runs.json, guest dirs.
fn clear(dir: &Path) -> Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if name.ends_with(".dtcap") || name == "runs.json" {
            fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
        } else if name
            .strip_prefix("guest-")
            .and_then(|r| parse_capture_name(&format!("{r}.dtcap")))
            .is_some()
        {
            fs::remove_dir_all(&path).with_context(|| format!("removing {}", path.display()))?;
        }
    }
    Ok(())
}

fn runs_json(opts: &AbOptions, runs: &[AbRun]) -> Value {
    json!({
        "before": opts.before.short_name(),
        "after": opts.after.short_name(),
        "runs_per_side": opts.runs,
        "duration_s": opts.seconds,
        "functions": opts.functions,
        "attach": opts.attach.name(),
        "mode": opts.mode.map(Mode::name),
        "scenario_args": opts.scenario_args,
        "runs": runs.iter().map(|r| json!({
            "side": r.side.name(),
            "index": r.index,
            "kernel": opts.kernel(r.side).short_name(),
            "kernel_release": r.kernel_release,
            "file": r.file.file_name().map(|n| n.to_string_lossy().into_owned()),
            "boot": r.boot,
            "seconds": (r.seconds * 10.0).round() / 10.0,
        })).collect::<Vec<_>>(),
    })
}

/// Boots the 2·runs guests, interleaved, and collects their captures; runs.json is rewritten
/// after every boot, so an interrupted `ab` still describes the captures it left.
fn boot_all(opts: &AbOptions, binary: &Path) -> Result<Vec<AbRun>> {
    let out = &opts.out_dir;
    clear(out)?;
    let order = schedule(opts.runs);
    let total = order.len();
    let mut runs = Vec::with_capacity(total);
    for (boot, (side, index)) in (1u32..).zip(order) {
        let kernel = opts.kernel(side);
        let label = format!("{}-{index}", side.name());
        status(
            "ab",
            format!(
                "boot {boot}/{total}: {} ({}), run {index} …",
                side.name(),
                kernel.short_name()
            ),
        );
        let extra = if boot as usize == total {
            opts.extra_last.as_str()
        } else {
            ""
        };
        let outcome = Guest::new(kernel.clone(), guest_cmd(opts, extra))
            .clock(opts.clock)
            .out_dir(out.join(format!("guest-{label}")))
            .timeout(Duration::from_secs(opts.seconds + 360))
            .binary(Some(binary.to_path_buf()))
            .quiet()
            .run_ok()
            .with_context(|| {
                format!("ab: run {label} (boot {boot}/{total}, kernel {kernel}) failed")
            })?;
        let file = out.join(capture_name(side, index));
        fs::copy(outcome.dir().join(CAPTURE), &file).with_context(|| {
            format!(
                "ab: run {label} on {} left no /out/{CAPTURE}",
                outcome.kernel_release
            )
        })?;
        let bytes = fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
        let seconds = outcome.total_time.as_secs_f64();
        status(
            "ab",
            format!(
                "boot {boot}/{total}: {label} on {} took {seconds:.1} s, capture {bytes} bytes",
                outcome.kernel_release
            ),
        );
        runs.push(AbRun {
            side,
            index,
            kernel_release: outcome.outcome.kernel_release.clone(),
            file,
            boot,
            seconds,
        });
        let text = serde_json::to_string_pretty(&runs_json(opts, &runs))?;
        fs::write(out.join("runs.json"), text + "\n").context("writing runs.json")?;
    }
    Ok(runs)
}

/// `damon-trace compare --before B… --after A… ARGS…` in `dir` (file names relative to it,
/// so the outputs name no host paths).
pub fn run_compare(
    binary: &Path,
    dir: &Path,
    before: &[PathBuf],
    after: &[PathBuf],
    args: &[&str],
) -> Result<String> {
    let name = |p: &PathBuf| p.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    let mut cmd = Command::new(binary);
    cmd.current_dir(dir)
        .arg("compare")
        .arg("--before")
        .args(before.iter().map(name))
        .arg("--after")
        .args(after.iter().map(name))
        .args(args);
    util::output(&mut cmd).map_err(|e| {
        let msg = format!("{e:#}");
        if msg.contains("unexpected argument '--before'") || msg.contains("<BEFORE> <AFTER>") {
            anyhow::anyhow!(
                "{} does not know the multi-run `compare --before F… --after F…` yet; the \
                 captures are kept in {}: rebuild it (`cargo xtask build-static`) from a tree \
                 that has it and run `cargo xtask ab … --compare-only`\n{msg}",
                binary.display(),
                dir.display()
            )
        } else {
            e.context("the multi-run compare failed; the captures are kept")
        }
    })
}

/// The compare step, `args` (e.g. `--bucket-ns`) given to each: compare.{txt,json,md} in `dir`
/// (old ones removed first, so a failure never leaves a stale result next to new captures).
pub fn compare(
    binary: &Path,
    dir: &Path,
    before: &[PathBuf],
    after: &[PathBuf],
    args: &[&str],
) -> Result<Compared> {
    for f in ["compare.txt", "compare.json", "compare.md"] {
        let _ = fs::remove_file(dir.join(f));
    }
    let with =
        |format: &[&'static str]| -> Vec<&str> { args.iter().chain(format).copied().collect() };
    let text = run_compare(binary, dir, before, after, &with(&[]))?;
    let json_text = run_compare(binary, dir, before, after, &with(&["--format", "json"]))?;
    let markdown = run_compare(binary, dir, before, after, &with(&["--format", "markdown"]))?;
    let json = serde_json::from_str(&json_text).context("compare --format json: not JSON")?;
    for (f, t) in [
        ("compare.txt", &text),
        ("compare.json", &json_text),
        ("compare.md", &markdown),
    ] {
        fs::write(dir.join(f), t).with_context(|| format!("writing {f}"))?;
    }
    Ok(Compared {
        text,
        json,
        markdown,
    })
}

/// Boots the guests (unless `compare_only`), keeps the captures and runs.json in
/// `opts.out_dir`, and compares them on the host.
pub fn run(opts: &AbOptions) -> Result<AbOutcome> {
    ensure!(opts.runs >= 1, "ab needs at least one run per side");
    ensure!(opts.seconds >= 1, "ab needs a duration of at least 1 s");
    let out = &opts.out_dir;
    fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let probe = VmOptions {
        binary: opts.binary.clone(),
        ..VmOptions::new(opts.before.clone(), "")
    };
    let binary = vm::guest_binary(&probe)?;
    let binary = fs::canonicalize(&binary)
        .with_context(|| format!("no damon-trace at {}", binary.display()))?;
    let runs = if opts.compare_only {
        Vec::new()
    } else {
        boot_all(opts, &binary)?
    };
    let (before, after) = captures(out)?;
    ensure!(
        !before.is_empty() && !after.is_empty(),
        "no before-N.dtcap and after-N.dtcap in {} to compare (run `cargo xtask ab` without \
         --compare-only first)",
        out.display()
    );
    status(
        "ab",
        format!(
            "comparing {} before against {} after run(s) on the host",
            before.len(),
            after.len()
        ),
    );
    let compare = compare(&binary, out, &before, &after, &[]);
    Ok(AbOutcome {
        out_dir: out.clone(),
        runs,
        before,
        after,
        compare,
    })
}

/// `cargo xtask ab`: runs, prints compare.txt and where everything is; false if the compare
/// step failed (the captures are kept).
pub fn main(opts: &AbOptions) -> Result<bool> {
    let o = run(opts)?;
    let ok = match &o.compare {
        Ok(c) => {
            println!("{}", c.text);
            true
        }
        Err(e) => {
            status("ab", format!("compare FAILED: {e:#}"));
            false
        }
    };
    status(
        "ab",
        format!(
            "{} before and {} after capture(s){} in {}",
            o.before.len(),
            o.after.len(),
            if ok {
                ", runs.json and compare.{txt,json,md}"
            } else {
                " and runs.json"
            },
            o.out_dir.display()
        ),
    );
    Ok(ok)
}

#[cfg(test)]
mod tests;
