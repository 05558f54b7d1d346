//! `damon-trace record`: trace for a while and write a capture.
use std::{
    io::Write as _,
    process::ExitCode,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context as _, bail};
use damon_common::FunctionId;
use tokio::signal::unix::{SignalKind, signal};

use crate::{
    capture::{Meta, Summary, format::CaptureWriter},
    cli::{RecordArgs, Selection},
    doctor,
    probe::{
        attach::{LoadOptions, Tracer},
        kernel::KernelIdentity,
        ring::RingReader,
    },
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

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer for the duration of the call.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Ends a session: the deadline or a signal.
enum Stop {
    Duration,
    Interrupted,
    Terminated,
}

impl Stop {
    fn as_str(&self) -> &'static str {
        match self {
            Stop::Duration => "duration",
            Stop::Interrupted => "interrupted",
            Stop::Terminated => "terminated",
        }
    }
}

pub fn run(args: &RecordArgs) -> anyhow::Result<ExitCode> {
    let functions = select_functions(&args.selection)?;

    // Catch stop signals from the start: a Ctrl-C during the (slow) attach then ends the session
    // as soon as it starts, with a complete capture, instead of killing us half-attached. This
    // also overrides a SIG_IGN inherited by background jobs of non-interactive shells.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (mut sigint, mut sigterm, mut sighup) = {
        let _rt = runtime.enter();
        (
            signal(SignalKind::interrupt())?,
            signal(SignalKind::terminate())?,
            signal(SignalKind::hangup())?,
        )
    };

    // Fail fast, with the cause, when this kernel cannot be traced at all.
    let diagnosis = doctor::diagnose(&functions);
    if !diagnosis.can_trace {
        eprint!("{}", doctor::render_text(&diagnosis));
        bail!("this kernel cannot be traced (diagnosis above)");
    }

    let mut tracer = Tracer::load(&LoadOptions {
        functions: functions.clone(),
        attach: args.selection.attach,
        ring_size: args.ring_size,
    })?;
    for s in tracer.statuses() {
        match &s.detail {
            Some(d) => eprintln!("{:<27} {:<7} {d}", s.name, s.attach.as_str()),
            None => eprintln!("{:<27} {}", s.name, s.attach.as_str()),
        }
    }
    if !tracer.any_attached() {
        bail!(
            "none of the selected functions could be attached (reasons above); see `damon-trace doctor`"
        );
    }

    let meta = Meta {
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        kernel: KernelIdentity::read(),
        hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap_or_default()
            .trim()
            .to_owned(),
        start_unix_ns: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
        start_monotonic_ns: clock_ns(libc::CLOCK_MONOTONIC),
        command_line: std::env::args().collect(),
        mode: "stream".to_owned(),
        ring_size: args.ring_size,
        functions: tracer.statuses().to_vec(),
        damon: damon_config(),
    };
    let mut writer = CaptureWriter::create(&args.output, args.force, &meta)
        .with_context(|| format!("creating capture {}", args.output.display()))?;
    writer.flush().context("writing the capture header")?;
    let ring = tracer.take_ring()?;

    let started = Instant::now();
    let (stop, mut reader) = runtime.block_on(async {
        let mut reader = RingReader::new(ring).context("registering the ring buffer with epoll")?;
        let deadline = tokio::time::sleep(args.duration);
        tokio::pin!(deadline);
        // Backup against a missed wake-up, and the cadence of status lines and file flushes
        // (so a killed recorder loses at most about a second of records).
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut received = 0u64;
        let mut batch = Vec::new();
        let stop = loop {
            let mut sink = |r| batch.push(r);
            let mut flush = false;
            tokio::select! {
                r = reader.drain_when_ready(&mut sink) => { r?; }
                _ = tick.tick() => {
                    reader.drain(&mut sink);
                    flush = true;
                }
                _ = &mut deadline => break Stop::Duration,
                _ = sigint.recv() => break Stop::Interrupted,
                _ = sigterm.recv() => break Stop::Terminated,
                _ = sighup.recv() => break Stop::Terminated,
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
        anyhow::Ok((stop, reader))
    })?;

    // Entries off, let running calls finish, exits off; then take what is left in the ring.
    tracer.detach();
    let mut rest = Vec::new();
    reader.drain(&mut |r| rest.push(r));
    for r in &rest {
        writer.push(r).context("writing the capture")?;
    }
    let counters = tracer.counters()?;
    let summary = Summary {
        duration_ns: started.elapsed().as_nanos() as u64,
        end_reason: stop.as_str().to_owned(),
        counters,
        malformed_items: reader.malformed,
        damon_end: damon_config(),
    };
    drop(reader);
    drop(tracer);
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

/// DAMON configuration in sysfs, for the capture's metadata; `None` without DAMON.
fn damon_config() -> Option<serde_json::Value> {
    let snapshot = crate::damon::snapshot(&crate::damon::SysfsRoot::system()).ok()?;
    serde_json::to_value(snapshot).ok()
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
