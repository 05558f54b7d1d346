//! Guest kernels: stock Debian kernels resolved through each suite's `linux-image-amd64` meta
//! package (never a pinned version the archive will drop), downloaded once and cached as
//! `<cache>/kernels/<release>/vmlinuz`, or any bzImage given by path. A kernel whose virtio PCI
//! transport or virtio console is a module (Debian 6.1) also gets those modules and the ones
//! they depend on, cached under `<cache>/kernels/<release>/modules/`, for /init to load.
use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    fmt, fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    str::FromStr,
    time::Instant,
};

use anyhow::{Context as _, Result, bail};

use crate::{
    apt::Apt,
    elf, host,
    util::{self, status},
};

pub use self::profile::{KernelProfile, PROFILES, Preemption};

/// Which kernel the guest boots: a Debian kernel of the matrix ([`PROFILES`]), or a bzImage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kernel {
    /// A Debian kernel: what it is and can do is its profile's.
    Debian(&'static KernelProfile),
    /// A bzImage on the host.
    Path(PathBuf),
}

/// The names `--kernel` takes, for help texts and errors: "7.3 (Debian trixie-backports), …".
pub fn kernel_names() -> String {
    let names: Vec<String> = PROFILES
        .iter()
        .map(|p| Kernel::Debian(p).to_string())
        .collect();
    names.join(", ")
}

impl Kernel {
    /// Debian trixie-backports' 7.3.
    pub const DEBIAN_7_3: Kernel = Kernel::Debian(&profile::DEBIAN_7_3);
    /// Debian sid's 7.2.
    pub const DEBIAN_7_2: Kernel = Kernel::Debian(&profile::DEBIAN_7_2);
    /// Debian trixie's 6.12.
    pub const DEBIAN_6_12: Kernel = Kernel::Debian(&profile::DEBIAN_6_12);
    /// Debian bookworm's 6.1.
    pub const DEBIAN_6_1: Kernel = Kernel::Debian(&profile::DEBIAN_6_1);

    /// Every Debian kernel of the matrix, newest first.
    pub fn all_debian() -> impl Iterator<Item = Kernel> {
        PROFILES.iter().map(Kernel::Debian)
    }

    /// The Debian kernel's profile; None for a bzImage given by path.
    pub fn profile(&self) -> Option<&'static KernelProfile> {
        match self {
            Self::Debian(p) => Some(p),
            Self::Path(_) => None,
        }
    }

    /// The Debian suite that ships this kernel.
    pub fn suite(&self) -> Option<&'static str> {
        self.profile().map(|p| p.suite)
    }

    /// The name `--kernel` takes (`7.2`), or a path's file name: for directory names.
    pub fn short_name(&self) -> String {
        match self {
            Self::Debian(p) => p.name.into(),
            Self::Path(p) => p.file_name().map_or_else(
                || p.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            ),
        }
    }

    /// The suite whose userland (e.g. bpftrace) goes with this kernel: a backports suite
    /// carries the kernel, its base release the rest.
    pub fn userland_suite(&self) -> Option<&'static str> {
        self.profile().map(|p| p.userland_suite)
    }

    /// Whether the kernel has this ability; a bzImage given by path has none of them.
    pub fn has(&self, ability: impl Fn(&KernelProfile) -> bool) -> bool {
        self.profile().is_some_and(ability)
    }
}

impl FromStr for Kernel {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match KernelProfile::named(s) {
            Some(p) => Ok(Self::Debian(p)),
            None if Path::new(s).is_file() => Ok(Self::Path(PathBuf::from(s))),
            None => bail!(
                "unknown kernel `{s}`: use {} or a path to a bzImage",
                kernel_names()
            ),
        }
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Debian(p) => write!(f, "{} (Debian {})", p.name, p.suite),
            Self::Path(p) => write!(f, "{}", p.display()),
        }
    }
}

/// A bootable kernel on the host.
#[derive(Debug, Clone)]
pub struct KernelImage {
    pub vmlinuz: PathBuf,
    /// What `uname -r` prints in the guest, read from the bzImage header.
    pub release: String,
    /// Uncompressed modules /init loads, in this order, before the virtio-serial ports are
    /// used: empty when the kernel has the drivers built in.
    pub modules: Vec<PathBuf>,
}

/// The drivers the harness's devices need: the virtio PCI transport and the console whose
/// ports carry /out back. Built into Debian's 6.12 and 7.x kernels, modules in 6.1.
const GUEST_DRIVERS: [&str; 2] = ["virtio_pci", "virtio_console"];

/// In `<cache>/kernels/<release>/`: the files under `modules/` that /init loads, in order, one
/// a line; empty when [`GUEST_DRIVERS`] are built in. Its presence means the check was done.
const MODULE_LIST: &str = "guest-modules";

/// The modules `dir` lists in [`MODULE_LIST`]; None if the list or one of its files is missing.
fn read_module_list(dir: &Path) -> Option<Vec<PathBuf>> {
    let list = fs::read_to_string(dir.join(MODULE_LIST)).ok()?;
    list.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let p = dir.join("modules").join(l.trim());
            p.is_file().then_some(p)
        })
        .collect()
}

/// Returns a bootable kernel, downloading it only when the cache lacks the suite's current one.
pub fn fetch(kernel: &Kernel) -> Result<KernelImage> {
    if let Kernel::Path(path) = kernel {
        let vmlinuz = fs::canonicalize(path)
            .with_context(|| format!("kernel {} not found", path.display()))?;
        let release = elf::kernel_release(&vmlinuz)?;
        status("kernel", format!("{release} from {}", vmlinuz.display()));
        return Ok(KernelImage {
            vmlinuz,
            release,
            modules: Vec::new(),
        });
    }
    let suite = kernel.suite().context("a Debian kernel without a suite")?;
    let cache = util::cache_dir()?;
    let kernels = cache.join("kernels");
    let _lock = util::lock(&kernels.join(format!("{suite}.lock")))?;
    let marker = kernels.join(format!("{suite}.release"));
    let cached = fs::read_to_string(&marker)
        .ok()
        .map(|r| r.trim().to_owned())
        .and_then(|release| {
            let dir = kernels.join(&release);
            // Caches from before the module check have no list: their kernels (6.12, 7.2)
            // have the drivers built in. A list whose modules are gone is no usable cache.
            let modules = match read_module_list(&dir) {
                Some(m) => m,
                None if !dir.join(MODULE_LIST).exists() => Vec::new(),
                None => return None,
            };
            Some(KernelImage {
                vmlinuz: dir.join("vmlinuz"),
                modules,
                release,
            })
        })
        .filter(|k| k.vmlinuz.is_file());

    match resolve_and_download(&cache, &kernels, suite) {
        Ok(k) => {
            util::write_atomic(&marker, k.release.as_bytes())?;
            Ok(k)
        }
        Err(e) => match cached {
            Some(k) => {
                status(
                    "kernel",
                    format!("warning: {e:#}; using cached {}", k.release),
                );
                Ok(k)
            }
            None => Err(e.context(format!(
                "no cached {suite} kernel and fetching one failed; check apt's network access, \
                 or pass --kernel PATH to a bzImage"
            ))),
        },
    }
}

fn resolve_and_download(cache: &Path, kernels: &Path, suite: &str) -> Result<KernelImage> {
    let (apt, mirror) = Apt::for_suite(cache, suite)?;
    // The meta package depends on the versioned image of the current ABI, e.g.
    // linux-image-7.2.13+deb14-amd64, whose name (minus the prefix) is the release.
    let image = apt
        .depends("linux-image-amd64")?
        .into_iter()
        .find(|p| p.starts_with("linux-image-") && p != "linux-image-amd64")
        .with_context(|| {
            format!("linux-image-amd64 in {suite} depends on no versioned linux-image-*")
        })?;
    let abi = image.trim_start_matches("linux-image-").to_owned();
    let cached_dir = kernels.join(&abi);
    let cached = cached_dir.join("vmlinuz");
    if cached.is_file()
        && let Some(modules) = read_module_list(&cached_dir)
    {
        status(
            "kernel",
            format!("{abi} ({suite}) cached at {}", cached.display()),
        );
        return Ok(KernelImage {
            vmlinuz: cached,
            release: abi,
            modules,
        });
    }
    let work = kernels.join(format!("tmp-{suite}-{}", std::process::id()));
    let mut debs = Debs {
        apt: &apt,
        work: work.clone(),
        downloaded: HashMap::new(),
        extracts: 0,
    };
    let result = (|| {
        let (dir, release, builtin) = if cached.is_file() {
            // Cached before the module check: only the check is left to do.
            (cached_dir.clone(), abi.clone(), None)
        } else {
            let (bytes, builtin) = download_vmlinuz(&mut debs, &image, suite)?;
            let release = elf::kernel_release_of(&bytes)
                .with_context(|| format!("the vmlinuz of {suite}'s {abi} is no bzImage"))?;
            if release != abi {
                status(
                    "kernel",
                    format!("warning: package ABI {abi} but the image says {release}"),
                );
            }
            let dir = kernels.join(&release);
            fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            util::write_atomic(&dir.join("vmlinuz"), &bytes)?;
            fs::write(dir.join("source"), format!("{suite} {mirror}\n"))
                .context("writing the kernel source note")?;
            (dir, release, builtin)
        };
        let modules = guest_modules(&mut debs, &image, &abi, builtin, &dir)?;
        let vmlinuz = dir.join("vmlinuz");
        status(
            "kernel",
            format!("{release} ({suite}) cached at {}", vmlinuz.display()),
        );
        Ok(KernelImage {
            vmlinuz,
            release,
            modules,
        })
    })();
    let _ = fs::remove_dir_all(&work);
    result
}

/// Downloads the package holding `image`'s vmlinuz and returns the image's bytes, with the
/// package's `modules.builtin` if it carries one (6.x; 7.x keep it in linux-base-<abi>).
fn download_vmlinuz(
    debs: &mut Debs<'_>,
    image: &str,
    suite: &str,
) -> Result<(Vec<u8>, Option<String>)> {
    // Newer Debian kernels split the image into linux-binary-<abi> (vmlinuz under
    // usr/lib/modules/<abi>/) and leave linux-image-<abi> nearly empty; older ones keep
    // boot/vmlinuz-<abi> in linux-image-<abi>. Try the binary package first, then the image.
    let candidates = packages_of(debs, image, "linux-binary-")?;
    for pkg in &candidates {
        if !debs.apt.has_package(pkg) {
            continue;
        }
        let x = debs.extract(
            pkg,
            &["*vmlinuz*".to_owned(), "*/modules.builtin".to_owned()],
        )?;
        let Some(found) = find_file(&x, |n| n == "vmlinuz" || n.starts_with("vmlinuz-")) else {
            continue;
        };
        let bytes = fs::read(&found).with_context(|| format!("reading {}", found.display()))?;
        let builtin = find_file(&x, |n| n == "modules.builtin")
            .map(|p| fs::read_to_string(&p).with_context(|| format!("reading {}", p.display())))
            .transpose()?;
        return Ok((bytes, builtin));
    }
    bail!("no vmlinuz in any of {candidates:?} ({suite})")
}

/// Makes sure [`GUEST_DRIVERS`] can run in the kernel cached in `dir`: nothing to do when they
/// are built in (as `modules.builtin` says), else their modules and every module those depend
/// on (from each module's `.modinfo`: the packages ship no modules.dep, depmod writes it at
/// install time), uncompressed into `dir/modules/`, listed in load order in [`MODULE_LIST`].
fn guest_modules(
    debs: &mut Debs<'_>,
    image: &str,
    abi: &str,
    builtin: Option<String>,
    dir: &Path,
) -> Result<Vec<PathBuf>> {
    let builtin = match builtin {
        Some(text) => text,
        None => find_builtin(debs, image, abi)?,
    };
    let builtin: BTreeSet<String> = builtin.lines().filter_map(module_name).collect();
    let list = dir.join(MODULE_LIST);
    let mut pending: Vec<String> = GUEST_DRIVERS
        .iter()
        .filter(|d| !builtin.contains(**d))
        .map(|d| (*d).to_owned())
        .collect();
    if pending.is_empty() {
        status(
            "kernel",
            format!("{abi} has {} built in", GUEST_DRIVERS.join(" and ")),
        );
        util::write_atomic(&list, b"")?;
        return Ok(Vec::new());
    }
    // 7.x ship modules in linux-modules-<abi>, 6.x in linux-image-<abi> itself.
    let pkg = packages_of(debs, image, "linux-modules-")?
        .into_iter()
        .find(|p| debs.apt.has_package(p))
        .with_context(|| format!("no package of {abi} to take modules from"))?;
    status(
        "kernel",
        format!(
            "{abi} has {} as modules: taking them from {pkg}",
            pending.join(" and ")
        ),
    );
    // name -> (uncompressed module, its dependencies that are modules too)
    let mut found: BTreeMap<String, (Vec<u8>, Vec<String>)> = BTreeMap::new();
    while !pending.is_empty() {
        // Module names use `_` where file names may use `-`.
        let patterns: Vec<String> = pending
            .iter()
            .map(|n| format!("*/{}.ko*", n.replace('_', "[-_]")))
            .collect();
        let x = debs.extract(&pkg, &patterns)?;
        let mut next = Vec::new();
        for name in &pending {
            let file = find_file(&x, |n| module_name(n).as_deref() == Some(name.as_str()))
                .with_context(|| format!("{pkg} has no module {name}"))?;
            let bytes = read_module(&file)?;
            let deps: Vec<String> = elf::module_depends(&bytes)
                .with_context(|| format!("reading the .modinfo of {}", file.display()))?
                .into_iter()
                .map(|d| d.replace('-', "_"))
                .filter(|d| !builtin.contains(d))
                .collect();
            for d in &deps {
                if !found.contains_key(d) && !pending.contains(d) && !next.contains(d) {
                    next.push(d.clone());
                }
            }
            found.insert(name.clone(), (bytes, deps));
        }
        pending = next;
    }
    let deps: BTreeMap<&str, &[String]> = found
        .iter()
        .map(|(n, (_, d))| (n.as_str(), d.as_slice()))
        .collect();
    let order = load_order(&GUEST_DRIVERS, &deps);
    let mod_dir = dir.join("modules");
    fs::create_dir_all(&mod_dir).with_context(|| format!("creating {}", mod_dir.display()))?;
    let mut files = Vec::new();
    for name in &order {
        let file = format!("{name}.ko");
        util::write_atomic(&mod_dir.join(&file), &found[name].0)?;
        files.push(file);
    }
    status(
        "kernel",
        format!("{abi}: the guest loads {}", order.join(", ")),
    );
    util::write_atomic(&list, format!("{}\n", files.join("\n")).as_bytes())?;
    Ok(files.iter().map(|f| mod_dir.join(f)).collect())
}

/// The packages `image` depends on whose names start with `prefix`, then `image` itself (where
/// a part of the kernel may be, newest layout first).
fn packages_of(debs: &Debs<'_>, image: &str, prefix: &str) -> Result<Vec<String>> {
    let mut pkgs: Vec<String> = debs
        .apt
        .depends(image)?
        .into_iter()
        .filter(|p| p.starts_with(prefix))
        .collect();
    pkgs.push(image.to_owned());
    Ok(pkgs)
}

/// The text of `modules.builtin` from whichever of the kernel's packages ships it
/// (linux-base-<abi> in 7.x, linux-image-<abi> in 6.x).
fn find_builtin(debs: &mut Debs<'_>, image: &str, abi: &str) -> Result<String> {
    let pkgs = packages_of(debs, image, "linux-base-")?;
    for pkg in &pkgs {
        if !debs.apt.has_package(pkg) {
            continue;
        }
        let x = debs.extract(pkg, &["*/modules.builtin".to_owned()])?;
        if let Some(p) = find_file(&x, |n| n == "modules.builtin") {
            return fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()));
        }
    }
    bail!(
        "none of {pkgs:?} has a modules.builtin: cannot tell whether {abi} has {} built in",
        GUEST_DRIVERS.join(" and ")
    )
}

/// `virtio_console` for `kernel/drivers/char/virtio_console.ko` (or `.ko.xz`, or a name with
/// `-`, which module names spell `_`); None for anything else.
fn module_name(path: &str) -> Option<String> {
    let file = path.trim().rsplit('/').next()?;
    let (stem, _) = file.split_once(".ko")?;
    let rest = &file[stem.len() + 3..];
    (rest.is_empty() || rest.starts_with('.')).then(|| stem.replace('-', "_"))
}

/// A module file's bytes, uncompressed (`.ko.xz` through the host's xz).
fn read_module(path: &Path) -> Result<Vec<u8>> {
    let name = path.to_string_lossy();
    if name.ends_with(".ko") {
        return fs::read(path).with_context(|| format!("reading {}", path.display()));
    }
    if name.ends_with(".ko.xz") {
        let xz = host::ensure_xz()?;
        let out = Command::new(xz)
            .arg("-dc")
            .arg(path)
            .stdin(Stdio::null())
            .output()
            .context("running xz")?;
        if !out.status.success() {
            bail!(
                "xz -dc {} failed: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        return Ok(out.stdout);
    }
    bail!(
        "{} is compressed in a format the harness does not unpack (only .ko and .ko.xz)",
        path.display()
    )
}

/// `roots` and the modules they need, each after its dependencies (only names in `deps`, the
/// modules to load, count; built-in ones are already there).
fn load_order(roots: &[&str], deps: &BTreeMap<&str, &[String]>) -> Vec<String> {
    fn visit<'a>(
        name: &'a str,
        deps: &BTreeMap<&str, &'a [String]>,
        seen: &mut BTreeSet<&'a str>,
        out: &mut Vec<String>,
    ) {
        let Some(&ds) = deps.get(name) else {
            return;
        };
        if !seen.insert(name) {
            return;
        }
        for d in ds {
            visit(d, deps, seen, out);
        }
        out.push(name.to_owned());
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for r in roots {
        visit(r, deps, &mut seen, &mut out);
    }
    out
}

/// Kernel packages downloaded once each into a work dir and unpacked in parts.
struct Debs<'a> {
    apt: &'a Apt,
    work: PathBuf,
    downloaded: HashMap<String, PathBuf>,
    extracts: u32,
}

impl Debs<'_> {
    /// The .deb of `pkg`, downloaded on first use.
    fn deb(&mut self, pkg: &str) -> Result<PathBuf> {
        if let Some(deb) = self.downloaded.get(pkg) {
            return Ok(deb.clone());
        }
        let dir = self.work.join(format!("deb-{}", self.downloaded.len()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let start = Instant::now();
        self.apt.run("apt-get", &["download", pkg], Some(&dir))?;
        let deb = fs::read_dir(&dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|e| e == "deb"))
            .with_context(|| format!("apt-get download {pkg} left no .deb in {}", dir.display()))?;
        let size = fs::metadata(&deb)?.len();
        status(
            "kernel",
            format!(
                "downloaded {pkg} ({:.1} MB in {:.1} s)",
                size as f64 / 1e6,
                start.elapsed().as_secs_f64()
            ),
        );
        self.downloaded.insert(pkg.to_owned(), deb.clone());
        Ok(deb)
    }

    /// Unpacks the members of `pkg` that match any of the tar wildcards `patterns` into a
    /// fresh directory and returns it (empty if none matched). Only these are unpacked: a
    /// kernel package holds ~500 MB of modules.
    fn extract(&mut self, pkg: &str, patterns: &[String]) -> Result<PathBuf> {
        let deb = self.deb(pkg)?;
        self.extracts += 1;
        let dest = self.work.join(format!("x-{}", self.extracts));
        fs::create_dir_all(&dest).with_context(|| format!("creating {}", dest.display()))?;
        let mut dpkg = Command::new("dpkg-deb")
            .arg("--fsys-tarfile")
            .arg(&deb)
            .stdout(Stdio::piped())
            .spawn()
            .context("running dpkg-deb")?;
        let data = dpkg.stdout.take().context("dpkg-deb stdout")?;
        // tar fails when a pattern matched nothing, which is an answer here, not an error:
        // callers look at what was unpacked.
        let _ = Command::new("tar")
            .arg("-x")
            .arg("-C")
            .arg(&dest)
            .arg("--wildcards")
            .args(patterns)
            .stdin(data)
            .stderr(Stdio::null())
            .status()
            .context("running tar")?;
        let dpkg_status = dpkg.wait().context("waiting for dpkg-deb")?;
        if !dpkg_status.success() {
            bail!(
                "dpkg-deb --fsys-tarfile {} failed ({dpkg_status})",
                deb.display()
            );
        }
        Ok(dest)
    }
}

/// The first regular file below `dir` whose name satisfies `wanted`.
fn find_file(dir: &Path, wanted: impl Fn(&str) -> bool) -> Option<PathBuf> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).ok()?.flatten() {
            let path = entry.path();
            let ft = entry.file_type().ok()?;
            if ft.is_dir() {
                stack.push(path);
            } else if ft.is_file() && wanted(&entry.file_name().to_string_lossy()) {
                return Some(path);
            }
        }
    }
    None
}

mod profile;
pub mod pvh;
#[cfg(test)]
mod tests;
