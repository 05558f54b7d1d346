//! Where DAMON's files live, and raw attribute I/O with errors that name cause and remedy.
//!
//! Every path hangs off a [`SysfsRoot`] so that the logic above it runs unchanged against a
//! temporary directory tree in unit tests.
use std::{
    fs, io,
    path::{Path, PathBuf},
    str::FromStr,
    thread,
    time::{Duration, Instant},
};

use anyhow::{Result, anyhow};

/// The DAMON_STAT module (its kdamond is exclusive; the scenario switches it off for the run
/// and back on after it). Here, below `restore.rs` and `snapshot.rs`, which both name it.
pub const DAMON_STAT: &str = "damon_stat";

/// The filesystem root under which `sys/` and `proc/` are looked up (`/` on a real system).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysfsRoot {
    root: PathBuf,
}

impl SysfsRoot {
    /// The running system.
    pub fn system() -> Self {
        Self::at("/")
    }

    /// A tree that mirrors `/` (tests, or a chroot).
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// `sys/kernel/mm/damon`: present iff the kernel has CONFIG_DAMON_SYSFS.
    pub fn damon_dir(&self) -> PathBuf {
        self.root.join("sys/kernel/mm/damon")
    }

    pub fn kdamonds(&self) -> PathBuf {
        self.damon_dir().join("admin/kdamonds")
    }

    /// `enabled` parameter of a DAMON special-purpose module (damon_stat, damon_reclaim, ...).
    pub fn module_enabled(&self, module: &str) -> PathBuf {
        self.root
            .join("sys/module")
            .join(module)
            .join("parameters/enabled")
    }

    pub fn node_dir(&self, node: u32) -> PathBuf {
        self.root
            .join(format!("sys/devices/system/node/node{node}"))
    }

    pub fn iomem(&self) -> PathBuf {
        self.root.join("proc/iomem")
    }

    pub fn kallsyms(&self) -> PathBuf {
        self.root.join("proc/kallsyms")
    }

    pub fn proc_dir(&self) -> PathBuf {
        self.root.join("proc")
    }

    pub fn proc_file(&self, pid: u32, name: &str) -> PathBuf {
        self.root.join(format!("proc/{pid}/{name}"))
    }
}

/// How long a read waits out EBUSY. A kdamond's `state` and `pid` take DAMON's sysfs lock
/// with a trylock and fail with EBUSY while another writer holds it, e.g. a tool's
/// `update_schemes_stats`, which holds it until the kdamond has answered (a sampling interval
/// or more), or the kernel's own periodic refresh of the stats.
const READ_BUSY_WAIT: Duration = Duration::from_secs(5);

/// The file's text, read again while it answers EBUSY, up to [`READ_BUSY_WAIT`].
fn read_string(path: &Path) -> io::Result<String> {
    let deadline = Instant::now() + READ_BUSY_WAIT;
    loop {
        match fs::read_to_string(path) {
            Err(e) if is_busy(&e) && Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(10));
            }
            read => return read,
        }
    }
}

/// Reads an attribute, without the newline the kernel appends.
pub fn read_attr(path: &Path) -> Result<String> {
    let text = read_string(path).map_err(|e| io_error(e, path, "reading"))?;
    Ok(text.trim_end_matches('\n').to_string())
}

/// Like [`read_attr`], but `None` when the file does not exist (an older kernel's layout).
pub fn read_opt(path: &Path) -> Result<Option<String>> {
    match read_string(path) {
        Ok(text) => Ok(Some(text.trim_end_matches('\n').to_string())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(e, path, "reading")),
    }
}

pub fn read_num<T: FromStr>(path: &Path) -> Result<T> {
    let text = read_attr(path)?;
    text.trim()
        .parse()
        .map_err(|_| anyhow!("{}: `{text}` is not a number", path.display()))
}

pub fn read_num_opt<T: FromStr>(path: &Path) -> Result<Option<T>> {
    match read_opt(path)? {
        None => Ok(None),
        Some(text) => text
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| anyhow!("{}: `{text}` is not a number", path.display())),
    }
}

/// Writes `value` exactly (no newline: some DAMON files, e.g. `memcg_path`, keep it verbatim).
/// Never creates files: a missing file means this kernel lacks the feature.
pub fn write_raw(path: &Path, value: &str) -> io::Result<()> {
    use std::io::Write as _;
    let mut file = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)?;
    file.write_all(value.as_bytes())
}

pub fn write_attr(path: &Path, value: &str) -> Result<()> {
    write_raw(path, value).map_err(|e| write_error(e, path, value))
}

pub fn write_error(err: io::Error, path: &Path, value: &str) -> anyhow::Error {
    io_error(err, path, &format!("writing `{value}` to"))
}

/// True for the errno a busy kdamond produces.
pub fn is_busy(err: &io::Error) -> bool {
    err.raw_os_error() == Some(libc::EBUSY)
}

/// Wraps an I/O error with what was being done and, where the errno says it, the remedy.
fn io_error(err: io::Error, path: &Path, doing: &str) -> anyhow::Error {
    let hint = match err.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            " (permission denied: run as root; DAMON's sysfs files are root-only)"
        }
        Some(libc::ENOENT) => " (this kernel does not have this DAMON file)",
        Some(libc::EBUSY) if doing == "reading" => {
            " (busy for 5 s: another program holds DAMON's sysfs lock; retry when it is done)"
        }
        Some(libc::EBUSY) => {
            " (busy: a kdamond is running; DAMON sysfs files cannot change while it runs)"
        }
        Some(libc::EINVAL) => " (the kernel rejected the value)",
        _ => "",
    };
    anyhow::Error::new(err).context(format!("{doing} {}{hint}", path.display()))
}

/// Whether `name` (a static or global kernel function) appears in kallsyms. Compiler-made
/// clones such as `name.isra.0` count; a module suffix (`\t[mod]`) is ignored.
pub fn kallsyms_has(kallsyms: &str, name: &str) -> bool {
    kallsyms.lines().any(|line| {
        let Some(sym) = line.split_whitespace().nth(2) else {
            return false;
        };
        sym == name
            || sym
                .strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('.'))
    })
}

/// Pages of a process per NUMA node, summed over its `/proc/<pid>/numa_maps` lines (`N<n>=<pages>`).
pub fn numa_maps_pages(numa_maps: &str) -> Vec<(u32, u64)> {
    let mut per_node: Vec<(u32, u64)> = Vec::new();
    for field in numa_maps.split_whitespace() {
        let Some((node, pages)) = field.strip_prefix('N').and_then(|f| f.split_once('=')) else {
            continue;
        };
        let (Ok(node), Ok(pages)) = (node.parse::<u32>(), pages.parse::<u64>()) else {
            continue;
        };
        match per_node.iter_mut().find(|(n, _)| *n == node) {
            Some((_, total)) => *total += pages,
            None => per_node.push((node, pages)),
        }
    }
    per_node.sort_unstable();
    per_node
}

/// Reads the workload's per-node page counts; empty if the process is gone.
pub fn process_node_pages(root: &SysfsRoot, pid: u32) -> Vec<(u32, u64)> {
    fs::read_to_string(root.proc_file(pid, "numa_maps"))
        .map(|text| numa_maps_pages(&text))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kallsyms_lookup() {
        let text = "ffffffff81000000 T _stext\n\
                    ffffffff81234560 t damos_va_migrate_dests_add.isra.0\n\
                    ffffffff81234990 t damon_hot_score\n\
                    ffffffffc0000000 t foo_bar\t[foo]\n";
        assert!(kallsyms_has(text, "damos_va_migrate_dests_add"));
        assert!(kallsyms_has(text, "damon_hot_score"));
        assert!(kallsyms_has(text, "foo_bar"));
        assert!(!kallsyms_has(text, "damon_hot"));
        assert!(!kallsyms_has(text, "damon_migrate_pages"));
    }

    #[test]
    fn numa_maps_are_summed_per_node() {
        let text = "55d0c0000000 default file=/bin/x mapped=3 N0=3 kernelpagesize_kB=4\n\
                    7f0000000000 prefer:0 anon=65536 dirty=65536 N0=57344 N1=8192 kernelpagesize_kB=4\n\
                    7ffd00000000 default stack anon=3 dirty=3 N1=3 kernelpagesize_kB=4\n";
        assert_eq!(numa_maps_pages(text), vec![(0, 57347), (1, 8195)]);
        assert!(numa_maps_pages("").is_empty());
    }

    #[test]
    fn writes_never_create_files_and_read_trims() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("nope");
        let err = write_attr(&missing, "1").expect_err("must not create");
        assert!(format!("{err:#}").contains("does not have this DAMON file"));
        let file = dir.path().join("state");
        fs::write(&file, "off\n").expect("seed");
        write_attr(&file, "on").expect("write");
        assert_eq!(read_attr(&file).expect("read"), "on");
        assert_eq!(read_opt(&missing).expect("read_opt"), None);
        assert!(read_num_opt::<u32>(&file).is_err());
    }
}
