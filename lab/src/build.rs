//! `build-static` and `dist`'s binary: the musl `damon-trace`, in the release profile (the
//! one the VM's initramfs carries) or the dist profile (stripped, optimised across crates:
//! the one that ships). Only the VM tests' binary has the instrument commands (damon-user's
//! feature `instruments`: `bench-loop`, `disturb-loop`, `bench-decode`, `bench-floor`,
//! `bench-heatmap`); the shipped one has not.
use std::{path::PathBuf, process::Command};

use anyhow::{Context as _, Result};

use crate::{
    bootstrap::{MUSL_TARGET, Toolchain},
    elf,
    util::{self, run, status},
};

/// Builds `damon-trace` for musl in release mode and returns its path, checked to be static.
pub fn build_static(tc: &Toolchain) -> Result<PathBuf> {
    build_musl(tc, "build-static", "release", None, INSTRUMENTS)
}

/// The environment variable that builds the eBPF object without its `probe-log` feature
/// (damon-user's build.rs reads it).
pub const NO_PROBE_LOG_ENV: &str = "DAMON_TRACE_EBPF_NO_PROBE_LOG";

/// [`build_static`] without the probes' log calls compiled in (the benchmark's
/// `stream-ksession-nolog`), in a target directory of its own so neither build undoes the
/// other.
pub fn build_static_without_probe_log(tc: &Toolchain) -> Result<PathBuf> {
    let dir = util::target_dir().join("no-probe-log");
    build_musl(
        tc,
        "build-static-no-probe-log",
        "release",
        Some(&dir),
        INSTRUMENTS,
    )
}

/// Builds `damon-trace` for musl in the workspace's `dist` profile (stripped, fat LTO) and
/// returns its path, checked to be static.
pub fn build_dist(tc: &Toolchain) -> Result<PathBuf> {
    build_musl(tc, "dist", "dist", None, &[])
}

/// damon-user's features of the VM tests' and benchmarks' binaries: the instrument commands.
pub const INSTRUMENTS: &[&str] = &["--features", "instruments"];

/// With `no_log_dir`, the build without the probes' log calls, into that target directory;
/// `features`: cargo's feature arguments.
fn build_musl(
    tc: &Toolchain,
    step: &str,
    profile: &str,
    no_log_dir: Option<&std::path::Path>,
    features: &[&str],
) -> Result<PathBuf> {
    let mut args = vec![
        "build",
        "--profile",
        profile,
        "--target",
        MUSL_TARGET,
        "-p",
        "damon-user",
    ];
    args.extend(features);
    status(step, format!("cargo {}", args.join(" ")));
    let mut cargo = Command::new("cargo");
    cargo
        .current_dir(util::workspace_root())
        .args(args)
        // damon-user's build.rs runs aya-build, whose nightly cargo must find bpf-linker.
        .env("PATH", util::path_with(&tc.bpf_linker_dir)?);
    let target_dir = match no_log_dir {
        Some(dir) => {
            cargo
                .env(NO_PROBE_LOG_ENV, "1")
                .env("CARGO_TARGET_DIR", dir);
            dir.to_path_buf()
        }
        None => util::target_dir(),
    };
    run(&mut cargo).context("building the static damon-trace (see the compiler output above)")?;
    let bin = target_dir
        .join(MUSL_TARGET)
        .join(profile)
        .join("damon-trace");
    elf::ensure_static(&bin)?;
    let size = std::fs::metadata(&bin)
        .with_context(|| format!("{} was not produced", bin.display()))?
        .len();
    status(
        step,
        format!("{} (static, {} KiB)", bin.display(), size / 1024),
    );
    Ok(bin)
}
