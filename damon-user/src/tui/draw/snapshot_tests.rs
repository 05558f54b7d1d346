//! The whole screen, drawn from the real capture replayed on its own clock (no wall clock, so
//! every frame is reproducible), at a serial console's 80x24 and at 160x48.

use ratatui::crossterm::event::KeyCode;

use crate::{
    capture::{AttachState, FunctionCounters},
    tui::{
        app::{Event, Origin},
        test_support::{
            MIGRATE_HOT, OVERLOAD, counters, fixture, overload_fixture, press, render, replayed,
            ring_full,
        },
    },
};

const SECOND: u64 = 1_000_000_000;

#[test]
fn main_view_80x24() {
    let app = replayed(fixture(), MIGRATE_HOT, 12 * SECOND);
    let screen = render(&app, 80, 24);
    insta::assert_snapshot!("main_80x24", screen);
}

#[test]
fn main_view_log2_160x48() {
    let mut app = replayed(fixture(), MIGRATE_HOT, 12 * SECOND);
    // The first `l` fixes linear (damon_hot_score's automatic bins are log2), the second log2.
    press(&mut app, KeyCode::Char('l'));
    press(&mut app, KeyCode::Char('l'));
    press(&mut app, KeyCode::Tab);
    insta::assert_snapshot!("main_log2_160x48", render(&app, 160, 48));
}

#[test]
fn focused_hot_score_zoomed_80x24() {
    let mut app = replayed(fixture(), MIGRATE_HOT, u64::MAX);
    press(&mut app, KeyCode::Enter);
    press(&mut app, KeyCode::Char('l'));
    press(&mut app, KeyCode::Char('z'));
    insta::assert_snapshot!("focused_zoom_80x24", render(&app, 80, 24));
}

#[test]
fn focused_hot_score_window_160x48() {
    let mut app = replayed(fixture(), MIGRATE_HOT, 15 * SECOND);
    press(&mut app, KeyCode::Enter);
    press(&mut app, KeyCode::Char('w'));
    insta::assert_snapshot!("focused_window_160x48", render(&app, 160, 48));
}

#[test]
fn focused_lock_timer_base_wide_buckets_80x24() {
    let mut app = replayed(fixture(), MIGRATE_HOT, u64::MAX);
    press(&mut app, KeyCode::BackTab);
    press(&mut app, KeyCode::Enter);
    for _ in 0..6 {
        press(&mut app, KeyCode::Char('+'));
    }
    let screen = render(&app, 80, 24);
    assert!(screen.contains("· 2.00µs bins"), "{screen}");
    insta::assert_snapshot!("focused_lock_timer_base_80x24", screen);
}

/// A kernel without two of the functions (as Debian 6.12), recording, with drops.
#[test]
fn missing_functions_recording_and_drops_80x24() {
    let mut capture = fixture();
    for f in &mut capture.meta.functions {
        if f.id == 1 || f.id == 2 {
            f.attach = AttachState::Missing;
            f.detail = Some("not in /proc/kallsyms: this kernel does not have the function".into());
        }
    }
    capture.records.retain(|r| r.func != 1 && r.func != 2);
    capture.summary = None;
    let mut app = replayed(capture, MIGRATE_HOT, 8 * SECOND);
    app.origin = Origin::Live;
    app.recording = Some("/out/live.dtcap".into());
    app.update(counters(3, ring_full(300, 12)));
    press(&mut app, KeyCode::Char('f'));
    let screen = render(&app, 80, 24);
    for expected in ["missing", "● REC /out/live.dtcap", "12 dropped", "FROZEN"] {
        assert!(screen.contains(expected), "{expected}:\n{screen}");
    }
    insta::assert_snapshot!("missing_recording_80x24", screen);
}

#[test]
fn help_lists_every_key_80x24() {
    let mut app = replayed(fixture(), MIGRATE_HOT, 3 * SECOND);
    press(&mut app, KeyCode::Char('?'));
    let screen = render(&app, 80, 24);
    for (keys, what, _) in crate::tui::keys::BINDINGS {
        assert!(screen.contains(keys) && screen.contains(what), "{keys}");
    }
    insta::assert_snapshot!("help_80x24", screen);
}

/// Narrower than a serial console: nothing panics, the selected panel stays visible.
#[test]
fn tiny_terminals_do_not_break() {
    let mut app = replayed(fixture(), MIGRATE_HOT, 5 * SECOND);
    press(&mut app, KeyCode::Up);
    for (w, h) in [(1, 1), (20, 5), (40, 10), (80, 6)] {
        let screen = render(&app, w, h);
        if h >= 6 {
            assert!(screen.contains("lock_timer_base"), "{w}x{h}:\n{screen}");
        }
    }
    press(&mut app, KeyCode::Enter);
    press(&mut app, KeyCode::Char('?'));
    for (w, h) in [(1, 1), (20, 5), (40, 10)] {
        render(&app, w, h);
    }
}

/// The overloaded capture replayed to its end: the header shows the total dropped in the alert
/// style, each panel its own drops (highlighted), and calls = records + dropped.
#[test]
fn overload_drops_highlighted_80x24() {
    use ratatui::{Terminal, backend::TestBackend, style::Color};
    let app = replayed(overload_fixture(), OVERLOAD, u64::MAX);
    let mut terminal = Terminal::new(TestBackend::new(80, 24)).expect("test terminal");
    terminal
        .draw(|f| super::draw(f, &app))
        .expect("draw into a test backend");
    let buffer = terminal.backend().buffer().clone();
    let screen = crate::tui::test_support::text(&buffer);
    // 118633 + 529 + 514 + 242 dropped; hot score: 7197 records + 118633 dropped = 125830 calls.
    assert_eq!(app.total_dropped(), 119_918);
    for expected in ["119.9k dropped", "125.8k calls", "dropped 118.6k"] {
        assert!(screen.contains(expected), "{expected}:\n{screen}");
    }
    // Every cell of every "dropped" label with a non-zero count is drawn in red.
    let lines: Vec<&str> = screen.lines().collect();
    let mut highlighted = 0;
    for (y, line) in lines.iter().enumerate() {
        let Some(at) = line.find("dropped") else {
            continue;
        };
        let x = line[..at].chars().count() as u16;
        assert_eq!(
            buffer[(x, y as u16)].bg,
            Color::Red,
            "`dropped` not highlighted on line {y}: {line}"
        );
        highlighted += 1;
    }
    assert!(highlighted >= 2, "{screen}");
    insta::assert_snapshot!("overload_80x24", screen);
}

/// With a calibration, `c` shows percentiles minus each function's floor (negative below it),
/// the footer and the focused table say so, and `c` again goes back to raw.
#[test]
fn corrected_latencies_toggle_80x24() {
    use crate::stats::calibration::{Calibration, Floor, FloorDistribution};
    let capture = fixture();
    // A 700 ns floor (660..=740: p5..p95 664..736, ±36): above the fastest damon_hot_score calls.
    let floor = FloorDistribution::from_durations(&(660..=740).collect::<Vec<u64>>());
    let cal = Calibration::for_tests(81, vec![Floor::for_tests(floor)]);
    let mut app = replayed(capture, MIGRATE_HOT, 12 * SECOND);
    let raw = render(&app, 80, 24);
    press(&mut app, KeyCode::Char('c'));
    assert!(!app.corrected, "no calibration: stays raw");
    assert!(render(&app, 80, 24).contains("no probe calibration"));
    app.set_calibration(Some(&cal), crate::capture::Mode::Stream);
    press(&mut app, KeyCode::Char('c'));
    let screen = render(&app, 80, 24);
    assert!(screen.contains("corrected: − probe floor"), "{screen}");
    assert!(screen.contains("±36ns"), "{screen}");
    assert!(
        screen.contains("min -"),
        "a call below the floor shows negative:\n{screen}"
    );
    insta::assert_snapshot!("corrected_80x24", screen);
    press(&mut app, KeyCode::Enter);
    let focused = render(&app, 80, 24);
    assert!(focused.contains("percentiles (corrected)"), "{focused}");
    assert!(focused.contains("700ns±36ns"), "{focused}");
    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::Char('c'));
    assert_eq!(
        render(&app, 80, 24).replace("no probe calibration", ""),
        raw.replace("no probe calibration", "")
    );
}

/// Runs the kernel skipped show in the panel, as part of the drops and on their own, and
/// count as calls made: lock_timer_base with 300 entries seen, 40 entry runs and 5 exit runs
/// skipped (the 5 entries found stale).
#[test]
fn skipped_probe_runs_show_in_the_panel_80x24() {
    let mut app = replayed(fixture(), MIGRATE_HOT, 8 * SECOND);
    app.origin = Origin::Live;
    app.update(counters(
        3,
        FunctionCounters {
            stale_entries: 5,
            skipped_entries: Some(40),
            skipped_exits: Some(5),
            ..ring_full(300, 0)
        },
    ));
    let panel = app
        .panels()
        .iter()
        .find(|p| p.status.id == 3)
        .expect("lock_timer_base panel");
    assert_eq!((panel.dropped(), panel.kernel_skipped()), (45, 45));
    assert!(panel.calls() >= 340, "{}", panel.calls());
    let screen = render(&app, 80, 24);
    assert!(screen.contains("dropped 45 (skip 45)"), "{screen}");
}

/// Live, with the floor measured beside the session: `c` says it is coming, then the
/// calibration event gives every panel its floor and `c` shows corrected values. A replayed
/// capture that still says pending (its recorder ended first) says there is no calibration.
#[test]
fn a_floor_measured_beside_the_session_comes_as_an_event() {
    use crate::stats::calibration::{Calibration, CalibrationStatus, Floor, FloorDistribution};
    let pending = Calibration::not_run(CalibrationStatus::Pending, "beside".into());
    let mut replay = replayed(fixture(), MIGRATE_HOT, 12 * SECOND);
    replay.set_calibration(Some(&pending), crate::capture::Mode::Stream);
    press(&mut replay, KeyCode::Char('c'));
    assert!(render(&replay, 80, 24).contains("no probe calibration"));
    let mut app = replayed(fixture(), MIGRATE_HOT, 12 * SECOND);
    app.origin = Origin::Live;
    app.set_calibration(Some(&pending), crate::capture::Mode::Stream);
    press(&mut app, KeyCode::Char('c'));
    assert!(!app.corrected);
    assert!(
        render(&app, 80, 24).contains("the probe floor is being measured"),
        "{}",
        render(&app, 80, 24)
    );
    let floor = FloorDistribution::from_durations(&(660..=740).collect::<Vec<u64>>());
    let cal = Calibration::for_tests(81, vec![Floor::for_tests(floor)]);
    app.update(Event::Calibration(cal, crate::capture::Mode::Stream));
    press(&mut app, KeyCode::Char('c'));
    assert!(app.corrected);
    assert!(render(&app, 80, 24).contains("corrected: − probe floor"));
}
