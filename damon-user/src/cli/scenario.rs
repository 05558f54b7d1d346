//! The `scenario` subcommands' arguments (clap derive only; no behaviour here).
use std::time::Duration;

use clap::{Args, Subcommand};

use super::{FormatArgs, help, parse_duration};

/// Every preset runs the hot/cold workload (its pages on node 0 when there are two nodes),
/// configures one kdamond with one quota-limited scheme, and restores DAMON's previous sysfs
/// state afterwards, also on Ctrl-C/SIGTERM. lock_timer_base is called system-wide under any
/// of them.
#[derive(Debug, Subcommand)]
pub enum ScenarioCommand {
    /// Every preset: description, operations set, the traced functions it exercises on this
    /// kernel and whether it can run here (probes DAMON's sysfs; needs root).
    List(ScenarioListArgs),
    /// Workload's hot pages to the other NUMA node (DAMOS migrate_hot) with a quota: exercises
    /// damon_hot_score, damos_va_migrate_dests_add (vaddr, 6.16+) and damon_migrate_pages
    /// (6.13+). Without vaddr migration (6.12) it runs on paddr: damon_hot_score only.
    MigrateHot(MigrateArgs),
    /// Workload's cold (never accessed) pages to the other NUMA node (DAMOS migrate_cold):
    /// damon_cold_score calls damon_hot_score, then damos_va_migrate_dests_add and
    /// damon_migrate_pages as for migrate-hot; paddr fallback on 6.12.
    MigrateCold(MigrateArgs),
    /// Physical address space (paddr), DAMOS pageout of never-accessed memory: exercises
    /// damon_hot_score (through damon_cold_score); nothing is migrated.
    Pageout(ScenarioArgs),
    /// Physical address space (paddr), DAMOS lru_prio (activate the hottest memory first):
    /// exercises damon_hot_score.
    LruPrio(ScenarioArgs),
    /// Physical address space (paddr), DAMOS lru_deprio of never-accessed memory: exercises
    /// damon_hot_score (through damon_cold_score).
    LruDeprio(ScenarioArgs),
}

#[derive(Debug, Args)]
#[command(after_long_help = help::SCENARIO)]
pub struct ScenarioListArgs {
    #[command(flatten)]
    pub format: FormatArgs,
}

#[derive(Debug, Args)]
#[command(after_long_help = help::SCENARIO)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub common: ScenarioArgs,
    /// Where pages go: `same` (node 0, where the workload's pages already are: DAMON walks
    /// and isolates, little or nothing moves), `other` (node 1), or a node number.
    /// Default: node 1 if it exists, else node 0.
    #[arg(long, value_name = "same|other|N")]
    pub dest_node: Option<crate::damon::DestNode>,
}

#[derive(Debug, Args)]
#[command(after_long_help = help::SCENARIO)]
pub struct ScenarioArgs {
    /// How long to keep DAMON running before restoring the previous state (e.g. 30s, 2m).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration, allow_hyphen_values = true)]
    pub duration: Duration,
    /// Size of the workload's mapping in MiB.
    #[arg(long, default_value_t = 256)]
    pub workload_mib: u64,
    /// Size of its hot (repeatedly written) part in MiB.
    #[arg(long, default_value_t = 32)]
    pub hot_mib: u64,
    /// DAMON sampling interval (monitoring_attrs/intervals/sample_us).
    #[arg(long, value_name = "DURATION", default_value = "5ms", value_parser = parse_duration)]
    pub sample_interval: Duration,
    /// DAMON aggregation interval (aggr_us); the scheme is applied once per aggregation
    /// unless --apply-interval says otherwise.
    #[arg(long, value_name = "DURATION", default_value = "100ms", value_parser = parse_duration)]
    pub aggr_interval: Duration,
    /// How often the scheme is applied (schemes/0/apply_interval_us); each application scores
    /// every region with damon_hot_score in one burst. Default: every aggregation.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub apply_interval: Option<Duration>,
    /// Split the workload into at least N DAMON regions (nr_regions/min = N, max = max(N,
    /// 1000)). Many regions with short intervals make damon_hot_score bursts of N calls:
    /// a way to overload a small --ring-size on purpose. Default: the kernel's (10 to 1000).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(3..=1_000_000))]
    pub regions: Option<u64>,
}
