//! The event loop end to end over `TestBackend`, on tokio's simulated clock: a replay paced
//! in real time, keys arriving as a user would type them, saves, signals.
use std::time::Duration;

use ratatui::{
    Terminal,
    backend::TestBackend,
    crossterm::event::{KeyCode, KeyEvent, KeyModifiers},
};
use tokio::sync::mpsc;

use super::*;
use crate::{
    capture::format::read_file,
    tui::test_support::{MIGRATE_HOT, app_for, fixture, text},
};

fn key(c: char) -> Event {
    Event::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

/// Sends `script` (delay before each event) into the loop's input channel.
fn type_keys(script: Vec<(u64, Event)>) -> mpsc::Receiver<Event> {
    let (tx, rx) = mpsc::channel(8);
    tokio::spawn(async move {
        for (delay_ms, event) in script {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            if tx.send(event).await.is_err() {
                return;
            }
        }
        // Keep the channel open: a closed input must not end the loop by itself.
        std::future::pending::<()>().await;
    });
    rx
}

struct Outcome {
    reason: StopReason,
    app: App,
    screen: String,
    saved_dir: tempfile::TempDir,
}

async fn drive(speed: f64, script: Vec<(u64, Event)>) -> Outcome {
    let capture = fixture();
    let mut app = app_for(&capture, MIGRATE_HOT);
    let mut collector = Collector::Replay(ReplaySource::new(ReplaySchedule::new(capture), speed));
    let mut spool = Spool::Memory(Vec::new());
    let dir = tempfile::tempdir().expect("tempdir");
    let mut terminal = Terminal::new(TestBackend::new(80, 24)).expect("terminal");
    let mut inputs = type_keys(script);
    let reason = run(
        &mut terminal,
        &mut app,
        &mut collector,
        &mut inputs,
        None,
        Sinks {
            spool: &mut spool,
            save_dir: dir.path(),
        },
    )
    .await
    .expect("the loop ends cleanly");
    Outcome {
        reason,
        screen: text(terminal.backend().buffer()),
        app,
        saved_dir: dir,
    }
}

#[tokio::test(start_paused = true)]
async fn quits_on_q_with_every_function_on_screen() {
    let started = tokio::time::Instant::now();
    let out = drive(1.0, vec![(5_000, key('q'))]).await;
    assert_eq!(out.reason, StopReason::Quit);
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    // Five seconds of capture at real speed, drawn at the frame rate.
    assert_eq!(out.app.elapsed, Duration::from_secs(5));
    for p in out.app.panels() {
        assert!(p.calls() > 0, "{}", p.status.name);
        assert!(out.screen.contains(&p.status.name), "{}", out.screen);
    }
    assert!(
        out.screen.contains("0:04") || out.screen.contains("0:05"),
        "{}",
        out.screen
    );
}

#[tokio::test(start_paused = true)]
async fn keys_change_the_screen_while_the_replay_runs() {
    let script = vec![
        (1_500, key('l')),
        (
            100,
            Event::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)),
        ),
        (100, key('w')),
        (100, key('f')),
        (2_000, key('?')),
        (100, key('q')),
    ];
    let out = drive(1.0, script).await;
    assert_eq!(
        out.reason,
        StopReason::Quit,
        "q quits even from the help overlay"
    );
    assert!(out.app.focused && out.app.windowed && out.app.frozen() && out.app.help);
    assert!(
        out.screen.contains("keys — Esc or ? closes"),
        "{}",
        out.screen
    );
    assert!(out.screen.contains("FROZEN"), "{}", out.screen);
    // Frozen at 1.7 s; collection went on to 3.8 s.
    let shown: u64 = out.app.panels().iter().map(|p| p.records).sum();
    assert!(shown > 0 && out.app.records_total > shown, "{shown}");
    assert_eq!(out.app.elapsed, Duration::from_secs(3));
}

#[tokio::test(start_paused = true)]
async fn s_saves_a_complete_capture_of_what_was_played() {
    let out = drive(10.0, vec![(1_000, key('s')), (10, key('q'))]).await;
    let message = out.app.message.clone().expect("a message");
    assert!(message.starts_with("saved "), "{message}");
    let saved: Vec<_> = std::fs::read_dir(out.saved_dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(saved.len(), 1);
    let capture = read_file(&saved[0]).expect("a readable capture");
    let summary = capture.summary.expect("with a summary");
    assert_eq!(summary.end_reason, "snapshot");
    // 1 s of wall time at 10x: about 10 s of the capture.
    assert_eq!(summary.duration_ns, 10_000_000_000);
    let calls: u64 = summary.counters.values().map(|c| c.calls).sum();
    assert_eq!(calls, capture.records.len() as u64);
    assert!(capture.records.len() > 1000 && capture.records.len() < 3612);
    assert!(message.contains(&format!("({} records)", capture.records.len())));
}

#[tokio::test(start_paused = true)]
async fn speed_zero_plays_everything_then_holds_until_a_signal() {
    let out = drive(0.0, vec![(3_000, Event::Stop(StopReason::Terminated))]).await;
    assert_eq!(out.reason, StopReason::Terminated);
    assert!(out.app.ended);
    assert_eq!(out.app.records_total, 3612);
    assert!(out.screen.contains("replay ended"), "{}", out.screen);
}

/// `--time on-cpu` on a capture: accepted with the breakdown, refused with the reason and the
/// remedy without it.
#[test]
fn time_on_cpu_needs_the_breakdown_and_says_why_not() {
    let plain = fixture();
    assert_eq!(
        check_time_basis(TimeBasis::Wall, &plain.meta, "the capture"),
        Ok(())
    );
    let e = check_time_basis(TimeBasis::OnCpu, &plain.meta, "the capture").unwrap_err();
    assert!(
        e.contains("which the capture does not have")
            && e.contains("recorded without --disturbance")
            && e.contains("--time wall"),
        "{e}"
    );
    let mut old = fixture();
    old.meta.disturbance = Some(crate::capture::DisturbanceStatus {
        measured: true,
        ..Default::default()
    });
    let e = check_time_basis(TimeBasis::OnCpu, &old.meta, "the capture").unwrap_err();
    assert!(e.contains("no time breakdown"), "{e}");
    let slow = crate::tui::test_support::slow_fixture();
    assert_eq!(
        check_time_basis(TimeBasis::OnCpu, &slow.meta, "the capture"),
        Ok(())
    );
}
