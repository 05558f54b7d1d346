//! `damon-trace`: per-call latency of DAMON and timer kernel functions.
mod capture;
mod cli;
mod compare;
mod damon;
mod doctor;
mod export;
mod probe;
mod record;
mod report;
mod serve;
mod session;
mod stats;
mod tui;

use std::process::ExitCode;

use clap::Parser as _;

use crate::cli::{Cli, Command};

/// Exit status for bad usage or input (clap also uses 2).
pub const EXIT_USAGE: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Doctor(args) => doctor::run(&args),
        Command::Live(args) => tui::run_live(&args),
        Command::Record(args) => record::run(&args),
        Command::Report(args) => report::run(&args),
        Command::Compare(args) => compare::run(&args),
        Command::Export(args) => export::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Scenario(cmd) => damon::run_scenario(&cmd),
        Command::Workload(args) => damon::run_workload(&args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("damon-trace: error: {err:#}");
            // Bad input (names, capture files) is the caller's to fix: same status as clap's.
            let input = err.downcast_ref::<record::UsageError>().is_some()
                || err
                    .downcast_ref::<capture::format::CaptureError>()
                    .is_some_and(|e| e.is_input());
            if input {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
