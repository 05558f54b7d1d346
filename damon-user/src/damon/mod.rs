//! DAMON sysfs scenario driver (set up, run, restore) and its memory workload.
//!
//! Layout: [`sysfs`] paths and raw I/O under a replaceable root; [`plan`] the pure choice of
//! operations set and the list of writes; [`presets`] the presets and `scenario list`;
//! [`restore`] the prior state and the guard that puts it back; [`kdamond`] start, stop and counters of the scenario's kdamond; [`snapshot`] a
//! serialisable summary of DAMON's configuration; [`workload`] the hot/cold child process;
//! [`scenario`] the run itself.
use std::process::ExitCode;

use crate::cli::{ScenarioCommand, WorkloadArgs};
use presets::Preset;

mod guardian;
mod kdamond;
mod plan;
mod presets;
mod restore;
mod scenario;
mod signals;
mod snapshot;
mod sysfs;
mod workload;

pub use plan::DestNode;
pub use restore::{ScenarioLeftover, scenario_leftover};
pub use snapshot::snapshot;
pub use sysfs::SysfsRoot;

pub fn run_scenario(cmd: &ScenarioCommand) -> anyhow::Result<ExitCode> {
    let root = SysfsRoot::system();
    let run = |preset, args, dest| scenario::run_preset(&root, preset, args, dest);
    match cmd {
        ScenarioCommand::List(args) => scenario::list(&root, args.json),
        ScenarioCommand::MigrateHot(a) => run(Preset::MigrateHot, &a.common, a.dest_node),
        ScenarioCommand::MigrateCold(a) => run(Preset::MigrateCold, &a.common, a.dest_node),
        ScenarioCommand::Pageout(args) => run(Preset::Pageout, args, None),
        ScenarioCommand::LruPrio(args) => run(Preset::LruPrio, args, None),
        ScenarioCommand::LruDeprio(args) => run(Preset::LruDeprio, args, None),
    }
}

pub fn run_workload(args: &WorkloadArgs) -> anyhow::Result<ExitCode> {
    workload::run(args)
}
