//! `damon-trace`: per-call latency of DAMON and timer kernel functions.
mod accounting;
mod analysis;
// The instrument commands (benchmarks, guest tests): feature `instruments`.
#[cfg(any(test, feature = "instruments"))]
mod bench;
mod calibrate;
mod capture;
mod cli;
mod compare;
mod damon;
mod diagnosis;
mod doctor;
mod error;
mod export;
mod heatmap_svg;
mod listen;
mod manual;
mod output;
mod probe;
mod record;
mod render;
mod report;
mod scenario;
mod selection;
mod serve;
mod session;
mod stats;
mod timing;
mod trace;
mod tui;

use std::process::ExitCode;

use clap::Parser as _;

use crate::cli::{Cli, Command};

/// Exit status for bad usage or input (clap also uses 2).
pub const EXIT_USAGE: u8 = 2;

fn main() -> ExitCode {
    // `--debug-timing` counts from here.
    let origin = std::time::Instant::now();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return clap_error(&err),
    };
    if debug_timing(&cli.command) {
        timing::enable(origin);
        timing::mark("arguments parsed");
    }
    let checked = {
        let _t = timing::phase("preflight: names, output path, privileges");
        preflight(&cli.command)
    };
    let result = checked.and_then(|()| match cli.command {
        Command::Doctor(args) => doctor::run(&args),
        Command::Live(args) => tui::run_live(&args),
        Command::Record(args) => record::run(&args),
        Command::Report(args) => report::run(&args),
        Command::Compare(args) => compare::run(&args),
        Command::Export(args) => export::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Calibrate(args) => calibrate::run(&args),
        Command::Scenario(cmd) => scenario::run(&cmd),
        Command::Completions(args) => manual::completions(&args),
        Command::Man(args) => manual::man(&args),
        Command::Workload(args) => scenario::run_workload(&args),
        #[cfg(any(test, feature = "instruments"))]
        Command::BenchLoop(args) => bench::run_loop(&args),
        #[cfg(any(test, feature = "instruments"))]
        Command::DisturbLoop(args) => bench::disturb_loop::run(&args),
        #[cfg(any(test, feature = "instruments"))]
        Command::ReadMix(args) => bench::read_mix::run(&args),
        #[cfg(any(test, feature = "instruments"))]
        Command::SwitchLoop(args) => bench::switch_loop::run(&args),
        #[cfg(any(test, feature = "instruments"))]
        Command::BenchDecode(args) => bench::run_decode(&args),
        #[cfg(any(test, feature = "instruments"))]
        Command::BenchHeatmap(args) => bench::run_heatmap(&args),
        #[cfg(any(test, feature = "instruments"))]
        Command::BenchFloor(args) => bench::run_floor(&args),
    });
    // Unless a session printed it at its first record.
    timing::print_once();
    match result {
        Ok(code) => code,
        // `damon-trace export … | head`: the reader has what it wanted.
        Err(err) if broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("damon-trace: error: {}", one_line(&format!("{err:#}")));
            ExitCode::from(exit_status(&err))
        }
    }
}

/// Whether the command asks for `--debug-timing` (or `DAMON_TRACE_DEBUG_TIMING=1`).
fn debug_timing(command: &Command) -> bool {
    let args = match command {
        Command::Record(a) => a.trace.timing,
        Command::Live(a) => a.trace.timing,
        Command::Serve(a) => a.trace.timing,
        Command::Doctor(a) => a.timing,
        Command::Calibrate(a) => a.timing,
        _ => return false,
    };
    args.debug_timing
}

/// Whether the error is stdout's reader going away (EPIPE), wherever it was wrapped: an
/// `io::Error` in the chain, or one inside a `serde_json::Error` (which hides its source from
/// the chain, so `export --format json | head` used to end in `error: Broken pipe`).
fn broken_pipe(err: &anyhow::Error) -> bool {
    use std::io::ErrorKind::BrokenPipe;
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == BrokenPipe)
            || e.downcast_ref::<serde_json::Error>()
                .is_some_and(|e| e.io_error_kind() == Some(BrokenPipe))
    })
}

/// 2 for input the caller must fix (names, paths, capture files), 1 for everything else.
fn exit_status(err: &anyhow::Error) -> u8 {
    let input = err.downcast_ref::<error::UsageError>().is_some()
        || err
            .downcast_ref::<capture::format::CaptureError>()
            .is_some_and(|e| e.is_input());
    if input { EXIT_USAGE } else { 1 }
}

/// What can be checked without the kernel, checked before it: names, then output paths, then
/// privileges. So `record -o EXISTING` says that the file exists (exit 2) on any machine, and
/// an unprivileged `record` names the missing capabilities instead of a failed diagnosis.
fn preflight(command: &Command) -> anyhow::Result<()> {
    use capture::format::check_output;
    match command {
        Command::Record(a) if a.format.json() && capture::stdio::is_stdio(&a.output) => {
            Err(error::UsageError(
                "-o - and --format json both write to stdout: write the capture to a file, or \
                 leave out --format json"
                    .to_owned(),
            )
            .into())
        }
        Command::Record(a) => {
            check_selection(&a.trace.selection)?;
            check_output(&a.output, a.force)?;
            diagnosis::privileges::require_privileges()
        }
        Command::Live(a) if a.replay.is_some() && !a.trace.selection.func.is_empty() => {
            Err(error::UsageError(
                "--func chooses what to trace; a replay shows what its capture holds (narrow it \
                 with --functions NAMES)"
                    .to_owned(),
            )
            .into())
        }
        Command::Live(a) if a.record.as_deref().is_some_and(capture::stdio::is_stdio) => {
            Err(error::UsageError(
                "live draws its screen on stdout, so --record - cannot write the capture there: \
                 give a file name (or use `record -o -`)"
                    .to_owned(),
            )
            .into())
        }
        Command::Live(a) if a.replay.is_none() => {
            check_selection(&a.trace.selection)?;
            if let Some(path) = &a.record {
                check_output(path, a.force)?;
            }
            diagnosis::privileges::require_privileges()
        }
        Command::Serve(a) => {
            check_selection(&a.trace.selection)?;
            if let Some(path) = &a.output {
                check_output(path, a.force)?;
            }
            diagnosis::privileges::require_privileges()
        }
        Command::Calibrate(_) => diagnosis::privileges::require_privileges(),
        Command::Export(a) if !capture::stdio::is_stdio(&a.output) => {
            Ok(check_output(&a.output, a.force)?)
        }
        Command::Report(a) => match &a.heatmap {
            Some(path) => Ok(check_output(path, a.force)?),
            None => Ok(()),
        },
        Command::Compare(a) => match &a.plot {
            Some(path) => Ok(check_output(path, a.force)?),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// The named functions are known, not repeated, and (for `--func`) in this kernel.
fn check_selection(selection: &cli::Selection) -> anyhow::Result<()> {
    selection::check_symbols(&selection::select_functions(&selection.into())?)
}

/// Errors are one line: a cause with embedded newlines (a kernel verifier log, a nested
/// error) is folded.
fn one_line(msg: &str) -> String {
    msg.split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Help and version go to stdout with status 0; a usage error becomes the same one line as
/// every other error (`damon-trace: error: …`, with clap's tip if it has one), status 2.
fn clap_error(err: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = err.print();
            return ExitCode::SUCCESS;
        }
        // A bare `damon-trace` (or `damon-trace scenario`): the help is the answer.
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = err.print();
            return ExitCode::from(EXIT_USAGE);
        }
        _ => {}
    }
    let text = err.render().to_string();
    // clap's layout: the message (and indented argument lists or tips), a blank line, then
    // "Usage: …" and "For more information, try '--help'.".
    let mut parts = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if !line.is_empty() {
            parts.push(line.trim_start_matches("error: ").to_owned());
        }
    }
    let help = match std::env::args().nth(1) {
        Some(sub) if err.kind() != ErrorKind::InvalidSubcommand && !sub.starts_with('-') => {
            format!("damon-trace {sub} --help")
        }
        _ => "damon-trace --help".to_owned(),
    };
    eprintln!("damon-trace: error: {} (see `{help}`)", parts.join(" "));
    ExitCode::from(EXIT_USAGE)
}
