//! The per-interval line of the DAMON panels, from a real 7.2 capture that recorded the
//! aggregation-interval boundaries, replayed on its own clock.
use std::path::Path;

use ratatui::crossterm::event::KeyCode;

use crate::{
    capture::format::read_file,
    tui::test_support::{INTERVALS, press, render, replayed},
};

fn capture() -> crate::capture::Capture {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/intervals-7.2.dtcap"
    );
    read_file(Path::new(path)).expect("interval capture")
}

#[test]
fn damon_panels_show_time_per_interval_160x48() {
    let app = replayed(capture(), INTERVALS, u64::MAX);
    let hot = &app.panels()[0];
    assert_eq!(
        hot.intervals.intervals, 129,
        "every complete interval of the replay"
    );
    // The kdamond's own sleeps call lock_timer_base, but only DAMON functions show the line.
    assert!(app.panels()[3].intervals.intervals > 0);
    assert!(!app.panels()[3].shows_intervals());
    let screen = render(&app, 160, 48);
    assert_eq!(screen.matches("per interval (").count(), 3, "{screen}");
    insta::assert_snapshot!("intervals_main_160x48", screen);
}

#[test]
fn focused_migrate_pages_shows_interval_sparkline_80x24() {
    let mut app = replayed(capture(), INTERVALS, u64::MAX);
    press(&mut app, KeyCode::Tab);
    press(&mut app, KeyCode::Tab);
    press(&mut app, KeyCode::Enter);
    let screen = render(&app, 80, 24);
    assert!(screen.contains("damon_migrate_pages"), "{screen}");
    insta::assert_snapshot!("intervals_focused_migrate_80x24", screen);
}

#[test]
fn serial_console_main_view_keeps_the_interval_line_80x24() {
    let app = replayed(capture(), INTERVALS, u64::MAX);
    let screen = render(&app, 80, 24);
    assert_eq!(screen.matches("per interval (").count(), 3, "{screen}");
    insta::assert_snapshot!("intervals_main_80x24", screen);
}
