//! `damon-trace record`: trace for a while and write a capture.
mod summary;

use std::{
    io::Write as _,
    path::Path,
    process::ExitCode,
    time::{Duration, Instant},
};

use anyhow::Context as _;

use crate::{
    accounting::{accounting_warnings, function_name},
    capture::{Summary, format::CaptureWriter},
    cli::RecordArgs,
    session::{Session, StopReason, StopSignals, runtime_with_signals},
    trace::Mode,
};

pub fn run(args: &RecordArgs) -> anyhow::Result<ExitCode> {
    let mut config = args.trace.session_config(args.ring_size)?;
    args.slow.apply(&mut config)?;

    let (runtime, mut signals) = runtime_with_signals()?;
    let _rt = runtime.enter();

    let mut session = Session::start(&config)?;
    let meta = session.meta();
    if crate::capture::DisturbanceStatus::breakdown(meta)
        && let Some(why) = meta
            .disturbance
            .as_ref()
            .and_then(|d| d.irq_time_missing.as_deref())
    {
        eprintln!("damon-trace: note: time breakdown without interrupt time: {why}");
    }
    if let Some(from) = meta
        .disturbance
        .as_ref()
        .and_then(|d| d.irq_clock.as_deref())
    {
        eprintln!("damon-trace: note: interrupt time {from}");
    }
    let mut writer = CaptureWriter::create(&args.output, args.force, session.meta())
        .with_context(|| format!("creating capture {}", args.output.display()))?;
    writer.flush().context("writing the capture header")?;

    let stop = runtime.block_on(record_until_stopped(
        &mut session,
        &mut writer,
        &mut signals,
        args.duration,
    ))?;

    let mut rest = Vec::new();
    let mut slow_rest = Vec::new();
    let mut meta = session.meta().clone();
    let summary = session.stop(stop, &mut rest, &mut slow_rest)?;
    if summary.calibration.is_some() {
        meta.calibration.clone_from(&summary.calibration);
    }
    for r in &rest {
        writer.push(r).context("writing the capture")?;
    }
    writer
        .push_slow(&slow_rest)
        .context("writing the capture")?;
    let by_function = writer.records_by_function.clone();
    let written = writer
        .finish(&summary)
        .with_context(|| format!("finishing capture {}", args.output.display()))?;
    let mode = config.mode.mode;
    print_end(&summary, mode, written, &args.output);
    if let Some(settings) = &meta.slow {
        for line in summary::slow_lines(settings, &summary, names_of(&meta)) {
            eprintln!("{line}");
        }
    }
    let names = |id: u32| {
        meta.functions.iter().find(|f| f.id == id).map_or_else(
            || (function_name(id), None),
            |f| (f.name.clone(), f.attach.attach()),
        )
    };
    // Kernel mode: the histograms hold the timed calls, the capture no records of them.
    let timed = if mode.streams() {
        written
    } else {
        summary.kernel_hist.values().map(|h| h.count).sum()
    };
    for w in accounting_warnings(&summary, names, args.ring_size, timed) {
        eprintln!("damon-trace: warning: {w}");
    }
    if args.format.json() {
        let s = summary::summarise(&args.output, &meta, &summary, &by_function);
        crate::output::write_stdout(&crate::output::json_document(&s)?)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes what the ring brings until the duration ends or a stop signal comes, flushing the
/// file (and, with kernel buckets, a cumulative snapshot) once a second.
async fn record_until_stopped(
    session: &mut Session,
    writer: &mut CaptureWriter,
    signals: &mut StopSignals,
    duration: Duration,
) -> anyhow::Result<StopReason> {
    let started = session.started();
    let deadline = tokio::time::sleep(duration);
    tokio::pin!(deadline);
    // Backup against a missed wake-up, and the cadence of status lines and file flushes
    // (so a killed recorder loses at most about a second of records).
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut received = 0u64;
    let mut batch = Vec::new();
    let stop = loop {
        let mut flush = false;
        tokio::select! {
            r = session.wait_and_drain(&mut batch) => r?,
            _ = tick.tick() => {
                session.drain(&mut batch);
                for line in session.probe_lines() {
                    eprintln!("{line}");
                }
                session.calibration_done(false)?;
                flush = true;
            }
            _ = &mut deadline => break StopReason::Duration,
            reason = signals.recv() => break reason,
        }
        // Interval boundary markers travel in the ring too, but are not records of calls.
        received += batch
            .iter()
            .filter(|r| r.func != damon_common::AGGREGATION_MARK)
            .count() as u64;
        for r in batch.drain(..) {
            writer.push(&r).context("writing the capture")?;
        }
        writer
            .push_slow(&session.take_slow_calls())
            .context("writing the capture")?;
        if flush {
            writer.flush().context("writing the capture")?;
            // Kernel mode: a cumulative snapshot a second, so a killed recorder's capture
            // reads to its last one; the calls bucketed so far are the progress.
            if session.buckets_in_kernel() {
                let snapshot = session
                    .hist_snapshot()
                    .context("reading the kernel's histograms")?;
                writer
                    .push_snapshot(&snapshot)
                    .context("writing the capture")?;
                if session.kernel_width_ns().is_some() {
                    received = snapshot.functions.values().map(|(_, h)| h.count).sum();
                }
            }
            let what = if session.kernel_width_ns().is_some() {
                "calls bucketed"
            } else {
                "records"
            };
            status_line(started, duration, received, what);
        }
    };
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!();
    }
    Ok(stop)
}

/// A function's name by id, as the capture's metadata has it.
fn names_of(meta: &crate::capture::Meta) -> impl Fn(u32) -> String + '_ {
    |id| {
        meta.functions
            .iter()
            .find(|f| f.id == id)
            .map_or_else(|| function_name(id), |f| f.name.clone())
    }
}

/// The last line: what was written where, and how many calls were made.
fn print_end(summary: &Summary, mode: Mode, written: u64, output: &Path) {
    let output = if crate::capture::stdio::is_stdio(output) {
        Path::new("stdout")
    } else {
        output
    };
    let calls: u64 = summary.counters.values().map(|c| c.made()).sum();
    let secs = summary.duration_ns as f64 / 1e9;
    if mode == Mode::Kernel {
        let bucketed: u64 = summary.kernel_hist.values().map(|h| h.count).sum();
        eprintln!(
            "wrote the kernel's histograms of {bucketed} calls ({calls} calls made) to {} in \
             {secs:.1} s",
            output.display(),
        );
    } else {
        eprintln!(
            "wrote {written} records ({calls} calls made) to {} in {secs:.1} s",
            output.display(),
        );
    }
}

/// Progress on stderr: rewritten in place on a terminal, a plain line every 5 s otherwise
/// (logs, the VM console).
fn status_line(started: Instant, total: Duration, received: u64, what: &str) {
    use std::io::IsTerminal as _;
    let el = started.elapsed();
    let rate = received as f64 / el.as_secs_f64().max(1e-3);
    let line = format!(
        "recording {:>5.1}/{:.0} s  {received} {what}  {rate:.0}/s",
        el.as_secs_f64(),
        total.as_secs_f64()
    );
    let mut err = std::io::stderr();
    if err.is_terminal() {
        let _ = write!(err, "\r{line}   ");
        let _ = err.flush();
    } else if el.as_secs().is_multiple_of(5) && el.as_secs() > 0 {
        let _ = writeln!(err, "{line}");
    }
}
