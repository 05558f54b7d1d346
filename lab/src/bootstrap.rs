//! Toolchain bootstrap: nightly with rust-src (the eBPF crate needs `-Z build-std`), the musl
//! target (the VM has no libc), and bpf-linker built against nightly's own LLVM.
//!
//! Idempotent and cheap once done: every step checks before it installs.
use std::{
    fs,
    os::unix::fs::symlink,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result, bail};

use crate::{
    elf::Elf,
    util::{self, output, run, status},
};

pub const MUSL_TARGET: &str = "x86_64-unknown-linux-musl";
const BPF_LINKER_VERSION: &str = "0.13.0";

/// What later steps need from the bootstrap.
#[derive(Debug, Clone)]
pub struct Toolchain {
    /// Directory holding the `bpf-linker` executable; prepend it to PATH for builds.
    pub bpf_linker_dir: PathBuf,
    /// LLVM major version shared by nightly rustc and bpf-linker.
    pub llvm_major: u32,
}

/// Runs every bootstrap step, printing one status line each.
pub fn ensure() -> Result<Toolchain> {
    ensure_nightly()?;
    ensure_nightly_components()?;
    ensure_musl_target()?;
    ensure_bpf_linker()
}

fn rustup() -> Command {
    Command::new("rustup")
}

fn ensure_nightly() -> Result<()> {
    let list = output(rustup().args(["toolchain", "list"])).context(
        "rustup is required (the eBPF crate needs nightly); install it from rustup.rs's installer",
    )?;
    if list.lines().any(|l| l.starts_with("nightly-")) {
        status("nightly", "installed");
        return Ok(());
    }
    status(
        "nightly",
        "installing with `rustup toolchain install nightly --profile minimal`",
    );
    run(rustup().args(["toolchain", "install", "nightly", "--profile", "minimal"]))
        .context("installing the nightly toolchain")
}

/// rust-src lets aya-build compile `core` for the bpf target; clippy lints the eBPF crate
/// (`cargo xtask test`). A `--profile minimal` nightly has neither.
fn ensure_nightly_components() -> Result<()> {
    let installed =
        output(rustup().args(["component", "list", "--toolchain", "nightly", "--installed"]))?;
    let has = |c: &str| {
        installed
            .lines()
            .any(|l| l.trim() == c || l.starts_with(&format!("{c}-")))
    };
    let missing: Vec<&str> = ["rust-src", "clippy"]
        .into_iter()
        .filter(|c| !has(c))
        .collect();
    if missing.is_empty() {
        status("nightly components", "rust-src and clippy installed");
        return Ok(());
    }
    status(
        "nightly components",
        format!("adding {}", missing.join(", ")),
    );
    run(rustup()
        .args(["component", "add", "--toolchain", "nightly"])
        .args(&missing))
    .context("adding nightly components")
}

fn ensure_musl_target() -> Result<()> {
    // No --toolchain: the target must exist for the toolchain that builds damon-user here,
    // which is whatever rustup resolves in this directory (the default stable).
    let installed = output(rustup().args(["target", "list", "--installed"]))?;
    if installed.lines().any(|l| l.trim() == MUSL_TARGET) {
        status("musl target", format!("{MUSL_TARGET} installed"));
        return Ok(());
    }
    status("musl target", format!("adding {MUSL_TARGET}"));
    run(rustup().args(["target", "add", MUSL_TARGET])).context("adding the musl target")
}

/// The LLVM major from `rustc +nightly -vV` ("LLVM version: 22.1.4").
pub fn nightly_llvm_major() -> Result<u32> {
    let vv = output(Command::new("rustc").args(["+nightly", "-vV"]))?;
    parse_llvm_major(&vv)
        .with_context(|| format!("no `LLVM version:` line in `rustc +nightly -vV`:\n{vv}"))
}

fn parse_llvm_major(vv: &str) -> Option<u32> {
    let ver = vv.lines().find_map(|l| l.strip_prefix("LLVM version:"))?;
    ver.trim().split('.').next()?.parse().ok()
}

/// The LLVM major encoded in a libLLVM file name: `libLLVM.so.22.1-rust-…`, `libLLVM-22…`.
fn lib_llvm_major(name: &str) -> Option<u32> {
    let rest = name
        .strip_prefix("libLLVM.so.")
        .or_else(|| name.strip_prefix("libLLVM-"))?;
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// nightly's shared LLVM, `<sysroot>/lib/libLLVM.so.NN.*-rust-*`.
fn nightly_libllvm(major: u32) -> Result<PathBuf> {
    let sysroot = output(Command::new("rustc").args(["+nightly", "--print", "sysroot"]))?;
    let lib = Path::new(sysroot.trim()).join("lib");
    let prefix = format!("libLLVM.so.{major}.");
    let found = fs::read_dir(&lib)
        .with_context(|| format!("listing {}", lib.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.contains("-rust-"))
        });
    found.with_context(|| {
        format!(
            "nightly ships no {prefix}*-rust-* in {}; reinstall nightly \
             (`rustup toolchain uninstall nightly` then `cargo xtask bootstrap`)",
            lib.display()
        )
    })
}

/// Points `link` at `target`, replacing a stale link.
fn ensure_symlink(target: &Path, link: &Path) -> Result<()> {
    if fs::read_link(link).ok().as_deref() == Some(target) {
        return Ok(());
    }
    if link.symlink_metadata().is_ok() {
        fs::remove_file(link).with_context(|| format!("removing stale {}", link.display()))?;
    }
    symlink(target, link)
        .with_context(|| format!("linking {} -> {}", link.display(), target.display()))
}

fn ensure_bpf_linker() -> Result<Toolchain> {
    let cache = util::cache_dir()?;
    let llvm_major = nightly_llvm_major()?;
    let libllvm = nightly_libllvm(llvm_major)?;
    let soname = libllvm
        .file_name()
        .and_then(|n| n.to_str())
        .context("libLLVM path has no file name")?
        .to_owned();
    // llvm-sys links against LLVM_PREFIX/lib/libLLVM.so and bpf-linker keeps an rpath to that
    // directory, so it must persist; the soname link lets bpf-linker start outside rustup's
    // LD_LIBRARY_PATH (e.g. `bpf-linker --version` below).
    let prefix = cache.join(format!("llvm-{llvm_major}"));
    let lib = prefix.join("lib");
    fs::create_dir_all(&lib).with_context(|| format!("creating {}", lib.display()))?;
    ensure_symlink(&libllvm, &lib.join("libLLVM.so"))?;
    ensure_symlink(&libllvm, &lib.join(&soname))?;

    let root = cache.join(format!("bpf-linker-llvm{llvm_major}"));
    let bin_dir = root.join("bin");
    let exe = bin_dir.join("bpf-linker");
    let _lock = util::lock(&cache.join("bpf-linker.lock"))?;
    let needs_build = match linked_llvm(&exe)? {
        None => true,
        Some(linked) if linked == soname => false,
        Some(linked) => match lib_llvm_major(&linked) {
            Some(major) if major != llvm_major => bail!(
                "{} links LLVM {major} ({linked}) but `rustc +nightly` uses LLVM {llvm_major}; \
                 the eBPF object would not link. Remedy: `rm -r {}` and rerun `cargo xtask bootstrap`",
                exe.display(),
                root.display()
            ),
            // Same LLVM major but another nightly build: the old soname no longer exists.
            _ => {
                status(
                    "bpf-linker",
                    format!("built for {linked}, nightly now ships {soname}: rebuilding"),
                );
                true
            }
        },
    };
    if needs_build {
        status(
            "bpf-linker",
            format!(
                "building {BPF_LINKER_VERSION} against nightly's LLVM {llvm_major} (about 3 min)"
            ),
        );
        run(Command::new("cargo")
            .args([
                "install",
                "bpf-linker",
                "--version",
                BPF_LINKER_VERSION,
                "--locked",
                "--force",
            ])
            .args([
                "--no-default-features",
                "--features",
                &format!("llvm-{llvm_major}"),
            ])
            .arg("--root")
            .arg(&root)
            .env("LLVM_PREFIX", &prefix))
        .context("building bpf-linker (needs a C compiler and network access to crates.io)")?;
        match linked_llvm(&exe)? {
            Some(l) if l == soname => {}
            other => bail!(
                "the new {} links {other:?}, expected {soname}",
                exe.display()
            ),
        }
    }
    let version = output(Command::new(&exe).arg("--version")).with_context(|| {
        format!(
            "{} does not start; remedy: `rm -r {}` and rerun",
            exe.display(),
            root.display()
        )
    })?;
    status(
        "bpf-linker",
        format!(
            "cached at {} ({}, LLVM {llvm_major} = nightly's)",
            exe.display(),
            version.trim()
        ),
    );
    Ok(Toolchain {
        bpf_linker_dir: bin_dir,
        llvm_major,
    })
}

/// The libLLVM soname `exe` needs, or None if `exe` does not exist.
fn linked_llvm(exe: &Path) -> Result<Option<String>> {
    if !exe.is_file() {
        return Ok(None);
    }
    let needed = Elf::read(exe)?.needed()?;
    let llvm = needed.into_iter().find(|l| l.starts_with("libLLVM"));
    llvm.map(Some).with_context(|| {
        format!(
            "{} does not link a shared libLLVM; remove it and rerun `cargo xtask bootstrap`",
            exe.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llvm_major_from_rustc_vv() {
        let vv = "rustc 1.97.0-nightly\nhost: x86_64-unknown-linux-gnu\nLLVM version: 22.1.4\n";
        assert_eq!(parse_llvm_major(vv), Some(22));
        assert_eq!(parse_llvm_major("rustc 1.0"), None);
    }

    #[test]
    fn llvm_major_from_library_names() {
        assert_eq!(
            lib_llvm_major("libLLVM.so.22.1-rust-1.97.0-nightly"),
            Some(22)
        );
        assert_eq!(
            lib_llvm_major("libLLVM-21-rust-1.90.0-nightly.so"),
            Some(21)
        );
        assert_eq!(lib_llvm_major("libLLVM.so"), None);
        assert_eq!(lib_llvm_major("libc.so.6"), None);
    }
}
