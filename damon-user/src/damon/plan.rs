//! The scenario presets' DAMON configuration as a pure list of sysfs writes, chosen from the
//! features the running kernel exposes (never from its version string).
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::sysfs::write_attr;
use crate::{cli::ScenarioArgs, error::UsageError};

/// DAMON intervals (µs): sample often enough that a hot page is seen within an aggregation.
pub const SAMPLE_US: u64 = 5_000;
pub const AGGR_US: u64 = 100_000;
pub const UPDATE_US: u64 = 1_000_000;
/// Quota: without one the kernel never calls `damon_hot_score`.
pub const QUOTA_MS: u64 = 100;
pub const QUOTA_BYTES: u64 = 32 << 20;
pub const QUOTA_RESET_MS: u64 = 1_000;
/// Prioritisation weights: sysfs defaults them to 0, which makes every score 0 (nothing applies).
pub const WEIGHT_SZ: u32 = 0;
pub const WEIGHT_NR_ACCESSES: u32 = 700;
pub const WEIGHT_AGE: u32 = 300;
/// Upper bound for `nr_accesses`: above the AGGR_US/SAMPLE_US = 20 samples an aggregation can hold.
pub const NR_ACCESSES_MAX: u32 = 200;

/// What the kernel offers, as seen in sysfs and kallsyms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Features {
    /// Contents of `contexts/0/avail_operations`.
    pub avail_operations: Vec<String>,
    /// `schemes/<N>/dests/` exists: vaddr migration with destination lists (the kernels whose
    /// vaddr ops implement migrate_hot at all).
    pub has_dests: bool,
    /// `schemes/<N>/target_nid` exists (migrate_hot/migrate_cold are supported at all).
    pub has_target_nid: bool,
    /// `damos_va_migrate_dests_add` is in kallsyms.
    pub va_migrate_symbol: bool,
    /// `/sys/devices/system/node/node1` exists.
    pub has_node1: bool,
    /// `damon_migrate_pages` is in kallsyms (the ops-common migration helper shared by vaddr
    /// and paddr; older kernels have only paddr's static `damon_pa_migrate_pages`).
    pub migrate_pages_symbol: bool,
}

impl Features {
    pub fn has_ops(&self, ops: &str) -> bool {
        self.avail_operations.iter().any(|o| o == ops)
    }

    /// vaddr can apply migrate_hot/migrate_cold (the kernels with `damos_va_migrate`).
    pub fn vaddr_migrates(&self) -> bool {
        self.has_ops("vaddr") && (self.has_dests || self.va_migrate_symbol)
    }
}

/// The DAMOS action a preset's scheme applies (`schemes/<N>/action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    MigrateHot,
    MigrateCold,
    Pageout,
    LruPrio,
    LruDeprio,
}

impl Action {
    pub fn sysfs_name(self) -> &'static str {
        match self {
            Action::MigrateHot => "migrate_hot",
            Action::MigrateCold => "migrate_cold",
            Action::Pageout => "pageout",
            Action::LruPrio => "lru_prio",
            Action::LruDeprio => "lru_deprio",
        }
    }

    /// Moves pages to another node (needs `target_nid`).
    pub fn migrates(self) -> bool {
        matches!(self, Action::MigrateHot | Action::MigrateCold)
    }

    /// Acts on cold memory: the ops score regions with `damon_cold_score` (which calls
    /// `damon_hot_score`), and the access pattern takes only never-accessed regions.
    pub fn targets_cold(self) -> bool {
        matches!(
            self,
            Action::MigrateCold | Action::Pageout | Action::LruDeprio
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpsKind {
    Vaddr,
    Paddr,
}

impl OpsKind {
    pub fn name(self) -> &'static str {
        match self {
            OpsKind::Vaddr => "vaddr",
            OpsKind::Paddr => "paddr",
        }
    }
}

/// The operations set to use and the sentence that justifies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpsDecision {
    pub kind: OpsKind,
    pub why: String,
}

/// The operations set for `action`: migrations prefer vaddr (only the workload is
/// monitored) where vaddr can migrate, else paddr; the other actions are paddr-only presets.
pub fn choose_ops(f: &Features, action: Action) -> Result<OpsDecision> {
    if !action.migrates() {
        if f.has_ops("paddr") {
            return Ok(OpsDecision {
                kind: OpsKind::Paddr,
                why: format!(
                    "{} runs on the physical address space (largest System RAM range)",
                    action.sysfs_name()
                ),
            });
        }
        bail!(
            "this kernel's DAMON has no paddr operations set (avail_operations: {:?}), which \
             the {} preset needs; use a kernel with CONFIG_DAMON_PADDR, e.g. `cargo xtask vm \
             --kernel 7.2`",
            f.avail_operations,
            action.sysfs_name()
        );
    }
    let name = action.sysfs_name();
    if !f.has_target_nid {
        bail!(
            "this kernel's DAMON has no {name} action (schemes/<N>/target_nid is missing; \
             it appeared in Linux 6.11): use a newer kernel, e.g. `cargo xtask vm --kernel 7.2`"
        );
    }
    if f.vaddr_migrates() {
        let evidence = match (f.has_dests, f.va_migrate_symbol) {
            (true, true) => "schemes/<N>/dests/ and damos_va_migrate_dests_add exist",
            (true, false) => "schemes/<N>/dests/ exists",
            _ => "damos_va_migrate_dests_add is in kallsyms",
        };
        return Ok(OpsDecision {
            kind: OpsKind::Vaddr,
            why: format!("vaddr monitors the workload only; {evidence}, so vaddr {name} works"),
        });
    }
    if f.has_ops("paddr") {
        let why = if f.has_ops("vaddr") {
            format!(
                "this kernel's vaddr ops cannot migrate (no schemes/<N>/dests/, no \
                 damos_va_migrate_dests_add), so {name} runs on the physical address space \
                 (largest System RAM range)"
            )
        } else {
            format!(
                "vaddr ops are not built in; {name} runs on the physical address space \
                 (largest System RAM range)"
            )
        };
        return Ok(OpsDecision {
            kind: OpsKind::Paddr,
            why,
        });
    }
    bail!(
        "no DAMON operations set here can migrate (avail_operations: {:?}); \
         the kernel needs CONFIG_DAMON_PADDR or a vaddr with migration (Linux 6.16+)",
        f.avail_operations
    )
}

/// The node the workload's pages are placed on (when the machine has more than one).
pub const WORKLOAD_NODE: u32 = 0;

/// `--dest-node`: where a migration scheme sends pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DestNode {
    /// The node the workload's memory is already on: DAMON walks and isolates, little moves.
    Same,
    /// The other node (node 1; the workload's pages are on node 0).
    Other,
    Node(u32),
}

impl std::str::FromStr for DestNode {
    type Err = String;
    fn from_str(s: &str) -> Result<DestNode, String> {
        match s {
            "same" => Ok(DestNode::Same),
            "other" => Ok(DestNode::Other),
            n => n.parse().map(DestNode::Node).map_err(|_| {
                format!("`{s}` is not a destination: use same, other or a node number")
            }),
        }
    }
}

/// Refuses a `--dest-node` this machine does not have (a usage error: nothing has changed yet).
pub fn validate_dest(
    dest: DestNode,
    has_node1: bool,
    node_exists: impl Fn(u32) -> bool,
) -> Result<(), UsageError> {
    match dest {
        DestNode::Other if !has_node1 => Err(UsageError(
            "--dest-node other needs a second NUMA node and this machine has one (no \
             /sys/devices/system/node/node1); use --dest-node same, or boot with two nodes"
                .to_string(),
        )),
        DestNode::Node(n) if !node_exists(n) => Err(UsageError(format!(
            "--dest-node {n}: there is no NUMA node {n} here \
             (/sys/devices/system/node/node{n} is missing)"
        ))),
        _ => Ok(()),
    }
}

/// The target node for a migration preset and the sentence that explains it. `None` is the
/// default: the other node where there is one, else node 0 with a warning.
pub fn dest_node(
    dest: Option<DestNode>,
    f: &Features,
    node_exists: impl Fn(u32) -> bool,
) -> Result<(u32, String)> {
    let Some(dest) = dest else {
        let (n, why) = target_node(f);
        return Ok((n, why.to_string()));
    };
    validate_dest(dest, f.has_node1, node_exists)?;
    Ok(match dest {
        DestNode::Same => (
            WORKLOAD_NODE,
            format!(
                "--dest-node same: node {WORKLOAD_NODE}, where the workload's pages already \
                 are (few or no pages should move)"
            ),
        ),
        DestNode::Other => (
            1,
            format!("--dest-node other: pages move from node {WORKLOAD_NODE} to node 1"),
        ),
        DestNode::Node(n) if n == WORKLOAD_NODE => (
            n,
            format!("--dest-node {n}: the workload's own node (few or no pages should move)"),
        ),
        DestNode::Node(n) => (
            n,
            format!("--dest-node {n}: pages move from node {WORKLOAD_NODE} to node {n}"),
        ),
    })
}

/// Migrate towards node 1 when it exists (the workload's pages start on node 0).
pub fn target_node(f: &Features) -> (u32, &'static str) {
    if f.has_node1 {
        (1, "hot pages move from node 0 to node 1")
    } else {
        (
            0,
            "only one NUMA node: target node 0, where the pages already are, so little \
             or nothing will move (boot with two nodes to see migrations)",
        )
    }
}

/// What DAMON watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Monitor {
    Vaddr {
        pid: u32,
    },
    /// Physical range, `end` exclusive.
    Paddr {
        start: u64,
        end: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemeConfig {
    pub action: Action,
    pub monitor: Monitor,
    /// Migration target (migrate_hot/migrate_cold only; ignored for the other actions).
    pub target_nid: u32,
    /// Also write `dests/` (migrations on kernels that have it; otherwise only `target_nid`).
    pub use_dests: bool,
    pub tuning: Tuning,
}

/// How often DAMON samples, aggregates and applies the scheme, and into how many regions it
/// splits the target. The scheme scores every region (`damon_hot_score`) once per apply
/// interval, in one burst inside kdamond: many regions and short intervals make dense bursts
/// (the overload test uses that to overflow a small ring buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuning {
    pub sample_us: u64,
    pub aggr_us: u64,
    /// `schemes/<N>/apply_interval_us`; `None` keeps the kernel's default (0: every
    /// aggregation).
    pub apply_us: Option<u64>,
    /// `monitoring_attrs/nr_regions/{min,max}`; `None` keeps the kernel's defaults (10, 1000).
    pub regions: Option<(u64, u64)>,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            sample_us: SAMPLE_US,
            aggr_us: AGGR_US,
            apply_us: None,
            regions: None,
        }
    }
}

/// DAMON's own floor for `nr_regions/min`.
pub const MIN_REGIONS: u64 = 3;

impl Tuning {
    /// Checks what the kernel would refuse only when the kdamond is turned on (with a bare
    /// EINVAL), so that the user gets the reason up front.
    pub fn validate(&self) -> Result<(), UsageError> {
        if self.sample_us == 0 || self.aggr_us < self.sample_us {
            return Err(UsageError(format!(
                "--aggr-interval ({} µs) must be at least --sample-interval ({} µs)",
                self.aggr_us, self.sample_us
            )));
        }
        if let Some((min, max)) = self.regions
            && (min < MIN_REGIONS || max < min)
        {
            return Err(UsageError(format!(
                "--regions {min}: DAMON needs at least {MIN_REGIONS} regions"
            )));
        }
        Ok(())
    }

    /// The tuning `scenario migrate-hot` was asked for, checked.
    pub fn from_args(args: &ScenarioArgs) -> Result<Tuning, UsageError> {
        let us = |d: std::time::Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let mut t = Tuning {
            sample_us: us(args.sample_interval),
            aggr_us: us(args.aggr_interval),
            apply_us: args.apply_interval.map(us),
            regions: None,
        };
        if let Some(n) = args.regions {
            t = t.with_regions(n);
        }
        t.validate()?;
        Ok(t)
    }

    /// `--regions N`: at least N regions, and room for DAMON's default maximum above that.
    pub fn with_regions(mut self, n: u64) -> Tuning {
        self.regions = Some((n, n.max(1000)));
        self
    }
}

/// One write, relative to the `kdamonds` directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysfsWrite {
    pub rel: PathBuf,
    pub value: String,
}

fn w(rel: &str, value: impl ToString) -> SysfsWrite {
    SysfsWrite {
        rel: PathBuf::from(rel),
        value: value.to_string(),
    }
}

/// One kdamond with one context and one scheme: enough to probe the scheme directory's layout.
/// Writing `nr_kdamonds` replaces every kdamond directory, so the scenario always uses index 0.
pub fn skeleton() -> Vec<SysfsWrite> {
    vec![
        w("nr_kdamonds", 1),
        w("0/contexts/nr_contexts", 1),
        w("0/contexts/0/schemes/nr_schemes", 1),
    ]
}

/// The complete configuration, in an order the kernel accepts (`nr_*` before the directories
/// they create). Starts with the skeleton so it is valid on a fresh tree too.
pub fn scheme_writes(cfg: &SchemeConfig) -> Vec<SysfsWrite> {
    const CTX: &str = "0/contexts/0";
    const S: &str = "0/contexts/0/schemes/0";
    let mut out = skeleton();
    let ops = match cfg.monitor {
        Monitor::Vaddr { .. } => OpsKind::Vaddr,
        Monitor::Paddr { .. } => OpsKind::Paddr,
    };
    out.push(w(&format!("{CTX}/operations"), ops.name()));
    let t = &cfg.tuning;
    let iv = format!("{CTX}/monitoring_attrs/intervals");
    out.push(w(&format!("{iv}/sample_us"), t.sample_us));
    out.push(w(&format!("{iv}/aggr_us"), t.aggr_us));
    out.push(w(&format!("{iv}/update_us"), UPDATE_US.max(t.aggr_us)));
    if let Some((min, max)) = t.regions {
        let nr = format!("{CTX}/monitoring_attrs/nr_regions");
        // Max first: the kernel checks min <= max only on commit, but keep every step valid.
        out.push(w(&format!("{nr}/max"), max));
        out.push(w(&format!("{nr}/min"), min));
    }
    out.push(w(&format!("{CTX}/targets/nr_targets"), 1));
    match cfg.monitor {
        Monitor::Vaddr { pid } => out.push(w(&format!("{CTX}/targets/0/pid_target"), pid)),
        Monitor::Paddr { start, end } => {
            let r = format!("{CTX}/targets/0/regions");
            out.push(w(&format!("{r}/nr_regions"), 1));
            out.push(w(&format!("{r}/0/start"), start));
            out.push(w(&format!("{r}/0/end"), end));
        }
    }
    out.push(w(&format!("{S}/action"), cfg.action.sysfs_name()));
    if let Some(us) = t.apply_us {
        out.push(w(&format!("{S}/apply_interval_us"), us));
    }
    let migrates = cfg.action.migrates();
    if migrates {
        out.push(w(&format!("{S}/target_nid"), cfg.target_nid));
    }
    if migrates && cfg.use_dests {
        out.push(w(&format!("{S}/dests/nr_dests"), 1));
        out.push(w(&format!("{S}/dests/0/id"), cfg.target_nid));
        out.push(w(&format!("{S}/dests/0/weight"), 1));
    }
    let ap = format!("{S}/access_pattern");
    out.push(w(&format!("{ap}/sz/min"), 4096));
    out.push(w(&format!("{ap}/sz/max"), u64::MAX));
    out.push(w(&format!("{ap}/nr_accesses/min"), 0));
    // Cold actions take only regions not accessed in the last aggregation; hot ones take
    // every region and let the quota's prioritisation (the scores) pick the hottest.
    let nr_max = if cfg.action.targets_cold() {
        0
    } else {
        NR_ACCESSES_MAX
    };
    out.push(w(&format!("{ap}/nr_accesses/max"), nr_max));
    out.push(w(&format!("{ap}/age/min"), 0));
    out.push(w(&format!("{ap}/age/max"), u32::MAX));
    let q = format!("{S}/quotas");
    out.push(w(&format!("{q}/ms"), QUOTA_MS));
    out.push(w(&format!("{q}/bytes"), QUOTA_BYTES));
    out.push(w(&format!("{q}/reset_interval_ms"), QUOTA_RESET_MS));
    out.push(w(&format!("{q}/weights/sz_permil"), WEIGHT_SZ));
    out.push(w(
        &format!("{q}/weights/nr_accesses_permil"),
        WEIGHT_NR_ACCESSES,
    ));
    out.push(w(&format!("{q}/weights/age_permil"), WEIGHT_AGE));
    out
}

/// migrate-hot's configuration as older callers (tests elsewhere) build it.
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrateHotConfig {
    pub monitor: Monitor,
    pub target_nid: u32,
    pub use_dests: bool,
    pub tuning: Tuning,
}

#[cfg(test)]
pub fn migrate_hot_writes(cfg: &MigrateHotConfig) -> Vec<SysfsWrite> {
    scheme_writes(&SchemeConfig {
        action: Action::MigrateHot,
        monitor: cfg.monitor,
        target_nid: cfg.target_nid,
        use_dests: cfg.use_dests,
        tuning: cfg.tuning,
    })
}

/// Performs the writes in order; the first failure stops with the file and value named.
pub fn apply(kdamonds: &Path, writes: &[SysfsWrite]) -> Result<()> {
    for wr in writes {
        write_attr(&kdamonds.join(&wr.rel), &wr.value)?;
    }
    Ok(())
}

/// The largest "System RAM" range in `/proc/iomem`, as `[start, end)`. `None` if there is
/// none, or if every address reads as 0 (what non-root readers are shown).
pub fn largest_system_ram(iomem: &str) -> Option<(u64, u64)> {
    iomem
        .lines()
        .filter_map(|line| {
            let (range, name) = line.split_once(" : ")?;
            if name.trim() != "System RAM" {
                return None;
            }
            let (start, end) = range.trim().split_once('-')?;
            let start = u64::from_str_radix(start, 16).ok()?;
            let end = u64::from_str_radix(end, 16).ok()?.checked_add(1)?;
            (end > start + 1).then_some((start, end))
        })
        .max_by_key(|(start, end)| end - start)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn features(ops: &[&str], dests: bool, sym: bool, node1: bool) -> Features {
        Features {
            avail_operations: ops.iter().map(|s| s.to_string()).collect(),
            has_dests: dests,
            has_target_nid: true,
            va_migrate_symbol: sym,
            has_node1: node1,
            migrate_pages_symbol: sym,
        }
    }

    fn value_of<'a>(writes: &'a [SysfsWrite], rel: &str) -> Option<&'a str> {
        writes
            .iter()
            .rev()
            .find(|w| w.rel == Path::new(rel))
            .map(|w| w.value.as_str())
    }

    #[test]
    fn kernel_7_2_uses_vaddr_with_dests() {
        let f = features(&["vaddr", "fvaddr", "paddr"], true, true, true);
        let d = choose_ops(&f, Action::MigrateHot).expect("choose");
        assert_eq!(d.kind, OpsKind::Vaddr);
        assert!(d.why.contains("dests"));
        assert_eq!(target_node(&f).0, 1);
        let ws = scheme_writes(&SchemeConfig {
            action: Action::MigrateHot,
            monitor: Monitor::Vaddr { pid: 4242 },
            target_nid: 1,
            use_dests: true,
            tuning: Tuning::default(),
        });
        assert_eq!(value_of(&ws, "0/contexts/0/operations"), Some("vaddr"));
        assert_eq!(
            value_of(&ws, "0/contexts/0/targets/0/pid_target"),
            Some("4242")
        );
        assert_eq!(
            value_of(&ws, "0/contexts/0/schemes/0/dests/nr_dests"),
            Some("1")
        );
        assert_eq!(
            value_of(&ws, "0/contexts/0/schemes/0/dests/0/id"),
            Some("1")
        );
        assert_eq!(
            value_of(&ws, "0/contexts/0/schemes/0/dests/0/weight"),
            Some("1")
        );
        let q = "0/contexts/0/schemes/0/quotas";
        assert_eq!(value_of(&ws, &format!("{q}/bytes")), Some("33554432"));
        assert_eq!(
            value_of(&ws, &format!("{q}/weights/nr_accesses_permil")),
            Some("700")
        );
        assert_eq!(
            value_of(&ws, &format!("{q}/weights/age_permil")),
            Some("300")
        );
        let ap = "0/contexts/0/schemes/0/access_pattern";
        assert_eq!(
            value_of(&ws, &format!("{ap}/sz/max")),
            Some("18446744073709551615")
        );
        assert_eq!(value_of(&ws, &format!("{ap}/age/max")), Some("4294967295"));
        assert!(value_of(&ws, "0/contexts/0/targets/0/regions/nr_regions").is_none());
        // nr_* files come before the directories they create.
        let pos = |rel: &str| ws.iter().position(|w| w.rel == Path::new(rel)).expect(rel);
        assert!(pos("nr_kdamonds") < pos("0/contexts/nr_contexts"));
        assert!(pos("0/contexts/0/targets/nr_targets") < pos("0/contexts/0/targets/0/pid_target"));
        assert!(
            pos("0/contexts/0/schemes/0/dests/nr_dests") < pos("0/contexts/0/schemes/0/dests/0/id")
        );
    }

    #[test]
    fn tuning_sets_regions_and_intervals_only_when_asked() {
        let cfg = |tuning| SchemeConfig {
            action: Action::MigrateHot,
            monitor: Monitor::Vaddr { pid: 1 },
            target_nid: 1,
            use_dests: true,
            tuning,
        };
        let nr = "0/contexts/0/monitoring_attrs/nr_regions";
        let apply = "0/contexts/0/schemes/0/apply_interval_us";
        let iv = "0/contexts/0/monitoring_attrs/intervals";
        let plain = scheme_writes(&cfg(Tuning::default()));
        assert!(value_of(&plain, &format!("{nr}/min")).is_none());
        assert!(value_of(&plain, apply).is_none());
        assert_eq!(value_of(&plain, &format!("{iv}/aggr_us")), Some("100000"));
        let dense = Tuning {
            sample_us: 1_000,
            aggr_us: 10_000,
            apply_us: Some(10_000),
            regions: None,
        }
        .with_regions(2000);
        dense.validate().expect("valid");
        let ws = scheme_writes(&cfg(dense));
        assert_eq!(value_of(&ws, &format!("{nr}/min")), Some("2000"));
        assert_eq!(value_of(&ws, &format!("{nr}/max")), Some("2000"));
        assert_eq!(value_of(&ws, apply), Some("10000"));
        assert_eq!(value_of(&ws, &format!("{iv}/sample_us")), Some("1000"));
        assert_eq!(value_of(&ws, &format!("{iv}/aggr_us")), Some("10000"));
        assert_eq!(Tuning::default().with_regions(50).regions, Some((50, 1000)));
        assert!(Tuning::default().with_regions(2).validate().is_err());
        let slow_sample = Tuning {
            sample_us: 200_000,
            ..Tuning::default()
        };
        assert!(slow_sample.validate().is_err());
    }

    #[test]
    fn kernel_6_12_falls_back_to_paddr_without_dests() {
        let f = features(&["vaddr", "fvaddr", "paddr"], false, false, true);
        let d = choose_ops(&f, Action::MigrateHot).expect("choose");
        assert_eq!(d.kind, OpsKind::Paddr);
        assert!(d.why.contains("cannot migrate"));
        let ws = scheme_writes(&SchemeConfig {
            action: Action::MigrateHot,
            monitor: Monitor::Paddr {
                start: 0x100000,
                end: 0x4000_0000,
            },
            target_nid: 1,
            use_dests: false,
            tuning: Tuning::default(),
        });
        assert_eq!(value_of(&ws, "0/contexts/0/operations"), Some("paddr"));
        let r = "0/contexts/0/targets/0/regions";
        assert_eq!(value_of(&ws, &format!("{r}/nr_regions")), Some("1"));
        assert_eq!(value_of(&ws, &format!("{r}/0/start")), Some("1048576"));
        assert_eq!(value_of(&ws, &format!("{r}/0/end")), Some("1073741824"));
        assert_eq!(
            value_of(&ws, "0/contexts/0/schemes/0/target_nid"),
            Some("1")
        );
        assert!(
            ws.iter()
                .all(|w| !w.rel.to_string_lossy().contains("dests"))
        );
        assert!(value_of(&ws, "0/contexts/0/targets/0/pid_target").is_none());
    }

    #[test]
    fn symbol_alone_selects_vaddr_and_paddr_only_kernels_work() {
        let d = choose_ops(
            &features(&["vaddr", "paddr"], false, true, true),
            Action::MigrateHot,
        )
        .expect("choose");
        assert_eq!(d.kind, OpsKind::Vaddr);
        assert!(d.why.contains("kallsyms"));
        let d = choose_ops(&features(&["paddr"], true, true, false), Action::MigrateHot)
            .expect("choose");
        assert_eq!(d.kind, OpsKind::Paddr);
        assert!(d.why.contains("not built in"));
        assert!(
            choose_ops(
                &features(&["vaddr"], false, false, true),
                Action::MigrateHot
            )
            .is_err()
        );
    }

    #[test]
    fn kernels_without_migrate_hot_are_refused() {
        let mut f = features(&["vaddr", "paddr"], false, false, true);
        f.has_target_nid = false;
        let err = choose_ops(&f, Action::MigrateHot).expect_err("no migrate_hot");
        assert!(err.to_string().contains("6.11"));
    }

    #[test]
    fn single_node_targets_node_zero() {
        let (nid, why) = target_node(&features(&["vaddr"], true, true, false));
        assert_eq!(nid, 0);
        assert!(why.contains("one NUMA node"));
    }

    #[test]
    fn iomem_largest_system_ram() {
        let iomem = "00000000-00000fff : Reserved\n\
                     00001000-0009fbff : System RAM\n\
                     000a0000-000bffff : PCI Bus 0000:00\n\
                     00100000-3ffdffff : System RAM\n\
                     \x20 01000000-01ffffff : Kernel code\n\
                     \x20 02000000-0257ffff : Kernel rodata\n\
                     3ffe0000-3fffffff : Reserved\n\
                     100000000-11fffffff : System RAM\n\
                     fd000000-fdffffff : PCI Bus 0000:00\n";
        assert_eq!(largest_system_ram(iomem), Some((0x100000, 0x3ffe0000)));
        // Unprivileged readers see zeros: no usable range.
        let hidden = "00000000-00000000 : System RAM\n00000000-00000000 : System RAM\n";
        assert_eq!(largest_system_ram(hidden), None);
        assert_eq!(largest_system_ram("garbage\n"), None);
    }

    #[test]
    fn apply_writes_into_an_existing_tree_and_stops_at_missing_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kd = dir.path();
        std::fs::write(kd.join("nr_kdamonds"), "0\n").expect("seed");
        std::fs::create_dir_all(kd.join("0/contexts")).expect("mkdir");
        std::fs::write(kd.join("0/contexts/nr_contexts"), "0\n").expect("seed");
        let err = apply(kd, &skeleton()).expect_err("schemes dir is absent");
        assert!(format!("{err:#}").contains("nr_schemes"));
        assert_eq!(
            std::fs::read_to_string(kd.join("nr_kdamonds")).expect("read"),
            "1"
        );
        assert_eq!(
            std::fs::read_to_string(kd.join("0/contexts/nr_contexts")).expect("read"),
            "1"
        );
    }
}
