//! The slow-call view's keys and `--time on-cpu`, on the real capture and on records made
//! here with a known breakdown.
use damon_common::{CallRecord, breakdown::UNKNOWN_NS};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::*;
use crate::tui::test_support::{MIGRATE_HOT, app_for, fixture, render, slow_call as slow};

fn key(app: &mut App, code: KeyCode) -> Effect {
    app.update(Event::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

#[test]
fn x_opens_the_selected_functions_slow_calls_and_x_or_esc_closes_them() {
    let mut app = app_for(&fixture(), MIGRATE_HOT);
    key(&mut app, KeyCode::Down);
    let id = app.panels()[1].status.id;
    let other = app.panels()[0].status.id;
    app.update(Event::Slow(vec![
        slow(id, 10, 5_000_000),
        slow(id, 20, 9_000_000),
        slow(other, 30, 8_000_000),
        slow(id, 40, 7_000_000),
    ]));
    assert_eq!(app.slow.of(id).map(|l| l.len()), Some(3));
    assert_eq!(app.slow.of(other).map(|l| l.len()), Some(1));

    assert_eq!(key(&mut app, KeyCode::Char('x')), Effect::Draw);
    let view = app.slow_view.expect("open");
    assert_eq!((view.func, view.selected), (id, 0));
    assert_eq!(view.order, SlowOrder::Slowest);
    for (code, expect) in [
        (KeyCode::Down, 1),
        (KeyCode::Char('j'), 2),
        (KeyCode::Down, 2),
        (KeyCode::Up, 1),
        (KeyCode::Char('k'), 0),
        (KeyCode::Up, 0),
    ] {
        key(&mut app, code);
        assert_eq!(app.slow_view.map(|v| v.selected), Some(expect), "{code:?}");
    }
    assert_eq!(
        app.selected, 1,
        "moving in the list keeps the panel selected"
    );
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Char('o'));
    let view = app.slow_view.expect("still open");
    assert_eq!((view.order, view.selected), (SlowOrder::Newest, 0));
    // Other keys wait while the view is open.
    assert_eq!(key(&mut app, KeyCode::Char('l')), Effect::None);
    assert_eq!(app.scale, None);
    assert_eq!(key(&mut app, KeyCode::Enter), Effect::None);
    assert!(!app.focused);
    assert_eq!(key(&mut app, KeyCode::Char('s')), Effect::Save);
    assert_eq!(key(&mut app, KeyCode::Esc), Effect::Draw);
    assert!(app.slow_view.is_none());
    key(&mut app, KeyCode::Char('x'));
    assert!(app.slow_view.is_some());
    key(&mut app, KeyCode::Char('x'));
    assert!(app.slow_view.is_none(), "x closes too");
    key(&mut app, KeyCode::Char('o'));
    assert!(
        app.message
            .as_deref()
            .is_some_and(|m| m.contains("x opens")),
        "{:?}",
        app.message
    );
    assert_eq!(
        key(&mut app, KeyCode::Char('q')),
        Effect::Quit(StopReason::Quit)
    );
}

#[test]
fn slow_calls_of_functions_not_on_screen_are_counted() {
    let mut app = app_for(&fixture(), MIGRATE_HOT);
    app.update(Event::Slow(vec![slow(77, 0, 1_000_000)]));
    assert_eq!(app.slow.foreign, 1);
    assert!(app.slow.of(77).is_none());
}

/// A live session's counters arrive each second and show in the open view; `r` empties the
/// list and counts from there; `f` holds the list as it was while new slow calls come in.
#[test]
fn live_counters_show_reset_counts_from_there_and_freeze_holds_the_list() {
    let mut app = app_for(&fixture(), MIGRATE_HOT);
    let id = app.panels()[0].status.id;
    let counters = |kept, ring_full, over_limit| {
        BTreeMap::from([(
            id,
            crate::capture::SlowCounters {
                kept,
                ring_full,
                over_limit,
            },
        )])
    };
    app.update(Event::Slow(vec![
        slow(id, 10, 5_000_000),
        slow(id, 20, 6_000_000),
    ]));
    app.update(Event::SlowCounters(counters(2, 7, 0)));
    key(&mut app, KeyCode::Char('x'));
    let screen = render(&app, 120, 40);
    assert!(
        screen.contains("2 arrived")
            && screen.contains("recorded 2, lost 7 (ring full 7, over limit 0)"),
        "{screen}"
    );
    key(&mut app, KeyCode::Esc);

    key(&mut app, KeyCode::Char('r'));
    assert!(app.slow_calls().of(id).is_none(), "r empties the list");
    app.update(Event::Slow(vec![slow(id, 30, 7_000_000)]));
    app.update(Event::SlowCounters(counters(3, 9, 1)));
    assert_eq!(
        app.slow_calls().counters_of(id),
        Some(crate::capture::SlowCounters {
            kept: 1,
            ring_full: 2,
            over_limit: 1
        }),
        "counted from the reset"
    );

    key(&mut app, KeyCode::Char('f'));
    app.update(Event::Slow(vec![slow(id, 40, 8_000_000)]));
    app.update(Event::SlowCounters(counters(4, 9, 1)));
    assert_eq!(
        app.slow_calls().of(id).map(|l| l.arrived),
        Some(1),
        "frozen"
    );
    assert_eq!(app.slow_calls().counters_of(id).map(|c| c.kept), Some(1));
    assert_eq!(
        app.slow.of(id).map(|l| l.arrived),
        Some(2),
        "still collected"
    );
    key(&mut app, KeyCode::Char('x'));
    assert!(render(&app, 120, 40).contains("1 arrived"));
    key(&mut app, KeyCode::Esc);
    key(&mut app, KeyCode::Char('f'));
    assert_eq!(
        app.slow_calls().of(id).map(|l| l.arrived),
        Some(2),
        "thawed"
    );
    assert_eq!(app.slow_calls().counters_of(id).map(|c| c.kept), Some(2));
}

/// Nearest rank, computed here from the sorted values (not through the screen's histogram).
fn nearest_rank_percentile(sorted: &[u64], p: f64) -> u64 {
    let rank = ((p * sorted.len() as f64 / 100.0) - 1e-9).ceil().max(1.0) as usize;
    sorted[rank - 1]
}

/// The percentile line of `--time on-cpu` is computed from each call's on-CPU time; calls
/// whose breakdown is not known are set aside and counted.
#[test]
fn time_on_cpu_shows_the_percentiles_of_the_on_cpu_times() {
    let id = fixture().meta.functions[0].id;
    // 1000 calls: on-CPU time 100..=1099 ns in a scrambled order (below 2048 ns, where the
    // screen's histogram is exact), wall time far larger and not in the same order.
    let mut on_cpu = Vec::new();
    let mut records: Vec<CallRecord> = (0..1000u64)
        .map(|i| {
            let on = 100 + (i * 389) % 1000;
            on_cpu.push(on);
            let off = 50_000 + (i * 7919) % 90_000;
            let irq = (i * 13) % 3000;
            CallRecord {
                func: id,
                entry_ns: i * 1000,
                duration_ns: on + off + irq,
                off_cpu_ns: off as u32,
                irq_ns: irq as u32,
                pid: 1,
                tid: 1,
                ..CallRecord::default()
            }
        })
        .collect();
    // Seven whose breakdown is not known.
    records.extend((0..7).map(|i| CallRecord {
        func: id,
        entry_ns: 2_000_000 + i,
        duration_ns: 10,
        off_cpu_ns: UNKNOWN_NS,
        ..CallRecord::default()
    }));
    on_cpu.sort_unstable();

    let mut app = app_for(&fixture(), MIGRATE_HOT);
    app.set_time_basis(TimeBasis::OnCpu);
    app.update(Event::Records(records.clone()));
    let panel = &app.panels()[0];
    assert_eq!(panel.set_aside, 7);
    assert_eq!(panel.records, 1007, "set-aside calls are still calls");
    let shown = app
        .distribution(panel)
        .percentiles(&crate::tui::draw::PANEL_PERCENTILES)
        .expect("calls");
    let expect: Vec<u64> = crate::tui::draw::PANEL_PERCENTILES
        .iter()
        .map(|&p| nearest_rank_percentile(&on_cpu, p))
        .collect();
    assert_eq!(shown, expect);
    let screen = render(&app, 120, 40);
    let d = |v: u64| crate::tui::format::duration(crate::capture::Clock::Wall, v);
    let line = format!(
        "min 100ns  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  7 set aside (no breakdown)",
        d(expect[0]),
        d(expect[1]),
        d(expect[2]),
        d(expect[3]),
        d(1099)
    );
    assert!(screen.contains(&line), "{line}\n{screen}");
    assert!(
        screen
            .lines()
            .next()
            .is_some_and(|l| l.contains("on-CPU time")),
        "{screen}"
    );

    // The same records on wall time: other percentiles, nothing set aside, no basis named.
    let mut wall = app_for(&fixture(), MIGRATE_HOT);
    wall.update(Event::Records(records));
    let panel = &wall.panels()[0];
    assert_eq!(panel.set_aside, 0);
    let p50 = wall
        .distribution(panel)
        .percentiles(&[50.0])
        .expect("calls")[0];
    assert!(p50 > 50_000, "{p50}");
    assert!(!render(&wall, 120, 40).contains("on-CPU"));
}
