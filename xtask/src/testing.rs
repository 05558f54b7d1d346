//! `cargo xtask test`: every check the project has, in the order that fails fastest.
use std::{
    io::{BufRead as _, BufReader},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use damon_lab::{
    bootstrap::{self, Toolchain},
    build,
    util::{self, run},
};

use crate::{
    counts::{Counts, parse_result_line},
    vm_lanes,
};

/// Options of `cargo xtask test`.
#[derive(Debug, Clone, Default)]
pub struct TestOptions {
    /// Skip the VM stage (for quick local iterations; CI never sets it).
    pub skip_vm: bool,
}

/// Cargo's wrapper of rustc for the workspace's own crates, as `cargo clippy` sets it.
const WRAPPER: &str = "RUSTC_WORKSPACE_WRAPPER";

/// A cargo for the test command's host work. clippy-driver (rustc with clippy's lints) compiles
/// the workspace's crates, as under `cargo clippy` but producing code, with every warning
/// denied (`CLIPPY_ARGS`, in clippy-driver's own separator): the host tests' compile is also
/// the lint pass, instead of `cargo clippy` type-checking the whole workspace and its
/// dependencies a second time. Every cargo of the test command sets the same wrapper, so none
/// rebuilds what another built.
fn cargo(tc: &Toolchain) -> Result<Command> {
    let mut c = Command::new("cargo");
    // damon-user's build script (run by clippy and test too) needs bpf-linker on PATH.
    c.current_dir(util::workspace_root())
        .env("PATH", util::path_with(&tc.bpf_linker_dir)?)
        .env(WRAPPER, "clippy-driver")
        .env(
            "CLIPPY_ARGS",
            "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__",
        );
    Ok(c)
}

/// Runs a cargo test command, echoing its output and summing its results.
fn cargo_test(mut cmd: Command) -> Result<Counts> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .context("starting cargo test")?;
    let stdout = child.stdout.take().context("cargo test stdout")?;
    let mut total = Counts::default();
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading cargo test output")?;
        println!("{line}");
        if let Some(c) = parse_result_line(&line) {
            total.add(c);
        }
    }
    let st = child.wait().context("waiting for cargo test")?;
    if !st.success() {
        bail!(
            "cargo test failed ({st}); {} passed, {} failed",
            total.passed,
            total.failed
        );
    }
    Ok(total)
}

/// Where the test command builds: `$CARGO_TARGET_DIR` when set, else `target` in the user's
/// cache dir, shared by every clone of the repository. A fresh clone then compiles only the
/// workspace's own crates (cargo names their outputs by their path inside the workspace, so
/// a clone overwrites the last one's instead of adding its own): on the 2-core machine the
/// host build took 78 s instead of 181 s. Two test commands at once wait for each other's
/// builds (cargo locks the directory).
fn build_dir() -> Result<std::path::PathBuf> {
    match std::env::var_os("CARGO_TARGET_DIR").filter(|v| !v.is_empty()) {
        Some(_) => Ok(util::target_dir()),
        None => Ok(util::cache_dir()?.join("target")),
    }
}

struct Stage {
    name: &'static str,
    took: Duration,
    counts: Option<Counts>,
}

/// Runs every stage; the first failure stops the run and names its stage.
pub fn run_all(opts: &TestOptions) -> Result<()> {
    let target = build_dir()?;
    println!("builds in {} (CARGO_TARGET_DIR)", target.display());
    // SAFETY: first thing of `xtask test`, before it starts any thread; every cargo it runs,
    // and every test process those start, inherits the directory.
    unsafe { std::env::set_var("CARGO_TARGET_DIR", &target) };
    let mut done: Vec<Stage> = Vec::new();
    let result = stages(opts, &mut done);
    println!("\n==== xtask test summary ====");
    let mut total = Counts::default();
    for s in &done {
        let counts = s
            .counts
            .map(|c| format!(" ({} passed, {} failed)", c.passed, c.failed))
            .unwrap_or_default();
        println!(
            "  ok    {:<12} {:>6.1} s{counts}",
            s.name,
            s.took.as_secs_f64()
        );
        if let Some(c) = s.counts {
            total.add(c);
        }
    }
    if let Err(e) = &result {
        println!("  FAIL  {e:#}");
    }
    // The VM tests are #[ignore]d during the host stage and run in the VM stage, so host
    // "ignored" counts are not skips; the closing line states only what ran.
    println!("tests: {} passed, {} failed", total.passed, total.failed);
    result
}

fn stage<T>(
    done: &mut Vec<Stage>,
    name: &'static str,
    f: impl FnOnce() -> Result<T>,
    counts: impl Fn(&T) -> Option<Counts>,
) -> Result<T> {
    println!("\n==== xtask test: {name} ====");
    let start = Instant::now();
    let value = f().with_context(|| format!("stage `{name}` failed"))?;
    done.push(Stage {
        name,
        took: start.elapsed(),
        counts: counts(&value),
    });
    Ok(value)
}

fn no_counts<T>(_: &T) -> Option<Counts> {
    None
}

fn stages(opts: &TestOptions, done: &mut Vec<Stage>) -> Result<()> {
    let tc = stage(done, "bootstrap", bootstrap::ensure, no_counts)?;
    stage(
        done,
        "fmt",
        || {
            run(Command::new("cargo")
                .current_dir(util::workspace_root())
                .args(["fmt", "--all", "--", "--check"]))
            .context("run `cargo fmt --all` to fix")
        },
        no_counts,
    )?;
    stage(
        done,
        "shape",
        || {
            let shape = crate::shape::check(&util::workspace_root())?;
            if shape.ok() {
                return Ok(());
            }
            eprint!("{}", shape.render());
            anyhow::bail!("the code's shape is broken (above); `cargo xtask shape` shows it")
        },
        no_counts,
    )?;
    stage(
        done,
        "clippy + build",
        || {
            // One compile of the workspace serves clippy and the tests (see [`cargo`]).
            run(cargo(&tc)?.args(["test", "--workspace", "--exclude", "damon-ebpf", "--no-run"]))
                .context("clippy's lints or the build failed (above); `cargo clippy --workspace --exclude damon-ebpf --all-targets` shows the lints")
        },
        no_counts,
    )?;
    stage(
        done,
        "clippy eBPF",
        || {
            // The eBPF crate builds only for the bpf target, with nightly and build-std.
            run(cargo(&tc)?
                .env_remove(WRAPPER)
                .env_remove("CLIPPY_ARGS")
                .args(["+nightly", "clippy", "-p", "damon-ebpf", "--release"])
                .args(["--target", "bpfel-unknown-none", "-Z", "build-std=core"])
                .args(["--", "-D", "warnings"]))
        },
        no_counts,
    )?;
    stage(
        done,
        "host tests",
        || {
            let mut c = cargo(&tc)?;
            c.args(["test", "--workspace", "--exclude", "damon-ebpf"]);
            cargo_test(c)
        },
        |c| Some(*c),
    )?;
    if opts.skip_vm {
        println!("\n==== xtask test: VM tests skipped (--skip-vm) ====");
        return Ok(());
    }
    let bin = stage(done, "build-static", || build::build_static(&tc), no_counts)?;
    stage(done, "VM tests", || vm_stage(&tc, &bin), |c| Some(*c))?;
    Ok(())
}

/// The VM stage: every guest test file, in lanes (see [`vm_lanes`]).
fn vm_stage(tc: &Toolchain, bin: &std::path::Path) -> Result<Counts> {
    let targets = vm_test_targets()?;
    // The host packages once, before the lanes start: on a fresh machine every lane's first
    // guest would find them missing at the same moment.
    damon_lab::host::ensure()?;
    // Build every test binary once, before the lanes start.
    let mut build = cargo(tc)?;
    build.args(["test", "-p", "damon-lab", "--no-run"]);
    for target in &targets {
        build.args(["--test", target]);
    }
    run(&mut build)?;
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let env = std::env::var("DAMON_TRACE_VM_LANES").ok();
    let lanes = vm_lanes::lane_count(cores, env.as_deref())?;
    let plan = vm_lanes::plan(&targets, lanes, vm_lanes::seconds_of);
    let counts = vm_lanes::run(&plan, |files| {
        let mut c = cargo(tc)?;
        // Every test file runs, so one failure does not hide the others.
        c.args(["test", "-p", "damon-lab", "--no-fail-fast"]);
        for target in files {
            c.args(["--test", target]);
        }
        // One guest at a time per lane: a TCG guest keeps one host core busy.
        c.args(["--", "--ignored", "--test-threads=1"])
            .env("DAMON_TRACE_BIN", bin);
        Ok(c)
    })?;
    if counts.passed == 0 {
        bail!("no VM test ran (lab/tests/vm*.rs should hold #[ignore]d `vm_` tests)");
    }
    Ok(counts)
}

/// The VM test files: every `lab/tests/vm*.rs` (damon-lab's), as cargo test target names.
fn vm_test_targets() -> Result<Vec<String>> {
    let dir = util::workspace_root().join("lab/tests");
    let mut targets = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if stem.starts_with("vm") && path.extension().is_some_and(|e| e == "rs") {
            targets.push(stem.to_owned());
        }
    }
    targets.sort();
    if targets.is_empty() {
        bail!("no VM test file in {}", dir.display());
    }
    Ok(targets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_test_files_are_found() {
        let targets = vm_test_targets().expect("lab/tests readable");
        assert!(targets.contains(&"vm".to_owned()), "{targets:?}");
        assert!(targets.iter().all(|t| t.starts_with("vm")), "{targets:?}");
    }
}
