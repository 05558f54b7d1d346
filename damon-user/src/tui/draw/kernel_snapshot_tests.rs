//! The screen fed by a real kernel-mode capture (`record --mode kernel` in the 7.2 guest),
//! replayed on its own clock: panels from the differences of the kernel's cumulative
//! histogram snapshots, the status line saying KERNEL MODE.
use ratatui::crossterm::event::KeyCode;

use crate::tui::test_support::{KERNEL_MODE, kernel_fixture, press, render, replayed};

const SECOND: u64 = 1_000_000_000;

#[test]
fn kernel_mode_main_80x24() {
    let app = replayed(kernel_fixture(), KERNEL_MODE, 6 * SECOND);
    let screen = render(&app, 80, 24);
    assert!(screen.contains("KERNEL 10ns"), "{screen}");
    insta::assert_snapshot!("kernel_main_80x24", screen);
}

#[test]
fn kernel_mode_focused_lock_timer_base_160x48() {
    let mut app = replayed(kernel_fixture(), KERNEL_MODE, u64::MAX);
    press(&mut app, KeyCode::BackTab);
    press(&mut app, KeyCode::Enter);
    insta::assert_snapshot!(
        "kernel_focused_lock_timer_base_160x48",
        render(&app, 160, 48)
    );
}

/// What the panels count is what the kernel counted: at the end of the replay every
/// function's calls equal the capture's summary, and the calls on screen equal the
/// histograms' counts.
#[test]
fn kernel_mode_panels_count_what_the_kernel_counted() {
    let capture = kernel_fixture();
    let summary = capture.summary.clone().expect("finished capture");
    let app = replayed(capture, KERNEL_MODE, u64::MAX);
    for p in app.panels() {
        let id = p.status.id;
        let h = &summary.kernel_hist[&id];
        assert_eq!(p.records, h.count, "{}", p.status.name);
        assert_eq!(p.calls(), summary.counters[&id].calls, "{}", p.status.name);
        let d = app.distribution(p);
        assert_eq!(d.count, h.count);
        assert_eq!(d.sum, u128::from(h.sum_ns));
        assert_eq!((d.min, d.max), (Some(h.min_ns), Some(h.max_ns)));
    }
}
