//! The heatmap view (`h`), from real 7.2 captures replayed on their own clock: the main view and
//! the focused view at a serial console's 80x24 and at 132x40. Besides the pictures, the cells
//! are checked against the capture itself: every call of a function is in exactly one cell, and
//! every second in which an aggregation interval ended has its tick.
use std::collections::BTreeSet;

use ratatui::crossterm::event::KeyCode;

use super::heatmap::grid;
use crate::{
    capture::Capture,
    tui::{
        app::{App, HEAT_COLUMN_NS},
        test_support::{
            INTERVALS, KERNEL_MODE, MIGRATE_HOT, fixture, intervals_fixture, kernel_fixture, press,
            render, replayed,
        },
    },
};

fn heat(capture: Capture, file: &str) -> App {
    let mut app = replayed(capture, file, u64::MAX);
    press(&mut app, KeyCode::Char('h'));
    app
}

/// Each panel's cells (at any size) hold exactly the capture's records of its function.
fn assert_cells_hold_every_call(app: &App, capture: &Capture) {
    for p in app.panels().iter().filter(|p| p.traced()) {
        let records = capture
            .records
            .iter()
            .filter(|r| r.func == p.status.id)
            .count() as u64;
        for (width, rows) in [(80, 3), (132, 26), (600, 64)] {
            let g = grid(app, p, width, rows).expect("calls");
            let cells: u64 = g.columns.iter().flat_map(|c| c.0.iter()).sum();
            // 20 s of capture fit every width here: nothing scrolled out or fell outside.
            assert_eq!(cells + g.below + g.above, records, "{}", p.status.name);
            assert_eq!((g.below, g.above), (0, 0), "{}", p.status.name);
        }
    }
}

#[test]
fn main_heatmap_80x24() {
    let app = heat(fixture(), MIGRATE_HOT);
    assert_cells_hold_every_call(&app, &fixture());
    let screen = render(&app, 80, 24);
    assert!(screen.contains("· heatmap ·"), "{screen}");
    insta::assert_snapshot!("heatmap_main_80x24", screen);
}

#[test]
fn main_heatmap_132x40() {
    let app = heat(fixture(), MIGRATE_HOT);
    insta::assert_snapshot!("heatmap_main_132x40", render(&app, 132, 40));
}

#[test]
fn focused_heatmap_80x24() {
    let mut app = heat(fixture(), MIGRATE_HOT);
    press(&mut app, KeyCode::Enter);
    let screen = render(&app, 80, 24);
    assert!(screen.contains("latency over time: 2961 calls"), "{screen}");
    insta::assert_snapshot!("heatmap_focused_80x24", screen);
}

#[test]
fn focused_heatmap_ticks_the_seconds_intervals_ended_in_132x40() {
    let capture = intervals_fixture();
    let mut app = heat(intervals_fixture(), INTERVALS);
    assert_cells_hold_every_call(&app, &capture);
    press(&mut app, KeyCode::Tab);
    press(&mut app, KeyCode::Enter);
    let screen = render(&app, 132, 40);
    // One tick per second in which the capture has an aggregation-interval marker.
    let seconds: BTreeSet<u64> = capture
        .marks
        .iter()
        .map(|m| m.entry_ns / HEAT_COLUMN_NS)
        .collect();
    let ticks = screen.lines().map(|l| l.matches('╵').count()).max();
    assert_eq!(ticks, Some(seconds.len()), "{screen}");
    assert!(screen.contains("╵ interval ended"), "{screen}");
    insta::assert_snapshot!("heatmap_focused_intervals_132x40", screen);
}

#[test]
fn kernel_mode_says_why_there_is_no_heatmap() {
    let app = heat(kernel_fixture(), KERNEL_MODE);
    assert!(!app.heatmap);
    let screen = render(&app, 80, 24);
    assert!(screen.contains("no heatmap"), "{screen}");
}

/// Linear rows (`l`) widen in 1-2-5 steps until the calls' range fits the rows; the zoomed
/// range (`z`, p0.5–p99.5) leaves calls outside, which are counted, never lost, and named on
/// the axis.
#[test]
fn linear_rows_fit_the_range_and_zoom_counts_what_falls_outside() {
    let capture = fixture();
    let mut app = heat(fixture(), MIGRATE_HOT);
    press(&mut app, KeyCode::Char('l'));
    for zoomed in [false, true] {
        let mut outside = 0;
        for p in app.panels().iter().filter(|p| p.traced()) {
            let records = capture
                .records
                .iter()
                .filter(|r| r.func == p.status.id)
                .count();
            let g = grid(&app, p, 78, 3).expect("calls");
            assert!(!g.log, "{}", p.status.name);
            let cells: u64 = g.columns.iter().flat_map(|c| c.0.iter()).sum();
            assert_eq!(
                cells + g.below + g.above,
                records as u64,
                "{}",
                p.status.name
            );
            outside += g.below + g.above;
        }
        let screen = render(&app, 80, 24);
        assert_eq!(outside > 0, zoomed, "{screen}");
        assert_eq!(screen.contains(" above"), zoomed, "{screen}");
        press(&mut app, KeyCode::Char('z'));
    }
}
