//! A Debian system for a guest that boots with systemd as PID 1 (the packaging tests: `apt
//! install` of the .deb, the `damon-trace-serve` unit, sudo, man, bash completion).
//!
//! Made once with `debootstrap --variant=minbase` (mirror from the machine's apt configuration,
//! see [`crate::apt::system_debian_mirror`]), configured (a sudo user, no gettys or timers,
//! a fixed machine id) and packed as an uncompressed newc cpio at
//! `<cache>/systemd-guest/<suite>-<key>/system.cpio`, where the key hashes the suite, the
//! package list and the configuration script: changing any of them makes a new image. The image
//! holds no kernel and no modules (the 7.x kernels have virtio_console built in and the root is
//! the initramfs' tmpfs), so one image serves every kernel.
//!
//! Each boot appends a small second cpio ([`overlay`]) to a copy of it: `/init` (systemd), the
//! command and a oneshot unit `damon-vm.service` that runs it once `multi-user.target` is
//! reached, prints the harness's marker lines on the serial console, ships `/out` through the
//! virtio port exactly as the busybox `/init` does (see [`crate::initramfs::init_script`]), and
//! powers the guest off.
use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::{Context as _, Result, ensure};

use crate::{
    apt,
    initramfs::{self, Cpio},
    util::{self, status},
};

/// The Debian suite of the image.
pub const SUITE: &str = "trixie";
/// What the image holds beyond minbase.
pub const PACKAGES: &[&str] = &[
    "systemd",
    "systemd-sysv",
    "libnss-systemd",
    "init-system-helpers",
    "dbus",
    "sudo",
    "man-db",
    "bash-completion",
    "wget",
    "kmod",
    "libcap2-bin",
    "procps",
];
/// Guest RAM for this system, in MiB: the initrd (a few hundred MiB) is in RAM while the
/// kernel unpacks it into the tmpfs root, which then holds the whole system.
pub const GUEST_MIB: u32 = 2048;
/// The unprivileged user of the tests, in group `sudo` (no password asked).
pub const USER: &str = "alice";

/// Run in the chroot once debootstrap is done.
const CONFIGURE: &str = r#"set -e
useradd --create-home --shell /bin/bash --groups sudo alice
echo 'alice ALL=(ALL:ALL) NOPASSWD: ALL' > /etc/sudoers.d/alice
chmod 0440 /etc/sudoers.d/alice
echo damon-vm > /etc/hostname
printf '127.0.0.1\tlocalhost\n127.0.1.1\tdamon-vm\n' > /etc/hosts
# Not a first boot (no systemd-firstboot prompt on the console).
echo 5d3b1f2a8c7e4d6f9a0b1c2d3e4f5a6b > /etc/machine-id
: > /etc/fstab
# Nothing on the serial console but the harness, and nothing that runs by the clock.
for u in serial-getty@ttyS0.service getty@tty1.service console-getty.service \
    systemd-firstboot.service apt-daily.timer apt-daily-upgrade.timer man-db.timer \
    dpkg-db-backup.timer e2scrub_all.timer fstrim.timer systemd-tmpfiles-clean.timer; do
    ln -sf /dev/null /etc/systemd/system/$u
done
systemctl set-default multi-user.target
# The guest has no network: apt works from local .deb files only.
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc/* /usr/share/locale/* \
    /usr/share/info/* /var/log/*.log
"#;

/// The cached image, made when missing: the path of `system.cpio`.
pub fn ensure() -> Result<PathBuf> {
    let cache = util::cache_dir()?;
    let dir = cache
        .join("systemd-guest")
        .join(format!("{SUITE}-{:016x}", key()));
    let image = dir.join("system.cpio");
    let _lock = util::lock(&dir.join("lock"))?;
    if image.is_file() {
        status("sysimage", format!("cached at {}", image.display()));
        return Ok(image);
    }
    ensure!(
        util::is_root(),
        "making the systemd guest image needs root (debootstrap, chroot)"
    );
    let missing: Vec<&str> = ["debootstrap", "cpio"]
        .into_iter()
        .filter(|tool| util::which(tool).is_none())
        .collect();
    if !missing.is_empty() {
        crate::host::apt_install(&missing)?;
    }
    let mirror = apt::system_debian_mirror()?;
    let root = dir.join(format!("root.tmp{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    let start = Instant::now();
    status(
        "sysimage",
        format!("debootstrap {SUITE} from {mirror} into {}", root.display()),
    );
    util::run(
        Command::new("debootstrap")
            .arg("--variant=minbase")
            .arg(format!("--include={}", PACKAGES.join(",")))
            .arg(SUITE)
            .arg(&root)
            .arg(&mirror)
            .stdout(std::io::stderr()),
    )?;
    util::run(
        Command::new("chroot")
            .arg(&root)
            .args(["/bin/sh", "-c", CONFIGURE])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(std::io::stderr()),
    )
    .context("configuring the systemd guest image")?;
    let tmp = image.with_extension(format!("tmp{}", std::process::id()));
    // GNU cpio keeps owners, modes and hard links; name-sorted for a reproducible archive.
    util::run(Command::new("sh").current_dir(&root).arg("-c").arg(format!(
        "find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc > {}",
        initramfs::shell_quote(&tmp.display().to_string())
    )))
    .context("packing the systemd guest image")?;
    fs::rename(&tmp, &image)?;
    let _ = fs::remove_dir_all(&root);
    remove_stale(&dir);
    let size = fs::metadata(&image)?.len();
    status(
        "sysimage",
        format!(
            "{} ({} MiB) made in {:.0} s",
            image.display(),
            size >> 20,
            start.elapsed().as_secs_f64()
        ),
    );
    Ok(image)
}

/// Removes the images of other recipes beside `current` (each is a few hundred MiB).
fn remove_stale(current: &Path) {
    let Some(parent) = current.parent() else {
        return;
    };
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path != current && path.join("system.cpio").is_file() {
            status("sysimage", format!("removing the stale {}", path.display()));
            let _ = fs::remove_dir_all(&path);
        }
    }
}

/// The image's cache key: [`key_of`] its recipe.
fn key() -> u64 {
    key_of(SUITE, PACKAGES, CONFIGURE)
}

/// FNV-1a over everything that makes an image: the suite, the packages, the configuration.
fn key_of(suite: &str, packages: &[&str], configure: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let recipe = format!("{suite}\n{}\n{configure}", packages.join(","));
    for b in recipe.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// What one boot adds to the image.
pub struct Overlay<'a> {
    pub cmd: &'a str,
    pub env: &'a [(String, String)],
    /// (host path, absolute guest path); their parent directories are (re)made root-owned
    /// 0755, so put them under `/root` or `/srv`, not under a user's home or `/tmp`.
    pub files: &'a [(PathBuf, String)],
    pub nonce: &'a str,
}

/// The unit that runs the command once the system is up.
const UNIT: &str = "[Unit]
Description=damon-vm: the harness's command
After=multi-user.target

[Service]
Type=exec
ExecStart=/etc/damon-vm/run
StandardInput=null
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0
TTYReset=no
TTYVHangup=no
";

/// The unit's script: the same protocol as the busybox `/init` (ready marker, command, /out as a
/// tar on the virtio port, exit marker, power off).
fn run_script(o: &Overlay<'_>) -> Result<String> {
    let env = initramfs::env_exports(o.env)?;
    Ok(format!(
        r#"#!/bin/sh
# Generated by the xtask VM harness (systemd guest): run the command, ship /out, power off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=vt100
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
mountpoint -q /sys/kernel/debug || mount -t debugfs debugfs /sys/kernel/debug
mkdir -p /out
{}"#,
        initramfs::protocol(
            o.nonce,
            &env,
            r#"sh -c "$(cat /etc/damon-vm/cmd)" </dev/null"#,
            "/run",
            "systemctl poweroff --force --force",
        )
    ))
}

/// Writes `image` followed by the boot's overlay to `path` (the kernel unpacks concatenated
/// newc archives in order, later entries replacing earlier ones).
pub fn write_initrd(image: &Path, o: &Overlay<'_>, path: &Path) -> Result<()> {
    fs::copy(image, path)
        .with_context(|| format!("copying {} to {}", image.display(), path.display()))?;
    let mut c = Cpio::default();
    c.symlink("init", "usr/lib/systemd/systemd");
    c.parents("etc/damon-vm/cmd");
    c.file("etc/damon-vm/cmd", 0o644, o.cmd.as_bytes());
    c.file("etc/damon-vm/run", 0o755, run_script(o)?.as_bytes());
    c.parents("etc/systemd/system/multi-user.target.wants/x");
    c.file(
        "etc/systemd/system/damon-vm.service",
        0o644,
        UNIT.as_bytes(),
    );
    c.symlink(
        "etc/systemd/system/multi-user.target.wants/damon-vm.service",
        "/etc/systemd/system/damon-vm.service",
    );
    for (host, guest) in o.files {
        let rel = guest.strip_prefix('/').filter(|r| !r.is_empty());
        let rel = rel.with_context(|| format!("guest path `{guest}` must be absolute"))?;
        let data = fs::read(host).with_context(|| format!("reading {}", host.display()))?;
        if rel.contains('/') {
            c.parents(rel);
        }
        c.file(rel, 0o644, &data);
    }
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    std::io::Write::write_all(&mut f, &c.finish())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overlay<'a>(files: &'a [(PathBuf, String)]) -> Overlay<'a> {
        Overlay {
            cmd: "true",
            env: &[],
            files,
            nonce: "n1",
        }
    }

    #[test]
    fn the_unit_script_speaks_the_harness_protocol_in_order() {
        let s = run_script(&overlay(&[])).unwrap();
        let at = |needle: &str| s.find(needle).unwrap_or_else(|| panic!("{needle}: {s}"));
        let ready = at(&initramfs::ready_marker("n1"));
        let cmd = at("sh -c \"$(cat /etc/damon-vm/cmd)\" </dev/null");
        let out = at(initramfs::out_marker_prefix());
        let exit = at(&format!("{}$rc id=n1", initramfs::exit_marker_prefix()));
        let off = at("systemctl poweroff --force --force");
        assert!(ready < cmd && cmd < out && out < exit && exit < off, "{s}");
        let env = [("A B".to_owned(), "v".to_owned())];
        let bad = Overlay {
            env: &env,
            ..overlay(&[])
        };
        assert!(run_script(&bad).is_err());
    }

    #[test]
    fn the_initrd_is_the_image_then_the_overlay() {
        let Some(cpio) = util::which("cpio") else {
            return;
        };
        let t = tempfile::tempdir().unwrap();
        let image = t.path().join("image.cpio");
        let mut base = Cpio::default();
        base.file("etc/os-release", 0o644, b"ID=debian\n");
        fs::write(&image, base.finish()).unwrap();
        let extra = t.path().join("x.deb");
        fs::write(&extra, b"deb").unwrap();
        let files = [(extra, "/srv/x.deb".to_owned())];
        let initrd = t.path().join("initrd");
        write_initrd(&image, &overlay(&files), &initrd).unwrap();
        let bytes = fs::read(&initrd).unwrap();
        assert!(bytes.starts_with(&fs::read(&image).unwrap()));
        // GNU cpio reads one archive: the overlay is the second, right after the image.
        let second = t.path().join("second");
        fs::write(
            &second,
            &bytes[fs::metadata(&image).unwrap().len() as usize..],
        )
        .unwrap();
        let out = Command::new(cpio)
            .args(["-t", "-F"])
            .arg(&second)
            .output()
            .unwrap();
        let names = String::from_utf8(out.stdout).unwrap();
        for name in [
            "init",
            "etc/damon-vm/run",
            "etc/systemd/system/damon-vm.service",
            "etc/systemd/system/multi-user.target.wants/damon-vm.service",
            "srv/x.deb",
        ] {
            assert!(names.lines().any(|l| l == name), "{name} in {names}");
        }
    }

    #[test]
    fn the_cache_key_follows_the_recipe() {
        let base = key_of("trixie", &["systemd", "sudo"], "set -e");
        assert_eq!(base, key_of("trixie", &["systemd", "sudo"], "set -e"));
        assert_ne!(base, key_of("sid", &["systemd", "sudo"], "set -e"));
        assert_ne!(base, key_of("trixie", &["systemd"], "set -e"));
        assert_ne!(base, key_of("trixie", &["systemd", "sudo"], "set -eu"));
        assert_eq!(key(), key_of(SUITE, PACKAGES, CONFIGURE));
    }
}
