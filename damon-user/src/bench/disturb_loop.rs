//! `disturb-loop`: ground truth for the disturbance flags (hidden; the guest tests run it).
//!
//! One worker thread, pinned to CPU 0, makes a known number of system calls whose kernel
//! function the test traces, and reads its own context-switch counts (`getrusage(RUSAGE_THREAD)`,
//! the same `nvcsw`/`nivcsw` the programs read, but taken by the task itself, outside the
//! function) before and after each call. With `--hog`, a thread pinned to CPU 0 spins beside
//! it, so that its long calls are preempted; with `--hog-odd`, only during its odd-numbered
//! calls (the thread is parked, blocked, during the others), so that calls alone and calls
//! beside the spinner alternate under the same conditions of the machine. (The interrupts the
//! tests count against are the local timer's, at the kernel's HZ: an IPI storm from CPU 1 with
//! `membarrier` reached hardly any call under TCG, whose vCPUs take turns on one host thread.)
//!
//! Prints one JSON line: the worker's tid, the calls made, and per call the switches the task
//! saw across the system call (`[voluntary, involuntary]`), in call order.
use std::{
    process::ExitCode,
    sync::atomic::{AtomicBool, Ordering},
};

use anyhow::Context as _;
use clap::Args;
use serde_json::json;

use super::pin_to;

#[derive(Debug, Args)]
pub struct DisturbArgs {
    /// The system call each call makes: `sleep` (nanosleep of 1 ms: the task sleeps in
    /// `hrtimer_nanosleep`), `zero` (read of --bytes from /dev/zero: `read_zero` runs that
    /// long), `getppid` (a call too short to be disturbed, mostly).
    #[arg(long, value_parser = ["sleep", "zero", "getppid"])]
    pub work: String,
    #[arg(long, default_value_t = 100)]
    pub calls: u64,
    /// Bytes each `zero` call reads.
    #[arg(long, default_value_t = 1 << 20)]
    pub bytes: usize,
    /// A spinning thread on the worker's CPU.
    #[arg(long)]
    pub hog: bool,
    /// The spinning thread only during odd-numbered calls (0-based).
    #[arg(long, conflicts_with = "hog")]
    pub hog_odd: bool,
}

/// Whether the spinner should spin, and whether it is parked (blocked).
#[derive(Default)]
struct Hog {
    state: std::sync::Mutex<(bool, bool)>,
    changed: std::sync::Condvar,
}

impl Hog {
    /// The spinner's loop, until `done`: spins while asked to, blocks otherwise.
    fn run(&self, done: &AtomicBool) {
        pin_to(0);
        while !done.load(Ordering::Relaxed) {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if !st.0 {
                st.1 = true;
                self.changed.notify_all();
                while !st.0 && !done.load(Ordering::Relaxed) {
                    st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
                }
                st.1 = false;
                continue;
            }
            drop(st);
            for _ in 0..10_000 {
                std::hint::spin_loop();
            }
        }
    }

    /// Asks the spinner to spin (`true`), or to park and waits until it has.
    fn set(&self, spin: bool) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.0 = spin;
        self.changed.notify_all();
        while !spin && !st.1 {
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// This thread's `[voluntary, involuntary]` context switches so far.
fn switches() -> [i64; 2] {
    // SAFETY: a zeroed rusage is valid; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_THREAD with a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    [ru.ru_nvcsw, ru.ru_nivcsw]
}

/// One call of `work`.
fn call(work: &str, zero: &std::fs::File, buf: &mut [u8]) {
    use std::os::fd::AsRawFd as _;
    match work {
        "sleep" => std::thread::sleep(std::time::Duration::from_millis(1)),
        // SAFETY: reads into a buffer of its length.
        "zero" => unsafe {
            libc::read(zero.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len());
        },
        _ => {
            // SAFETY: getppid takes no arguments.
            std::hint::black_box(unsafe { libc::syscall(libc::SYS_getppid) });
        }
    }
}

pub fn run(args: &DisturbArgs) -> anyhow::Result<ExitCode> {
    let zero = std::fs::File::open("/dev/zero").context("opening /dev/zero")?;
    // Touched first, so that no call faults its pages in (a fault may sleep).
    let mut buf = vec![1u8; args.bytes.max(1)];
    let done = AtomicBool::new(false);
    let hog = Hog::default();
    let (tid, per_call) = std::thread::scope(|scope| {
        if args.hog || args.hog_odd {
            scope.spawn(|| hog.run(&done));
            hog.set(args.hog);
        }
        pin_to(0);
        // SAFETY: gettid takes no arguments.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) };
        let mut per_call = Vec::with_capacity(args.calls as usize);
        for i in 0..args.calls {
            if args.hog_odd {
                hog.set(i % 2 == 1);
            }
            let before = switches();
            call(&args.work, &zero, &mut buf);
            let after = switches();
            per_call.push([after[0] - before[0], after[1] - before[1]]);
        }
        done.store(true, Ordering::Relaxed);
        hog.set(true);
        (tid, per_call)
    });
    println!(
        "{}",
        json!({
            "tid": tid,
            "made": per_call.len(),
            "switches": per_call,
        })
    );
    Ok(ExitCode::SUCCESS)
}
