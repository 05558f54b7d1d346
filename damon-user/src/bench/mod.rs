//! Hidden helpers of `cargo xtask bench` (not part of the user contract):
//!
//! - `bench-loop`: a tight loop of `getppid` system calls, timed with CLOCK_MONOTONIC, so that
//!   the per-call cost of tracing the syscall's kernel function can be compared between
//!   untraced, bpftrace and damon-trace runs of the same guest;
//! - `bench-decode`: userspace throughput on one core from a synthetic ring image laid out
//!   like the kernel's BPF ring buffer, through the same decode ([`ring::decode`]), the same
//!   aggregation (`live`'s [`App::update`]) and the same capture writer (`record`'s
//!   [`CaptureWriter`]) the real paths use.
use std::{
    collections::BTreeMap,
    process::ExitCode,
    sync::atomic::AtomicUsize,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use damon_common::{AGGREGATION_MARK, CALL_RECORD_SIZE, CallRecord, FunctionId};
use serde_json::json;

pub mod disturb_loop;
mod heatmap;
pub mod read_mix;
mod ring_image;
pub mod switch_loop;
mod timer_storm;

pub use heatmap::run_heatmap;
use ring_image::item_size;
pub use ring_image::{RingImage, synthetic_records};

use crate::{
    capture::{AttachState, FunctionStatus, KernelIdentity, Meta, Summary, format::CaptureWriter},
    cli::instruments::{DecodeArgs, FloorArgs, LoopArgs, Pin},
    tui::app::{App, AppConfig, Event, Origin},
};

/// `bench-floor`: attaches the floor pair, prints `attached` and waits to be killed (the
/// programs detach when the process ends).
pub fn run_floor(args: &FloorArgs) -> anyhow::Result<ExitCode> {
    let kind = crate::probe::calibrate::floor::FloorKind::parse(&args.attach)
        .with_context(|| format!("no floor `{}`", args.attach))?;
    let _bpf = crate::probe::calibrate::floor::attach(&args.func, kind)?;
    println!("attached");
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// `bench-loop`: prints one JSON line `{"calls":N,"elapsed_ns":T,"ns_per_call":X,...}`: the
/// timed calls of all tasks, the longest task's loop, and `made` (every getppid call made,
/// warm-up included: the ground truth for the exactness tests) with each task's loop time.
pub fn run_loop(args: &LoopArgs) -> anyhow::Result<ExitCode> {
    let calls = args.calls.max(1);
    let warmup = if args.no_warmup { 0 } else { calls / 10 };
    let tasks = args.tasks.max(1);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let start_all = std::sync::Barrier::new(tasks as usize);
    let loops: Vec<u64> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..tasks as usize)
            .map(|i| {
                let start_all = &start_all;
                scope.spawn(move || {
                    match args.pin {
                        Pin::None => {}
                        Pin::Same => pin_to(0),
                        Pin::Spread => pin_to(i % cpus),
                    }
                    getppid_loop(warmup);
                    start_all.wait();
                    let start = clock_ns();
                    getppid_loop(calls);
                    clock_ns() - start
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(u64::MAX))
            .collect()
    });
    let elapsed = loops.iter().copied().max().unwrap_or(0);
    let timed = calls * u64::from(tasks);
    println!(
        "{}",
        json!({
            "calls": timed,
            "elapsed_ns": elapsed,
            "ns_per_call": elapsed as f64 / calls as f64,
            "made": (calls + warmup) * u64::from(tasks),
            "tasks": tasks,
            "task_loop_ns": loops,
        })
    );
    Ok(ExitCode::SUCCESS)
}

/// Pins the calling thread to `cpu` (best effort: a failure leaves it where it is).
pub(crate) fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes inside it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above, for a CPU number below the set's capacity.
    unsafe { libc::CPU_SET(cpu % libc::CPU_SETSIZE as usize, &mut set) };
    // SAFETY: pid 0 is this thread; the set is valid for its size.
    let _ = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
}

/// `n` raw getppid system calls (libc's wrapper might one day cache the answer).
fn getppid_loop(n: u64) {
    for _ in 0..n {
        // SAFETY: getppid takes no arguments, cannot fail and touches no memory of ours.
        let r = unsafe { libc::syscall(libc::SYS_getppid) };
        std::hint::black_box(r);
    }
}

fn clock_ns() -> u64 {
    crate::session::clock_ns(libc::CLOCK_MONOTONIC)
}

/// What one measured path did. Rates are per second of this thread's CPU time: on a shared
/// machine the wall clock also counts the time other processes had the core.
struct Measured {
    records: u64,
    elapsed: Duration,
    cpu: Duration,
}

impl Measured {
    fn per_sec(&self) -> f64 {
        self.records as f64 / self.cpu.as_secs_f64().max(1e-9)
    }

    fn per_wall_sec(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

fn thread_cpu() -> Duration {
    Duration::from_nanos(crate::session::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID))
}

/// Drains `image` again and again (the consumer wrapping round the ring) until `total` records
/// went to `batch_sink`, in batches of at most `batch`, pushed into one vector as the real
/// readers do: the sink empties it (`record`) or takes it away (`live` hands each batch to the
/// screen, and the next drain grows a new vector).
fn drive(
    image: &RingImage,
    total: u64,
    batch: usize,
    mut batch_sink: impl FnMut(&mut Vec<CallRecord>) -> anyhow::Result<()>,
) -> anyhow::Result<Measured> {
    let consumer = AtomicUsize::new(0);
    let mut done = 0u64;
    let mut pos = 0;
    let start = Instant::now();
    let cpu = thread_cpu();
    let mut buf: Vec<CallRecord> = Vec::new();
    while done < total {
        let want = batch.min((total - done) as usize);
        let (next, malformed) = image.drain(pos, want, &consumer, &mut |r| buf.push(r));
        anyhow::ensure!(malformed == 0, "the synthetic ring has malformed items");
        pos = if next >= image.producer { 0 } else { next };
        done += buf.len() as u64;
        batch_sink(&mut buf)?;
        buf.clear();
    }
    Ok(Measured {
        records: done,
        elapsed: start.elapsed(),
        cpu: thread_cpu() - cpu,
    })
}

fn statuses() -> Vec<FunctionStatus> {
    FunctionId::ALL
        .iter()
        .map(|f| FunctionStatus {
            name: f.symbol().to_owned(),
            id: *f as u32,
            attach: AttachState::Traced(crate::trace::Attach::Fentry),
            detail: None,
        })
        .collect()
}

/// The metadata of a benchmark's synthetic capture: every function traced with fentry, the
/// host's CPU model, nothing measured beside it.
fn bench_meta(command: &str, ring_size: u32, start_monotonic_ns: u64) -> Meta {
    Meta {
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        kernel: KernelIdentity::default(),
        hostname: String::new(),
        start_unix_ns: 0,
        start_monotonic_ns,
        command_line: vec!["damon-trace".into(), command.into()],
        mode: crate::capture::Mode::Stream,
        ring_size,
        functions: statuses(),
        damon: None,
        cpu_model: crate::capture::host_cpu_model(),
        calibration: None,
        intervals: None,
        args: Vec::new(),
        filter: Default::default(),
        disturbance: None,
        clock: Default::default(),
        slow: None,
    }
}

/// `bench-decode`: prints one JSON object with records per second (of CPU time, and of wall
/// time) of each path and the capture's bytes per record.
pub fn run_decode(args: &DecodeArgs) -> anyhow::Result<ExitCode> {
    let item = item_size(CALL_RECORD_SIZE);
    let per_ring = (args.ring_size as usize / item).max(1);
    let records = synthetic_records(per_ring, 0x5eed);
    let image = RingImage::build(args.ring_size as usize, &records);
    let batch = args.batch.max(1);
    let total = args.records.max(1);

    // 1. Drain and decode only: the floor under everything else.
    let mut checksum = 0u64;
    let decode = drive(&image, total, batch, |b| {
        checksum = checksum.wrapping_add(b.iter().map(|r| r.duration_ns).sum::<u64>());
        Ok(())
    })?;
    std::hint::black_box(checksum);

    // 2. Drain, decode and aggregate as `live` does.
    let aggregate = measure_aggregation(&image, total, batch)?;

    let mut out = json!({
        "records": total,
        "ring_bytes": args.ring_size,
        "item_bytes": item,
        "ring_items": image.items(),
        "batch": batch,
        "decode_per_sec": decode.per_sec(),
        "decode_aggregate_per_sec": aggregate.per_sec(),
        "decode_per_wall_sec": decode.per_wall_sec(),
        "decode_aggregate_per_wall_sec": aggregate.per_wall_sec(),
    });
    if args.skip_write {
        println!("{out}");
        return Ok(ExitCode::SUCCESS);
    }

    // 3. Drain, decode and write the capture as `record` does.
    let (write, bytes) = measure_capture_write(&image, total, batch, args, &records)?;

    out["capture_write_per_sec"] = json!(write.per_sec());
    out["capture_write_per_wall_sec"] = json!(write.per_wall_sec());
    out["capture_write_mb_per_sec"] = json!(bytes as f64 / 1e6 / write.cpu.as_secs_f64().max(1e-9));
    out["capture_bytes"] = json!(bytes);
    out["capture_bytes_per_record"] = json!(bytes as f64 / write.records as f64);
    println!("{out}");
    Ok(ExitCode::SUCCESS)
}

/// Drain, decode and aggregate as `live` does: the screen's App::update per batch and a
/// second boundary (window slice closed) every million records.
fn measure_aggregation(image: &RingImage, total: u64, batch: usize) -> anyhow::Result<Measured> {
    let mut app = App::new(AppConfig {
        kernel_release: "bench".into(),
        clock: crate::capture::Clock::Wall,
        origin: Origin::Live,
        recording: None,
        functions: statuses(),
        bucket_ns: 20,
        window_secs: 10,
        kernel_width_ns: None,
    });
    let mut since_second = 0u64;
    let mut seconds = 0u64;
    let mut calls = 0u64;
    let aggregate = drive(image, total, batch, |b| {
        since_second += b.len() as u64;
        calls += b.iter().filter(|r| r.func != AGGREGATION_MARK).count() as u64;
        // As `live`'s source hands a batch over and the screen hands it back (tui/source.rs).
        let next = crate::tui::source::next_batch(app.take_spent(), b.capacity());
        app.update(Event::Records(std::mem::replace(b, next)));
        if since_second >= 1_000_000 {
            since_second = 0;
            seconds += 1;
            app.update(Event::Second {
                elapsed: Duration::from_secs(seconds),
            });
        }
        Ok(())
    })?;
    let aggregated: u64 = app.panels().iter().map(|p| p.records).sum();
    anyhow::ensure!(
        aggregated == calls,
        "the aggregation counted {aggregated} of {calls} call records"
    );

    Ok(aggregate)
}

/// Drain, decode and write the capture as `record` does (push per record, a flush per second's
/// worth, the summary at the end): the measurement and the capture's size in bytes.
fn measure_capture_write(
    image: &RingImage,
    total: u64,
    batch: usize,
    args: &DecodeArgs,
    records: &[CallRecord],
) -> anyhow::Result<(Measured, u64)> {
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir(),
    };
    let path = dir.join(format!("damon-trace-bench-{}.dtcap", std::process::id()));
    let meta = bench_meta(
        "bench-decode",
        args.ring_size,
        records.first().map_or(0, |r| r.entry_ns),
    );
    let result = (|| {
        let mut writer = CaptureWriter::create(&path, false, &meta)
            .with_context(|| format!("creating {}", path.display()))?;
        let mut since_flush = 0u64;
        let mut write = drive(image, total, batch, |b| {
            for r in b.iter() {
                writer.push(r)?;
            }
            since_flush += b.len() as u64;
            if since_flush >= 1_000_000 {
                since_flush = 0;
                writer.flush()?;
            }
            Ok(())
        })?;
        let start = Instant::now();
        let cpu = thread_cpu();
        writer.finish(&Summary::new(0, "duration", BTreeMap::new()))?;
        write.elapsed += start.elapsed();
        write.cpu += thread_cpu() - cpu;
        let bytes = std::fs::metadata(&path)?.len();
        anyhow::Ok((write, bytes))
    })();
    let _ = std::fs::remove_file(&path);
    result
}
