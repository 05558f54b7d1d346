//! DAMON sysfs scenario driver (set up, run, restore) and its memory workload.
//!
//! Layout: [`sysfs`] paths and raw I/O under a replaceable root; [`plan`] the pure choice of
//! operations set and the list of writes; [`restore`] the prior state and the guard that puts
//! it back; [`kdamond`] start, stop and counters of the scenario's kdamond; [`snapshot`] a
//! serialisable summary of DAMON's configuration; [`workload`] the hot/cold child process;
//! [`scenario`] the run itself.
use std::process::ExitCode;

use crate::cli::{ScenarioCommand, WorkloadArgs};

mod guardian;
mod kdamond;
mod plan;
mod restore;
mod scenario;
mod signals;
mod snapshot;
mod sysfs;
mod workload;

pub use restore::{ScenarioLeftover, scenario_leftover};
pub use snapshot::snapshot;
pub use sysfs::SysfsRoot;

pub fn run_scenario(cmd: &ScenarioCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ScenarioCommand::MigrateHot(args) => scenario::run_migrate_hot(&SysfsRoot::system(), args),
    }
}

pub fn run_workload(args: &WorkloadArgs) -> anyhow::Result<ExitCode> {
    workload::run(args)
}
