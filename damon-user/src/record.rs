//! `damon-trace record`: trace for a while and write a capture.
use std::{
    io::Write as _,
    process::ExitCode,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use damon_common::FunctionId;

use crate::{
    capture::format::CaptureWriter,
    cli::{RecordArgs, Selection},
    session::{Session, StopReason, runtime_with_signals},
};

/// Usage errors (exit status 2) as opposed to runtime failures (1).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Resolves `--functions` into ids: all four by default; unknown or repeated names are errors
/// that list what exists.
pub fn select_functions(sel: &Selection) -> anyhow::Result<Vec<FunctionId>> {
    if sel.functions.is_empty() {
        return Ok(FunctionId::ALL.to_vec());
    }
    let known = || FunctionId::ALL.map(FunctionId::symbol).join(", ");
    let mut out = Vec::new();
    for name in &sel.functions {
        let name = name.trim();
        let f = FunctionId::from_symbol(name).ok_or_else(|| {
            UsageError(format!(
                "unknown function `{name}`; the built-in functions are: {}",
                known()
            ))
        })?;
        if out.contains(&f) {
            return Err(
                UsageError(format!("function `{name}` is given twice in --functions")).into(),
            );
        }
        out.push(f);
    }
    Ok(out)
}

pub fn run(args: &RecordArgs) -> anyhow::Result<ExitCode> {
    select_functions(&args.selection)?;

    let (runtime, mut signals) = runtime_with_signals()?;
    let _rt = runtime.enter();

    let mut session = Session::start(&args.selection, args.ring_size, "stream")?;
    let mut writer = CaptureWriter::create(&args.output, args.force, session.meta())
        .with_context(|| format!("creating capture {}", args.output.display()))?;
    writer.flush().context("writing the capture header")?;

    let started = session.started();
    let stop = runtime.block_on(async {
        let deadline = tokio::time::sleep(args.duration);
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
                    flush = true;
                }
                _ = &mut deadline => break StopReason::Duration,
                reason = signals.recv() => break reason,
            }
            received += batch.len() as u64;
            for r in batch.drain(..) {
                writer.push(&r).context("writing the capture")?;
            }
            if flush {
                writer.flush().context("writing the capture")?;
                status_line(started, args.duration, received);
            }
        };
        if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            eprintln!();
        }
        anyhow::Ok(stop)
    })?;

    let mut rest = Vec::new();
    let summary = session.stop(stop, &mut rest)?;
    for r in &rest {
        writer.push(r).context("writing the capture")?;
    }
    let written = writer
        .finish(&summary)
        .with_context(|| format!("finishing capture {}", args.output.display()))?;
    let dropped: u64 = summary.counters.values().map(|c| c.dropped()).sum();
    let calls: u64 = summary.counters.values().map(|c| c.calls).sum();
    eprintln!(
        "wrote {} records ({} calls seen) to {} in {:.1} s",
        written,
        calls,
        args.output.display(),
        summary.duration_ns as f64 / 1e9
    );
    if dropped > 0 {
        eprintln!(
            "warning: {dropped} calls were dropped (see `damon-trace report`); a larger --ring-size may help"
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Progress on stderr: rewritten in place on a terminal, a plain line every 5 s otherwise
/// (logs, the VM console).
fn status_line(started: Instant, total: Duration, received: u64) {
    use std::io::IsTerminal as _;
    let el = started.elapsed();
    let rate = received as f64 / el.as_secs_f64().max(1e-3);
    let line = format!(
        "recording {:>5.1}/{:.0} s  {received} records  {rate:.0}/s",
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::AttachChoice;

    fn sel(names: &[&str]) -> Selection {
        Selection {
            functions: names.iter().map(|s| s.to_string()).collect(),
            attach: AttachChoice::Auto,
        }
    }

    #[test]
    fn selects_functions() {
        assert_eq!(select_functions(&sel(&[])).expect("all").len(), 4);
        assert_eq!(
            select_functions(&sel(&["lock_timer_base", "damon_hot_score"])).expect("two"),
            vec![FunctionId::LockTimerBase, FunctionId::DamonHotScore]
        );
        let e = select_functions(&sel(&["nope"]))
            .expect_err("unknown")
            .to_string();
        assert!(
            e.contains("nope") && e.contains("damon_migrate_pages"),
            "{e}"
        );
        assert!(select_functions(&sel(&["lock_timer_base", "lock_timer_base"])).is_err());
    }
}
