//! A Debian package and the libraries it needs, unpacked once into
//! `<cache>/<package>/<suite>/<version>/root` for a guest's `/` ([`crate::vm::VmOptions::trees`]):
//! bpftrace for the benchmark, Prometheus for the scrape test. Fetched through the same private
//! apt instance as the kernels, so through the mirror the machine's apt configuration names.
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

/// What to unpack.
pub struct Unpack {
    /// The package whose version names the cache folder (and the folder's name).
    pub package: &'static str,
    /// Packages taken with their whole `Depends` closure.
    pub closure_of: &'static [&'static str],
    /// Packages taken without their `Depends` (what the guest runs of them needs none).
    pub alone: &'static [&'static str],
    /// The file, relative to the root, that must be there.
    pub bin: &'static str,
    /// Parts removed after unpacking (the guest holds its initramfs in RAM).
    pub prune: &'static [&'static str],
}

/// The unpacked root holding `u.bin` for `suite`, fetching it if the cache lacks the suite's
/// current version of `u.package` (or using the cached one when the mirror cannot be reached).
pub fn ensure(u: &Unpack, suite: &str) -> Result<PathBuf> {
    let name = u.package;
    let cache = util::cache_dir()?;
    let base = cache.join(name).join(suite);
    let _lock = util::lock(&base.join("lock"))?;
    let marker = base.join("version");
    let cached = fs::read_to_string(&marker)
        .ok()
        .map(|v| base.join(v.trim()).join("root"))
        .filter(|r| r.join(u.bin).is_file());
    let version = match Apt::for_suite(&cache, suite).and_then(|(apt, _)| {
        let v = apt.version(name)?;
        Ok((apt, v))
    }) {
        Ok(v) => v,
        Err(e) => {
            return match cached {
                Some(root) => {
                    status(
                        name,
                        format!("warning: {e:#}; using cached {}", root.display()),
                    );
                    Ok(root)
                }
                None => Err(e.context(format!("no cached {name} for {suite}"))),
            };
        }
    };
    let (apt, version) = version;
    let dir = base.join(&version);
    let root = dir.join("root");
    if root.join(u.bin).is_file() {
        util::write_atomic(&marker, version.as_bytes())?;
        status(
            name,
            format!("{version} ({suite}) cached at {}", root.display()),
        );
        return Ok(root);
    }
    let packages = packages(u, &apt)?;
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
    for p in u.prune {
        let p = unpacked.join(p);
        let _ = if p.is_dir() {
            fs::remove_dir_all(p)
        } else {
            fs::remove_file(p)
        };
    }
    merge_usr(&unpacked)?;
    let _ = fs::remove_dir_all(&debs);
    if !unpacked.join(u.bin).is_file() {
        bail!("the {name} package has no {}", u.bin);
    }
    let _ = fs::remove_dir_all(&root);
    fs::rename(&unpacked, &root)
        .with_context(|| format!("moving {} to {}", unpacked.display(), root.display()))?;
    let _ = fs::remove_dir_all(&work);
    util::write_atomic(&marker, version.as_bytes())?;
    status(
        name,
        format!(
            "{version} ({suite}) and {} more packages unpacked at {} in {:.1} s",
            packages.len() - 1,
            root.display(),
            start.elapsed().as_secs_f64()
        ),
    );
    Ok(root)
}

/// `u.alone`, then the `Depends` closures of `u.closure_of`, each package once.
fn packages(u: &Unpack, apt: &Apt) -> Result<Vec<String>> {
    let mut packages: Vec<String> = u.alone.iter().map(|p| (*p).to_owned()).collect();
    for root in u.closure_of {
        for p in apt.closure(root)? {
            if !packages.contains(&p) {
                packages.push(p);
            }
        }
    }
    Ok(packages)
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
