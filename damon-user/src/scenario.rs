//! `damon-trace scenario …` and the hidden `__workload`: the command line turned into the
//! [`damon`](crate::damon) module's settings, run against the real sysfs.
use std::process::ExitCode;

use crate::{
    cli::{ScenarioArgs, ScenarioCommand, WorkloadArgs},
    damon::{self, Preset, ScenarioSettings, SysfsRoot, WorkloadSizes},
};

pub fn run(cmd: &ScenarioCommand) -> anyhow::Result<ExitCode> {
    let root = SysfsRoot::system();
    let run = |preset, args: &ScenarioArgs, dest| {
        damon::run_preset(&root, preset, &ScenarioSettings::from(args), dest)
    };
    match cmd {
        ScenarioCommand::List(args) => damon::list_presets(&root, args.format.json()),
        ScenarioCommand::MigrateHot(a) => run(Preset::MigrateHot, &a.common, a.dest_node),
        ScenarioCommand::MigrateCold(a) => run(Preset::MigrateCold, &a.common, a.dest_node),
        ScenarioCommand::Pageout(args) => run(Preset::Pageout, args, None),
        ScenarioCommand::LruPrio(args) => run(Preset::LruPrio, args, None),
        ScenarioCommand::LruDeprio(args) => run(Preset::LruDeprio, args, None),
    }
}

pub fn run_workload(args: &WorkloadArgs) -> anyhow::Result<ExitCode> {
    damon::run_workload(WorkloadSizes::from(args))
}

impl From<&ScenarioArgs> for ScenarioSettings {
    fn from(a: &ScenarioArgs) -> ScenarioSettings {
        ScenarioSettings {
            duration: a.duration,
            workload_mib: a.workload_mib,
            hot_mib: a.hot_mib,
            sample_interval: a.sample_interval,
            aggr_interval: a.aggr_interval,
            apply_interval: a.apply_interval,
            regions: a.regions,
        }
    }
}

impl From<&WorkloadArgs> for WorkloadSizes {
    fn from(a: &WorkloadArgs) -> WorkloadSizes {
        WorkloadSizes {
            total_mib: a.total_mib,
            hot_mib: a.hot_mib,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser as _;

    use super::*;
    use crate::cli::{Cli, Command};

    fn scenario(args: &[&str]) -> ScenarioCommand {
        let argv = ["damon-trace", "scenario"].iter().chain(args);
        match Cli::try_parse_from(argv).expect("parses").command {
            Command::Scenario(cmd) => cmd,
            other => panic!("{other:?}"),
        }
    }

    /// Every option reaches its field (each given a value other than its default).
    #[test]
    fn scenario_options_become_settings() {
        let ScenarioCommand::MigrateHot(a) = scenario(&[
            "migrate-hot",
            "--duration",
            "2s",
            "--workload-mib",
            "64",
            "--hot-mib",
            "8",
            "--sample-interval",
            "1ms",
            "--aggr-interval",
            "10ms",
            "--apply-interval",
            "20ms",
            "--regions",
            "500",
            "--dest-node",
            "same",
        ]) else {
            panic!("migrate-hot");
        };
        assert_eq!(a.dest_node, Some(damon::DestNode::Same));
        assert_eq!(
            ScenarioSettings::from(&a.common),
            ScenarioSettings {
                duration: Duration::from_secs(2),
                workload_mib: 64,
                hot_mib: 8,
                sample_interval: Duration::from_millis(1),
                aggr_interval: Duration::from_millis(10),
                apply_interval: Some(Duration::from_millis(20)),
                regions: Some(500),
            }
        );
    }

    #[test]
    fn workload_options_become_sizes() {
        let argv = [
            "damon-trace",
            "__workload",
            "--total-mib",
            "64",
            "--hot-mib",
            "8",
        ];
        let Command::Workload(args) = Cli::try_parse_from(argv).expect("parses").command else {
            panic!("__workload");
        };
        assert_eq!(
            WorkloadSizes::from(&args),
            WorkloadSizes {
                total_mib: 64,
                hot_mib: 8
            }
        );
    }
}
