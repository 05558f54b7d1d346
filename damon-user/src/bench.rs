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
    path::PathBuf,
    process::ExitCode,
    sync::atomic::{AtomicU32, AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use clap::Args;
use damon_common::{AGGREGATION_MARK, CALL_RECORD_SIZE, CallRecord, FunctionId};
use serde_json::json;

use crate::{
    capture::{AttachState, FunctionStatus, KernelIdentity, Meta, Summary, format::CaptureWriter},
    probe::ring,
    stats::rng::Rng,
    tui::app::{App, AppConfig, Event, Origin},
};

#[derive(Debug, Args)]
pub struct LoopArgs {
    /// System calls each task times (after a warm-up of a tenth as many, unless --no-warmup).
    #[arg(long, default_value_t = 1_000_000)]
    pub calls: u64,
    /// Tasks (threads) that each run the loop at the same time.
    #[arg(long, default_value_t = 1)]
    pub tasks: u32,
    /// Where the tasks run: `none` (the scheduler decides), `same` (all on CPU 0, so they
    /// preempt one another) or `spread` (task i on CPU i modulo the CPUs).
    #[arg(long, value_enum, default_value_t = Pin::None)]
    pub pin: Pin,
    /// No warm-up: every task makes exactly --calls system calls (the exactness tests count
    /// them).
    #[arg(long)]
    pub no_warmup: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Pin {
    None,
    Same,
    Spread,
}

#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// Records to push through each measured path.
    #[arg(long, default_value_t = 20_000_000)]
    pub records: u64,
    /// Size of the synthetic ring image in bytes (the default ring size of record/live).
    #[arg(long, default_value_t = damon_common::DEFAULT_RING_BYTES)]
    pub ring_size: u32,
    /// Items handed to the aggregation per drain (what one wake-up of the reader finds).
    #[arg(long, default_value_t = 4096)]
    pub batch: usize,
    /// Leave out the capture write measurement (to profile the others alone).
    #[arg(long)]
    pub skip_write: bool,
    /// Directory for the capture written by the write measurement (removed afterwards).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
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
fn pin_to(cpu: usize) {
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
    read_clock(libc::CLOCK_MONOTONIC)
}

fn read_clock(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write into.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Header bits of a BPF ring buffer item (kernel/bpf/ringbuf.c, `BPF_RINGBUF_*`).
const BUSY_BIT: u32 = 1 << 31;
const DISCARD_BIT: u32 = 1 << 30;
const HDR_SZ: usize = 8;

/// A ring buffer's data area as the kernel leaves it for the consumer: items of an 8-byte
/// header (`len | flags`, page offset) and the sample, each rounded up to 8 bytes, from
/// position 0 to `producer`.
pub struct RingImage {
    /// 8-byte words, so item headers are aligned for atomic access as in the real mapping.
    words: Vec<u64>,
    producer: usize,
}

impl RingImage {
    /// Fills up to `bytes` with `records` (as many as fit), in order.
    pub fn build(bytes: usize, records: &[CallRecord]) -> RingImage {
        let item = item_size(CALL_RECORD_SIZE);
        let n = records.len().min(bytes / item);
        let mut raw = vec![0u8; n * item];
        for (i, r) in records[..n].iter().enumerate() {
            let at = i * item;
            let len = CALL_RECORD_SIZE as u32;
            raw[at..at + 4].copy_from_slice(&len.to_le_bytes());
            // The kernel stores the header's page offset from the ring's start; not read here.
            raw[at + 4..at + 8].copy_from_slice(&((at >> 12) as u32).to_le_bytes());
            raw[at + HDR_SZ..at + HDR_SZ + CALL_RECORD_SIZE].copy_from_slice(record_bytes(r));
        }
        let words = raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect();
        RingImage {
            words,
            producer: n * item,
        }
    }

    pub fn items(&self) -> usize {
        self.producer / item_size(CALL_RECORD_SIZE)
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: u64s are plain bytes; the slice covers exactly the vector's initialised
        // elements and lives as long as the borrow of self.
        unsafe {
            std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.words.len() * 8)
        }
    }

    /// Consumes items from `from` while there are any (as aya's `RingBuf::next` does: an
    /// acquire load of each header, busy items stop the drain, discarded ones are skipped, the
    /// consumer position is published with a release store per item), decoding each with the
    /// real paths' [`ring::decode`], at most `max` records. Returns the next position and how
    /// many items of the wrong size were seen.
    pub fn drain(
        &self,
        from: usize,
        max: usize,
        consumer: &AtomicUsize,
        sink: &mut impl FnMut(CallRecord),
    ) -> (usize, u64) {
        let bytes = self.bytes();
        let mut pos = from;
        let mut taken = 0;
        let mut malformed = 0;
        while pos < self.producer && taken < max {
            // SAFETY: pos is 8-aligned within the words vector, so the u32 is aligned and in
            // bounds; nothing writes the image while it is drained.
            let header = unsafe {
                AtomicU32::from_ptr(self.words.as_ptr().cast::<u8>().add(pos).cast_mut().cast())
            }
            .load(Ordering::Acquire);
            if header & BUSY_BIT != 0 {
                break;
            }
            let len = (header & !(BUSY_BIT | DISCARD_BIT)) as usize;
            let next = pos + item_size(len);
            if header & DISCARD_BIT == 0 {
                match ring::decode(&bytes[pos + HDR_SZ..pos + HDR_SZ + len]) {
                    Some(r) => {
                        sink(r);
                        taken += 1;
                    }
                    None => malformed += 1,
                }
            }
            consumer.store(next, Ordering::Release);
            pos = next;
        }
        (pos, malformed)
    }

    #[cfg(test)]
    fn set_header(&mut self, item: usize, header: u32) {
        let at = item * item_size(CALL_RECORD_SIZE) / 8;
        self.words[at] = (self.words[at] & !0xffff_ffff) | u64::from(header);
    }
}

fn item_size(len: usize) -> usize {
    (HDR_SZ + len).div_ceil(8) * 8
}

fn record_bytes(r: &CallRecord) -> &[u8] {
    // SAFETY: CallRecord is repr(C), Pod, with explicit padding (no uninitialised bytes).
    unsafe { std::slice::from_raw_parts((r as *const CallRecord).cast::<u8>(), CALL_RECORD_SIZE) }
}

/// A plausible stream of what the migrate-hot scenario produces: lock_timer_base (about half
/// the calls, 100–300 ns, any process), damon_hot_score (40 %, tens of ns, the kdamond, with
/// its nr_accesses/age args and score value), damos_va_migrate_dests_add (9 %, hundreds of ns,
/// node args), damon_migrate_pages (1 %, tens of µs, pages moved) on two CPUs, with an
/// aggregation-interval marker every 10 000 items. Log-normal durations; seeded.
pub fn synthetic_records(n: usize, seed: u64) -> Vec<CallRecord> {
    let mut rng = Rng::new(seed);
    let mut t = 1_000_000_000u64;
    let kdamond = 211;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        t += 50 + (rng.uniform() * 900.0) as u64;
        let cpu = (rng.next_u64() & 1) as u32;
        let lognormal = |rng: &mut Rng, median: f64, sigma: f64| {
            (median * (sigma * rng.normal()).exp()).max(1.0) as u64
        };
        if i % 10_000 == 9_999 {
            out.push(CallRecord {
                entry_ns: t,
                func: AGGREGATION_MARK,
                pid: kdamond,
                tid: kdamond,
                cpu,
                value: 40,
                ..CallRecord::default()
            });
            continue;
        }
        let u = rng.uniform();
        let (func, duration, value, arg0, arg1, pid) = if u < 0.5 {
            let pid = 1 + (rng.next_u64() % 300) as u32;
            (
                FunctionId::LockTimerBase,
                lognormal(&mut rng, 150.0, 0.5),
                0,
                0,
                0,
                pid,
            )
        } else if u < 0.9 {
            let acc = (rng.next_u64() % 21) as i64;
            let age = (rng.next_u64() % 200) as i64;
            let d = lognormal(&mut rng, 60.0, 0.4);
            (FunctionId::DamonHotScore, d, acc * 5, acc, age, kdamond)
        } else if u < 0.99 {
            let from = (rng.next_u64() & 1) as i64;
            let d = lognormal(&mut rng, 400.0, 0.6);
            (
                FunctionId::DamosVaMigrateDestsAdd,
                d,
                0,
                from,
                1 - from,
                kdamond,
            )
        } else {
            let d = lognormal(&mut rng, 30_000.0, 1.0);
            let pages = (rng.next_u64() % 512) as i64;
            (
                FunctionId::DamonMigratePages,
                d,
                pages,
                (rng.next_u64() & 1) as i64,
                0,
                kdamond,
            )
        };
        out.push(CallRecord {
            entry_ns: t,
            duration_ns: duration,
            value,
            arg0,
            arg1,
            pid,
            tid: pid,
            cpu,
            func: func as u32,
        });
        t += duration;
    }
    out
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
    Duration::from_nanos(read_clock(libc::CLOCK_THREAD_CPUTIME_ID))
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
            attach: AttachState::Fentry,
            detail: None,
        })
        .collect()
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

    // 2. Drain, decode and aggregate as `live` does: the screen's App::update per batch and a
    //    second boundary (window slice closed) every million records.
    let mut app = App::new(AppConfig {
        kernel_release: "bench".into(),
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
    let aggregate = drive(&image, total, batch, |b| {
        since_second += b.len() as u64;
        calls += b.iter().filter(|r| r.func != AGGREGATION_MARK).count() as u64;
        // As `live`'s source hands a batch over (tui/source.rs).
        let next = Vec::with_capacity(b.capacity());
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

    // 3. Drain, decode and write the capture as `record` does (push per record, a flush per
    //    second's worth, the summary at the end).
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir(),
    };
    let path = dir.join(format!("damon-trace-bench-{}.dtcap", std::process::id()));
    let meta = Meta {
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        kernel: KernelIdentity::default(),
        hostname: String::new(),
        start_unix_ns: 0,
        start_monotonic_ns: records.first().map_or(0, |r| r.entry_ns),
        command_line: vec!["damon-trace".into(), "bench-decode".into()],
        mode: "stream".into(),
        ring_size: args.ring_size,
        functions: statuses(),
        damon: None,
        cpu_model: crate::capture::host_cpu_model(),
        calibration: None,
        intervals: None,
        args: Vec::new(),
    };
    let result = (|| {
        let mut writer = CaptureWriter::create(&path, false, &meta)
            .with_context(|| format!("creating {}", path.display()))?;
        let mut since_flush = 0u64;
        let mut write = drive(&image, total, batch, |b| {
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
        writer.finish(&Summary {
            duration_ns: 0,
            end_reason: "duration".into(),
            counters: BTreeMap::new(),
            malformed_items: 0,
            damon_end: None,
            intervals: None,
            kernel_hist: BTreeMap::new(),
        })?;
        write.elapsed += start.elapsed();
        write.cpu += thread_cpu() - cpu;
        let bytes = std::fs::metadata(&path)?.len();
        anyhow::Ok((write, bytes))
    })();
    let _ = std::fs::remove_file(&path);
    let (write, bytes) = result?;

    out["capture_write_per_sec"] = json!(write.per_sec());
    out["capture_write_per_wall_sec"] = json!(write.per_wall_sec());
    out["capture_write_mb_per_sec"] = json!(bytes as f64 / 1e6 / write.cpu.as_secs_f64().max(1e-9));
    out["capture_bytes"] = json!(bytes);
    out["capture_bytes_per_record"] = json!(bytes as f64 / write.records as f64);
    println!("{out}");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_image_round_trips_through_the_real_decoder() {
        let records = synthetic_records(2000, 7);
        let image = RingImage::build(1 << 16, &records);
        let fit = (1 << 16) / 64;
        assert_eq!(image.items(), fit);
        let consumer = AtomicUsize::new(0);
        let mut got = Vec::new();
        let (end, malformed) = image.drain(0, usize::MAX, &consumer, &mut |r| got.push(r));
        assert_eq!((end, malformed), (fit * 64, 0));
        assert_eq!(consumer.load(Ordering::Relaxed), end);
        assert_eq!(got, records[..fit]);
        // A partial drain resumes where it stopped.
        let mut first = Vec::new();
        let (mid, _) = image.drain(0, 10, &consumer, &mut |r| first.push(r));
        let (_, _) = image.drain(mid, usize::MAX, &consumer, &mut |r| first.push(r));
        assert_eq!(first, got);
    }

    #[test]
    fn discarded_items_are_skipped_busy_ones_stop_and_odd_sizes_count() {
        let records = synthetic_records(8, 1);
        let mut image = RingImage::build(8 * 64, &records);
        image.set_header(1, DISCARD_BIT | CALL_RECORD_SIZE as u32);
        // A wrong length that keeps the 64-byte stride (8 + 50 rounds up to 64).
        image.set_header(3, 50);
        image.set_header(5, BUSY_BIT | CALL_RECORD_SIZE as u32);
        let mut got = Vec::new();
        let (end, malformed) =
            image.drain(0, usize::MAX, &AtomicUsize::new(0), &mut |r| got.push(r));
        assert_eq!(malformed, 1);
        assert_eq!(got, [records[0], records[2], records[4]]);
        assert_eq!(end, 5 * 64);
    }

    #[test]
    fn synthetic_stream_is_plausible() {
        let records = synthetic_records(50_000, 3);
        let share = |f: FunctionId| {
            records.iter().filter(|r| r.func == f as u32).count() as f64 / records.len() as f64
        };
        assert!((share(FunctionId::LockTimerBase) - 0.5).abs() < 0.02);
        assert!((share(FunctionId::DamonHotScore) - 0.4).abs() < 0.02);
        assert_eq!(
            records
                .iter()
                .filter(|r| r.func == AGGREGATION_MARK)
                .count(),
            5
        );
        assert!(records.windows(2).all(|w| w[0].entry_ns < w[1].entry_ns));
        assert!(records.iter().all(|r| r.cpu < 2));
    }
}
