//! Builds the eBPF object (crate `damon-ebpf`) for the bpf target with aya-build.
//!
//! That needs the nightly toolchain with rust-src and `bpf-linker`; `cargo xtask bootstrap`
//! installs both (every `cargo xtask` command runs it first). bpf-linker is looked up on PATH,
//! then in the bootstrap's cache directory.
//!
//! aya-build prints every line of its nested cargo (each `Compiling …` of the ~35 crates a
//! fresh eBPF build compiles, and any compiler message) as a `cargo:warning`, which cargo
//! shows as a warning of this crate on every fresh build. It prints them to this process's
//! stdout, where cargo reads its directives, so this script runs aya-build in a child (itself,
//! re-executed with [`CHILD`] set), keeps those lines out of cargo's sight and passes the rest
//! of the child's directives on. On success the lines go to a log file only (and one warning
//! line, if the compiler warned); on failure all of them go to stderr, which cargo shows.
use std::{env, path::PathBuf, process::Command};

use anyhow::{Context as _, anyhow};

/// Set in the child that runs aya-build (see the module docs).
const CHILD: &str = "DAMON_TRACE_EBPF_BUILD_CHILD";

fn cache_dir() -> Option<PathBuf> {
    env::var_os("DAMON_TRACE_CACHE")
        .map(PathBuf::from)
        .or_else(|| env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("damon-trace")))
        .or_else(|| env::var_os("HOME").map(|d| PathBuf::from(d).join(".cache/damon-trace")))
}

/// PATH for aya-build's nested cargo: this one, with the bootstrap's bpf-linker directory in
/// front when PATH has no bpf-linker.
fn path_with_bpf_linker() -> anyhow::Result<std::ffi::OsString> {
    let path = env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = env::split_paths(&path).collect();
    if dirs.iter().any(|d| d.join("bpf-linker").is_file()) {
        return Ok(path);
    }
    let cached = cache_dir().and_then(|c| {
        let entries = std::fs::read_dir(&c).ok()?;
        entries
            .filter_map(Result::ok)
            .map(|e| e.path().join("bin"))
            .find(|b| b.join("bpf-linker").is_file())
    });
    let bin = cached.ok_or_else(|| {
        anyhow!(
            "bpf-linker not found on PATH nor under the damon-trace cache dir; \
             run `cargo xtask bootstrap` (it installs the nightly rust-src and builds \
             bpf-linker against nightly's LLVM)"
        )
    })?;
    dirs.insert(0, bin);
    env::join_paths(dirs).context("PATH")
}

/// Set (by `cargo xtask bench`): the eBPF object without its `probe-log` feature, the probes'
/// log calls not compiled in.
const NO_PROBE_LOG: &str = "DAMON_TRACE_EBPF_NO_PROBE_LOG";

fn build_ebpf() -> anyhow::Result<()> {
    let ebpf = aya_build::Package {
        name: "damon-ebpf",
        root_dir: concat!(env!("CARGO_MANIFEST_DIR"), "/../damon-ebpf"),
        no_default_features: env::var_os(NO_PROBE_LOG).is_some(),
        ..Default::default()
    };
    aya_build::build_ebpf([ebpf], aya_build::Toolchain::default())
}

fn main() -> anyhow::Result<()> {
    if env::var_os(CHILD).is_some() {
        // The parent shows this after the build's output; a backtrace of this script (with
        // RUST_BACKTRACE set) would only bury it.
        if let Err(e) = build_ebpf() {
            eprintln!("{e:#}");
            std::process::exit(1);
        }
        return Ok(());
    }
    println!("cargo:rerun-if-env-changed=DAMON_TRACE_CACHE");
    println!("cargo:rerun-if-env-changed={NO_PROBE_LOG}");
    println!("cargo:rerun-if-env-changed=PATH");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").context("OUT_DIR not set")?);
    let me = env::current_exe().context("locating the build script")?;
    let child = Command::new(&me)
        .env(CHILD, "1")
        .env("PATH", path_with_bpf_linker()?)
        .output()
        .with_context(|| format!("running {} for the eBPF build", me.display()))?;
    let stdout = String::from_utf8_lossy(&child.stdout);
    let stderr = String::from_utf8_lossy(&child.stderr);
    let mut build_output = Vec::new();
    for line in stdout.lines() {
        match line.strip_prefix("cargo:warning=") {
            Some(text) => build_output.push(text),
            // aya-build's rerun-if directives, which cargo needs.
            None => println!("{line}"),
        }
    }
    let log = out_dir.join("ebpf-build.log");
    // The log is for reading after a build; failing to write it must not fail the build.
    let _ = std::fs::write(&log, format!("{}\n{stderr}", build_output.join("\n")));
    if !child.status.success() {
        // Cargo shows a failed build script's stderr: the nested build's whole output, then
        // aya-build's own error (the child's stderr).
        eprintln!("the eBPF build (crate damon-ebpf) failed; its output:");
        for line in &build_output {
            eprintln!("{line}");
        }
        eprint!("{stderr}");
        eprintln!(
            "building the eBPF object failed ({}); the output above is also in {}",
            child.status,
            log.display()
        );
        std::process::exit(1);
    }
    strip_debug_info(&out_dir.join("damon"))?;
    if let Some(first) = first_warning(&build_output) {
        println!(
            "cargo:warning=the eBPF build (crate damon-ebpf) warned: {first} (all of its \
             output: {})",
            log.display()
        );
    }
    Ok(())
}

/// The first compiler or cargo warning among the nested build's lines (`warning: …`), without
/// its `warning: `, if any.
fn first_warning<'a>(lines: &[&'a str]) -> Option<&'a str> {
    lines
        .iter()
        .find_map(|l| l.trim_start().strip_prefix("warning: "))
}

/// Removes the DWARF sections (`.debug_*` and their `.rel.debug_*` relocations) from the eBPF
/// object at `path`, in place. bpf-linker keeps them after turning them into BTF; neither aya
/// nor the kernel reads them, yet they were 7.9 of the object's 10.6 MB, and each start parses
/// the embedded object (aya's loader, the session programs' relocation, each calibration
/// tracer) through every section and relocation.
fn strip_debug_info(path: &std::path::Path) -> anyhow::Result<()> {
    let data = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let mut builder = object::build::elf::Builder::read(&*data)
        .with_context(|| format!("parsing {}", path.display()))?;
    let mut dropped = 0;
    for section in builder.sections.iter_mut() {
        let name = section.name.as_slice();
        if name.starts_with(b".debug_") || name.starts_with(b".rel.debug_") {
            section.delete = true;
            dropped += 1;
        }
    }
    if dropped == 0 {
        return Ok(());
    }
    builder.delete_orphans();
    // LLVM names the sections from the symbols' string table (`.strtab`), which the builder
    // keeps for the symbols; the written file gets a section-name table of its own.
    let has_names = builder
        .sections
        .iter()
        .any(|s| matches!(s.data, object::build::elf::SectionData::SectionString));
    if !has_names {
        let names = builder.sections.add();
        names.name = b".shstrtab"[..].into();
        names.sh_type = object::elf::SHT_STRTAB;
        names.sh_addralign = 1;
        names.data = object::build::elf::SectionData::SectionString;
    }
    let mut out = Vec::with_capacity(data.len());
    builder
        .write(&mut out)
        .with_context(|| format!("writing {} without its DWARF", path.display()))?;
    std::fs::write(path, out).with_context(|| format!("writing {}", path.display()))
}
