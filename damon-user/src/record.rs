//! `damon-trace record`: trace for a while and write a capture.
use std::{
    io::Write as _,
    process::ExitCode,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use damon_common::FunctionId;

use crate::{
    capture::{FunctionCounters, Summary, format::CaptureWriter},
    cli::{RecordArgs, Selection},
    probe::attach::TracedFunction,
    session::{Session, StopReason, runtime_with_signals},
};

/// Usage errors (exit status 2) as opposed to runtime failures (1).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Resolves `--functions` and `--func` into the functions to trace, with their ids: the
/// built-in ones named by `--functions` (all four when neither flag is given), then the
/// `--func` ones in command-line order with ids from [`damon_common::FIRST_USER_FUNC`]. Usage
/// errors: unknown or repeated built-in names, an empty or malformed `--func` name, a `--func`
/// naming a built-in function or given twice, more than [`damon_common::MAX_USER_FUNCS`].
/// Whether the kernel has the `--func` symbols is [`check_symbols`]' job.
pub fn select_functions(sel: &Selection) -> anyhow::Result<Vec<TracedFunction>> {
    let mut out: Vec<TracedFunction> = select_builtins(&sel.functions, !sel.func.is_empty())?
        .into_iter()
        .map(TracedFunction::builtin)
        .collect();
    let max = damon_common::MAX_USER_FUNCS as usize;
    if sel.func.len() > max {
        return Err(UsageError(format!(
            "{} --func functions given; at most {max} can be traced at once",
            sel.func.len()
        ))
        .into());
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, name) in sel.func.iter().enumerate() {
        let name = name.trim();
        if name.is_empty() {
            return Err(UsageError("--func needs a kernel function name".to_owned()).into());
        }
        if !is_symbol_name(name) {
            return Err(UsageError(format!(
                "--func `{name}` is not a kernel function name (letters, digits, `_` and `.` only)"
            ))
            .into());
        }
        if FunctionId::from_symbol(name).is_some() {
            return Err(UsageError(format!(
                "--func `{name}` is a built-in function; select it with --functions {name}"
            ))
            .into());
        }
        if seen.contains(&name) {
            return Err(UsageError(format!("--func `{name}` is given twice")).into());
        }
        seen.push(name);
        out.push(TracedFunction {
            id: damon_common::FIRST_USER_FUNC + i as u32,
            symbol: name.to_owned(),
        });
    }
    Ok(out)
}

/// Checks that the kernel has each `--func` function (a text symbol in /proc/kallsyms): a
/// usage error naming the first one it does not have, with the closest name it does have.
/// Functions that exist but cannot be traced (notrace, kprobe-blacklisted, inlined with only
/// compiler clones left) are not errors here: the session reports each one's status and why,
/// as for the built-in functions. When kallsyms cannot be read, attaching will say why.
pub fn check_symbols(functions: &[TracedFunction]) -> anyhow::Result<()> {
    use crate::probe::kernel::{Kallsyms, SymbolPresence};
    let user: Vec<&TracedFunction> = functions
        .iter()
        .filter(|f| f.as_builtin().is_none())
        .collect();
    if user.is_empty() {
        return Ok(());
    }
    let Ok(kallsyms) = Kallsyms::read() else {
        return Ok(());
    };
    for f in user {
        if kallsyms.presence(&f.symbol) == SymbolPresence::Absent {
            let hint = kallsyms
                .closest(&f.symbol)
                .map_or_else(String::new, |c| format!("; did you mean `{c}`?"));
            return Err(UsageError(format!(
                "--func `{}`: this kernel has no such function (not a text symbol in \
                 /proc/kallsyms){hint}",
                f.symbol
            ))
            .into());
        }
    }
    Ok(())
}

/// What a kernel text symbol can look like (`name`, or a compiler clone `name.isra.0`).
fn is_symbol_name(name: &str) -> bool {
    name.len() <= 255
        && !name.starts_with(['.', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9'])
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// The built-in functions named by `--functions`: all four when it is empty, unless `--func`
/// is given (then `--func` alone says what to trace).
fn select_builtins(names: &[String], user_funcs: bool) -> anyhow::Result<Vec<FunctionId>> {
    if names.is_empty() {
        return Ok(if user_funcs {
            Vec::new()
        } else {
            FunctionId::ALL.to_vec()
        });
    }
    let known = || FunctionId::ALL.map(FunctionId::symbol).join(", ");
    let mut out = Vec::new();
    for name in names {
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

    let mut session = Session::start(
        &args.selection,
        args.ring_size,
        args.mode,
        Some(&args.calibration),
    )?;
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
            // Interval boundary markers travel in the ring too, but are not records of calls.
            received += batch
                .iter()
                .filter(|r| r.func != damon_common::AGGREGATION_MARK)
                .count() as u64;
            for r in batch.drain(..) {
                writer.push(&r).context("writing the capture")?;
            }
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
                status_line(started, args.duration, received, what);
            }
        };
        if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            eprintln!();
        }
        anyhow::Ok(stop)
    })?;

    let mut rest = Vec::new();
    let session_names = session.meta().functions.clone();
    let summary = session.stop(stop, &mut rest)?;
    for r in &rest {
        writer.push(r).context("writing the capture")?;
    }
    let written = writer
        .finish(&summary)
        .with_context(|| format!("finishing capture {}", args.output.display()))?;
    let calls: u64 = summary.counters.values().map(|c| c.made()).sum();
    if args.mode.mode.bits() == damon_common::MODE_KERNEL {
        let bucketed: u64 = summary.kernel_hist.values().map(|h| h.count).sum();
        eprintln!(
            "wrote the kernel's histograms of {bucketed} calls ({calls} calls made) to {} in \
             {:.1} s",
            args.output.display(),
            summary.duration_ns as f64 / 1e9
        );
    } else {
        eprintln!(
            "wrote {} records ({} calls made) to {} in {:.1} s",
            written,
            calls,
            args.output.display(),
            summary.duration_ns as f64 / 1e9
        );
    }
    let names = |id: u32| {
        session_names.iter().find(|f| f.id == id).map_or_else(
            || (function_name(id), ""),
            |f| (f.name.clone(), f.attach.as_str()),
        )
    };
    // Kernel mode: the histograms hold the timed calls, the capture no records of them.
    let timed = if args.mode.mode.bits() & damon_common::MODE_STREAM != 0 {
        written
    } else {
        summary.kernel_hist.values().map(|h| h.count).sum()
    };
    for w in accounting_warnings(&summary, names, args.ring_size, timed) {
        eprintln!("damon-trace: warning: {w}");
    }
    Ok(ExitCode::SUCCESS)
}

/// A built-in function's symbol by id.
pub fn function_name(id: u32) -> String {
    FunctionId::try_from(id)
        .map(|f| f.symbol().to_owned())
        .unwrap_or_else(|id| format!("function {id}"))
}

/// The end-of-session warnings: one line per function that lost calls, saying how many of how
/// many, why and what helps; and a line if the counters do not add up to what was written
/// (`calls == records + dropped + in flight` must hold; if not, that is a bug to report).
pub fn accounting_warnings(
    summary: &Summary,
    name: impl Fn(u32) -> (String, &'static str),
    ring_size: u32,
    written: u64,
) -> Vec<String> {
    let mut out: Vec<String> = summary
        .counters
        .iter()
        .filter_map(|(&id, c)| {
            let (name, attach) = name(id);
            drop_warning(&name, attach, c, ring_size)
        })
        .collect();
    let calls: u64 = summary.counters.values().map(|c| c.made()).sum();
    let accounted: u64 = summary
        .counters
        .values()
        .map(|c| c.dropped() + c.in_flight)
        .sum::<u64>()
        + written;
    if calls != accounted {
        out.push(format!(
            "the kernel counted {calls} calls but records ({written}) + dropped + in flight =              {accounted}: {} calls unaccounted (please report this)",
            calls as i128 - accounted as i128
        ));
    }
    out
}

/// What a function lost, why, and what helps: `12345 of 20000 calls of damon_hot_score were
/// not recorded: the ring buffer (4096 B) was full; use --ring-size 4194304 (or larger) to keep
/// more`. `None` when nothing was lost.
/// `attach`: the function's attach method (`fentry`, `kprobe`), which decides what a skipped
/// probe run means and what helps.
pub fn drop_warning(
    name: &str,
    attach: &str,
    c: &FunctionCounters,
    ring_size: u32,
) -> Option<String> {
    let dropped = c.dropped();
    if dropped == 0 {
        return None;
    }
    let mut why = Vec::new();
    if c.ring_full > 0 {
        why.push(format!(
            "the ring buffer ({ring_size} B) was full{}",
            if c.ring_full == dropped {
                String::new()
            } else {
                format!(" for {}", c.ring_full)
            }
        ));
    }
    if c.stamp_full > 0 {
        why.push(format!(
            "the entry-stamp map ({} open calls) was full for {}",
            crate::probe::globals::stamp_map_entries(),
            c.stamp_full
        ));
    }
    if c.too_deep > 0 {
        why.push(format!(
            "{} nested deeper than {} calls on one task",
            c.too_deep,
            damon_common::STAMP_DEPTH
        ));
    }
    let skipped_entries = c.skipped_entries.unwrap_or(0);
    if skipped_entries > 0 {
        why.push(format!(
            "the kernel skipped the entry probe of {skipped_entries}"
        ));
    }
    if c.stale_entries > 0 {
        why.push(format!(
            "the kernel skipped the exit probe of {} (their entry stamps were discarded, not \
             timed)",
            c.stale_entries
        ));
    }
    let mut line = format!(
        "{dropped} of {} calls of {name} were not recorded: {}",
        c.made(),
        why.join(", ")
    );
    if c.ring_full > 0 {
        line.push_str(&format!(
            "; use --ring-size {} (or larger) to keep more",
            suggested_ring_size(ring_size)
        ));
    }
    if skipped_entries > 0 || c.stale_entries > 0 {
        line.push_str(if attach == "kprobe" {
            "; the kernel skips a kprobe program while another kprobe or tracepoint program runs \
             on that CPU (the call came from an interrupt nested in one): fewer other tracing \
             programs on the machine help"
        } else {
            "; the kernel runs a fentry/fexit probe once per CPU at a time and skips it while \
             another run is active there: on a preemptible kernel a task preempted inside the \
             probe blocks it for every task on that CPU (use --attach kprobe, whose probes run \
             with preemption disabled)"
        });
    }
    let skipped_exits = c.skipped_exits.unwrap_or(0);
    // kprobe skips come as whole calls (entry and exit), so only fentry/fexit can join two.
    if attach != "kprobe" && skipped_entries > 0 && skipped_exits > 0 {
        line.push_str(&format!(
            "; with both entry and exit runs skipped, up to {} of the recorded durations may \
             span two calls of one task (an exit skipped, then the next entry at the same stack \
             position)",
            skipped_entries.min(skipped_exits)
        ));
    }
    Some(line)
}

/// Four times the ring, at least the default, at most 1 GiB (all powers of two).
pub fn suggested_ring_size(ring_size: u32) -> u32 {
    ring_size
        .saturating_mul(4)
        .clamp(damon_common::DEFAULT_RING_BYTES, 1 << 30)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::AttachChoice;

    fn sel(names: &[&str]) -> Selection {
        Selection {
            functions: names.iter().map(|s| s.to_string()).collect(),
            attach: AttachChoice::Auto,
            func: Vec::new(),
        }
    }

    fn summary(counters: &[(u32, FunctionCounters)]) -> Summary {
        Summary {
            duration_ns: 1,
            end_reason: "duration".into(),
            counters: counters.iter().copied().collect(),
            malformed_items: 0,
            damon_end: None,
            intervals: None,
            kernel_hist: Default::default(),
        }
    }

    fn names(id: u32) -> (String, &'static str) {
        (function_name(id), "fentry")
    }

    #[test]
    fn end_warning_names_function_counts_reason_and_remedy() {
        let hot = FunctionCounters {
            calls: 20000,
            emitted: 7655,
            ring_full: 12345,
            ..Default::default()
        };
        let timer = FunctionCounters {
            calls: 10,
            emitted: 9,
            in_flight: 1,
            ..Default::default()
        };
        let w = accounting_warnings(&summary(&[(0, hot), (3, timer)]), names, 4096, 7664);
        assert_eq!(
            w,
            [
                "12345 of 20000 calls of damon_hot_score were not recorded: the ring buffer \
                 (4096 B) was full; use --ring-size 4194304 (or larger) to keep more"
            ]
        );
        let mixed = FunctionCounters {
            calls: 100,
            emitted: 90,
            ring_full: 5,
            stamp_full: 3,
            too_deep: 2,
            ..Default::default()
        };
        let w = accounting_warnings(&summary(&[(2, mixed)]), names, 1 << 24, 90);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("10 of 100 calls of damon_migrate_pages were not recorded: the ring buffer (16777216 B) was full for 5, the entry-stamp map (16384 open calls) was full for 3, 2 nested deeper than 4"),
            "{}",
            w[0]
        );
        assert!(w[0].ends_with("use --ring-size 67108864 (or larger) to keep more"));
    }

    #[test]
    fn end_warning_when_the_counters_do_not_add_up() {
        let c = FunctionCounters {
            calls: 10,
            emitted: 10,
            ..Default::default()
        };
        assert!(accounting_warnings(&summary(&[(0, c)]), names, 4096, 10).is_empty());
        let w = accounting_warnings(&summary(&[(0, c)]), names, 4096, 8);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("2 calls unaccounted"), "{}", w[0]);
    }

    #[test]
    fn ring_size_suggestion() {
        assert_eq!(suggested_ring_size(4096), damon_common::DEFAULT_RING_BYTES);
        assert_eq!(suggested_ring_size(8 << 20), 32 << 20);
        assert_eq!(suggested_ring_size(1 << 30), 1 << 30);
    }

    #[test]
    fn selects_functions() {
        assert_eq!(select_functions(&sel(&[])).expect("all").len(), 4);
        assert_eq!(
            select_functions(&sel(&["lock_timer_base", "damon_hot_score"])).expect("two"),
            vec![
                TracedFunction::builtin(FunctionId::LockTimerBase),
                TracedFunction::builtin(FunctionId::DamonHotScore)
            ]
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
