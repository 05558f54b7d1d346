//! Builds the eBPF object (crate `damon-ebpf`) for the bpf target with aya-build.
//!
//! That needs the nightly toolchain with rust-src and `bpf-linker`; `cargo xtask bootstrap`
//! installs both (every `cargo xtask` command runs it first). bpf-linker is looked up on PATH,
//! then in the bootstrap's cache directory.
use std::{env, path::PathBuf};

use anyhow::{Context as _, anyhow};

fn cache_dir() -> Option<PathBuf> {
    env::var_os("DAMON_TRACE_CACHE")
        .map(PathBuf::from)
        .or_else(|| env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("damon-trace")))
        .or_else(|| env::var_os("HOME").map(|d| PathBuf::from(d).join(".cache/damon-trace")))
}

fn main() -> anyhow::Result<()> {
    println!("cargo:rerun-if-env-changed=DAMON_TRACE_CACHE");
    println!("cargo:rerun-if-env-changed=PATH");
    let path = env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = env::split_paths(&path).collect();
    let on_path = dirs.iter().any(|d| d.join("bpf-linker").is_file());
    if !on_path {
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
        let joined = env::join_paths(dirs).context("PATH")?;
        // SAFETY: build scripts are single-threaded at this point; the variable is read by the
        // child cargo that aya-build spawns.
        unsafe { env::set_var("PATH", joined) };
    }
    let ebpf = aya_build::Package {
        name: "damon-ebpf",
        root_dir: concat!(env!("CARGO_MANIFEST_DIR"), "/../damon-ebpf"),
        ..Default::default()
    };
    aya_build::build_ebpf([ebpf], aya_build::Toolchain::default())
}
