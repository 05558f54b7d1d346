//! The hot/cold memory workload (`damon-trace __workload`) and the parent's handle on it.
//!
//! The workload touches its whole mapping once (cold), then keeps writing the first part (hot).
//! Every few seconds it drops the hot pages and faults them in again, so fresh pages keep
//! landing on the source node and `migrate_hot` keeps having work.
use std::{
    env,
    io::{self, BufRead as _, BufReader, Write as _},
    os::unix::process::CommandExt as _,
    process::{Child, Command, ExitCode, Stdio},
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

const PAGE: usize = 4096;
const MIB: usize = 1 << 20;
/// What the workload prints once its whole mapping is resident.
const READY: &str = "ready";
/// Internal plumbing from parent to workload (the hidden CLI stays minimal).
const PARENT_ENV: &str = "DAMON_TRACE_WORKLOAD_PARENT";
const NODE_ENV: &str = "DAMON_TRACE_WORKLOAD_NODE";
/// How often the hot part is dropped and faulted in again.
const REFAULT_EVERY: Duration = Duration::from_secs(3);

/// The workload's mapping and its hot part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkloadSizes {
    pub total_mib: u64,
    pub hot_mib: u64,
}

/// Body of `damon-trace __workload`. Runs until SIGTERM/SIGKILL or until the parent dies.
pub fn run(sizes: WorkloadSizes) -> Result<ExitCode> {
    validate(sizes.total_mib, sizes.hot_mib)?;
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes a signal number and changes only this process.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) } != 0 {
        return Err(io::Error::last_os_error()).context("prctl(PR_SET_PDEATHSIG)");
    }
    // The parent may have died before prctl took effect: then nobody would ever stop us.
    if let Some(parent) = env::var(PARENT_ENV)
        .ok()
        .and_then(|p| p.parse::<i32>().ok())
    {
        // SAFETY: getppid has no preconditions.
        if unsafe { libc::getppid() } != parent {
            return Ok(ExitCode::SUCCESS);
        }
    }
    if let Some(node) = env::var(NODE_ENV).ok().and_then(|n| n.parse::<u32>().ok()) {
        // Best effort: without NUMA support allocations are local anyway.
        if let Err(e) = prefer_node(node) {
            eprintln!("damon-trace __workload: cannot prefer node {node}: {e}");
        }
        // Run on the node's CPUs too, so the pages it faults in again after each refault
        // land there even if the preference were ignored (and "same node" stays true).
        if let Err(e) = run_on_node_cpus(node) {
            eprintln!("damon-trace __workload: cannot pin to node {node}'s CPUs: {e}");
        }
    }
    let total = usize::try_from(sizes.total_mib)?.saturating_mul(MIB);
    let hot = usize::try_from(sizes.hot_mib)?.saturating_mul(MIB);
    let map = Mapping::new(total)?;
    map.touch(0, total, 1);
    let mut out = io::stdout().lock();
    writeln!(out, "{READY}").and_then(|()| out.flush())?;
    drop(out);
    let mut pass: u8 = 2;
    let mut last_refault = Instant::now();
    loop {
        map.touch(0, hot, pass);
        pass = pass.wrapping_add(1);
        if last_refault.elapsed() >= REFAULT_EVERY {
            map.drop_pages(hot)?;
            last_refault = Instant::now();
        }
        // Leave the CPU to kdamond now and then; one pass per sample interval is plenty.
        thread::sleep(Duration::from_millis(1));
    }
}

fn validate(total_mib: u64, hot_mib: u64) -> Result<()> {
    if total_mib == 0 || hot_mib == 0 || hot_mib > total_mib {
        bail!(
            "workload sizes must satisfy 0 < hot ({hot_mib} MiB) <= total ({total_mib} MiB); \
             adjust --hot-mib/--workload-mib"
        );
    }
    Ok(())
}

/// set_mempolicy(MPOL_PREFERRED, {node}): first-touch pages go to `node` whatever CPU we run on.
fn prefer_node(node: u32) -> io::Result<()> {
    let bits = libc::c_ulong::BITS;
    if node >= bits {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "node id too large",
        ));
    }
    let mask: libc::c_ulong = 1 << node;
    // SAFETY: `mask` is one c_ulong and maxnode (bits + 1, as the syscall expects one more
    // than the number of bits) covers exactly that word; the kernel only reads it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_set_mempolicy,
            libc::MPOL_PREFERRED,
            &mask as *const libc::c_ulong,
            libc::c_ulong::from(bits + 1),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `sched_setaffinity` to the CPUs in `/sys/devices/system/node/node<N>/cpulist`.
fn run_on_node_cpus(node: u32) -> io::Result<()> {
    let path = format!("/sys/devices/system/node/node{node}/cpulist");
    let cpus = parse_cpulist(&std::fs::read_to_string(&path)?)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("{path}: bad list")))?;
    // SAFETY: an all-zero cpu_set_t is a valid empty set; CPU_SET only writes inside it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let max = usize::try_from(libc::CPU_SETSIZE).unwrap_or(0);
    for cpu in cpus.into_iter().filter(|&c| c < max) {
        // SAFETY: `cpu` < CPU_SETSIZE, inside the set.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: pid 0 is this thread (the workload is single-threaded); the set is initialised.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Parses a kernel CPU list such as `0-3,8,10-11`. `None` if malformed or empty.
fn parse_cpulist(text: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
        if b < a {
            return None;
        }
        out.extend(a..=b);
    }
    (!out.is_empty()).then_some(out)
}

/// An anonymous private mapping, unmapped on drop.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(len: usize) -> Result<Self> {
        // SAFETY: a fresh anonymous mapping; no existing memory is affected.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error())
                .with_context(|| format!("mmap of {} MiB", len / MIB));
        }
        Ok(Self {
            ptr: ptr.cast(),
            len,
        })
    }

    /// Writes one byte per page in `[start, end)`: volatile so the compiler keeps every store
    /// (the point is to set the accessed bits DAMON samples).
    fn touch(&self, start: usize, end: usize, value: u8) {
        for off in (start..end.min(self.len)).step_by(PAGE) {
            // SAFETY: `off < self.len`, inside our live read/write mapping.
            unsafe { self.ptr.add(off).write_volatile(value) };
        }
    }

    /// Frees the first `len` bytes' pages; the next touch faults in fresh ones.
    fn drop_pages(&self, len: usize) -> Result<()> {
        // SAFETY: the range lies inside our mapping; MADV_DONTNEED on private anonymous
        // memory just makes it read as zero again, which the workload does not rely on.
        let rc = unsafe { libc::madvise(self.ptr.cast(), len.min(self.len), libc::MADV_DONTNEED) };
        if rc != 0 {
            return Err(io::Error::last_os_error()).context("madvise(MADV_DONTNEED)");
        }
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created in `new`; no references outlive self.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// The parent's handle: the child is killed and reaped on drop, whatever the exit path.
pub struct WorkloadChild {
    child: Child,
    ready: mpsc::Receiver<io::Result<String>>,
}

impl WorkloadChild {
    /// Starts `current_exe __workload`, in its own process group so a terminal's Ctrl-C reaches
    /// only the parent (which then restores DAMON and stops the child).
    pub fn spawn(total_mib: u64, hot_mib: u64, node: Option<u32>) -> Result<Self> {
        validate(total_mib, hot_mib)?;
        let exe = env::current_exe().context("locating the damon-trace executable")?;
        let mut cmd = Command::new(&exe);
        cmd.arg("__workload")
            .arg("--total-mib")
            .arg(total_mib.to_string())
            .arg("--hot-mib")
            .arg(hot_mib.to_string())
            .env(PARENT_ENV, std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .process_group(0);
        if let Some(node) = node {
            cmd.env(NODE_ENV, node.to_string());
        }
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting the workload ({} __workload)", exe.display()))?;
        let stdout = child.stdout.take().context("workload stdout")?;
        let (tx, ready) = mpsc::channel();
        // A thread turns the blocking read into something the parent can wait on with a timeout.
        thread::spawn(move || {
            let mut line = String::new();
            let result = BufReader::new(stdout).read_line(&mut line).map(|_| line);
            let _ = tx.send(result);
        });
        Ok(Self { child, ready })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until the mapping is resident. `Ok(false)` if `stop()` turned true first.
    pub fn wait_ready(&mut self, timeout: Duration, stop: impl Fn() -> bool) -> Result<bool> {
        let deadline = Instant::now() + timeout;
        loop {
            if stop() {
                return Ok(false);
            }
            match self.ready.recv_timeout(Duration::from_millis(100)) {
                Ok(Ok(line)) if line.trim() == READY => return Ok(true),
                Ok(Ok(line)) => {
                    self.ensure_running()?;
                    bail!("the workload said {line:?} instead of {READY:?}");
                }
                Ok(Err(e)) => return Err(e).context("reading from the workload"),
                Err(mpsc::RecvTimeoutError::Disconnected) => bail!("the workload closed stdout"),
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() > deadline => {
                    bail!("the workload did not become ready within {timeout:?}")
                }
                Err(mpsc::RecvTimeoutError::Timeout) => self.ensure_running()?,
            }
        }
    }

    /// Errors if the workload has exited (out of memory, killed, ...).
    pub fn ensure_running(&mut self) -> Result<()> {
        match self.child.try_wait().context("checking the workload")? {
            None => Ok(()),
            Some(status) => bail!(
                "the workload (pid {}) exited early: {status}; is there enough free memory \
                 for --workload-mib?",
                self.child.id()
            ),
        }
    }
}

impl Drop for WorkloadChild {
    fn drop(&mut self) {
        // Errors mean it is already gone; reaping is what matters.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_validated() {
        assert!(validate(256, 32).is_ok());
        assert!(validate(32, 32).is_ok());
        assert!(validate(0, 0).is_err());
        assert!(validate(16, 32).is_err());
        assert!(validate(16, 0).is_err());
    }

    #[test]
    fn cpulists_parse() {
        assert_eq!(parse_cpulist("0\n"), Some(vec![0]));
        assert_eq!(parse_cpulist("0-2,5,7-8"), Some(vec![0, 1, 2, 5, 7, 8]));
        assert_eq!(parse_cpulist("\n"), None);
        assert_eq!(parse_cpulist("3-1"), None);
        assert_eq!(parse_cpulist("x"), None);
    }

    #[test]
    fn mapping_touch_and_drop() {
        let map = Mapping::new(4 * PAGE).expect("mmap");
        map.touch(0, 4 * PAGE, 7);
        // SAFETY: reading inside the mapping just written.
        assert_eq!(unsafe { map.ptr.add(3 * PAGE).read_volatile() }, 7);
        map.drop_pages(2 * PAGE).expect("madvise");
        // SAFETY: as above; dropped private anonymous pages read back as zero.
        assert_eq!(unsafe { map.ptr.read_volatile() }, 0);
        // SAFETY: as above; pages past the dropped range keep their data.
        assert_eq!(unsafe { map.ptr.add(3 * PAGE).read_volatile() }, 7);
    }
}
