//! bpftrace for the guest: Debian's `bpftrace` package of the guest kernel's suite and the
//! shared libraries it needs (its `Depends` closure, glibc and the dynamic loader included),
//! unpacked once into `<cache>/bpftrace/<suite>/<version>/root` and merged into the guest's `/`
//! ([`crate::vm::VmOptions::trees`]). Fetched through the same private apt instance as the
//! kernels, so through the mirror the machine's apt configuration names.
use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::{Context as _, Result, bail};

use crate::{
    apt::Apt,
    util::{self, status},
};

/// Where bpftrace is in the guest.
pub const GUEST_BIN: &str = "/usr/bin/bpftrace";

/// Unpacked parts the benchmark's bpftrace never opens: documentation, the example scripts,
/// the ahead-of-time runtime, glibc's charset converters. Pruned to keep the initramfs (which
/// the guest holds in RAM) small.
const PRUNE: &[&str] = &[
    "usr/share",
    "usr/include",
    "usr/sbin",
    "usr/bin/bpftrace-aotrt",
    "usr/lib/x86_64-linux-gnu/gconv",
];

/// The unpacked root holding `usr/bin/bpftrace` for `suite`, fetching it if the cache lacks the
/// suite's current version (or using the cached one when the mirror cannot be reached).
pub fn ensure(suite: &str) -> Result<PathBuf> {
    let cache = util::cache_dir()?;
    let base = cache.join("bpftrace").join(suite);
    let _lock = util::lock(&base.join("lock"))?;
    let marker = base.join("version");
    let cached = fs::read_to_string(&marker)
        .ok()
        .map(|v| base.join(v.trim()).join("root"))
        .filter(|r| r.join("usr/bin/bpftrace").is_file());
    let version = match Apt::for_suite(&cache, suite).and_then(|(apt, _)| {
        let v = apt.version("bpftrace")?;
        Ok((apt, v))
    }) {
        Ok(v) => v,
        Err(e) => {
            return match cached {
                Some(root) => {
                    status(
                        "bpftrace",
                        format!("warning: {e:#}; using cached {}", root.display()),
                    );
                    Ok(root)
                }
                None => Err(e.context(format!("no cached bpftrace for {suite}"))),
            };
        }
    };
    let (apt, version) = version;
    let dir = base.join(&version);
    let root = dir.join("root");
    if root.join("usr/bin/bpftrace").is_file() {
        util::write_atomic(&marker, version.as_bytes())?;
        status(
            "bpftrace",
            format!("{version} ({suite}) cached at {}", root.display()),
        );
        return Ok(root);
    }
    let packages = apt.closure("bpftrace")?;
    let work = dir.join(format!("tmp-{}", std::process::id()));
    let _ = fs::remove_dir_all(&work);
    let debs = work.join("debs");
    let unpacked = work.join("root");
    fs::create_dir_all(&debs).with_context(|| format!("creating {}", debs.display()))?;
    fs::create_dir_all(&unpacked)?;
    let start = Instant::now();
    let mut args = vec!["download"];
    args.extend(packages.iter().map(String::as_str));
    apt.run("apt-get", &args, Some(&debs))?;
    let mut files: Vec<PathBuf> = fs::read_dir(&debs)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .collect();
    files.sort();
    if files.len() != packages.len() {
        bail!(
            "apt-get download of {} packages left {} .deb files in {}",
            packages.len(),
            files.len(),
            debs.display()
        );
    }
    for deb in &files {
        util::run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&unpacked))?;
    }
    for p in PRUNE {
        let p = unpacked.join(p);
        let _ = if p.is_dir() {
            fs::remove_dir_all(p)
        } else {
            fs::remove_file(p)
        };
    }
    merge_usr(&unpacked)?;
    let _ = fs::remove_dir_all(&debs);
    if !unpacked.join("usr/bin/bpftrace").is_file() {
        bail!("the bpftrace package has no usr/bin/bpftrace");
    }
    let _ = fs::remove_dir_all(&root);
    fs::rename(&unpacked, &root)
        .with_context(|| format!("moving {} to {}", unpacked.display(), root.display()))?;
    let _ = fs::remove_dir_all(&work);
    util::write_atomic(&marker, version.as_bytes())?;
    status(
        "bpftrace",
        format!(
            "{version} ({suite}) and {} libraries unpacked at {} in {:.1} s",
            packages.len() - 1,
            root.display(),
            start.elapsed().as_secs_f64()
        ),
    );
    Ok(root)
}

/// Debian is merged-/usr: the loader is `/lib64/ld-linux-x86-64.so.2`, which base-files makes a
/// symlink into `/usr`. Packages unpacked without base-files need those links; anything a
/// package put at the top level (older layouts) moves under `usr/` first.
fn merge_usr(root: &Path) -> Result<()> {
    for top in ["lib", "lib64"] {
        let path = root.join(top);
        let usr = root.join("usr").join(top);
        if path.is_dir() && !path.is_symlink() {
            fs::create_dir_all(&usr)?;
            util::run(
                Command::new("cp")
                    .arg("-a")
                    .arg(format!("{}/.", path.display()))
                    .arg(&usr),
            )?;
            fs::remove_dir_all(&path)?;
        }
        if !path.is_symlink() {
            fs::create_dir_all(&usr)?;
            std::os::unix::fs::symlink(format!("usr/{top}"), &path)
                .with_context(|| format!("linking {}", path.display()))?;
        }
    }
    Ok(())
}
