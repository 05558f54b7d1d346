//! State-update tests: every key, every event, on the real capture.
use std::time::Duration;

use damon_common::CallRecord;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::*;
use crate::tui::test_support::{MIGRATE_HOT, app_for, counters, fixture, replayed, ring_full};

const SECOND: u64 = 1_000_000_000;

fn record(func: u32, duration_ns: u64) -> CallRecord {
    CallRecord {
        entry_ns: 0,
        duration_ns,
        value: 0,
        pid: 1,
        tid: 1,
        cpu: 0,
        func,
        ..CallRecord::default()
    }
}

fn key(app: &mut App, code: KeyCode) -> Effect {
    app.update(Event::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

#[test]
fn selection_moves_and_wraps_with_tab_arrows_and_jk() {
    let mut app = app_for(&fixture(), MIGRATE_HOT);
    for code in [
        KeyCode::Tab,
        KeyCode::Down,
        KeyCode::Right,
        KeyCode::Char('j'),
    ] {
        let before = app.selected;
        assert_eq!(key(&mut app, code), Effect::Draw);
        assert_eq!(app.selected, (before + 1) % 4, "{code:?}");
    }
    assert_eq!(app.selected, 0, "four steps around four functions");
    for (code, expect) in [
        (KeyCode::BackTab, 3),
        (KeyCode::Up, 2),
        (KeyCode::Left, 1),
        (KeyCode::Char('k'), 0),
    ] {
        key(&mut app, code);
        assert_eq!(app.selected, expect, "{code:?}");
    }
}

#[test]
fn enter_focuses_and_esc_goes_back() {
    let mut app = app_for(&fixture(), MIGRATE_HOT);
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Enter);
    assert!(app.focused);
    assert_eq!(app.selected, 1);
    key(&mut app, KeyCode::Tab);
    assert!(app.focused && app.selected == 2, "Tab moves the focus");
    key(&mut app, KeyCode::Esc);
    assert!(!app.focused);
    let mut empty = App::new(AppConfig {
        functions: Vec::new(),
        ..test_config()
    });
    key(&mut empty, KeyCode::Enter);
    assert!(!empty.focused, "nothing to focus");
    key(&mut empty, KeyCode::Tab);
    assert_eq!(empty.selected, 0);
}

fn test_config() -> AppConfig {
    AppConfig {
        kernel_release: "k".into(),
        clock: crate::capture::Clock::Wall,
        origin: Origin::Live,
        recording: None,
        functions: fixture().meta.functions,
        bucket_ns: 20,
        window_secs: 3,
        kernel_width_ns: None,
    }
}

#[test]
fn l_toggles_linear_and_log2_and_z_toggles_zoom() {
    let mut app = app_for(&fixture(), MIGRATE_HOT);
    assert_eq!(
        (app.scale, app.zoom),
        (None, false),
        "bins chosen from the data"
    );
    key(&mut app, KeyCode::Char('l'));
    assert_eq!(app.scale, Some(Scale::Log2));
    key(&mut app, KeyCode::Char('z'));
    assert!(app.zoom);
    key(&mut app, KeyCode::Char('l'));
    assert_eq!(app.scale, Some(Scale::Linear));
    assert!(app.zoom, "zoom survives a scale change");
    key(&mut app, KeyCode::Char('z'));
    assert!(!app.zoom);
}

/// Before any choice `l` switches away from what the selected panel shows (its data's
/// scale), and the choice then stays the user's whatever data arrives.
#[test]
fn l_fixes_the_other_scale_than_the_automatic_one() {
    let mut app = replayed(fixture(), MIGRATE_HOT, 12_000_000_000);
    let panel = &app.panels()[app.selected];
    let auto = crate::tui::binning::auto_scale(&app.distribution(panel));
    assert_eq!(auto, Some(Scale::Log2), "damon_hot_score: p99 30x p1");
    key(&mut app, KeyCode::Char('l'));
    assert_eq!(app.scale, Some(Scale::Linear));
    app.update(Event::Second {
        elapsed: Duration::from_secs(13),
    });
    assert_eq!(app.scale, Some(Scale::Linear), "sticky");
}

#[test]
fn plus_and_minus_step_the_bucket_width_and_return_to_plain_linear() {
    let mut app = app_for(&fixture(), MIGRATE_HOT);
    key(&mut app, KeyCode::Char('+'));
    assert_eq!(app.bucket_ns, 50);
    key(&mut app, KeyCode::Char('='));
    assert_eq!(app.bucket_ns, 100);
    key(&mut app, KeyCode::Char('l'));
    key(&mut app, KeyCode::Char('z'));
    key(&mut app, KeyCode::Char('-'));
    assert_eq!(app.bucket_ns, 50);
    assert_eq!((app.scale, app.zoom), (Some(Scale::Linear), false));
    for _ in 0..10 {
        key(&mut app, KeyCode::Char('-'));
    }
    assert_eq!(app.bucket_ns, 1, "stops at 1 ns");
}

#[test]
fn w_switches_between_since_start_and_the_sliding_window() {
    let mut app = App::new(test_config());
    app.update(Event::Records(vec![record(3, 100)]));
    for s in 1..=3 {
        app.update(Event::Second {
            elapsed: Duration::from_secs(s),
        });
    }
    app.update(Event::Records(vec![record(3, 200), record(3, 300)]));
    let panel = &app.panels()[3];
    assert_eq!(app.distribution(panel).count, 3);
    key(&mut app, KeyCode::Char('w'));
    assert!(app.windowed);
    let panel = &app.panels()[3];
    let window = app.distribution(panel);
    assert_eq!(
        (window.count, window.min),
        (2, Some(200)),
        "the 100 ns call left"
    );
    key(&mut app, KeyCode::Char('w'));
    assert!(!app.windowed);
}

#[test]
fn f_freezes_the_display_while_collection_goes_on() {
    let mut app = App::new(test_config());
    app.update(Event::Records(vec![record(0, 100)]));
    key(&mut app, KeyCode::Char('f'));
    assert!(app.frozen());
    app.update(Event::Records(vec![record(0, 100), record(0, 100)]));
    assert_eq!(app.panels()[0].records, 1, "the display holds still");
    assert_eq!(app.records_total, 3, "collection goes on");
    key(&mut app, KeyCode::Char('f'));
    assert!(!app.frozen());
    assert_eq!(app.panels()[0].records, 3);
}

#[test]
fn r_resets_statistics_and_counts_drops_from_then_on() {
    let mut app = replayed(fixture(), MIGRATE_HOT, 5 * SECOND);
    app.update(counters(0, ring_full(1000, 7)));
    assert_eq!(app.panels()[0].dropped(), 7);
    assert_eq!(app.total_dropped(), 7);
    key(&mut app, KeyCode::Char('f'));
    key(&mut app, KeyCode::Char('r'));
    assert!(!app.frozen(), "reset shows the fresh state");
    assert_eq!(app.reset_at, Some(Duration::from_secs(5)));
    assert!(
        app.panels()
            .iter()
            .all(|p| p.records == 0 && p.rates.is_empty())
    );
    assert_eq!(app.panels()[0].stats.since_start().count, 0);
    assert_eq!((app.panels()[0].calls(), app.panels()[0].dropped()), (0, 0));
    assert!(app.message.as_deref().is_some_and(|m| m.contains("reset")));
    app.update(counters(0, ring_full(1500, 9)));
    assert_eq!(
        (app.panels()[0].calls(), app.panels()[0].dropped()),
        (500, 2)
    );
}

#[test]
fn s_asks_for_a_save_and_shows_the_outcome() {
    let mut app = app_for(&fixture(), MIGRATE_HOT);
    assert_eq!(key(&mut app, KeyCode::Char('s')), Effect::Save);
    app.update(Event::Saved(Ok("./damon-trace-x.dtcap (3 records)".into())));
    assert_eq!(
        app.message.as_deref(),
        Some("saved ./damon-trace-x.dtcap (3 records)")
    );
    app.update(Event::Saved(Err("disk full".into())));
    assert_eq!(app.message.as_deref(), Some("save failed: disk full"));
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.message, None, "Esc clears the message");
}

#[test]
fn probe_lines_show_the_last_one_and_the_count() {
    let mut app = app_for(&fixture(), MIGRATE_HOT);
    assert_eq!(app.probe_lines, 0);
    let lines = |n: u32| -> Vec<String> {
        (0..n)
            .map(|i| format!("probe: orphan exit (no stamps) lock_timer_base tid {i} cpu 1"))
            .collect()
    };
    assert_eq!(app.update(Event::ProbeLog(lines(3))), Effect::Draw);
    assert_eq!(
        app.message.as_deref(),
        Some("[3 probe lines] probe: orphan exit (no stamps) lock_timer_base tid 2 cpu 1")
    );
    app.update(Event::ProbeLog(lines(2)));
    assert_eq!(app.probe_lines, 5);
    assert!(
        app.message
            .as_deref()
            .unwrap()
            .starts_with("[5 probe lines] ")
    );
}

#[test]
fn help_overlay_opens_closes_and_swallows_other_keys() {
    let mut app = app_for(&fixture(), MIGRATE_HOT);
    key(&mut app, KeyCode::Char('?'));
    assert!(app.help);
    assert_eq!(key(&mut app, KeyCode::Tab), Effect::None);
    assert_eq!(key(&mut app, KeyCode::Char('s')), Effect::None);
    assert_eq!(app.selected, 0);
    key(&mut app, KeyCode::Char('?'));
    assert!(!app.help);
    key(&mut app, KeyCode::Char('?'));
    key(&mut app, KeyCode::Esc);
    assert!(!app.help);
    key(&mut app, KeyCode::Char('?'));
    assert_eq!(
        key(&mut app, KeyCode::Char('q')),
        Effect::Quit(StopReason::Quit)
    );
}

#[test]
fn q_ctrl_c_and_signals_quit() {
    let mut app = app_for(&fixture(), MIGRATE_HOT);
    assert_eq!(
        key(&mut app, KeyCode::Char('q')),
        Effect::Quit(StopReason::Quit)
    );
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert_eq!(
        app.update(Event::Key(ctrl_c)),
        Effect::Quit(StopReason::Quit)
    );
    assert_eq!(
        app.update(Event::Stop(StopReason::Terminated)),
        Effect::Quit(StopReason::Terminated)
    );
    assert_eq!(key(&mut app, KeyCode::Char('y')), Effect::None);
    assert_eq!(app.update(Event::Frame), Effect::Draw);
    assert_eq!(app.update(Event::Resize), Effect::Draw);
}

#[test]
fn rates_come_from_calls_per_second_of_the_source_clock() {
    let mut app = App::new(test_config());
    app.update(Event::Records(vec![record(3, 10); 4]));
    app.update(Event::Second {
        elapsed: Duration::from_secs(1),
    });
    assert_eq!(app.panels()[3].calls_per_sec(), Some(4));
    assert_eq!(app.records_per_sec, 4);
    // Counters ahead of the records (calls dropped or not yet read) count as calls.
    app.update(counters(3, ring_full(10, 0)));
    app.update(Event::Second {
        elapsed: Duration::from_millis(1500),
    });
    assert_eq!(app.panels()[3].calls(), 10);
    assert_eq!(
        app.panels()[3].calls_per_sec(),
        Some(12),
        "6 calls in 0.5 s"
    );
    assert_eq!(app.elapsed, Duration::from_millis(1500));
    for s in 2..100 {
        app.update(Event::Second {
            elapsed: Duration::from_secs(s),
        });
    }
    assert_eq!(app.panels()[3].rates.len(), RATE_HISTORY);
}

#[test]
fn records_of_functions_not_on_screen_are_counted() {
    let mut app = App::new(AppConfig {
        functions: fixture().meta.functions[..1].to_vec(),
        ..test_config()
    });
    app.update(Event::Records(vec![record(0, 5), record(3, 5)]));
    assert_eq!((app.panels()[0].records, app.foreign_records), (1, 1));
}

#[test]
fn the_end_of_a_replay_is_shown() {
    let app = replayed(fixture(), MIGRATE_HOT, u64::MAX);
    assert!(app.ended);
    let calls: u64 = app.panels().iter().map(Panel::calls).sum();
    assert_eq!(calls, 3612);
    assert_eq!(app.elapsed, Duration::from_nanos(20_342_638_243));
    let hot = &app.panels()[0];
    let scores = hot
        .stats
        .since_start()
        .scores
        .expect("hot score keeps scores");
    assert_eq!((scores.counts[11], scores.counts[84]), (1504, 8));
    assert!(app.panels()[1].stats.since_start().scores.is_none());
}

/// The batch the screen aggregated comes back emptied, with its memory, once; the source's
/// next batch reuses it when it is large enough (tui/source.rs).
#[test]
fn a_spent_batch_is_handed_back_for_the_next() {
    let mut app = App::new(test_config());
    let mut batch = Vec::with_capacity(4096);
    batch.extend([record(3, 100), record(3, 200)]);
    let memory = batch.as_ptr();
    app.update(Event::Records(batch));
    assert_eq!(app.panels()[3].records, 2);
    let spent = app.take_spent();
    assert!(spent.is_empty());
    assert_eq!((spent.capacity(), spent.as_ptr()), (4096, memory));
    assert_eq!(app.take_spent().capacity(), 0, "handed back once");
    let next = crate::tui::source::next_batch(spent, 4096);
    assert_eq!(next.as_ptr(), memory, "reused");
    let next = crate::tui::source::next_batch(next, 8192);
    assert!(next.capacity() >= 8192, "too small: a fresh one");
}

#[test]
fn panels_count_clean_calls_where_the_records_say_and_keep_counting_after_a_reset() {
    let disturbed = |func, d: [u16; 4]| {
        let mut r = record(func, 100);
        r.set_disturbance(d);
        r
    };
    let batch = || {
        vec![
            record(0, 100),
            record(0, 120),
            record(0, 140),
            disturbed(
                0,
                [
                    1,
                    0,
                    damon_common::disturb::UNKNOWN,
                    damon_common::disturb::UNKNOWN,
                ],
            ),
            disturbed(0, [0, 0, 2, 0]),
        ]
    };
    // Not measured (an older capture, kernel mode, recorded without --disturbance): no share shown.
    let mut app = App::new(test_config());
    app.update(Event::Records(batch()));
    assert_eq!(app.panels()[0].clean_share(), None);
    let mut app = App::new(test_config());
    app.set_disturbance_measured(true);
    app.update(Event::Records(batch()));
    assert_eq!(app.panels()[0].clean_share(), Some(0.6));
    assert_eq!(app.panels()[1].clean_share(), None, "no calls yet");
    key(&mut app, KeyCode::Char('r'));
    app.update(Event::Records(vec![
        record(0, 90),
        disturbed(0, [0, 1, 7, 7]),
    ]));
    assert_eq!(
        app.panels()[0].clean_share(),
        Some(0.5),
        "counted since the reset"
    );
}

/// Kernel mode: the clean share comes from the histograms' disturbed calls, period by period
/// (each snapshot is cumulative).
#[test]
fn kernel_mode_panels_count_clean_calls_from_the_histograms() {
    use crate::{capture::KernelDisturbed, stats::kernel_hist::from_durations};
    let snapshot = |calls: &[u64], slept: u64| {
        let mut h = from_durations(calls, 10);
        let mut buckets = vec![0; h.buckets.len()];
        buckets[damon_common::hist_bucket(5_000, 10) as usize] = slept;
        h.disturbed = Some(KernelDisturbed {
            slept,
            sum_ns: 5_000 * slept,
            buckets,
            ..Default::default()
        });
        let mut s = HistSnapshot::default();
        s.functions
            .insert(0, (FunctionCounters::all_recorded(h.count), h));
        s
    };
    let mut app = App::new(test_config());
    app.set_disturbance_measured(true);
    app.update(Event::Histograms(snapshot(&[100, 120, 5_000], 1)));
    assert_eq!(app.panels()[0].clean_share(), Some(2.0 / 3.0));
    // Cumulative: 3 more calls, 2 more slept.
    app.update(Event::Histograms(snapshot(
        &[100, 120, 5_000, 130, 5_000, 5_000],
        3,
    )));
    assert_eq!(app.panels()[0].clean_share(), Some(0.5));
}
