//! The slow-call view (`x`), drawn from the real capture with slow calls and a breakdown made
//! up from its records (`test_support::slow_fixture`), and without any.
use ratatui::crossterm::event::KeyCode;

use crate::{
    cli::TimeBasis,
    tui::test_support::{
        MIGRATE_HOT, fixture, press, render, replayed, slow_fixture, slow_replayed,
    },
};

const SECOND: u64 = 1_000_000_000;

#[test]
fn slow_calls_of_damon_migrate_pages_100x32() {
    let mut app = slow_replayed(slow_fixture(), MIGRATE_HOT, TimeBasis::Wall, 12 * SECOND);
    press(&mut app, KeyCode::Down);
    press(&mut app, KeyCode::Down);
    press(&mut app, KeyCode::Char('x'));
    press(&mut app, KeyCode::Down);
    let screen = render(&app, 100, 32);
    assert!(
        screen.contains("slow calls of damon_migrate_pages"),
        "{screen}"
    );
    // Those that ended in the first 12 s of the capture, counted here from the capture.
    let c = slow_fixture();
    let id = app.panels()[2].status.id;
    let by = c.meta.start_monotonic_ns + 12 * SECOND;
    let ended = c
        .slow_calls
        .iter()
        .filter(|s| s.call.func == id && s.call.entry_ns + s.call.duration_ns < by)
        .count();
    let kept = c.summary.as_ref().map_or(0, |s| s.slow[&id].kept as usize);
    assert!(ended > 0 && ended < kept, "{ended} of {kept}");
    assert_eq!(app.slow.of(id).map(|l| l.len()), Some(ended));
    assert!(screen.contains(&format!(" {ended} arrived")), "{screen}");
    insta::assert_snapshot!("slow_migrate_pages_100x32", screen);
}

#[test]
fn slow_calls_newest_first_at_the_end_80x24() {
    let mut app = slow_replayed(slow_fixture(), MIGRATE_HOT, TimeBasis::Wall, u64::MAX);
    press(&mut app, KeyCode::Char('x'));
    press(&mut app, KeyCode::Char('o'));
    insta::assert_snapshot!("slow_hot_score_newest_80x24", render(&app, 80, 24));
}

#[test]
fn without_slow_calls_the_view_says_how_to_get_them() {
    let mut app = replayed(fixture(), MIGRATE_HOT, 12 * SECOND);
    press(&mut app, KeyCode::Char('x'));
    let screen = render(&app, 100, 30);
    assert!(screen.contains("--slow DURATION"), "{screen}");
    insta::assert_snapshot!("slow_none_100x30", screen);
}

#[test]
fn on_cpu_time_is_named_in_the_header_80x24() {
    let app = slow_replayed(slow_fixture(), MIGRATE_HOT, TimeBasis::OnCpu, 12 * SECOND);
    insta::assert_snapshot!("on_cpu_main_80x24", render(&app, 80, 24));
}
