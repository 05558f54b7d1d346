//! `disturb-loop`: ground truth for the disturbance flags (hidden; the guest tests run it).
//!
//! One worker thread, pinned to CPU 0, makes a known number of system calls whose kernel
//! function the test traces, and reads its own context-switch counts (`getrusage(RUSAGE_THREAD)`,
//! the same `nvcsw`/`nivcsw` the programs read, but taken by the task itself, outside the
//! function) before and after each call. With `--hog`, a thread pinned to CPU 0 spins beside
//! it, so that its long calls are preempted; with `--hog-odd`, only during its odd-numbered
//! calls (the thread is parked, blocked, during the others), so that calls alone and calls
//! beside the spinner alternate under the same conditions of the machine. With
//! `--timer-storm HZ`, a storm of timer interrupts on the worker's CPU (`timer_storm.rs`), on
//! every call or with `--storm-odd` on odd ones. (An IPI storm from CPU 1 with `membarrier`
//! reached hardly any call under TCG, whose vCPUs take turns on one host thread: the storm has
//! to be local.)
//!
//! Prints one JSON line: the worker's tid, the calls made, per call the switches the task saw
//! across the system call (`[voluntary, involuntary]`), in call order, `cpu_ns`: per call the
//! task's own CPU time across it (`CLOCK_THREAD_CPUTIME_ID`, the scheduler's
//! `sum_exec_runtime`, read just inside the two switch reads), `sleep_ns`: what each `sleep`
//! call asks for (null for the others), and `interrupts`: how
//! long the calls took in all and how many hard interrupts CPU 0 took meanwhile
//! (/proc/interrupts), `storm_hz`, the storm's rate (null without one), and `bytes`, what each
//! `zero` call read (see `--min-call-ms`).
use std::{
    process::ExitCode,
    sync::atomic::{AtomicBool, Ordering},
};

use anyhow::Context as _;
use serde_json::json;

use super::pin_to;
use crate::cli::instruments::DisturbArgs;

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

/// This thread's CPU time so far, ns (`CLOCK_THREAD_CPUTIME_ID`: the scheduler's
/// `sum_exec_runtime`, brought up to date by the read).
fn cpu_time_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What a `sleep` call asks for.
const SLEEP: std::time::Duration = std::time::Duration::from_millis(1);

/// CPU 0's hard interrupts so far as /proc/interrupts shows them: the first count of every
/// line (device IRQs, and on x86 the local timer, IPIs, NMIs and the other system vectors),
/// the kernel's own account that the tests hold the calls' counts against; `None` when the
/// file cannot be read.
fn cpu0_interrupts() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/interrupts").ok()?;
    Some(
        text.lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum(),
    )
}

/// Spins for a pseudo-random part of one storm period (`hz`), so that a call made right after
/// the storm is switched on meets its first interrupt at any point, not always at the same
/// time after its start (the storm's timer starts one period after it is switched on).
fn random_phase(i: u64, hz: u64) {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    x ^= x >> 29;
    let wait = std::time::Duration::from_nanos(x % (1_000_000_000 / hz.max(1)));
    let start = std::time::Instant::now();
    while start.elapsed() < wait {
        std::hint::spin_loop();
    }
}

/// The median time of 11 calls of `work` reading `bytes`, made by a thread of its own on
/// CPU 0, so that the worker makes exactly the calls it reports.
fn call_ns(work: &str, zero: &std::fs::File, bytes: usize) -> u64 {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                pin_to(0);
                let mut buf = vec![1u8; bytes];
                let mut took: Vec<u64> = (0..11)
                    .map(|_| {
                        let start = std::time::Instant::now();
                        call(work, zero, &mut buf);
                        start.elapsed().as_nanos() as u64
                    })
                    .collect();
                took.sort_unstable();
                took[took.len() / 2]
            })
            .join()
            .unwrap_or(0)
    })
}

/// With `--min-call-ms`, the bytes a `zero` call reads: `bytes`, doubled until a call takes
/// `ms` (at most 256 MiB). Beside a spinner, a call preempted under the `lazy` model (7.x)
/// is switched out only at the tick after the one that asked for it; a 16 MiB read took 4 ms
/// on one machine and 3 ms on another, so on the faster one most such switches fell after
/// the call, at the system call's exit.
///
/// With `--storm-odd`, likewise until a call takes half the storm's period, so that a call
/// made at a random phase meets the storm about one time in two on a fast machine too (a
/// 256 KiB read takes 30 µs on 7.2 under TCG, 15 % of 5 kHz's period: 36–112 of 500 calls met
/// it on 6.12, 7.2 and 7.3).
fn call_bytes(args: &DisturbArgs, zero: &std::fs::File) -> usize {
    let mut bytes = args.bytes.max(1);
    let storm_ns = match (args.storm_odd, args.timer_storm) {
        (true, Some(hz)) => 1_000_000_000 / (2 * hz.max(1)),
        _ => 0,
    };
    let min_ns = args
        .min_call_ms
        .map_or(0, |ms| ms * 1_000_000)
        .max(storm_ns);
    if min_ns > 0 && args.work == "zero" {
        while bytes < 256 << 20 && call_ns(&args.work, zero, bytes) < min_ns {
            bytes *= 2;
        }
    }
    bytes
}

/// With `--storm-odd`, the storm's rate: `hz`, or fewer interrupts a second where a call takes
/// more than half of `hz`'s period, so that a call met at a random phase is interrupted about
/// one time in two or less, and half of those calls stay clean. (On 6.1 under TCG a 256 KiB
/// read takes 650 µs, 16 times as long as on 7.2: at 5 kHz nearly every call met the storm
/// and too few stayed clean to compare.)
fn storm_rate(hz: u64, work: &str, zero: &std::fs::File, bytes: usize) -> u64 {
    let per_call = call_ns(work, zero, bytes);
    hz.min(1_000_000_000 / (2 * per_call).max(1)).max(1)
}

/// One call of `work`.
fn call(work: &str, zero: &std::fs::File, buf: &mut [u8]) {
    use std::os::fd::AsRawFd as _;
    match work {
        "sleep" => std::thread::sleep(SLEEP),
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
    let mut buf = vec![1u8; call_bytes(args, &zero)];
    let done = AtomicBool::new(false);
    let hog = Hog::default();
    let storm_hz = args.timer_storm.map(|hz| match args.storm_odd {
        true => storm_rate(hz, &args.work, &zero, buf.len()),
        false => hz,
    });
    let storm = storm_hz
        .map(|hz| super::timer_storm::TimerStorm::on_cpu(0, hz))
        .transpose()?;
    if let Some(s) = &storm {
        s.set(!args.storm_odd)?;
    }
    let (tid, per_call, cpu_ns, interrupts) = std::thread::scope(|scope| {
        if args.hog || args.hog_odd {
            scope.spawn(|| hog.run(&done));
            hog.set(args.hog);
        }
        pin_to(0);
        // SAFETY: gettid takes no arguments.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) };
        let mut per_call = Vec::with_capacity(args.calls as usize);
        let mut cpu_ns = Vec::with_capacity(args.calls as usize);
        let mut failed = None;
        let (irqs_start, start) = (cpu0_interrupts(), std::time::Instant::now());
        for i in 0..args.calls {
            if args.hog_odd {
                hog.set(i % 2 == 1);
            }
            if let (Some(s), true) = (&storm, args.storm_odd) {
                // On failure the loop ends first: the spinner must be told to stop.
                if let Err(e) = s.set(i % 2 == 1) {
                    failed = Some(e);
                    break;
                }
                if i % 2 == 1 {
                    random_phase(i, storm_hz.unwrap_or(1));
                }
            }
            let before = switches();
            let cpu_before = cpu_time_ns();
            call(&args.work, &zero, &mut buf);
            let cpu_after = cpu_time_ns();
            let after = switches();
            per_call.push([after[0] - before[0], after[1] - before[1]]);
            cpu_ns.push(cpu_after.wrapping_sub(cpu_before));
        }
        let interrupts = json!({
            "seconds": start.elapsed().as_secs_f64(),
            "cpu0": irqs_start.zip(cpu0_interrupts()).map(|(a, b)| b - a),
        });
        done.store(true, Ordering::Relaxed);
        hog.set(true);
        failed.map_or(Ok((tid, per_call, cpu_ns, interrupts)), Err)
    })?;
    println!(
        "{}",
        json!({
            "tid": tid,
            "made": per_call.len(),
            "switches": per_call,
            "cpu_ns": cpu_ns,
            "sleep_ns": (args.work == "sleep").then_some(SLEEP.as_nanos() as u64),
            "interrupts": interrupts,
            "storm_hz": storm_hz,
            "bytes": buf.len(),
        })
    );
    Ok(ExitCode::SUCCESS)
}
