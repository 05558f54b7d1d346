//! `damon-trace live`: the live screen.
//!
//! Three layers: collection ([`source`]: the ring buffer or a replayed capture, on tokio),
//! state ([`app`]: `App::update(event)`, pure) and drawing ([`draw`]: a pure function of the
//! state). [`run`] joins them with one event enum and one `select!`, over any ratatui backend,
//! so the whole screen is testable with `TestBackend`.
pub mod app;
mod binning;
pub mod draw;
mod format;
mod keys;
pub mod replay;
pub mod slow;
pub mod source;
pub mod spool;
mod terminal;
#[cfg(test)]
mod test_support;

use std::{
    io::IsTerminal as _,
    path::{Path, PathBuf},
    process::ExitCode,
    time::{Duration, SystemTime},
};

use anyhow::{Context as _, bail};
use ratatui::{Terminal, backend::Backend};
use tokio::sync::mpsc;

use crate::{
    capture::format::read_file,
    cli::{LiveArgs, TimeBasis},
    error::UsageError,
    session::{Session, StopReason, StopSignals, runtime_with_signals},
};
use app::{App, AppConfig, Effect, Event, Origin};
use replay::{ReplaySchedule, ReplaySource};
use source::{Collector, LiveSource};
use spool::Spool;
use terminal::TerminalGuard;

/// Redraws per second, whatever the rate of records.
pub const FRAME_INTERVAL: Duration = Duration::from_millis(200);
/// The data tick: ring drain against missed wake-ups, kernel counters, capture flush.
pub const DATA_INTERVAL: Duration = Duration::from_secs(1);

/// Where the loop's side effects go.
pub struct Sinks<'a> {
    pub spool: &'a mut Spool,
    /// Directory for captures saved with `s`.
    pub save_dir: &'a Path,
}

/// The event loop: collects, updates the state, draws at a fixed frame rate, saves on `s`,
/// and returns why it stopped (`q`, a signal).
pub async fn run<B: Backend>(
    terminal: &mut Terminal<B>,
    app: &mut App,
    collector: &mut Collector,
    inputs: &mut mpsc::Receiver<Event>,
    mut signals: Option<&mut StopSignals>,
    sinks: Sinks<'_>,
) -> anyhow::Result<StopReason>
where
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let mut frame = tokio::time::interval(FRAME_INTERVAL);
    frame.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut data =
        tokio::time::interval_at(tokio::time::Instant::now() + DATA_INTERVAL, DATA_INTERVAL);
    data.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut keys_open = true;
    // Redraw on a frame tick only when something changed (a held replay costs nothing, and a
    // serial console gets no needless bytes).
    let mut changed = true;
    // `--debug-timing`: the first frame that shows a call is marked (bench --startup).
    let mut call_shown = false;
    loop {
        // Keys and the frame first: a flood of records must not make the screen unresponsive.
        let events = tokio::select! {
            biased;
            reason = stop_signal(signals.as_deref_mut()) => vec![Event::Stop(reason)],
            input = inputs.recv(), if keys_open => match input {
                Some(event) => vec![event],
                None => {
                    keys_open = false;
                    Vec::new()
                }
            },
            _ = frame.tick() => vec![Event::Frame],
            _ = data.tick() => {
                sinks.spool.flush().context("writing the capture")?;
                collector.second()?
            }
            batch = collector.next() => batch?,
        };
        for event in events {
            let is_frame = matches!(event, Event::Frame);
            if is_frame && !changed {
                continue;
            }
            changed = !is_frame;
            if let Event::Records(records) = &event {
                sinks.spool.push(records).context("writing the capture")?;
            }
            if let Event::Slow(calls) = &event {
                sinks
                    .spool
                    .push_slow(calls)
                    .context("writing the capture")?;
            }
            if let Event::Histograms(snapshot) = &event {
                sinks
                    .spool
                    .push_snapshot(snapshot)
                    .context("writing the capture")?;
            }
            let effect = app.update(event);
            collector.recycle(app.take_spent());
            match effect {
                Effect::None => {}
                Effect::Draw => {
                    terminal.draw(|f| draw::draw(f, app))?;
                    if !call_shown
                        && crate::timing::enabled()
                        && app.panels().iter().any(|p| p.calls() > 0)
                    {
                        call_shown = true;
                        crate::timing::mark("first frame showing a call");
                    }
                }
                Effect::Save => {
                    for event in collector.drain() {
                        if let Event::Records(records) = &event {
                            sinks.spool.push(records).context("writing the capture")?;
                        }
                        if let Event::Slow(calls) = &event {
                            sinks
                                .spool
                                .push_slow(calls)
                                .context("writing the capture")?;
                        }
                        app.update(event);
                    }
                    let outcome = save(collector, sinks.spool, sinks.save_dir);
                    app.update(Event::Saved(outcome));
                    terminal.draw(|f| draw::draw(f, app))?;
                }
                Effect::Quit(reason) => return Ok(reason),
            }
        }
    }
}

async fn stop_signal(signals: Option<&mut StopSignals>) -> StopReason {
    match signals {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

fn save(collector: &Collector, spool: &mut Spool, dir: &Path) -> Result<String, String> {
    let summary = collector.snapshot_summary().map_err(|e| format!("{e:#}"))?;
    spool
        .save_snapshot(collector.meta(), &summary, dir, SystemTime::now())
        .map(|(path, n)| format!("{} ({n} records)", path.display()))
        .map_err(|e| format!("{e:#}"))
}

/// The session a live view traces (`--slow` included); `None` for a replay.
fn live_config(args: &LiveArgs) -> anyhow::Result<Option<crate::trace::SessionConfig>> {
    if args.replay.is_some() {
        if args.slow.slow.is_some() {
            return Err(crate::error::UsageError(
                "--slow applies to tracing, not to --replay (a capture recorded with --slow \
                 has its slow calls already)"
                    .into(),
            )
            .into());
        }
        return Ok(None);
    }
    let mut config = args.trace.session_config(args.ring_size)?;
    args.slow.apply(&mut config)?;
    if args.time == TimeBasis::OnCpu {
        if config.mode.mode != crate::capture::Mode::Stream {
            return Err(UsageError(
                "--time on-cpu needs each call's time breakdown, which only stream mode \
                 records: drop --mode kernel"
                    .to_owned(),
            )
            .into());
        }
        config.mode.disturbance = true;
    }
    Ok(Some(config))
}

/// `damon-trace live`: trace (or replay) and show the screen until `q`, Ctrl-C or a signal.
pub fn run_live(args: &LiveArgs) -> anyhow::Result<ExitCode> {
    // A replay is narrowed to names its capture has (user-named functions included), not to
    // the built-in ones.
    let config = live_config(args)?;
    let replay = match &args.replay {
        Some(path) => {
            let capture = narrowed(read_file(path)?, &args.trace.selection.functions)?;
            check_time_basis(args.time, &capture.meta, "the capture").map_err(UsageError)?;
            Some(capture)
        }
        None => None,
    };
    if !std::io::stdout().is_terminal() {
        bail!(
            "`live` draws a full-screen view and needs a terminal on stdout; \
             use `damon-trace record` to trace without one"
        );
    }
    let (runtime, mut signals) = runtime_with_signals()?;
    let _rt = runtime.enter();

    let (mut collector, mut spool, origin) = match (replay, &args.replay) {
        (Some(capture), Some(path)) => {
            let origin = Origin::Replay {
                file: path.file_name().map_or_else(
                    || path.display().to_string(),
                    |f| f.to_string_lossy().into(),
                ),
                speed: args.speed,
            };
            let schedule = ReplaySchedule::new(capture);
            let source = ReplaySource::new(schedule, args.speed);
            (Collector::Replay(source), Spool::Memory(Vec::new()), origin)
        }
        _ => {
            let config = config.context("a live session has its configuration")?;
            let mut session = Session::start(&config)?;
            check_time_basis(args.time, session.meta(), "this session")
                .map_err(anyhow::Error::msg)?;
            session.timing_report_at_end();
            let spool = match &args.record {
                Some(path) => Spool::record(path, args.force, session.meta())?,
                None => Spool::temporary(session.meta())?,
            };
            (
                Collector::Live(LiveSource::new(session)),
                spool,
                Origin::Live,
            )
        }
    };
    let save_dir: PathBuf = match spool.recording().and_then(Path::parent) {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let mut app = screen(args, &collector, origin, spool.recording());
    let (tx, mut rx) = mpsc::channel(64);
    let outcome = {
        let mut guard = TerminalGuard::enter()?;
        terminal::spawn_key_reader(tx);
        runtime.block_on(run(
            guard.terminal(),
            &mut app,
            &mut collector,
            &mut rx,
            Some(&mut signals),
            Sinks {
                spool: &mut spool,
                save_dir: &save_dir,
            },
        ))
        // The guard restores the terminal here, before anything is printed.
    };
    drop(rx);
    let finished = finish(collector, spool, &outcome);
    match (outcome, finished) {
        (Ok(_), finished) => finished.map(|()| ExitCode::SUCCESS),
        (Err(e), Ok(())) => Err(e),
        (Err(e), Err(also)) => {
            eprintln!("damon-trace: while stopping: {also:#}");
            Err(e)
        }
    }
}

/// The screen's state, set up for the session or the replayed capture.
fn screen(args: &LiveArgs, collector: &Collector, origin: Origin, recording: Option<&Path>) -> App {
    let meta = collector.meta();
    let mut app = App::new(AppConfig {
        kernel_release: meta.kernel.release.clone(),
        clock: meta.clock,
        origin,
        recording: recording.map(|p| p.display().to_string()),
        functions: meta.functions.clone(),
        bucket_ns: args.bucket_ns,
        window_secs: args.window,
        kernel_width_ns: collector.kernel_width_ns(),
    });
    app.set_calibration(
        crate::stats::calibration::Calibration::from_meta(meta.calibration.as_ref()).as_ref(),
        meta.mode,
    );
    app.set_disturbance_measured(crate::capture::DisturbanceStatus::measured(meta));
    app.set_time_basis(args.time);
    app.set_slow_settings(
        meta.slow,
        crate::capture::DisturbanceStatus::breakdown(meta),
    );
    if let Collector::Replay(r) = collector {
        app.set_slow_counters(r.schedule().slow_counters());
    }
    app
}

/// Stops tracing with exact accounting and completes the `--record` capture, even when the
/// loop failed (then the capture ends with reason "error").
fn finish(
    collector: Collector,
    mut spool: Spool,
    outcome: &anyhow::Result<StopReason>,
) -> anyhow::Result<()> {
    let ring_size = collector.meta().ring_size;
    let names = collector.meta().functions.clone();
    let Collector::Live(live) = collector else {
        return Ok(());
    };
    let reason = *outcome.as_ref().unwrap_or(&StopReason::Error);
    let source::Stopped {
        records: rest,
        slow,
        summary,
    } = live.stop(reason)?;
    spool.push(&rest).context("writing the capture")?;
    spool.push_slow(&slow).context("writing the capture")?;
    if let Some((path, n)) = spool.finish(&summary)? {
        let calls: u64 = summary.counters.values().map(|c| c.made()).sum();
        let what = if n == 0 && !summary.kernel_hist.is_empty() {
            let bucketed: u64 = summary.kernel_hist.values().map(|h| h.count).sum();
            format!("the kernel's histograms of {bucketed} calls")
        } else {
            format!("{n} records")
        };
        eprintln!(
            "wrote {what} ({calls} calls made) to {} in {:.1} s",
            path.display(),
            summary.duration_ns as f64 / 1e9
        );
    }
    for (&id, c) in &summary.counters {
        let (name, attach) = names.iter().find(|f| f.id == id).map_or_else(
            || (crate::accounting::function_name(id), None),
            |f| (f.name.clone(), f.attach.attach()),
        );
        if let Some(w) = crate::accounting::drop_warning(&name, attach, c, ring_size) {
            eprintln!("damon-trace: warning: {w}");
        }
    }
    Ok(())
}

/// The session `live` traces: `--time on-cpu` needs each call's time breakdown, so it
/// implies `--disturbance`, which only stream mode has.
/// `--time on-cpu` needs records with their time breakdown (`what`: the capture or the
/// session whose metadata `meta` is); the error says why they have none.
fn check_time_basis(
    time: TimeBasis,
    meta: &crate::capture::Meta,
    what: &str,
) -> Result<(), String> {
    if time == TimeBasis::Wall || crate::capture::DisturbanceStatus::breakdown(meta) {
        return Ok(());
    }
    let why = match &meta.disturbance {
        Some(d) if !d.measured => d
            .why_not
            .clone()
            .unwrap_or_else(|| "its disturbance was not measured".to_owned()),
        Some(_) => "the records carry no time breakdown (captures written before damon-trace \
                    measured it have none)"
            .to_owned(),
        None if meta.mode != crate::capture::Mode::Stream => {
            "it is a kernel-mode capture: no per-call records".to_owned()
        }
        None => "it was recorded without --disturbance".to_owned(),
    };
    Err(format!(
        "--time on-cpu needs each call's time off the CPU and in interrupts, which {what} \
         does not have: {why}; record in stream mode with --disturbance, or use --time wall"
    ))
}

/// Narrows a replayed capture to `--functions`, which must all be in it.
fn narrowed(
    mut capture: crate::capture::Capture,
    names: &[String],
) -> anyhow::Result<crate::capture::Capture> {
    if names.is_empty() {
        return Ok(capture);
    }
    crate::analysis::check_functions(&capture, names)?;
    capture.meta.functions.retain(|f| names.contains(&f.name));
    Ok(capture)
}

#[cfg(test)]
mod run_tests;
