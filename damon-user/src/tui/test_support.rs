//! Shared by the screen's tests: the real capture, an app fed from it on the capture's clock,
//! and a text rendering of a frame.
use std::path::Path;

use ratatui::{Terminal, backend::TestBackend, buffer::Buffer};

use crate::{
    capture::{Capture, FunctionCounters, format::read_file},
    tui::{
        app::{App, AppConfig, Event, Origin},
        draw,
        replay::ReplaySchedule,
    },
};

/// 20 s of the migrate-hot scenario in the 7.2 guest: 3612 records, all four functions.
pub fn fixture() -> Capture {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/migrate-hot-7.2.dtcap"
    );
    read_file(Path::new(path)).expect("fixture capture")
}

/// 12.7 s of the migrate-hot scenario at `--regions 8000 --aggr-interval 20ms` in the 7.2
/// guest, recorded with `--ring-size 4096` by a recorder paused 80 % of the time: 8089 of
/// 128007 calls recorded, the rest counted as dropped (ring full).
pub fn overload_fixture() -> Capture {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/overload-7.2.dtcap");
    read_file(Path::new(path)).expect("overload fixture capture")
}

/// The migrate-hot scenario in the 7.2 guest with the aggregation-interval hook: 129 complete
/// intervals of one kdamond.
pub fn intervals_fixture() -> Capture {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/intervals-7.2.dtcap"
    );
    read_file(Path::new(path)).expect("interval fixture capture")
}

/// 10.5 s of the migrate-hot scenario in the 7.2 guest recorded with `--mode kernel`: the
/// kernel's histograms (10 ns buckets) of 1546 calls of all four functions, one snapshot a
/// second, no per-call records.
pub fn kernel_fixture() -> Capture {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/kernel-mode-7.2.dtcap"
    );
    read_file(Path::new(path)).expect("kernel-mode fixture capture")
}

/// The fixtures' file names, shown in the replay header as `live --replay FILE` shows them.
pub const MIGRATE_HOT: &str = "migrate-hot-7.2.dtcap";
pub const OVERLOAD: &str = "overload-7.2.dtcap";
pub const KERNEL_MODE: &str = "kernel-mode-7.2.dtcap";
pub const INTERVALS: &str = "intervals-7.2.dtcap";

/// An app replaying `capture`, read from the file named `file` (the header shows that name).
pub fn app_for(capture: &Capture, file: &str) -> App {
    let mut app = App::new(AppConfig {
        kernel_release: capture.meta.kernel.release.clone(),
        clock: capture.meta.clock,
        origin: Origin::Replay {
            file: file.to_owned(),
            speed: 1.0,
        },
        recording: None,
        functions: capture.meta.functions.clone(),
        bucket_ns: 20,
        window_secs: 10,
        kernel_width_ns: capture
            .final_hists()
            .filter(|_| capture.is_kernel_mode())
            .and_then(|s| s.functions.values().next().map(|(_, h)| h.width_ns)),
    });
    app.set_disturbance_measured(crate::capture::DisturbanceStatus::measured(&capture.meta));
    app
}

/// An app that has replayed `capture` (read from `file`) up to `t_ns` on the capture's clock.
pub fn replayed(capture: Capture, file: &str, t_ns: u64) -> App {
    let app = app_for(&capture, file);
    play(app, capture, t_ns)
}

/// `app` fed with `capture` replayed up to `t_ns` on the capture's clock.
pub fn play(mut app: App, capture: Capture, t_ns: u64) -> App {
    let mut schedule = ReplaySchedule::new(capture);
    if let Some(e) = schedule.opening() {
        app.update(e);
    }
    for e in schedule.advance_to(t_ns) {
        app.update(e);
    }
    app
}

pub fn press(app: &mut App, code: ratatui::crossterm::event::KeyCode) {
    use ratatui::crossterm::event::{KeyEvent, KeyModifiers};
    app.update(Event::Key(KeyEvent::new(code, KeyModifiers::NONE)));
}

/// The frame's characters, one line per row, trailing blanks trimmed.
pub fn text(buffer: &Buffer) -> String {
    let area = buffer.area;
    let mut out = String::new();
    for y in 0..area.height {
        let mut line = String::new();
        for x in 0..area.width {
            line.push_str(buffer[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

pub fn render(app: &App, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test terminal");
    terminal
        .draw(|f| draw::draw(f, app))
        .expect("draw into a test backend");
    text(terminal.backend().buffer())
}

/// The kernel's counters of one function, as the session sends them.
pub fn counters(id: u32, c: FunctionCounters) -> Event {
    Event::Counters([(id, c)].into())
}

/// Counters of `calls` calls, `ring_full` of them dropped because the ring was full.
pub fn ring_full(calls: u64, ring_full: u64) -> FunctionCounters {
    FunctionCounters {
        calls,
        ring_full,
        ..FunctionCounters::default()
    }
}

/// The fixture as if recorded with `--slow 100us --disturbance`: every call of at least
/// 100 µs kept as a slow call with a made-up stack naming its function and a made-up breakdown
/// (half its time off the CPU, a tenth in interrupts), stored out of order (newest first) as a
/// reader with several CPUs may deliver them; the summary counts them kept, and two lost to
/// a full ring per function.
pub fn slow_fixture() -> Capture {
    use crate::capture::{DisturbanceStatus, SlowCall, SlowCounters, SlowSettings};
    let mut c = fixture();
    const THRESHOLD_NS: u64 = 100_000;
    c.meta.slow = Some(SlowSettings {
        threshold_ns: THRESHOLD_NS,
        stack_depth: damon_common::slow::SLOW_STACK_DEPTH as u32,
        max_per_function: 1000,
    });
    c.meta.disturbance = Some(DisturbanceStatus {
        measured: true,
        breakdown: true,
        ..DisturbanceStatus::default()
    });
    for r in &mut c.records {
        r.off_cpu_ns = (r.duration_ns / 2) as u32;
        r.irq_ns = (r.duration_ns / 10) as u32;
    }
    c.slow_calls = c
        .records
        .iter()
        .filter(|r| r.duration_ns >= THRESHOLD_NS)
        .rev()
        .map(|r| SlowCall {
            call: *r,
            stack: vec![
                format!(
                    "{}+0x1c",
                    c.meta
                        .functions
                        .iter()
                        .find(|f| f.id == r.func)
                        .map_or("?", |f| &f.name)
                ),
                format!("caller_of_{}+0x2f0", r.entry_ns % 3),
                "kdamond_fn+0x1a4".to_owned(),
                "kthread+0xf5".to_owned(),
                "ret_from_fork+0x31".to_owned(),
            ],
        })
        .collect();
    let summary = c.summary.as_mut().expect("the fixture has a summary");
    for s in &c.slow_calls {
        summary.slow.entry(s.call.func).or_insert(SlowCounters {
            ring_full: 2,
            ..SlowCounters::default()
        });
        summary.slow.get_mut(&s.call.func).expect("just added").kept += 1;
    }
    c
}

/// `app_for` with the capture's slow-call settings, counters and time basis, as `live
/// --replay` sets them up.
pub fn slow_app_for(capture: &Capture, file: &str, time: crate::cli::TimeBasis) -> App {
    let mut app = app_for(capture, file);
    app.set_time_basis(time);
    app.set_slow_settings(
        capture.meta.slow,
        crate::capture::DisturbanceStatus::breakdown(&capture.meta),
    );
    app.set_slow_counters(
        capture
            .summary
            .as_ref()
            .map(|s| s.slow.clone())
            .unwrap_or_default(),
    );
    app
}

/// An app set up by [`slow_app_for`] that has replayed `capture` up to `t_ns`.
pub fn slow_replayed(capture: Capture, file: &str, time: crate::cli::TimeBasis, t_ns: u64) -> App {
    let app = slow_app_for(&capture, file, time);
    play(app, capture, t_ns)
}

/// A slow call of `func` with a one-frame stack.
pub fn slow_call(func: u32, entry_ns: u64, duration_ns: u64) -> crate::capture::SlowCall {
    crate::capture::SlowCall {
        call: damon_common::CallRecord {
            func,
            entry_ns,
            duration_ns,
            ..damon_common::CallRecord::default()
        },
        stack: vec![format!("f{duration_ns}+0x1")],
    }
}
