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

/// `apt-get install` of `pkgs` as root, updating the package lists first if that fails.
pub(crate) fn apt_install(pkgs: &[&str]) -> Result<()> {
    if !util::is_root() {
        bail!(
            "missing Debian packages {pkgs:?}; install them as root: apt-get install {}",
            pkgs.join(" ")
        );
    }
    status(
        "host packages",
        format!("apt-get install {}", pkgs.join(" ")),
    );
    let install = || {
        run(Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(pkgs)
            .env("DEBIAN_FRONTEND", "noninteractive"))
    };
    if install().is_ok() {
        return Ok(());
    }
    // A fresh machine has empty or stale package lists.
    run(Command::new("apt-get").args(["update", "-q"])).context("apt-get update")?;
    install().with_context(|| format!("installing {pkgs:?}"))
}

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

/// `xz` (Debian package xz-utils), installed when missing: some kernels ship their modules as
/// `.ko.xz`, which the guest's busybox insmod is not relied on to read, so the host unpacks them.
pub fn ensure_xz() -> Result<PathBuf> {
    if let Some(xz) = util::which("xz") {
        return Ok(xz);
    }
    apt_install(&["xz-utils"])?;
    util::which("xz").context("xz still missing after installing xz-utils")
}
