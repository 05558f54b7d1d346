//! `cargo xtask kernel-ab PATCH`: a kernel patch measured as two kernels built from one source
//! tree, differing by the patch alone, outside CI (like `bench` and `patch-ab`).
//!
//! The source is Debian's `linux-source-<series>` of the guest kernel's release (7.2.13 for
//! Debian sid's 7.2), built with a small configuration ([`build`]) by the kernel's own
//! compiler; the patch makes the variant. The seed patches under `xtask/kernel-ab/` are already
//! in that source, so they are applied *reversed* to get the kernel before them; the control
//! adds a known delay to the after kernel; a path to a unified diff works the same way
//! (`--reverse` when your tree already has it). Then `ab`'s boots (A B B A …, one fresh boot a
//! run, `--runs` a side), the multi-run compare, and the seed-shaped view of the patch's
//! functions (`kernel-ab-compare:` in its header, e.g. 20 ns rows).
pub mod args;
mod build;
pub mod plan;
#[cfg(test)]
mod tests;

use std::{
    fs,
    path::{Path, PathBuf},
    time::Instant,
};

use anyhow::{Context as _, Result, ensure};

use crate::{
    ab::{self, AbOptions, Attach},
    kernel::{self, Kernel},
    patch_ab,
    util::{self, status},
    vm::{self, VmOptions},
};

/// Runs a side unless `--runs` says otherwise.
pub const DEFAULT_RUNS: u32 = 3;
/// Seconds each run records unless `--duration` says otherwise.
pub const DEFAULT_SECONDS: u64 = 20;
/// The patch whose after kernel has a known delay: `kernel-ab control` fails unless found.
pub const CONTROL: &str = "control";
/// The Debian kernel whose release is built (its source package and compiler).
pub const KERNEL: Kernel = Kernel::DEBIAN_7_2;

/// What `cargo xtask kernel-ab` does.
#[derive(Debug, Clone)]
pub struct KernelAbOptions {
    /// A name under `xtask/kernel-ab/` (`seed-000`, …, `control`) or a path to a unified diff.
    pub patch: String,
    /// Apply a path's diff reversed (the tree already has it); the shipped patches say so in
    /// their header.
    pub reverse: bool,
    pub runs: u32,
    pub seconds: u64,
    /// Replaces the patch's `kernel-ab-scenario:` arguments for the migrate-hot scenario.
    pub scenario_args: Option<String>,
    pub out_dir: Option<PathBuf>,
    pub binary: Option<PathBuf>,
    /// Build and boot nothing: compare the captures already in the output directory again.
    pub compare_only: bool,
    /// `make -j`; 0: the number of CPUs.
    pub jobs: usize,
    /// The guests' clock (`--clock`).
    pub clock: crate::vm::GuestClock,
}

impl KernelAbOptions {
    pub fn new(patch: &str) -> Self {
        Self {
            patch: patch.to_owned(),
            reverse: false,
            runs: DEFAULT_RUNS,
            seconds: DEFAULT_SECONDS,
            scenario_args: None,
            out_dir: None,
            binary: None,
            compare_only: false,
            jobs: 0,
            clock: crate::vm::GuestClock::Wall,
        }
    }
}

/// `xtask/kernel-ab`: the configuration fragment and the shipped patches.
pub fn patches_dir() -> PathBuf {
    util::workspace_root().join("xtask").join("kernel-ab")
}

/// The shipped patches: `<name>.diff` under [`patches_dir`].
pub fn list_patches(dir: &Path) -> Result<Vec<String>> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".diff").map(String::from)
        })
        .collect();
    names.sort();
    Ok(names)
}

/// A patch with its header read: a shipped name or a path.
pub fn load_patch(dir: &Path, patch: &str, reverse: bool) -> Result<(build::Patch, plan::Header)> {
    let shipped = dir.join(format!("{patch}.diff"));
    let (name, path) = if shipped.is_file() {
        (patch.to_owned(), shipped)
    } else {
        let p = PathBuf::from(patch);
        ensure!(
            p.is_file(),
            "no patch {patch:?}: neither xtask/kernel-ab/{patch}.diff nor a file (shipped: {})",
            list_patches(dir)?.join(", ")
        );
        let stem = p
            .file_stem()
            .map_or_else(|| "patch".to_owned(), |s| s.to_string_lossy().into_owned());
        (stem, p)
    };
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    ensure!(
        !plan::touched_files(&text).is_empty(),
        "{} is not a unified diff (no +++ lines)",
        path.display()
    );
    let header = plan::parse_header(&text);
    let reverse = header.reverse.unwrap_or(false) || reverse;
    Ok((
        build::Patch {
            name,
            text,
            reverse,
        },
        header,
    ))
}

/// The `ab` run of the pair: kprobe sessions on both (exact on the preemptible 7.x kernels:
/// no call lost to a trampoline's recursion guard, so per-interval sums are whole), the
/// patch's functions and scenario.
pub fn ab_options(
    opts: &KernelAbOptions,
    header: &plan::Header,
    before: &Path,
    after: &Path,
    out_dir: &Path,
) -> AbOptions {
    let mut ab = AbOptions::new(
        Kernel::Path(before.to_path_buf()),
        Kernel::Path(after.to_path_buf()),
    );
    ab.runs = opts.runs;
    ab.seconds = opts.seconds;
    ab.functions = header.functions.clone();
    ab.scenario_args = opts
        .scenario_args
        .clone()
        .unwrap_or_else(|| header.scenario_args.clone());
    ab.attach = Attach::KprobeSession;
    ab.out_dir = out_dir.to_path_buf();
    ab.binary = opts.binary.clone();
    ab.compare_only = opts.compare_only;
    ab.clock = opts.clock;
    ab
}

/// The images of the pair, copied next to the captures as before.bzImage / after.bzImage
/// (`ab` names its runs' kernels by file name).
fn stage_images(images: &build::Images, out: &Path) -> Result<(PathBuf, PathBuf)> {
    fs::create_dir_all(out)?;
    let before = out.join("before.bzImage");
    let after = out.join("after.bzImage");
    fs::copy(&images.before, &before)?;
    fs::copy(&images.after, &after)?;
    Ok((before, after))
}

/// Builds (or finds) the pair, boots it, compares; false if the compare failed or the control
/// was not found.
pub fn main(opts: &KernelAbOptions) -> Result<bool> {
    ensure!(
        opts.runs >= 2,
        "kernel-ab needs at least 2 runs a side (the verdict is over runs)"
    );
    let (patch, header) = load_patch(&patches_dir(), &opts.patch, opts.reverse)?;
    let out = opts.out_dir.clone().unwrap_or_else(|| {
        util::target_dir()
            .join("kernel-ab")
            .join(opts.clock.dir_name(&patch.name))
    });
    let start = Instant::now();
    let (images, before, after) = if opts.compare_only {
        (None, out.join("before.bzImage"), out.join("after.bzImage"))
    } else {
        let image = kernel::fetch(&KERNEL)?;
        let series = plan::series_of(&image.release)
            .with_context(|| format!("no kernel series in release {:?}", image.release))?;
        let cache = util::cache_dir()?;
        let lp_plan = patch_ab::build::Plan {
            base: cache.join("livepatch"),
            suite: KERNEL.suite().unwrap_or("sid").to_owned(),
            release: image.release.clone(),
        };
        let plan = plan::Plan {
            chroot: lp_plan.chroot(),
            base: cache.join("kernel-ab"),
            series,
            jobs: if opts.jobs == 0 {
                num_cpus()
            } else {
                opts.jobs
            },
        };
        let fragment = fs::read_to_string(patches_dir().join("config.fragment"))?;
        let images = build::ensure_images(&plan, &lp_plan, &patch, &fragment)?;
        let (b, a) = stage_images(&images, &out)?;
        (Some(images), b, a)
    };
    let build_seconds = start.elapsed().as_secs_f64();
    let ab_opts = ab_options(opts, &header, &before, &after, &out);
    let boots = Instant::now();
    let outcome = ab::run(&ab_opts)?;
    let boot_seconds = boots.elapsed().as_secs_f64();
    let compare = match &outcome.compare {
        Ok(c) => c,
        Err(e) => {
            status("kernel-ab", format!("compare FAILED: {e:#}"));
            return Ok(false);
        }
    };
    println!("{}", compare.text);
    let ok = seed_view(opts, &header, &outcome, &out)?;
    if let Some(i) = &images {
        status(
            "kernel-ab",
            timing_line(i, build_seconds, boot_seconds, opts.runs),
        );
    }
    status(
        "kernel-ab",
        format!("captures, images and compare outputs in {}", out.display()),
    );
    Ok(ok)
}

/// The patch's own view (`kernel-ab-compare:` arguments, e.g. 20 ns rows) into seed.txt and
/// printed; the control's check.
fn seed_view(
    opts: &KernelAbOptions,
    header: &plan::Header,
    outcome: &ab::AbOutcome,
    out: &Path,
) -> Result<bool> {
    let probe = VmOptions {
        binary: opts.binary.clone(),
        ..VmOptions::new(KERNEL, "")
    };
    let binary = fs::canonicalize(vm::guest_binary(&probe)?)?;
    let view = header.compare_args(opts.clock);
    let text = if view.is_empty() {
        None
    } else {
        let args: Vec<&str> = view.iter().map(String::as_str).collect();
        let t = ab::run_compare(&binary, out, &outcome.before, &outcome.after, &args)?;
        fs::write(out.join("seed.txt"), &t)?;
        println!("--- {} ---\n{t}", view.join(" "));
        Some(t)
    };
    if opts.patch == CONTROL {
        let all = outcome
            .compare
            .as_ref()
            .map(|c| c.text.clone())
            .unwrap_or_default();
        if !patch_ab::control_detected(&all)
            && !text.as_deref().is_some_and(patch_ab::control_detected)
        {
            status(
                "kernel-ab",
                "FAILED: the control's known delay was not found slower over these runs",
            );
            return Ok(false);
        }
        status(
            "kernel-ab",
            "the control's delay was found: the comparison has the power to see 1 µs",
        );
    }
    Ok(true)
}

/// Where the time went: the first build, the variant, the boots.
pub fn timing_line(i: &build::Images, build_seconds: f64, boot_seconds: f64, runs: u32) -> String {
    let part = |s: Option<f64>| s.map_or_else(|| "cached".to_owned(), |s| format!("{s:.0} s"));
    format!(
        "time: kernel as shipped {}, variant {}, building in all {build_seconds:.0} s; {} boots \
         and the compare {boot_seconds:.0} s",
        part(i.base_seconds),
        part(i.variant_seconds),
        2 * runs
    )
}

fn num_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}
