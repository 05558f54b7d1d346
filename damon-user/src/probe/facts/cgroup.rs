//! `--cgroup PATH`: a cgroup v2 directory turned into the id the kernel gives its tasks.
use std::{os::unix::fs::MetadataExt, path::Path};

use crate::{capture::CgroupFilter, error::UsageError};

/// Where systemd (and most distributions) mount the cgroup v2 hierarchy.
pub const CGROUP2_ROOT: &str = "/sys/fs/cgroup";

/// `statfs` type of a cgroup v2 mount (`CGROUP2_SUPER_MAGIC`).
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// The cgroup v2 directory `path` (absolute, or relative to [`CGROUP2_ROOT`]) and its id: the
/// directory's inode number, which is the kernfs node id `bpf_get_current_cgroup_id` returns
/// for a task in it. Usage errors name the cause: no such directory, or not on a cgroup v2
/// mount (a v1 hierarchy, or any other file system).
pub fn resolve(path: &Path) -> anyhow::Result<CgroupFilter> {
    let full = if path.is_absolute() {
        path.to_path_buf()
    } else {
        Path::new(CGROUP2_ROOT).join(path)
    };
    let meta = std::fs::metadata(&full).map_err(|e| {
        UsageError(format!(
            "--cgroup {}: {e}; give a cgroup v2 directory, absolute or relative to \
             {CGROUP2_ROOT} (e.g. system.slice/cron.service)",
            full.display()
        ))
    })?;
    if !meta.is_dir() {
        return Err(UsageError(format!(
            "--cgroup {}: not a directory; give the cgroup's directory, not one of its files",
            full.display()
        ))
        .into());
    }
    let fs_type = statfs_type(&full)?;
    if fs_type != CGROUP2_SUPER_MAGIC {
        return Err(UsageError(format!(
            "--cgroup {}: not on a cgroup v2 file system (statfs type {fs_type:#x}); the filter \
             uses cgroup v2 ids: give a directory under a cgroup2 mount (`mount -t cgroup2 none \
             {CGROUP2_ROOT}` when none is mounted)",
            full.display()
        ))
        .into());
    }
    Ok(CgroupFilter {
        path: full.display().to_string(),
        id: meta.ino(),
    })
}

/// The file system type of `path` (`statfs`'s `f_type`).
fn statfs_type(path: &Path) -> anyhow::Result<i64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: a NUL-terminated path and a buffer of the right type the call fills.
    let rc = unsafe { libc::statfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(UsageError(format!(
            "--cgroup {}: statfs failed: {}",
            path.display(),
            std::io::Error::last_os_error()
        ))
        .into());
    }
    // SAFETY: statfs succeeded, so it filled the buffer.
    let st = unsafe { st.assume_init() };
    // `f_type` is a `c_long` with glibc and a `c_ulong` with musl (the static build).
    #[allow(clippy::unnecessary_cast)]
    Ok(st.f_type as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_is_not_a_cgroup_v2_directory() {
        let e = resolve(Path::new("/no/such/cgroup")).expect_err("missing");
        assert!(e.to_string().contains("/no/such/cgroup"), "{e}");
        let dir = std::env::temp_dir();
        let e = resolve(&dir).expect_err("tmp is no cgroup");
        assert!(e.to_string().contains("not on a cgroup v2"), "{e}");
        let e = resolve(Path::new("/proc/self/status")).expect_err("a file");
        assert!(e.to_string().contains("not a directory"), "{e}");
    }

    #[test]
    fn a_cgroup_v2_directory_gives_its_inode() {
        // The host test runs wherever cgroup2 is mounted at the usual place; elsewhere there
        // is nothing to resolve.
        let Ok(root) = resolve(Path::new(CGROUP2_ROOT)) else {
            eprintln!("skipping: no cgroup2 at {CGROUP2_ROOT}");
            return;
        };
        let ino = std::fs::metadata(CGROUP2_ROOT).expect("root").ino();
        assert_eq!(root.id, ino);
        // The root cgroup's id is 1 in every cgroup v2 hierarchy.
        assert_eq!(root.id, 1);
    }
}
