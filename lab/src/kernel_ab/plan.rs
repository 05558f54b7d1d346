//! The build plan of `kernel-ab`, pure (tested on the host): where the source, the build tree
//! and the images live, the `make` and `patch` command lines, the cache keys, what a patch
//! file says about itself, and the check that the final `.config` kept the fragment.
use std::path::PathBuf;

use crate::patch_ab::build::cache_key;

/// Where a kernel pair is built, and with what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The Debian chroot (`patch-ab`'s) the build runs in: the kernel's own compiler.
    pub chroot: PathBuf,
    /// `<cache>/kernel-ab`: the bzImages, by key.
    pub base: PathBuf,
    /// The kernel series of the guest kernel (`7.2`): `linux-source-7.2` is built.
    pub series: String,
    /// `make -j`.
    pub jobs: usize,
}

/// The Debian source package version and the compiler: what a build tree is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toolchain {
    /// `dpkg-query`'s version of `linux-source-<series>` in the chroot, e.g. `7.2.13-1`.
    pub source_version: String,
    /// `CONFIG_CC_VERSION_TEXT` of the Debian kernel (its compiler, installed in the chroot).
    pub compiler_text: String,
    /// The compiler command, e.g. `x86_64-linux-gnu-gcc-16`.
    pub cc: String,
}

impl Plan {
    pub fn source_package(&self) -> String {
        format!("linux-source-{}", self.series)
    }

    /// The source tarball inside the chroot.
    pub fn tarball(&self) -> String {
        format!("/usr/src/linux-source-{}.tar.xz", self.series)
    }

    /// `/build/kernel-ab/<version>` inside the chroot: the unpacked source and `out/`.
    pub fn work_dir(&self, tc: &Toolchain) -> String {
        format!("/build/kernel-ab/{}", tc.source_version)
    }

    /// The unpacked source inside the chroot (the tarball's top directory).
    pub fn source_dir(&self, tc: &Toolchain) -> String {
        format!("{}/linux-source-{}", self.work_dir(tc), self.series)
    }

    /// The build tree (`make O=`) inside the chroot: one for every variant, so a variant
    /// rebuilds only what its patch touches, then links and makes BTF again.
    pub fn out_dir(&self, tc: &Toolchain) -> String {
        format!("{}/out", self.work_dir(tc))
    }

    /// A path inside the chroot, on the host.
    pub fn host_path(&self, inside: &str) -> PathBuf {
        self.chroot.join(inside.trim_start_matches('/'))
    }

    /// `make` for `targets` in the build tree with the kernel's compiler.
    pub fn make_args(&self, tc: &Toolchain, targets: &[&str]) -> Vec<String> {
        let mut args = vec![
            "-C".to_owned(),
            self.source_dir(tc),
            format!("O={}", self.out_dir(tc)),
            format!("CC={}", tc.cc),
            format!("HOSTCC={}", tc.cc),
            format!("-j{}", self.jobs.max(1)),
        ];
        args.extend(targets.iter().map(|t| (*t).to_owned()));
        args
    }

    /// Where the image of `key` is kept.
    pub fn image(&self, key: &str) -> PathBuf {
        self.base.join("images").join(key).join("bzImage")
    }
}

/// The key of the kernel built from the source as shipped: source version, configuration
/// fragment and compiler.
pub fn base_key(tc: &Toolchain, fragment: &str) -> String {
    cache_key(&[
        b"kernel-ab base",
        tc.source_version.as_bytes(),
        fragment.as_bytes(),
        tc.compiler_text.as_bytes(),
    ])
}

/// The key of a variant: the base's key, the patch and its direction.
pub fn variant_key(base: &str, patch: &[u8], reverse: bool) -> String {
    cache_key(&[
        b"kernel-ab variant",
        base.as_bytes(),
        patch,
        if reverse { b"reverse" } else { b"forward" },
    ])
}

/// `patch` in the source directory: `-p1`, reversed or not, a dry run first.
pub fn patch_args(file: &str, reverse: bool, dry_run: bool) -> Vec<String> {
    // --forward: refuse a patch that looks applied already, instead of offering to reverse it.
    let direction = if reverse { "--reverse" } else { "--forward" };
    let mut args = vec!["-p1".to_owned(), direction.to_owned()];
    if dry_run {
        args.push("--dry-run".to_owned());
    }
    args.extend(["--batch".to_owned(), "-i".to_owned(), file.to_owned()]);
    args
}

/// The kernel series of a release: `7.2.13+deb14-amd64` → `7.2`.
pub fn series_of(release: &str) -> Option<String> {
    let mut parts = release.split(['.', '-', '+']);
    let (major, minor) = (parts.next()?, parts.next()?);
    (major.parse::<u32>().is_ok() && minor.parse::<u32>().is_ok())
        .then(|| format!("{major}.{minor}"))
}

/// The options of the fragment (`CONFIG_X=v` and `# CONFIG_X is not set`) that the final
/// `.config` does not have as asked: Kconfig drops what a dependency forbids, silently.
pub fn missing_options(fragment: &str, config: &str) -> Vec<String> {
    let set: Vec<&str> = config.lines().map(str::trim).collect();
    fragment
        .lines()
        .map(str::trim)
        .filter_map(|l| {
            if let Some(name) = l
                .strip_prefix("# ")
                .and_then(|r| r.strip_suffix(" is not set"))
            {
                // Unset: absent or "is not set" in the .config, never "=y"/"=m".
                let on = set
                    .iter()
                    .any(|c| c.strip_prefix(name).is_some_and(|v| v.starts_with('=')));
                on.then(|| l.to_owned())
            } else if l.starts_with("CONFIG_") {
                (!set.contains(&l)).then(|| l.to_owned())
            } else {
                None
            }
        })
        .collect()
}

/// What a patch file says about itself in its header (the text before the diff, which
/// `patch` ignores): `kernel-ab-reverse: yes` (the source as shipped is the after kernel),
/// `kernel-ab-functions: a,b`, `kernel-ab-scenario: ARGS`, `kernel-ab-compare: ARGS`, and
/// `kernel-ab-compare-instructions: ARGS` for the view under the instruction clock, where a
/// call is a path length, not the emulator's time (seed-001: 500 ns rows, but 20 insn rows).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Header {
    pub reverse: Option<bool>,
    pub functions: Vec<String>,
    pub scenario_args: String,
    pub compare_args: Vec<String>,
    /// Under the instruction clock, when the patch's view needs other rows there.
    pub compare_args_instructions: Option<Vec<String>>,
    /// The free text before the keys: what the patch is.
    pub description: String,
}

impl Header {
    /// The patch's own view's `compare` arguments under `clock`.
    pub fn compare_args(&self, clock: crate::vm::GuestClock) -> &[String] {
        match (clock, &self.compare_args_instructions) {
            (crate::vm::GuestClock::Instructions, Some(args)) => args,
            _ => &self.compare_args,
        }
    }
}

pub fn parse_header(text: &str) -> Header {
    let mut h = Header::default();
    for line in text.lines() {
        if line.starts_with("--- ") || line.starts_with("diff ") {
            break;
        }
        let Some((key, value)) = line.split_once(':') else {
            if !line.trim().is_empty() {
                h.description.push_str(line.trim());
                h.description.push(' ');
            }
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "kernel-ab-reverse" => h.reverse = Some(matches!(value, "yes" | "true")),
            "kernel-ab-functions" => {
                h.functions = value
                    .split(',')
                    .map(str::trim)
                    .filter(|f| !f.is_empty())
                    .map(String::from)
                    .collect();
            }
            "kernel-ab-scenario" => h.scenario_args = value.to_owned(),
            "kernel-ab-compare" => {
                h.compare_args = value.split_whitespace().map(String::from).collect();
            }
            "kernel-ab-compare-instructions" => {
                h.compare_args_instructions =
                    Some(value.split_whitespace().map(String::from).collect());
            }
            _ => {
                h.description.push_str(line.trim());
                h.description.push(' ');
            }
        }
    }
    h.description = h.description.trim_end().to_owned();
    h
}

/// The files a unified diff changes (`+++ b/PATH`), for the build's status line.
pub fn touched_files(diff: &str) -> Vec<String> {
    diff.lines()
        .filter_map(|l| l.strip_prefix("+++ "))
        .map(|p| {
            let p = p.split('\t').next().unwrap_or(p).trim();
            p.split_once('/').map_or(p, |(_, rest)| rest).to_owned()
        })
        .collect()
}

/// Objects compiled so far, from the build's log (kbuild's `  CC      path.o` lines): the
/// progress line's number.
pub fn compiled_objects(log: &str) -> usize {
    log.lines().filter(|l| l.starts_with("  CC ")).count()
}
