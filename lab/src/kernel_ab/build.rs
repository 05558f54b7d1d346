//! Builds the two kernels of `kernel-ab` in `patch-ab`'s Debian chroot (the guest kernel's own
//! compiler), each step cached:
//!
//! 1. the chroot, the kernel's compiler and the build's tools (`patch-ab`'s steps, then
//!    `linux-source-<series>`, bison, flex, bc, python3, …);
//! 2. the source unpacked once per source version, `/build/kernel-ab/<version>/` in the chroot;
//! 3. the configuration: `x86_64_defconfig` + `xtask/kernel-ab/config.fragment`, every option
//!    of the fragment checked in the result;
//! 4. the kernel as shipped (`bzImage`, BTF included), kept under `<cache>/kernel-ab/images/
//!    <key>/`, the key a hash of source version, fragment and compiler;
//! 5. the variant: the patch applied (or reversed) in the same tree, `make` again (only the
//!    objects the patch touches, the link and BTF), the image kept under its key (the base's
//!    key, the patch, its direction), and the patch taken back out. A variant interrupted
//!    before that is taken out at the next start (`APPLIED` records it).
use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail, ensure};

use super::plan::{self, Plan, Toolchain};
use crate::{
    patch_ab::build::{self as lp, ProcMount, chroot},
    util::{self, status},
};

/// Packages the kernel build needs beyond `patch-ab`'s (make, libelf-dev, dwarves, the
/// compiler), each with a file that shows it is installed.
const BUILD_PACKAGES: [(&str, &str); 7] = [
    ("bison", "usr/bin/bison"),
    ("flex", "usr/bin/flex"),
    ("bc", "usr/bin/bc"),
    ("python3-minimal", "usr/bin/python3"),
    ("libssl-dev", "usr/include/openssl/ssl.h"),
    ("xz-utils", "usr/bin/xz"),
    ("patch", "usr/bin/patch"),
];

/// In the source directory while a variant's patch is in: the patch and its direction.
const APPLIED: &str = ".damon-trace-applied";

/// How long a build goes between progress lines.
const PROGRESS_EVERY: Duration = Duration::from_secs(30);

/// A patch to build a variant of.
#[derive(Debug, Clone)]
pub struct Patch {
    pub name: String,
    pub text: String,
    /// Applied reversed: the source as shipped is the after kernel.
    pub reverse: bool,
}

/// The two images and where the time went.
#[derive(Debug, Clone)]
pub struct Images {
    pub before: PathBuf,
    pub after: PathBuf,
    /// The kernel as shipped: seconds it took, None when it came from the cache.
    pub base_seconds: Option<f64>,
    /// The variant: seconds, None when cached.
    pub variant_seconds: Option<f64>,
}

/// Step 1 (after `patch-ab`'s chroot and compiler): the build's own packages; the source
/// package's version.
fn ensure_tools(plan: &Plan, root: &Path) -> Result<String> {
    let source = plan.source_package();
    let mut missing: Vec<String> = BUILD_PACKAGES
        .iter()
        .filter(|(_, file)| !root.join(file).exists())
        .map(|(p, _)| (*p).to_owned())
        .collect();
    if !plan.host_path(&plan.tarball()).is_file() {
        missing.push(source.clone());
    }
    if !missing.is_empty() {
        status(
            "kernel-ab",
            format!("installing {} in the chroot", missing.join(" ")),
        );
        let _proc = ProcMount::new(root)?;
        let mut args: Vec<String> = [
            "-o",
            "Acquire::Check-Valid-Until=false",
            "install",
            "-y",
            "-q",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        args.push("--no-install-recommends".into());
        args.extend(missing);
        if chroot(root, "apt-get", &args).is_err() {
            chroot(
                root,
                "apt-get",
                &["-o", "Acquire::Check-Valid-Until=false", "update", "-q"].map(String::from),
            )?;
            chroot(root, "apt-get", &args)?;
        }
    }
    let out = util::output(Command::new("chroot").arg(root).args([
        "dpkg-query",
        "-W",
        "-f",
        "${Version}",
        &source,
    ]))
    .with_context(|| format!("{source} is not installed in {}", root.display()))?;
    Ok(out.trim().to_owned())
}

/// Runs `program args` in the chroot with its output in `log`, a progress line every
/// [`PROGRESS_EVERY`] (objects compiled, time); on failure the log's last lines.
fn logged(root: &Path, what: &str, log: &Path, program: &str, args: &[String]) -> Result<()> {
    let file = fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let mut child = Command::new("chroot")
        .arg(root)
        .arg(program)
        .args(args)
        .stdout(file.try_clone()?)
        .stderr(file)
        .stdin(Stdio::null())
        .spawn()
        .context("starting chroot")?;
    let start = Instant::now();
    let mut next = PROGRESS_EVERY;
    let status_code = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        thread::sleep(Duration::from_millis(500));
        if start.elapsed() >= next {
            next += PROGRESS_EVERY;
            let text = fs::read_to_string(log).unwrap_or_default();
            status(
                "kernel-ab",
                format!(
                    "{what}: {} objects compiled, {:.0} s",
                    plan::compiled_objects(&text),
                    start.elapsed().as_secs_f64()
                ),
            );
        }
    };
    if !status_code.success() {
        let text = fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(30).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!(
            "{what} failed ({status_code}); the last lines of {}:\n{}",
            log.display(),
            tail.join("\n")
        );
    }
    Ok(())
}

/// Step 2: the source, unpacked once.
fn ensure_source(plan: &Plan, tc: &Toolchain, root: &Path) -> Result<()> {
    let src = plan.host_path(&plan.source_dir(tc));
    if src.join("Makefile").is_file() {
        return Ok(());
    }
    let work = plan.work_dir(tc);
    fs::create_dir_all(plan.host_path(&work))?;
    status(
        "kernel-ab",
        format!("unpacking {} into {work}", plan.tarball()),
    );
    chroot(
        root,
        "tar",
        &["-xf".into(), plan.tarball(), "-C".into(), work],
    )?;
    ensure!(
        src.join("Makefile").is_file(),
        "{} has no Makefile after unpacking",
        src.display()
    );
    Ok(())
}

/// Step 3: the configuration, made again when the fragment changed; its options checked.
fn ensure_config(plan: &Plan, tc: &Toolchain, root: &Path, fragment: &str) -> Result<()> {
    let out = plan.host_path(&plan.out_dir(tc));
    let kept = out.join(".damon-trace-fragment");
    if fs::read_to_string(&kept).is_ok_and(|k| k == fragment) && out.join(".config").is_file() {
        return Ok(());
    }
    fs::create_dir_all(&out)?;
    let frag_in = format!("{}/config.fragment", plan.out_dir(tc));
    fs::write(plan.host_path(&frag_in), fragment)?;
    let _proc = ProcMount::new(root)?;
    chroot(root, "make", &plan.make_args(tc, &["-s", "defconfig"]))?;
    chroot(
        root,
        "sh",
        &[
            "-c".into(),
            format!(
                "cd {} && scripts/kconfig/merge_config.sh -m -O {out} {out}/.config {frag_in} >/dev/null",
                plan.source_dir(tc),
                out = plan.out_dir(tc)
            ),
        ],
    )?;
    chroot(root, "make", &plan.make_args(tc, &["-s", "olddefconfig"]))?;
    let config = fs::read_to_string(out.join(".config"))?;
    let missing = plan::missing_options(fragment, &config);
    ensure!(
        missing.is_empty(),
        "the kernel's Kconfig did not keep these options of xtask/kernel-ab/config.fragment \
         (a dependency is missing): {}",
        missing.join(", ")
    );
    fs::write(kept, fragment)?;
    Ok(())
}

/// Builds `bzImage` in the tree and keeps it as `image`; the seconds it took.
fn build_image(plan: &Plan, tc: &Toolchain, root: &Path, what: &str, image: &Path) -> Result<f64> {
    let start = Instant::now();
    let log = plan.host_path(&format!("{}/build.log", plan.work_dir(tc)));
    {
        let _proc = ProcMount::new(root)?;
        logged(root, what, &log, "make", &plan.make_args(tc, &["bzImage"]))?;
    }
    let built = plan.host_path(&format!("{}/arch/x86/boot/bzImage", plan.out_dir(tc)));
    fs::create_dir_all(image.parent().context("image path has a parent")?)?;
    let tmp = image.with_extension("tmp");
    fs::copy(&built, &tmp).with_context(|| format!("copying {}", built.display()))?;
    fs::rename(&tmp, image)?;
    let secs = start.elapsed().as_secs_f64();
    status("kernel-ab", format!("{what}: built in {secs:.0} s"));
    Ok(secs)
}

/// `patch` in the source directory.
fn run_patch(
    plan: &Plan,
    tc: &Toolchain,
    root: &Path,
    file: &str,
    reverse: bool,
    dry: bool,
) -> Result<()> {
    util::output(
        Command::new("chroot")
            .arg(root)
            .args(["sh", "-c"])
            .arg(format!(
                "cd {} && patch {}",
                plan.source_dir(tc),
                plan::patch_args(file, reverse, dry).join(" ")
            )),
    )
    .map(|_| ())
}

/// Takes a variant's patch back out of the source: after its build, or (`interrupted`) at
/// the start, when an interrupted run left one in.
fn restore_source(plan: &Plan, tc: &Toolchain, root: &Path, interrupted: bool) -> Result<()> {
    let marker = plan.host_path(&format!("{}/{APPLIED}", plan.source_dir(tc)));
    let Ok(text) = fs::read_to_string(&marker) else {
        return Ok(());
    };
    let reverse = text.starts_with("reverse");
    let file = format!("{}/{APPLIED}.diff", plan.source_dir(tc));
    if interrupted {
        status(
            "kernel-ab",
            "taking out the patch an interrupted build left in the source",
        );
    }
    run_patch(plan, tc, root, &file, !reverse, false)?;
    fs::remove_file(marker)?;
    Ok(())
}

/// Step 5: the variant, built in the same tree with the patch in, then taken out.
fn build_variant(
    plan: &Plan,
    tc: &Toolchain,
    root: &Path,
    patch: &Patch,
    image: &Path,
) -> Result<f64> {
    let src = plan.source_dir(tc);
    let file = format!("{src}/{APPLIED}.diff");
    fs::write(plan.host_path(&file), &patch.text)?;
    run_patch(plan, tc, root, &file, patch.reverse, true).with_context(|| {
        format!(
            "patch {} does not apply{} to {}",
            patch.name,
            if patch.reverse { " reversed" } else { "" },
            plan.source_package()
        )
    })?;
    let marker = plan.host_path(&format!("{src}/{APPLIED}"));
    fs::write(&marker, if patch.reverse { "reverse" } else { "forward" })?;
    run_patch(plan, tc, root, &file, patch.reverse, false)?;
    let what = format!(
        "variant {}{} ({})",
        patch.name,
        if patch.reverse { " reversed" } else { "" },
        plan::touched_files(&patch.text).join(", ")
    );
    let built = build_image(plan, tc, root, &what, image);
    restore_source(plan, tc, root, false)?;
    built
}

/// The two kernels of `patch`, built or from the cache: before, after.
pub fn ensure_images(
    plan: &Plan,
    lp_plan: &lp::Plan,
    patch: &Patch,
    fragment: &str,
) -> Result<Images> {
    ensure!(
        util::is_root(),
        "kernel-ab builds its kernels in a debootstrap chroot: run it as root"
    );
    let _lock = util::lock(&plan.base.join("build.lock"))?;
    lp::ensure_chroot(lp_plan)?;
    let (compiler_text, cc) = lp::ensure_headers(lp_plan)?;
    let root = lp_plan.chroot();
    let source_version = ensure_tools(plan, &root)?;
    let tc = Toolchain {
        source_version,
        compiler_text,
        cc,
    };
    ensure_source(plan, &tc, &root)?;
    restore_source(plan, &tc, &root, true)?;
    let base_key = plan::base_key(&tc, fragment);
    let base = plan.image(&base_key);
    let variant = plan.image(&plan::variant_key(
        &base_key,
        patch.text.as_bytes(),
        patch.reverse,
    ));
    let mut base_seconds = None;
    let mut variant_seconds = None;
    if !base.is_file() || !variant.is_file() {
        ensure_config(plan, &tc, &root, fragment)?;
    }
    if !base.is_file() {
        status(
            "kernel-ab",
            format!(
                "building {} {} as shipped with {} (the first build: tens of minutes on 2 cores)",
                plan.source_package(),
                tc.source_version,
                tc.cc
            ),
        );
        base_seconds = Some(build_image(plan, &tc, &root, "kernel as shipped", &base)?);
    }
    if !variant.is_file() {
        variant_seconds = Some(build_variant(plan, &tc, &root, patch, &variant)?);
    }
    let (before, after) = if patch.reverse {
        (variant, base)
    } else {
        (base, variant)
    };
    Ok(Images {
        before,
        after,
        base_seconds,
        variant_seconds,
    })
}
