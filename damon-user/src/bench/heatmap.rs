//! `bench-heatmap`: the heatmaps' cost as a capture grows (hidden; `docs/benchmarks.md`).
//!
//! - `--write FILE`: writes a synthetic capture of `--records` calls spread over `--seconds`
//!   (four functions whose latency drifts and bursts over time, an aggregation-interval marker
//!   every 100 ms), streamed to the writer without holding the calls, so that `report
//!   --heatmap` can be timed on it with `/usr/bin/time`.
//! - otherwise: feeds the same calls to `live`'s state (`App::update`, heatmap on) and times a
//!   frame of the main and the focused heatmap, and of the histogram view, at 132x40 whenever
//!   the calls fed reach 1, 2, 5, 10, 20, 50 … million: the frame's cost must stay flat.
use std::{process::ExitCode, time::Instant};

use anyhow::Context as _;
use damon_common::{AGGREGATION_MARK, CallRecord, FunctionId};
use ratatui::{Terminal, backend::TestBackend};
use serde_json::json;

use crate::{
    capture::{FunctionCounters, Summary, format::CaptureWriter},
    cli::instruments::HeatmapArgs,
    stats::rng::Rng,
    tui::{
        app::{App, AppConfig, Event, Origin},
        draw,
    },
};

const KDAMOND: u32 = 211;
const START_NS: u64 = 1_000_000_000;
const MARK_EVERY_NS: u64 = 100_000_000;

/// The synthetic calls, in time order, with interval markers interleaved: lock_timer_base half
/// of them (median 150 ns, three times slower for 5 s of every 60 s), damon_hot_score 40 %
/// (median 60 ns, ±30 % over a 2-minute wave), damos_va_migrate_dests_add 9 %, and
/// damon_migrate_pages 1 % (median 30 µs).
struct Calls {
    rng: Rng,
    left: u64,
    gap_ns: f64,
    t: u64,
    next_mark: u64,
}

impl Calls {
    fn new(records: u64, seconds: u64) -> Calls {
        Calls {
            rng: Rng::new(0x4ea7),
            left: records,
            gap_ns: seconds as f64 * 1e9 / records.max(1) as f64,
            t: START_NS,
            next_mark: START_NS + MARK_EVERY_NS,
        }
    }
}

impl Iterator for Calls {
    type Item = CallRecord;

    fn next(&mut self) -> Option<CallRecord> {
        if self.left == 0 {
            return None;
        }
        // `t` is the next call's entry: markers due before it come first.
        if self.next_mark <= self.t {
            let at = self.next_mark;
            self.next_mark += MARK_EVERY_NS;
            return Some(CallRecord {
                entry_ns: at,
                func: AGGREGATION_MARK,
                pid: KDAMOND,
                tid: KDAMOND,
                ..CallRecord::default()
            });
        }
        self.left -= 1;
        let entry = self.t;
        self.t += (self.gap_ns * 2.0 * self.rng.uniform()) as u64;
        let secs = (entry - START_NS) as f64 / 1e9;
        let wave = 1.0 + 0.3 * (secs * std::f64::consts::TAU / 120.0).sin();
        let burst = if secs % 60.0 < 5.0 { 3.0 } else { 1.0 };
        let u = self.rng.uniform();
        let (func, median, sigma, tid) = if u < 0.5 {
            let pid = 1 + (self.rng.next_u64() % 300) as u32;
            (FunctionId::LockTimerBase, 150.0 * burst, 0.5, pid)
        } else if u < 0.9 {
            (FunctionId::DamonHotScore, 60.0 * wave, 0.4, KDAMOND)
        } else if u < 0.99 {
            (FunctionId::DamosVaMigrateDestsAdd, 400.0, 0.6, KDAMOND)
        } else {
            (FunctionId::DamonMigratePages, 30_000.0, 1.0, KDAMOND)
        };
        let duration = (median * (sigma * self.rng.normal()).exp()).max(1.0) as u64;
        Some(CallRecord {
            entry_ns: entry,
            duration_ns: duration,
            pid: tid,
            tid,
            cpu: (self.rng.next_u64() & 1) as u32,
            func: func as u32,
            ..CallRecord::default()
        })
    }
}

pub fn run_heatmap(args: &HeatmapArgs) -> anyhow::Result<ExitCode> {
    match &args.write {
        Some(path) => write(args, path),
        None => frames(args),
    }
}

fn write(args: &HeatmapArgs, path: &std::path::Path) -> anyhow::Result<ExitCode> {
    let meta = super::bench_meta("bench-heatmap", damon_common::DEFAULT_RING_BYTES, START_NS);
    let mut writer = CaptureWriter::create(path, false, &meta)
        .with_context(|| format!("creating {}", path.display()))?;
    let started = Instant::now();
    let mut counts = std::collections::BTreeMap::<u32, u64>::new();
    let (mut since_flush, mut last_t) = (0u64, START_NS);
    for r in Calls::new(args.records, args.seconds) {
        writer.push(&r)?;
        last_t = r.entry_ns;
        if r.func != AGGREGATION_MARK {
            *counts.entry(r.func).or_default() += 1;
        }
        since_flush += 1;
        if since_flush >= 1_000_000 {
            since_flush = 0;
            writer.flush()?;
        }
    }
    let counters = counts
        .into_iter()
        .map(|(f, n)| (f, FunctionCounters::all_recorded(n)))
        .collect();
    writer.finish(&Summary::new(last_t - START_NS, "duration", counters))?;
    let bytes = std::fs::metadata(path)?.len();
    println!(
        "{}",
        json!({
            "records": args.records,
            "seconds": args.seconds,
            "capture_bytes": bytes,
            "write_seconds": started.elapsed().as_secs_f64(),
        })
    );
    Ok(ExitCode::SUCCESS)
}

/// Checkpoints 1, 2, 5, 10, 20, 50, … million up to `records`.
fn checkpoints(records: u64) -> Vec<u64> {
    (0..12u32)
        .flat_map(|e| [1, 2, 5].map(|m| m * 10u64.pow(e) * 1_000_000))
        .take_while(|&n| n <= records)
        .collect()
}

fn frames(args: &HeatmapArgs) -> anyhow::Result<ExitCode> {
    let mut app = App::new(AppConfig {
        kernel_release: "bench".into(),
        clock: crate::capture::Clock::Wall,
        origin: Origin::Live,
        recording: None,
        functions: super::statuses(),
        bucket_ns: 20,
        window_secs: 10,
        kernel_width_ns: None,
    });
    let mut terminal = Terminal::new(TestBackend::new(132, 40))?;
    let mut time_frame = |app: &mut App| -> anyhow::Result<f64> {
        let mut us = Vec::with_capacity(args.frames);
        for _ in 0..args.frames.max(1) {
            let t = Instant::now();
            terminal.draw(|f| draw::draw(f, app))?;
            us.push(t.elapsed().as_secs_f64() * 1e6);
        }
        us.sort_by(f64::total_cmp);
        Ok(us[us.len() / 2])
    };
    let mut out = Vec::new();
    let (mut fed, mut batch) = (0u64, Vec::with_capacity(4096));
    let mut marks = checkpoints(args.records).into_iter().peekable();
    let mut second = START_NS / 1_000_000_000 + 1;
    let started = Instant::now();
    for r in Calls::new(args.records, args.seconds) {
        fed += u64::from(r.func != AGGREGATION_MARK);
        let t = r.entry_ns;
        batch.push(r);
        if batch.len() == batch.capacity() || marks.peek() == Some(&fed) {
            app.update(Event::Records(std::mem::take(&mut batch)));
            batch = Vec::with_capacity(4096);
        }
        while t >= second * 1_000_000_000 {
            app.update(Event::Second {
                elapsed: std::time::Duration::from_secs(second - START_NS / 1_000_000_000),
            });
            second += 1;
        }
        if marks.next_if_eq(&fed).is_none() {
            continue;
        }
        let mut row = json!({ "records": fed });
        for (view, heat, focused) in [
            ("histogram_us", false, false),
            ("heatmap_us", true, false),
            ("heatmap_focused_us", true, true),
        ] {
            (app.heatmap, app.focused) = (heat, focused);
            row[view] = json!(time_frame(&mut app)?);
        }
        eprintln!("[bench-heatmap] {row}");
        out.push(row);
    }
    println!(
        "{}",
        json!({
            "size": "132x40",
            "frames_per_checkpoint": args.frames,
            "seconds_of_records": args.seconds,
            "wall_seconds": started.elapsed().as_secs_f64(),
            "checkpoints": out,
        })
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_calls_span_the_seconds_with_a_marker_every_100_ms() {
        let calls: Vec<CallRecord> = Calls::new(20_000, 2).collect();
        let marks = calls.iter().filter(|r| r.func == AGGREGATION_MARK).count();
        assert_eq!(calls.len() - marks, 20_000);
        // About 2 s of calls: 19 or 20 markers.
        assert!((18..=21).contains(&marks), "{marks}");
        assert!(calls.windows(2).all(|w| w[0].entry_ns <= w[1].entry_ns));
        assert_eq!(
            checkpoints(50_000_000),
            [1, 2, 5, 10, 20, 50].map(|m| m * 1_000_000)
        );
    }
}
