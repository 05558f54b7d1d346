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
    let mut app = app_for(&capture, file);
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
