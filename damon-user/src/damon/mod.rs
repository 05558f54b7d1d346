//! DAMON sysfs scenario driver (set up, run, restore) and its memory workload.
use std::process::ExitCode;

use crate::cli::{ScenarioCommand, WorkloadArgs};

pub fn run_scenario(_cmd: &ScenarioCommand) -> anyhow::Result<ExitCode> {
    anyhow::bail!("scenario: not implemented yet")
}

pub fn run_workload(_args: &WorkloadArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("workload: not implemented yet")
}
