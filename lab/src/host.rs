//! Host packages the VM harness needs, installed from Debian's archive when missing.
use std::{path::PathBuf, process::Command};

use anyhow::{Context as _, Result, bail};

use crate::{
    elf,
    util::{self, output, run, status},
};

/// Executables of the VM harness.
#[derive(Debug, Clone)]
pub struct HostTools {
    pub qemu: PathBuf,
    /// A statically linked busybox: the guest's shell and userland.
    pub busybox: PathBuf,
}

fn dpkg_installed(pkg: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", pkg])
        .output()
        .is_ok_and(|o| {
            o.status.success()
                && String::from_utf8_lossy(&o.stdout).contains("install ok installed")
        })
}

/// The file `pkg` installs whose path ends in `suffix` (`dpkg -L`), e.g. busybox-static's
/// `/bin/busybox`.
fn dpkg_file(pkg: &str, suffix: &str) -> Result<PathBuf> {
    let files = output(Command::new("dpkg").args(["-L", pkg]))?;
    files
        .lines()
        .map(PathBuf::from)
        .find(|p| p.to_string_lossy().ends_with(suffix) && p.is_file())
        .with_context(|| format!("package {pkg} lists no file *{suffix}; reinstall it: apt-get install --reinstall {pkg}"))
}

/// `apt-get install` of those of `pkgs` not yet installed, as root, updating the package lists
/// first if that fails. Guest-test lanes start at once on a fresh machine and each finds the
/// same packages missing: one lock file under the cache serialises them (the later ones then
/// find the packages there), and apt waits for the dpkg lock that any other apt run holds
/// instead of failing at once.
pub(crate) fn apt_install(pkgs: &[&str]) -> Result<()> {
    if !util::is_root() {
        bail!(
            "missing Debian packages {pkgs:?}; install them as root: apt-get install {}",
            pkgs.join(" ")
        );
    }
    let _lock = util::lock(&util::cache_dir()?.join("apt-install.lock"))?;
    let pkgs: Vec<&str> = pkgs
        .iter()
        .copied()
        .filter(|p| !dpkg_installed(p))
        .collect();
    if pkgs.is_empty() {
        return Ok(());
    }
    status(
        "host packages",
        format!("apt-get install {}", pkgs.join(" ")),
    );
    let apt = |args: &[&str]| {
        let mut c = Command::new("apt-get");
        // apt's progress goes to stderr with the rest of xtask's: stdout is the command's
        // result (a guest's output, patch-ab's table), which a fresh machine must not change.
        c.args(["-q", "-o", DPKG_LOCK_WAIT])
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(std::io::stderr());
        c
    };
    let install = || run(apt(&["install", "-y", "--no-install-recommends"]).args(&pkgs));
    if install().is_ok() {
        return Ok(());
    }
    // A fresh machine has empty or stale package lists.
    run(&mut apt(&["update"])).context("apt-get update")?;
    install().with_context(|| format!("installing {pkgs:?}"))
}

/// How long apt-get waits for another apt or dpkg run to release the dpkg lock (seconds).
const DPKG_LOCK_WAIT: &str = "DPkg::Lock::Timeout=600";

/// Ensures qemu-system-x86 and busybox-static are installed and returns their executables.
pub fn ensure() -> Result<HostTools> {
    let mut missing = Vec::new();
    if util::which("qemu-system-x86_64").is_none() {
        missing.push("qemu-system-x86");
    }
    if !dpkg_installed("busybox-static") {
        missing.push("busybox-static");
    }
    for tool in ["dpkg-deb", "tar"] {
        if util::which(tool).is_none() {
            bail!("`{tool}` is missing; the VM harness needs a Debian host with dpkg and tar");
        }
    }
    if !missing.is_empty() {
        apt_install(&missing)?;
    }
    let qemu = util::which("qemu-system-x86_64")
        .context("qemu-system-x86_64 still missing after install")?;
    let busybox = dpkg_file("busybox-static", "bin/busybox")?;
    elf::ensure_static(&busybox)?;
    status(
        "host packages",
        format!("{} and {}", qemu.display(), busybox.display()),
    );
    Ok(HostTools { qemu, busybox })
}

/// `zstd` (Debian package zstd), installed when missing: the kernels' payloads are unpacked on
/// the host for a direct boot ([`crate::kernel::pvh`]).
pub fn ensure_zstd() -> Result<PathBuf> {
    if let Some(zstd) = util::which("zstd") {
        return Ok(zstd);
    }
    apt_install(&["zstd"])?;
    util::which("zstd").context("zstd still missing after installing zstd")
}

/// `xz` (Debian package xz-utils), installed when missing: some kernels ship their modules as
/// `.ko.xz`, which the guest's busybox insmod is not relied on to read, so the host unpacks them.
pub fn ensure_xz() -> Result<PathBuf> {
    if let Some(xz) = util::which("xz") {
        return Ok(xz);
    }
    apt_install(&["xz-utils"])?;
    util::which("xz").context("xz still missing after installing xz-utils")
}
