//! `switch-loop`: context switches on demand (hidden; the benchmarks run it).
//!
//! Two threads pinned to CPU 0 pass one byte back and forth through two pipes: each round trip
//! blocks each thread once, so the CPU switches twice, from one thread straight to the other,
//! with no idle in between. What a program on `sched_switch` costs per switch (`record
//! --disturbance`'s task clocks, `damon-ebpf/src/clocks.rs`) is the difference in time per
//! switch with and without it. Prints one JSON line: the round trips, the timed loop's
//! nanoseconds, and the worker's context switches during it (getrusage: at least one a
//! round trip, since the echo runs only while the worker is off the CPU), so that the switch
//! count is the kernel's, not assumed.
use std::{process::ExitCode, time::Instant};

use anyhow::ensure;
use serde_json::json;

use super::pin_to;
use crate::cli::instruments::SwitchArgs;

/// Untimed round trips first (caches, the emulator's translation).
const WARM_UP: u64 = 1_000;

pub fn run(args: &SwitchArgs) -> anyhow::Result<ExitCode> {
    let (ping_r, ping_w) = pipe()?;
    let (pong_r, pong_w) = pipe()?;
    let total = WARM_UP + args.round_trips;
    let echo = std::thread::spawn(move || -> anyhow::Result<()> {
        pin_to(0);
        for _ in 0..total {
            transfer(ping_r, pong_w)?;
        }
        Ok(())
    });
    pin_to(0);
    let trip = || -> anyhow::Result<()> {
        send(ping_w)?;
        recv(pong_r)
    };
    for _ in 0..WARM_UP {
        trip()?;
    }
    let switches_before = switches();
    let start = Instant::now();
    for _ in 0..args.round_trips {
        trip()?;
    }
    let loop_ns = start.elapsed().as_nanos() as u64;
    let switches = switches() - switches_before;
    echo.join()
        .map_err(|_| anyhow::anyhow!("the echo thread panicked"))??;
    for fd in [ping_r, ping_w, pong_r, pong_w] {
        // SAFETY: our own descriptors, closed once, after both threads are done with them.
        unsafe { libc::close(fd) };
    }
    println!(
        "{}",
        json!({
            "round_trips": args.round_trips,
            "loop_ns": loop_ns,
            "ns_per_round_trip": loop_ns as f64 / args.round_trips.max(1) as f64,
            "worker_switches": switches,
        })
    );
    Ok(ExitCode::SUCCESS)
}

/// The echo thread's one step: a byte in, the byte out.
fn transfer(from: i32, to: i32) -> anyhow::Result<()> {
    recv(from)?;
    send(to)
}

fn send(fd: i32) -> anyhow::Result<()> {
    // SAFETY: one byte from a valid buffer to a pipe of ours.
    let n = unsafe { libc::write(fd, [0u8].as_ptr().cast(), 1) };
    ensure!(n == 1, "write: {}", std::io::Error::last_os_error());
    Ok(())
}

fn recv(fd: i32) -> anyhow::Result<()> {
    let mut byte = [0u8; 1];
    // SAFETY: one byte into a valid buffer, from a pipe of ours.
    let n = unsafe { libc::read(fd, byte.as_mut_ptr().cast(), 1) };
    ensure!(n == 1, "read: {}", std::io::Error::last_os_error());
    Ok(())
}

fn pipe() -> anyhow::Result<(i32, i32)> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe writes two descriptors into the array.
    let rc = unsafe { libc::pipe(fds.as_mut_ptr()) };
    ensure!(rc == 0, "pipe: {}", std::io::Error::last_os_error());
    Ok((fds[0], fds[1]))
}

/// The calling thread's context switches so far, voluntary and involuntary (the echo, once
/// woken, may preempt the worker before it blocks).
fn switches() -> u64 {
    // SAFETY: a zeroed rusage is valid; getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_THREAD with a valid pointer.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    if rc != 0 {
        return 0;
    }
    (usage.ru_nvcsw + usage.ru_nivcsw) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On the host: the worker leaves the CPU once per round trip (the echo runs only then).
    #[test]
    fn each_round_trip_blocks_the_worker() {
        let before = switches();
        run(&SwitchArgs { round_trips: 200 }).expect("runs");
        // The worker is this test's thread: the echo, pinned to its CPU, answers only while
        // the worker is off it.
        assert!(switches() - before >= 200);
    }
}
