//! Builds the livepatch modules of a patch under `xtask/patches/<name>/` for one Debian guest
//! kernel, each step cached under `<cache>/livepatch/`:
//!
//! 1. `<suite>/root`: a Debian chroot of the kernel's suite, `debootstrap --variant=minbase`
//!    through the mirror the machine's apt configuration names;
//! 2. inside it Debian's `linux-headers-<release>` (with its BTF-only `vmlinux`), make,
//!    libelf-dev, dwarves (pahole, for module BTF) and the kernel's own compiler, read from the
//!    headers' `CONFIG_CC_VERSION_TEXT`;
//! 3. `modules/<release>/<module>-<key>.ko` per variant, `<key>` a hash of the sources, the
//!    variant, the release and the compiler, so an edited patch rebuilds and nothing else does.
use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::{Context as _, Result, bail, ensure};

use crate::{
    apt,
    util::{self, status},
};

use crate::ab::Side as Variant;

/// Files every patch's `patch.c` may include, from `xtask/patches/common/`.
const COMMON: &str = "common";
/// Present in a chroot once debootstrap finished (a killed debootstrap leaves none).
const CHROOT_READY: &str = ".damon-trace-ready";
/// Sid's Release file may be past its Valid-Until on a mirror snapshot.
const APT_OPTS: [&str; 2] = ["-o", "Acquire::Check-Valid-Until=false"];

/// Where a patch's modules are built, and with what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// `<cache>/livepatch`.
    pub base: PathBuf,
    /// The Debian suite of the guest kernel (and of the chroot).
    pub suite: String,
    /// The guest's `uname -r`, e.g. `7.2.13+deb14-amd64`.
    pub release: String,
}

impl Plan {
    pub fn chroot(&self) -> PathBuf {
        self.base.join(&self.suite).join("root")
    }

    pub fn headers_package(&self) -> String {
        format!("linux-headers-{}", self.release)
    }

    /// The headers' directory inside the chroot.
    pub fn headers_dir(&self) -> String {
        format!("/usr/src/linux-headers-{}", self.release)
    }

    /// `debootstrap --variant=minbase SUITE TARGET MIRROR`.
    pub fn debootstrap_args(&self, target: &Path, mirror: &str) -> Vec<String> {
        vec![
            "--variant=minbase".into(),
            self.suite.clone(),
            target.display().to_string(),
            mirror.into(),
        ]
    }

    /// `apt-get install` inside the chroot: the headers and the tools the module build needs,
    /// plus `compiler` once the headers named it.
    pub fn install_args(&self, compiler: Option<&str>) -> Vec<String> {
        let mut args: Vec<String> = APT_OPTS.iter().map(|s| (*s).to_owned()).collect();
        args.extend(
            ["install", "-y", "-q", "--no-install-recommends"]
                .iter()
                .map(|s| (*s).to_owned()),
        );
        args.push(self.headers_package());
        args.extend(["make", "libelf-dev", "dwarves"].map(String::from));
        args.extend(compiler.map(String::from));
        args
    }

    /// The variant's cached module.
    pub fn module_path(&self, module: &str, key: &str) -> PathBuf {
        self.base
            .join("modules")
            .join(&self.release)
            .join(format!("{module}-{key}.ko"))
    }

    /// `make -C HEADERS M=DIR CC=CC modules`, run in the chroot.
    pub fn make_args(&self, dir: &str, cc: &str) -> Vec<String> {
        vec![
            "-C".into(),
            self.headers_dir(),
            format!("M={dir}"),
            format!("CC={cc}"),
            "modules".into(),
        ]
    }
}

/// The kernel's compiler from the headers' `.config`: (`CONFIG_CC_VERSION_TEXT`, the compiler
/// command, its Debian package), e.g. (`x86_64-linux-gnu-gcc-16 (Debian 16.2.0-4) 16.2.0`,
/// `x86_64-linux-gnu-gcc-16`, `gcc-16`).
pub fn kernel_compiler(config: &str) -> Option<(String, String, String)> {
    let text = config
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_CC_VERSION_TEXT="))?
        .trim()
        .trim_matches('"')
        .to_owned();
    let cc = text.split_whitespace().next()?.to_owned();
    let package = cc
        .rsplit_once("-linux-gnu-")
        .map_or(cc.as_str(), |(_, p)| p);
    (package.starts_with("gcc") || package.starts_with("clang"))
        .then(|| (text.clone(), cc.clone(), package.to_owned()))
}

/// FNV-1a over the parts (each followed by a 0 byte): stable across Rust versions, unlike
/// `DefaultHasher`, so cache keys survive toolchain updates.
pub fn cache_key(parts: &[&[u8]]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in part.iter().chain(&[0u8]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// The module name of a variant: `lp_<patch>_<variant>`, `-` made `_` (Kbuild's rule).
pub fn module_name(patch: &str, variant: Variant) -> String {
    format!("lp_{}_{}", patch.replace('-', "_"), variant.name())
}

/// The Kbuild file of a variant's build directory.
pub fn kbuild(module: &str, variant: Variant) -> String {
    format!(
        "obj-m := {module}.o\nccflags-y := -DLP_AFTER={}\n",
        u8::from(variant == Variant::After)
    )
}

/// `xtask/patches`.
pub fn patches_dir() -> PathBuf {
    util::workspace_root().join("xtask").join("patches")
}

/// The patches shipped: the directories under `xtask/patches` with a `patch.c`.
pub fn list_patches(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.join("patch.c").is_file()
            && let Some(n) = path.file_name()
        {
            names.push(n.to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// A patch's sources: (file name, contents), `patch.c` first, then `common/*.h` by name.
pub fn sources(dir: &Path, patch: &str) -> Result<Vec<(String, Vec<u8>)>> {
    let main = dir.join(patch).join("patch.c");
    let patches = list_patches(dir)?;
    ensure!(
        main.is_file(),
        "no patch {patch:?}: {} has none (patches: {})",
        main.display(),
        patches.join(", ")
    );
    let mut out = vec![("patch.c".to_owned(), fs::read(&main)?)];
    let mut common: Vec<PathBuf> = fs::read_dir(dir.join(COMMON))
        .with_context(|| format!("reading {}", dir.join(COMMON).display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "h"))
        .collect();
    common.sort();
    for p in common {
        let name = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        out.push((name, fs::read(&p)?));
    }
    Ok(out)
}

/// `/proc` mounted in the chroot (objtool and apt's scripts read it) until dropped.
pub(crate) struct ProcMount(PathBuf);

impl ProcMount {
    pub(crate) fn new(root: &Path) -> Result<Self> {
        let proc = root.join("proc");
        fs::create_dir_all(&proc)?;
        util::run(
            Command::new("mount")
                .args(["-t", "proc", "proc"])
                .arg(&proc),
        )?;
        Ok(Self(proc))
    }
}

impl Drop for ProcMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// `program args` in the chroot, its stdout sent to our stderr (stdout is the compare's).
pub(crate) fn chroot(root: &Path, program: &str, args: &[String]) -> Result<()> {
    util::run(
        Command::new("chroot")
            .arg(root)
            .arg(program)
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(std::io::stderr()),
    )
}

/// Step 1: the chroot, made once.
pub(crate) fn ensure_chroot(plan: &Plan) -> Result<()> {
    let root = plan.chroot();
    if root.join(CHROOT_READY).is_file() {
        return Ok(());
    }
    if util::which("debootstrap").is_none() {
        crate::host::apt_install(&["debootstrap"])?;
    }
    let mirror = apt::system_debian_mirror()?;
    let tmp = root.with_extension(format!("tmp{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    let start = Instant::now();
    status(
        "patch-ab",
        format!(
            "debootstrap {} from {mirror} into {}",
            plan.suite,
            root.display()
        ),
    );
    util::run(
        Command::new("debootstrap")
            .args(plan.debootstrap_args(&tmp, &mirror))
            .stdout(std::io::stderr()),
    )?;
    fs::write(tmp.join(CHROOT_READY), "")?;
    let _ = fs::remove_dir_all(&root);
    fs::rename(&tmp, &root)?;
    status(
        "patch-ab",
        format!("chroot made in {:.0} s", start.elapsed().as_secs_f64()),
    );
    Ok(())
}

/// Step 2: the headers and the kernel's compiler in the chroot; returns (compiler version
/// text, compiler command).
pub(crate) fn ensure_headers(plan: &Plan) -> Result<(String, String)> {
    let root = plan.chroot();
    let config = root
        .join(plan.headers_dir().trim_start_matches('/'))
        .join(".config");
    let compiler = |config: &Path| -> Result<(String, String, String)> {
        let text =
            fs::read_to_string(config).with_context(|| format!("reading {}", config.display()))?;
        kernel_compiler(&text)
            .with_context(|| format!("no CONFIG_CC_VERSION_TEXT in {}", config.display()))
    };
    if let Ok((text, cc, _)) = compiler(&config)
        && root.join("usr/bin").join(&cc).exists()
        && root.join("usr/bin/pahole").exists()
    {
        return Ok((text, cc));
    }
    let _proc = ProcMount::new(&root)?;
    let mut update: Vec<String> = APT_OPTS.iter().map(|s| (*s).to_owned()).collect();
    update.extend(["update".to_owned(), "-q".to_owned()]);
    chroot(&root, "apt-get", &update)?;
    chroot(&root, "apt-get", &plan.install_args(None))?;
    let (text, cc, package) = compiler(&config)?;
    chroot(&root, "apt-get", &plan.install_args(Some(&package)))?;
    if !root.join("usr/bin").join(&cc).exists() {
        bail!("{package} installed no /usr/bin/{cc} in {}", root.display());
    }
    status(
        "patch-ab",
        format!("{} and {text} ready", plan.headers_package()),
    );
    Ok((text, cc))
}

/// Step 3: one variant's module, built in the chroot unless cached.
fn ensure_module(
    plan: &Plan,
    patch: &str,
    variant: Variant,
    sources: &[(String, Vec<u8>)],
    compiler: &(String, String),
) -> Result<PathBuf> {
    let module = module_name(patch, variant);
    let kbuild = kbuild(&module, variant);
    let mut parts: Vec<&[u8]> = vec![
        kbuild.as_bytes(),
        plan.release.as_bytes(),
        compiler.0.as_bytes(),
    ];
    for (name, text) in sources {
        parts.push(name.as_bytes());
        parts.push(text);
    }
    let key = cache_key(&parts);
    let ko = plan.module_path(&module, &key);
    if ko.is_file() {
        return Ok(ko);
    }
    let root = plan.chroot();
    let dir_in = format!("/build/{module}-{key}");
    let dir = root.join(dir_in.trim_start_matches('/'));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)?;
    for (name, text) in sources {
        let name = if name == "patch.c" {
            format!("{module}.c")
        } else {
            name.clone()
        };
        fs::write(dir.join(name), text)?;
    }
    fs::write(dir.join("Kbuild"), &kbuild)?;
    {
        let _proc = ProcMount::new(&root)?;
        chroot(&root, "make", &plan.make_args(&dir_in, &compiler.1))?;
        // Debug info off, .BTF kept: the guest's initramfs holds the module in RAM.
        chroot(
            &root,
            "strip",
            &["--strip-debug".into(), format!("{dir_in}/{module}.ko")],
        )?;
    }
    fs::create_dir_all(ko.parent().context("module path has a parent")?)?;
    let tmp = ko.with_extension("ko.tmp");
    fs::copy(dir.join(format!("{module}.ko")), &tmp)?;
    fs::rename(&tmp, &ko)?;
    let _ = fs::remove_dir_all(&dir);
    Ok(ko)
}

/// The patch's modules (before, after), built or taken from the cache.
pub fn ensure_modules(plan: &Plan, patch: &str) -> Result<[PathBuf; 2]> {
    ensure!(
        util::is_root(),
        "patch-ab builds its modules in a debootstrap chroot: run it as root"
    );
    let sources = sources(&patches_dir(), patch)?;
    let _lock = util::lock(&plan.base.join(format!("{}.lock", plan.suite)))?;
    let start = Instant::now();
    ensure_chroot(plan)?;
    let compiler = ensure_headers(plan)?;
    let before = ensure_module(plan, patch, Variant::Before, &sources, &compiler)?;
    let after = ensure_module(plan, patch, Variant::After, &sources, &compiler)?;
    status(
        "patch-ab",
        format!(
            "modules of {patch} for {} (built with {}) ready in {:.1} s",
            plan.release,
            compiler.1,
            start.elapsed().as_secs_f64()
        ),
    );
    Ok([before, after])
}
