//! Bringing the guest's /out home: the tarball that crossed the virtio serial port is checked
//! and unpacked into the caller's directory.
use std::{fs, path::Path, process::Command};

use anyhow::{Context as _, Result, bail};

use crate::util;

/// Marks a directory as written by `vm::run`, so that a later run may clear it.
const OUT_STAMP: &str = ".damon-vm-out";

/// Replaces `out_dir`'s contents with the guest's /out tarball (checked against its size).
pub fn receive_out(tar: &Path, expected: u64, out_dir: &Path) -> Result<()> {
    let got = fs::metadata(tar).map(|m| m.len()).unwrap_or(0);
    if got != expected {
        bail!("the /out tarball arrived truncated ({got} of {expected} bytes)");
    }
    clear_out_dir(out_dir)?;
    util::run(
        Command::new("tar")
            .args(["-x", "--no-same-owner", "-f"])
            .arg(tar)
            .arg("-C")
            .arg(out_dir),
    )
    .context("unpacking the guest's /out")?;
    fs::write(
        out_dir.join(OUT_STAMP),
        b"written by `cargo xtask vm`; cleared on the next run\n",
    )
    .with_context(|| format!("writing {}", out_dir.join(OUT_STAMP).display()))
}

/// Empties `dir` only if a previous run wrote it (or it is empty): a mistyped `--out` must not
/// wipe unrelated files.
fn clear_out_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        let empty = fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .next()
            .is_none();
        if !empty && !dir.join(OUT_STAMP).exists() {
            bail!(
                "refusing to clear {}: it is not empty and was not written by `cargo xtask vm`; \
                 pass an empty or new --out directory",
                dir.display()
            );
        }
        fs::remove_dir_all(dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreign_out_dirs_are_not_cleared() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("mine");
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("precious"), b"x").unwrap();
        assert!(clear_out_dir(&d).is_err());
        assert!(d.join("precious").exists());
        fs::write(d.join(OUT_STAMP), b"").unwrap();
        clear_out_dir(&d).unwrap();
        assert_eq!(fs::read_dir(&d).unwrap().count(), 0);
    }
}
