//! A process forked at scenario start that puts DAMON's state back if the scenario dies
//! without doing it (SIGKILL, OOM kill, a crash): signal handlers and `Drop` cannot cover that.
//!
//! The scenario keeps the write end of a pipe and tells the guardian, one byte per event, what
//! it has changed; the guardian holds the [`PriorState`] (inherited through `fork`) and blocks
//! reading. When the scenario exits, however it exits, the kernel closes the write end and the
//! read returns end-of-file: there is no window between fork and "watching" in which a death
//! could be missed (unlike PR_SET_PDEATHSIG, which needs a getppid check after it and fires
//! when the forking *thread* ends). If by then the scenario had not restored, the guardian
//! does, with the same [`RestoreGuard`], and kills the workload if it is still there.
use std::{
    fs::File,
    io::{self, Read, Write as _},
    os::fd::{FromRawFd as _, OwnedFd},
};

use anyhow::{Context as _, Result};

use super::{
    restore::{PriorState, RestoreGuard},
    sysfs::SysfsRoot,
};

/// What the scenario tells its guardian (one byte each; the workload pid follows its byte as
/// 4 little-endian bytes).
const STAT_DISABLED: u8 = b'S';
const KDAMONDS_TOUCHED: u8 = b'K';
const RESTORED: u8 = b'R';
const WORKLOAD: u8 = b'W';
/// The scenario ends normally: nothing to do.
const DISMISSED: u8 = b'D';

/// The scenario's end of the pipe, and the guardian's pid to reap.
pub struct Guardian {
    pipe: Option<File>,
    pid: libc::pid_t,
}

impl Guardian {
    /// Forks the guardian. Call while the process is still single-threaded (before the
    /// workload's reader thread starts): the child runs ordinary Rust code after `fork`.
    pub fn start(root: &SysfsRoot, prior: &PriorState) -> Result<Guardian> {
        let mut fds = [0; 2];
        // SAFETY: `fds` is a valid out-array of two ints. O_CLOEXEC: the workload (exec'd)
        // must not inherit the write end, or the guardian would wait for it too.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error()).context("creating the guardian's pipe");
        }
        // SAFETY: both fds were just returned by pipe2 and are owned by nobody else.
        let (rx, tx) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: fork has no preconditions; the caller guarantees a single thread, so the
        // child's copy of the heap and of every lock is consistent.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error()).context("forking the scenario's guardian");
        }
        if pid == 0 {
            drop(tx);
            let code = guard(root, prior, File::from(rx));
            // SAFETY: ends the child without running the parent's exit handlers twice.
            unsafe { libc::_exit(code) };
        }
        drop(rx);
        Ok(Guardian {
            pipe: Some(File::from(tx)),
            pid,
        })
    }

    fn send(&mut self, bytes: &[u8]) {
        // A guardian that is gone cannot be helped; the scenario restores by itself anyway.
        if let Some(p) = &mut self.pipe
            && p.write_all(bytes).is_err()
        {
            self.pipe = None;
        }
    }

    pub fn stat_disabled(&mut self) {
        self.send(&[STAT_DISABLED]);
    }

    pub fn kdamonds_touched(&mut self) {
        self.send(&[KDAMONDS_TOUCHED]);
    }

    pub fn restored(&mut self) {
        self.send(&[RESTORED]);
    }

    pub fn workload(&mut self, pid: u32) {
        let mut msg = vec![WORKLOAD];
        msg.extend_from_slice(&pid.to_le_bytes());
        self.send(&msg);
    }
}

impl Drop for Guardian {
    /// The normal end: dismiss the guardian and reap it.
    fn drop(&mut self) {
        self.send(&[DISMISSED]);
        self.pipe = None;
        let mut status = 0;
        // SAFETY: waits for our own child; `status` is a valid out-pointer.
        unsafe { libc::waitpid(self.pid, &mut status, 0) };
    }
}

/// What the guardian learnt before end-of-file.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Heard {
    pub stat_disabled: bool,
    pub kdamonds_touched: bool,
    pub restored: bool,
    pub dismissed: bool,
    pub workload: Option<u32>,
}

/// Reads events until end-of-file (the scenario's exit).
pub fn listen(mut rx: impl Read) -> Heard {
    let mut heard = Heard::default();
    let mut byte = [0u8; 1];
    loop {
        match rx.read(&mut byte) {
            Ok(0) => return heard,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return heard,
        }
        match byte[0] {
            STAT_DISABLED => heard.stat_disabled = true,
            KDAMONDS_TOUCHED => heard.kdamonds_touched = true,
            RESTORED => heard.restored = true,
            DISMISSED => heard.dismissed = true,
            WORKLOAD => {
                let mut pid = [0u8; 4];
                if rx.read_exact(&mut pid).is_ok() {
                    heard.workload = Some(u32::from_le_bytes(pid));
                }
            }
            _ => {}
        }
    }
}

/// After end-of-file: undo what the scenario changed and did not restore. Returns whether
/// anything had to be done, or the restore error.
pub fn act(root: &SysfsRoot, prior: &PriorState, heard: &Heard) -> Result<bool> {
    if heard.dismissed {
        return Ok(false);
    }
    if let Some(pid) = heard.workload {
        kill_workload(root, pid);
    }
    if heard.restored || !(heard.stat_disabled || heard.kdamonds_touched) {
        return Ok(false);
    }
    let mut guard = RestoreGuard::new(root, prior.clone());
    guard.assume(heard.stat_disabled, heard.kdamonds_touched);
    guard.restore()?;
    Ok(true)
}

/// SIGKILLs the workload if that pid is still a `__workload` (it also has a parent-death
/// signal; this covers the case where it ignored or missed it).
fn kill_workload(root: &SysfsRoot, pid: u32) {
    let cmdline = std::fs::read(root.proc_file(pid, "cmdline")).unwrap_or_default();
    let is_workload = cmdline.split(|b| *b == 0).any(|arg| arg == b"__workload");
    if is_workload && let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: plain kill(2) of a process we identified by its command line.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// Body of the forked guardian; returns its exit status.
fn guard(root: &SysfsRoot, prior: &PriorState, rx: File) -> i32 {
    // SAFETY: plain system calls on this process: its own session (a signal to the
    // scenario's process group, or the terminal hanging up, must not reach it), a name for
    // `ps`, and stop signals ignored (it ends when the scenario ends, by itself).
    unsafe {
        libc::setsid();
        libc::prctl(libc::PR_SET_NAME, c"damon-guardian".as_ptr());
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
            libc::signal(sig, libc::SIG_IGN);
        }
    }
    let scenario = std::os::unix::process::parent_id();
    let heard = listen(rx);
    match act(root, prior, &heard) {
        Ok(false) => 0,
        Ok(true) => {
            eprintln!(
                "damon-trace: migrate-hot: the scenario (pid {scenario}) ended without \
                 restoring DAMON (killed?); its guardian restored DAMON's previous state"
            );
            0
        }
        Err(e) => {
            eprintln!(
                "damon-trace: migrate-hot: the scenario (pid {scenario}) ended without \
                 restoring DAMON, and its guardian could not: {e:#}"
            );
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_collects_events_until_eof() {
        let mut msg = vec![STAT_DISABLED, KDAMONDS_TOUCHED, WORKLOAD];
        msg.extend_from_slice(&4242u32.to_le_bytes());
        let heard = listen(&msg[..]);
        assert_eq!(
            heard,
            Heard {
                stat_disabled: true,
                kdamonds_touched: true,
                workload: Some(4242),
                ..Heard::default()
            }
        );
        let heard = listen(&[KDAMONDS_TOUCHED, RESTORED, DISMISSED][..]);
        assert!(heard.restored && heard.dismissed);
        assert_eq!(listen(&[][..]), Heard::default());
    }
}
