//! SIGINT/SIGTERM/SIGHUP become a flag the run loop polls, so the scenario can restore DAMON's
//! state before exiting instead of dying with a kdamond still running.
use std::{
    io,
    sync::atomic::{AtomicI32, Ordering},
};

use anyhow::{Context, Result};

/// The last stop signal received (0: none). A process-wide static because a signal handler
/// can reach nothing else.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

const STOP_SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

extern "C" fn record_signal(sig: libc::c_int) {
    // An atomic store is async-signal-safe; nothing else happens here.
    RECEIVED.store(sig, Ordering::SeqCst);
}

/// Installed stop-signal handlers; the previous dispositions come back on drop.
pub struct StopSignals {
    previous: Vec<(libc::c_int, libc::sigaction)>,
}

impl StopSignals {
    pub fn install() -> Result<Self> {
        RECEIVED.store(0, Ordering::SeqCst);
        let mut guard = Self {
            previous: Vec::new(),
        };
        for sig in STOP_SIGNALS {
            // SAFETY: all-zero is a valid `sigaction` (no flags, empty mask, SIG_DFL) that is
            // filled in below before use.
            let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
            action.sa_sigaction = record_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            // SA_RESTART: reads and waits elsewhere in the process must not fail with EINTR.
            action.sa_flags = libc::SA_RESTART;
            // SAFETY: `sa_mask` is a valid, owned sigset_t.
            unsafe { libc::sigemptyset(&mut action.sa_mask) };
            // SAFETY: as above; `old` receives the previous disposition.
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: valid signal number and pointers to initialised structs; the handler
            // only performs an atomic store.
            if unsafe { libc::sigaction(sig, &action, &mut old) } != 0 {
                return Err(io::Error::last_os_error())
                    .with_context(|| format!("installing a handler for signal {sig}"));
            }
            guard.previous.push((sig, old));
        }
        Ok(guard)
    }

    /// The stop signal received since [`StopSignals::install`], if any.
    pub fn received(&self) -> Option<i32> {
        match RECEIVED.load(Ordering::SeqCst) {
            0 => None,
            sig => Some(sig),
        }
    }
}

impl Drop for StopSignals {
    fn drop(&mut self) {
        for (sig, old) in self.previous.drain(..).rev() {
            // SAFETY: restores a disposition the kernel handed us for the same signal.
            unsafe { libc::sigaction(sig, &old, std::ptr::null_mut()) };
        }
    }
}

pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raised_signal_sets_the_flag_and_handlers_are_restored() {
        let guard = StopSignals::install().expect("install");
        assert_eq!(guard.received(), None);
        // SAFETY: SIGHUP is handled by `record_signal` while the guard lives.
        unsafe { libc::raise(libc::SIGHUP) };
        assert_eq!(guard.received(), Some(libc::SIGHUP));
        assert_eq!(signal_name(libc::SIGHUP), "SIGHUP");
        drop(guard);
        // SAFETY: querying (null new action) the current disposition.
        let mut now: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers.
        unsafe { libc::sigaction(libc::SIGHUP, std::ptr::null(), &mut now) };
        assert_ne!(
            now.sa_sigaction,
            record_signal as extern "C" fn(libc::c_int) as usize
        );
    }
}
