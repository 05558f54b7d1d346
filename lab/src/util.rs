//! Paths, locking and child-process helpers shared by every task.
use std::{
    env,
    ffi::OsStr,
    fs::{self, File},
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context as _, Result, bail};

/// Prints one status line for a step. Status goes to stderr so that `cargo xtask vm` leaves
/// stdout to the guest console.
pub fn status(step: &str, msg: impl std::fmt::Display) {
    eprintln!("[xtask] {step}: {msg}");
}

/// Where downloads and builds are kept: `$DAMON_TRACE_CACHE`, else
/// `$XDG_CACHE_HOME/damon-trace`, else `$HOME/.cache/damon-trace` (the same rule as
/// damon-user's build.rs, which looks for bpf-linker there).
pub fn cache_dir() -> Result<PathBuf> {
    let dir = env::var_os("DAMON_TRACE_CACHE")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            env::var_os("XDG_CACHE_HOME")
                .filter(|v| !v.is_empty())
                .map(|d| PathBuf::from(d).join("damon-trace"))
        })
        .or_else(|| env::var_os("HOME").map(|d| PathBuf::from(d).join(".cache/damon-trace")))
        .context("no cache directory: set DAMON_TRACE_CACHE (or HOME)")?;
    fs::create_dir_all(&dir).with_context(|| {
        format!(
            "creating cache dir {}; set DAMON_TRACE_CACHE to a writable directory",
            dir.display()
        )
    })?;
    Ok(dir)
}

/// The workspace root (this crate lives one level below it).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// Cargo's target directory, honouring `CARGO_TARGET_DIR` like cargo does.
pub fn target_dir() -> PathBuf {
    match env::var_os("CARGO_TARGET_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                workspace_root().join(dir)
            }
        }
        None => workspace_root().join("target"),
    }
}

/// An exclusive advisory lock held until dropped; serialises concurrent xtask runs (e.g. VM
/// tests in parallel threads) that would otherwise race on the same cache entries.
pub struct Lock(#[allow(dead_code)] File);

pub fn lock(path: &Path) -> Result<Lock> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let file =
        File::create(path).with_context(|| format!("creating lock file {}", path.display()))?;
    file.lock()
        .with_context(|| format!("locking {}", path.display()))?;
    Ok(Lock(file))
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        s.push(' ');
        s.push_str(&arg.to_string_lossy());
    }
    s
}

/// Runs `cmd` with inherited stdio and fails, naming the command, if it does not exit 0.
pub fn run(cmd: &mut Command) -> Result<()> {
    let what = describe(cmd);
    let st = cmd
        .status()
        .with_context(|| format!("cannot start `{what}`: is it installed?"))?;
    if !st.success() {
        bail!("`{what}` failed ({st})");
    }
    Ok(())
}

/// Runs `cmd` and returns its stdout; on failure the error carries stderr.
pub fn output(cmd: &mut Command) -> Result<String> {
    let what = describe(cmd);
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot start `{what}`: is it installed?"))?;
    if !out.status.success() {
        bail!(
            "`{what}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8(out.stdout).with_context(|| format!("`{what}` printed non-UTF-8 output"))
}

/// The first executable called `name` on PATH.
pub fn which(name: impl AsRef<OsStr>) -> Option<PathBuf> {
    let path = env::var_os("PATH")?;
    env::split_paths(&path)
        .map(|d| d.join(name.as_ref()))
        .find(|p| p.is_file())
}

/// PATH with `dir` in front, for children that must find bpf-linker.
pub fn path_with(dir: &Path) -> Result<std::ffi::OsString> {
    let old = env::var_os("PATH").unwrap_or_default();
    let dirs = std::iter::once(dir.to_path_buf()).chain(env::split_paths(&old));
    env::join_paths(dirs).context("a PATH entry contains ':'")
}

/// True when running as root (needed for `apt-get install`).
pub fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt as _;
    // /proc/self is owned by the effective uid of the process reading it.
    fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

/// Writes `bytes` to `path` through a temporary file and a rename, so readers never see a
/// partial file (a killed download must not look cached).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, path)
        .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

/// A `--duration` value: seconds, `20` or `20s`, at least 1.
pub fn parse_seconds(s: &str) -> Result<u64, String> {
    let n: u64 = s
        .strip_suffix('s')
        .unwrap_or(s)
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds (20 or 20s)"))?;
    if n == 0 {
        return Err("the duration must be at least 1 s".into());
    }
    Ok(n)
}
