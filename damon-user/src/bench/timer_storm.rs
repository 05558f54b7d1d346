//! A storm of timer interrupts on one CPU, for `disturb-loop`'s ground truth: a perf
//! software event (`PERF_COUNT_SW_CPU_CLOCK`) pinned to the CPU and sampling every
//! `1e9 / hz` ns is an hrtimer of that CPU (`perf_swevent_hrtimer`): each period one local
//! timer interrupt runs there and wakes nobody (no ring buffer is mapped), so the task on the
//! CPU keeps it and only counts interrupts. The kernel throttles a too-high rate
//! (`kernel.perf_event_max_sample_rate`); the tests read how many came from
//! /proc/interrupts, not from here.
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};

use anyhow::{Context as _, bail};

/// The first 64 bytes of `struct perf_event_attr` (`PERF_ATTR_SIZE_VER0`), all this needs.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    /// Bit 0 `disabled`; the other bits 0.
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
const PERF_ATTR_SIZE_VER0: u32 = 64;
/// `_IO('$', 0)` and `_IO('$', 1)`.
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;

/// The storm; stops when dropped.
pub struct TimerStorm {
    fd: OwnedFd,
}

impl TimerStorm {
    /// A storm of `hz` timer interrupts a second on `cpu`, off until [`Self::set`].
    pub fn on_cpu(cpu: i32, hz: u64) -> anyhow::Result<TimerStorm> {
        if hz == 0 || hz > 100_000 {
            bail!("--timer-storm {hz}: give 1 to 100000 interrupts a second");
        }
        let attr = PerfEventAttr {
            kind: PERF_TYPE_SOFTWARE,
            size: PERF_ATTR_SIZE_VER0,
            config: PERF_COUNT_SW_CPU_CLOCK,
            sample_period: 1_000_000_000 / hz,
            flags: 1,
            ..PerfEventAttr::default()
        };
        // SAFETY: a valid attr of the size it declares; pid -1 with a cpu: every task there.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                -1,
                cpu,
                -1,
                0,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error()).context(
                "perf_event_open of a CPU clock on the worker's CPU (root, and \
                 kernel.perf_event_paranoid allowing CPU-wide events)",
            );
        }
        // SAFETY: a new fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        Ok(TimerStorm { fd })
    }

    /// Turns the storm on or off.
    pub fn set(&self, on: bool) -> anyhow::Result<()> {
        let req = if on {
            PERF_EVENT_IOC_ENABLE
        } else {
            PERF_EVENT_IOC_DISABLE
        };
        // SAFETY: a perf event fd and a request without argument.
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), req as _, 0) } != 0 {
            return Err(std::io::Error::last_os_error()).context("enabling the timer storm");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_attr_is_the_first_abi_version() {
        assert_eq!(std::mem::size_of::<super::PerfEventAttr>(), 64);
        assert!(super::TimerStorm::on_cpu(0, 0).is_err());
    }
}
