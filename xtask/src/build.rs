//! `build-static`: the musl `damon-trace` binary that the VM's initramfs carries.
use std::{path::PathBuf, process::Command};

use anyhow::{Context as _, Result};

use crate::{
    bootstrap::{MUSL_TARGET, Toolchain},
    elf,
    util::{self, run, status},
};

/// Builds `damon-trace` for musl in release mode and returns its path, checked to be static.
pub fn build_static(tc: &Toolchain) -> Result<PathBuf> {
    status(
        "build-static",
        format!("cargo build --release --target {MUSL_TARGET} -p damon-user"),
    );
    run(Command::new("cargo")
        .current_dir(util::workspace_root())
        .args([
            "build",
            "--release",
            "--target",
            MUSL_TARGET,
            "-p",
            "damon-user",
        ])
        // damon-user's build.rs runs aya-build, whose nightly cargo must find bpf-linker.
        .env("PATH", util::path_with(&tc.bpf_linker_dir)?))
    .context("building the static damon-trace (see the compiler output above)")?;
    let bin = util::target_dir()
        .join(MUSL_TARGET)
        .join("release/damon-trace");
    elf::ensure_static(&bin)?;
    let size = std::fs::metadata(&bin)
        .with_context(|| format!("{} was not produced", bin.display()))?
        .len();
    status(
        "build-static",
        format!("{} (static, {} KiB)", bin.display(), size / 1024),
    );
    Ok(bin)
}
