//! A capture taken under the instruction clock (`kernel-ab seed-000 --clock instructions`,
//! the kernel before the patch, kernel-ab's own 7.2 build) shows every duration in
//! instructions: the header names the clock, and no value on any view reads as a time.
use ratatui::crossterm::event::KeyCode;

use crate::{
    capture::{Clock, format::read_file},
    tui::test_support::{press, render, replayed},
};

const FILE: &str = "seed-000-before-instructions-7.2.dtcap";

/// Words on the screen that end in a time unit after a digit: `661ns`, `1.05µs`, `3ms`.
fn time_values(screen: &str) -> Vec<String> {
    screen
        .split(|c: char| c.is_whitespace() || "│┃|,()[]<>≥±·:".contains(c))
        .filter(|w| {
            ["ns", "µs", "ms"].iter().any(|u| {
                w.strip_suffix(u)
                    .is_some_and(|n| n.ends_with(|c: char| c.is_ascii_digit()))
            })
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_view_of_an_instruction_clock_capture_counts_instructions() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/");
    let capture = read_file(std::path::Path::new(&format!("{path}{FILE}"))).expect(FILE);
    assert_eq!(
        capture.meta.clock,
        Clock::Instructions,
        "the fixture's clock"
    );
    let mut app = replayed(capture, FILE, u64::MAX);
    let mut views = vec![("overview", render(&app, 120, 40))];
    press(&mut app, KeyCode::Enter);
    views.push(("focus", render(&app, 120, 40)));
    press(&mut app, KeyCode::Char('c'));
    views.push(("focus corrected", render(&app, 120, 40)));
    press(&mut app, KeyCode::Esc);
    views.push(("overview corrected", render(&app, 120, 40)));
    press(&mut app, KeyCode::Char('l'));
    views.push(("log2", render(&app, 120, 40)));
    for (view, screen) in &views {
        assert!(
            screen.contains("instruction clock (insn)"),
            "{view}: the header names the clock:\n{screen}"
        );
        let times = time_values(screen);
        assert!(
            times.is_empty(),
            "{view}: {times:?} read as times:\n{screen}"
        );
        assert!(
            screen.matches(" insn").count() >= 5,
            "{view}: durations in insn:\n{screen}"
        );
    }
    // The same rendering of a wall-clock capture does show times: the check can fail.
    let wall = crate::tui::test_support::fixture();
    let screen = render(&replayed(wall, "w", u64::MAX), 120, 40);
    assert!(!time_values(&screen).is_empty(), "{screen}");
}
