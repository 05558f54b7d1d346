//! `cargo xtask patch-ab PATCH`: a kernel patch measured as the only difference, in one boot.
//!
//! Two kernel builds are out of reach on this machine, and two Debian kernels differ in
//! thousands of ways. A livepatch makes the patch the only difference: the patch's two variants
//! (`xtask/patches/<name>/patch.c` compiled with `LP_AFTER=0` and `=1`) are livepatch modules
//! replacing the same vmlinux function with a function of one name ([`build`] makes them, in
//! a Debian chroot, against the guest kernel's own headers and compiler). One guest boots under
//! the migrate-hot scenario and loads the variants alternately, before, after, before, … (each
//! with `.replace = true`; the script waits for the livepatch transition, then removes the
//! replaced module, so one copy of the function stays in kallsyms), and each load is one run:
//! `damon-trace record --func <the replacement> --disturbance` for `--duration` seconds (both
//! sides pay the same reads, and the captures can be compared `--clean`). The captures are kept
//! as `before-N.dtcap` / `after-N.dtcap` and judged by the multi-run compare on the host, as
//! `cargo xtask ab` does, with the run (one load) as the unit of replication.
//!
//! The replacement lives in a module. The modules carry BTF (Kbuild runs pahole against the
//! headers' `vmlinux`), and damon-trace's fsession finds a module function's BTF object and
//! passes it at load (`attach_btf_obj_fd`), which aya's fentry/fexit cannot: the runs use an
//! fsession where the kernel has one (7.x), a kprobe session on 6.12, kprobes on 6.1
//! ([`run_attach`]). One 1 s fentry/fexit attempt is made per boot and its outcome kept
//! (`fentry-attempt.txt`), so the output says why the pair is not used.
pub mod build;

use std::{
    fs,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context as _, Result, ensure};

use crate::{
    ab::{self, Side},
    guest::Guest,
    kernel::{self, Kernel},
    script,
    util::{self, status},
    vm::{self, VmOptions},
};

pub use self::build::Plan;

/// Loads per variant unless `--runs` says otherwise.
pub const DEFAULT_RUNS: u32 = 3;
/// Seconds each run records unless `--duration` says otherwise.
pub const DEFAULT_SECONDS: u64 = 15;
/// Per run beyond the recording: loading the module, the transition, removing the replaced
/// one, attaching and detaching the probes (3–4 s under TCG).
/// Calibrating the probe floor (`--calibrate-calls`, 5 000: 2–6 s under TCG, where the default
/// 20 000 took 6–25 s) is part of it.
const RUN_SLACK_SECONDS: u64 = 60;
/// Test runs of the probe floor each recording measures first.
const CALIBRATE_CALLS: u32 = 5000;
/// Where the modules are in the guest.
const GUEST_DIR: &str = "/lp";
/// The function every patch's module defines (and `record --func` traces).
pub const FUNCTION: &str = "lp_damon_hot_score";

/// What `cargo xtask patch-ab` does.
#[derive(Debug, Clone)]
pub struct PatchAbOptions {
    /// A directory name under `xtask/patches`.
    pub patch: String,
    pub kernel: Kernel,
    /// Loads per variant.
    pub runs: u32,
    /// Seconds each run records.
    pub seconds: u64,
    /// Receives the captures, the records' logs and compare.*. Default:
    /// `target/patch-ab/<patch>`.
    pub out_dir: PathBuf,
    /// The static damon-trace for the guest and the compare.
    pub binary: Option<PathBuf>,
    /// Boot nothing: compare the `--runs` captures already in `out_dir` again.
    pub compare_only: bool,
    /// The guest's clock (`--clock`).
    pub clock: crate::vm::GuestClock,
}

impl PatchAbOptions {
    pub fn new(patch: &str) -> Self {
        Self {
            patch: patch.to_owned(),
            kernel: Kernel::DEBIAN_7_2,
            runs: DEFAULT_RUNS,
            seconds: DEFAULT_SECONDS,
            out_dir: util::target_dir().join("patch-ab").join(patch),
            binary: None,
            compare_only: false,
            clock: crate::vm::GuestClock::Wall,
        }
    }
}

/// The order of the loads: (variant, run index), before, after, after, before, … as `ab`'s
/// boots (a drift within the boot cancels out).
pub fn schedule(runs: u32) -> Vec<(Side, u32)> {
    ab::schedule(runs)
}

/// The capture of a run, as `cargo xtask ab` names them (its compare step finds them so).
pub fn capture_name(side: Side, index: u32) -> String {
    format!("{}-{index}.dtcap", side.name())
}

/// Shell for the guest: `lp_load MODULE [REPLACED]` loads a variant, waits for its transition
/// (60 s at most, else status 98), waits for the replaced patch to be gone and removes its
/// module, and checks that kallsyms holds one copy of [`FUNCTION`]. Ends with a newline.
pub fn load_function() -> String {
    script::fill(
        include_str!("load_function.sh"),
        &[("GUEST_DIR", GUEST_DIR), ("FUNCTION", FUNCTION)],
    )
}

/// An upper bound of the guest command's time: the scenario runs this long (its stop ends it
/// once the runs are done).
pub fn guest_seconds(runs: u32, seconds: u64) -> u64 {
    u64::from(runs) * 2 * (seconds + RUN_SLACK_SECONDS) + 120
}

/// How the runs attach to [`FUNCTION`] on `kernel`: the cheapest method that reaches a module's
/// function there (an fsession through the module's BTF on 7.x, a kprobe session on 6.12,
/// kprobes before 6.10).
pub fn run_attach(kernel: &Kernel) -> &'static str {
    match kernel.profile() {
        Some(p) if p.has_fsession => "fsession",
        Some(p) if !p.has_kprobe_session => "kprobe",
        _ => "kprobe-session",
    }
}

/// The guest's command: the scenario, then per run the variant's module loaded (unless the run
/// before was of the same variant) and a recording
/// of [`FUNCTION`] (with `attach`) into `/out/<side>-<i>.dtcap`, its output in
/// `/out/<side>-<i>.txt`; after the first load one 1 s fentry attempt, its output in
/// `/out/fentry-attempt.txt`.
pub fn guest_cmd(patch: &str, runs: u32, seconds: u64, attach: &str) -> String {
    let scenario_seconds = guest_seconds(runs, seconds);
    let mut body = String::from("sleep 1\n");
    let mut previous = String::new();
    for (n, (side, index)) in schedule(runs).into_iter().enumerate() {
        let module = build::module_name(patch, side);
        // The order runs a variant twice in a row (… B B …): it stays loaded.
        if module != previous {
            body.push_str(&format!("lp_load {module} {previous}\n"));
        }
        if n == 0 {
            body.push_str(&format!(
                "damon-trace record -o /out/fentry-attempt.dtcap --duration 1s --func {FUNCTION} \
                 --attach fentry --calibrate-calls {CALIBRATE_CALLS} > /out/fentry-attempt.txt 2>&1 || true\n"
            ));
        }
        let capture = capture_name(side, index);
        let log = capture.replace(".dtcap", ".txt");
        body.push_str(&format!(
            "damon-trace record -o /out/{capture} --duration {seconds}s --func {FUNCTION} \
             --attach {attach} --calibrate-calls {CALIBRATE_CALLS} --disturbance > /out/{log} 2>&1 || {{ cat /out/{log} >&2; exit 1; }}\n"
        ));
        previous = module;
    }
    format!(
        "set -e\n{}{}",
        load_function(),
        script::with_scenario(scenario_seconds, "", &body)
    )
}

/// The attach method a record's output names for [`FUNCTION`] (its function table's second
/// column), if any.
pub fn attach_method(record_output: &str) -> Option<String> {
    record_output.lines().find_map(|l| {
        let mut words = l.split_whitespace();
        (words.next() == Some(FUNCTION))
            .then(|| words.next().map(String::from))
            .flatten()
    })
}

/// What the guest wrote, checked: every capture there and the attach method of each run.
fn collect(dir: &Path, out: &Path, runs: u32) -> Result<Vec<(String, String)>> {
    let mut methods = Vec::new();
    for (side, index) in schedule(runs) {
        let capture = capture_name(side, index);
        let log =
            fs::read_to_string(dir.join(capture.replace(".dtcap", ".txt"))).unwrap_or_default();
        fs::copy(dir.join(&capture), out.join(&capture))
            .with_context(|| format!("the guest left no /out/{capture}"))?;
        fs::write(out.join(capture.replace(".dtcap", ".txt")), &log)?;
        ensure!(
            records_written(&log).is_some_and(|n| n > 0),
            "run {capture} recorded no calls of {FUNCTION} (did the scenario end?):\n{log}"
        );
        let method = attach_method(&log).unwrap_or_else(|| "unknown".into());
        methods.push((capture, method));
    }
    Ok(methods)
}

/// The compare's range table: 100 ns rows up to 4 µs, where this function's calls are under
/// TCG (its default would widen the rows to fit the millisecond tail in 40 lines).
pub const COMPARE_ARGS: [&str; 4] = ["--bucket-ns", "100", "--max-ns", "4000"];

/// Builds the modules, boots the guest and records every run into `opts.out_dir`; prints the
/// attach method of each run and what fentry said.
fn boot_and_record(opts: &PatchAbOptions, binary: &Path) -> Result<()> {
    let suite = opts
        .kernel
        .suite()
        .context("patch-ab needs a Debian kernel (its headers come from its suite)")?;
    let image = kernel::fetch(&opts.kernel)?;
    let plan = Plan {
        base: util::cache_dir()?.join("livepatch"),
        suite: suite.to_owned(),
        release: image.release.clone(),
    };
    let [before, after] = build::ensure_modules(&plan, &opts.patch)?;
    let out = &opts.out_dir;
    let _ = fs::remove_dir_all(out);
    fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let files = [(Side::Before, before), (Side::After, after)]
        .into_iter()
        .map(|(side, ko)| {
            let name = build::module_name(&opts.patch, side);
            (ko, format!("{GUEST_DIR}/{name}.ko"))
        })
        .collect();
    status(
        "patch-ab",
        format!(
            "one boot of {}: {} × ({} before, {} after) runs of {} s, {} on {FUNCTION}",
            image.release,
            opts.runs,
            opts.patch,
            opts.patch,
            opts.seconds,
            run_attach(&opts.kernel)
        ),
    );
    let run = Guest::new(
        opts.kernel.clone(),
        guest_cmd(
            &opts.patch,
            opts.runs,
            opts.seconds,
            run_attach(&opts.kernel),
        ),
    )
    .out_dir(out.join("guest"))
    .clock(opts.clock)
    .timeout(Duration::from_secs(
        guest_seconds(opts.runs, opts.seconds) + 300,
    ))
    .binary(Some(binary.to_path_buf()))
    .files(files)
    .quiet()
    .run_ok()
    .context("patch-ab: the guest failed")?;
    status(
        "patch-ab",
        format!("guest took {:.0} s", run.total_time.as_secs_f64()),
    );
    let methods = collect(run.dir(), out, opts.runs)?;
    let fentry = run.read("fentry-attempt.txt");
    fs::write(out.join("fentry-attempt.txt"), &fentry)?;
    let methods: Vec<String> = methods
        .iter()
        .map(|(c, m)| format!("{} {m}", c.trim_end_matches(".dtcap")))
        .collect();
    println!("attach per run: {}", methods.join(", "));
    println!("fentry attempt: {}", fentry_summary(&fentry));
    Ok(())
}

/// Builds the modules, boots the guest, records every run (unless `compare_only`) and compares
/// the captures; false if the compare step failed (the captures are kept).
pub fn main(opts: &PatchAbOptions) -> Result<bool> {
    ensure!(
        opts.runs >= 1,
        "patch-ab needs at least one run per variant"
    );
    let probe = VmOptions {
        binary: opts.binary.clone(),
        ..VmOptions::new(opts.kernel.clone(), "")
    };
    let binary = fs::canonicalize(vm::guest_binary(&probe)?)?;
    if !opts.compare_only {
        boot_and_record(opts, &binary)?;
    }
    let out = &opts.out_dir;
    let pick = |want: Side| -> Vec<PathBuf> {
        schedule(opts.runs)
            .into_iter()
            .filter(|(s, _)| *s == want)
            .map(|(s, i)| out.join(capture_name(s, i)))
            .collect()
    };
    let (before, after) = (pick(Side::Before), pick(Side::After));
    match ab::compare(&binary, out, &before, &after, &COMPARE_ARGS) {
        Ok(c) => {
            println!("{}", c.text);
            status(
                "patch-ab",
                format!("captures and compare.{{txt,json,md}} in {}", out.display()),
            );
            if opts.patch == CONTROL && !control_detected(&c.text) {
                status(
                    "patch-ab",
                    "FAILED: the control's known delay was not found slower over these runs",
                );
                return Ok(false);
            }
            Ok(true)
        }
        Err(e) => {
            status("patch-ab", format!("compare FAILED: {e:#}"));
            Ok(false)
        }
    }
}

/// The patch whose after variant adds a known delay: `patch-ab control` fails unless the
/// verdict finds it.
pub const CONTROL: &str = "control";

/// Whether the compare's verdict on [`FUNCTION`] calls the after variant slower.
pub fn control_detected(compare_text: &str) -> bool {
    // Wall clock: slower; instruction clock: longer (by a test over runs, or in every run).
    ["slower by", "longer by", "longer in every run"]
        .iter()
        .any(|w| {
            compare_text
                .lines()
                .any(|l| l.starts_with(&format!("verdict: after is {w}")))
        })
}

/// `N` of record's `wrote N records` line.
pub fn records_written(record_output: &str) -> Option<u64> {
    record_output.lines().find_map(|l| {
        l.strip_prefix("wrote ")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })
}

/// What record said about attaching fentry to [`FUNCTION`]: its line of the attach table with
/// the spaces squeezed (`lp_damon_hot_score failed fentry/fexit: function not in the kernel's
/// BTF`), else its error line.
pub fn fentry_summary(output: &str) -> String {
    let line = output
        .lines()
        .find(|l| l.split_whitespace().next() == Some(FUNCTION))
        .or_else(|| output.lines().find(|l| l.contains("error")));
    line.map_or_else(
        || "no output".into(),
        |l| l.split_whitespace().collect::<Vec<_>>().join(" "),
    )
}

#[cfg(test)]
mod tests;
