//! `build-static` and `dist`'s binary: the musl `damon-trace`, in the release profile (the
//! one the VM's initramfs carries) or the dist profile (stripped, optimised across crates:
//! the one that ships).
use std::{path::PathBuf, process::Command};

use anyhow::{Context as _, Result};

use crate::{
    bootstrap::{MUSL_TARGET, Toolchain},
    elf,
    util::{self, run, status},
};

/// Builds `damon-trace` for musl in release mode and returns its path, checked to be static.
pub fn build_static(tc: &Toolchain) -> Result<PathBuf> {
    build_musl(tc, "build-static", "release")
}

/// Builds `damon-trace` for musl in the workspace's `dist` profile (stripped, fat LTO) and
/// returns its path, checked to be static.
pub fn build_dist(tc: &Toolchain) -> Result<PathBuf> {
    build_musl(tc, "dist", "dist")
}

fn build_musl(tc: &Toolchain, step: &str, profile: &str) -> Result<PathBuf> {
    let args = [
        "build",
        "--profile",
        profile,
        "--target",
        MUSL_TARGET,
        "-p",
        "damon-user",
    ];
    status(step, format!("cargo {}", args.join(" ")));
    run(Command::new("cargo")
        .current_dir(util::workspace_root())
        .args(args)
        // damon-user's build.rs runs aya-build, whose nightly cargo must find bpf-linker.
        .env("PATH", util::path_with(&tc.bpf_linker_dir)?))
    .context("building the static damon-trace (see the compiler output above)")?;
    let bin = util::target_dir()
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
