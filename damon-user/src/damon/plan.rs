//! The choices behind a preset's DAMON configuration: the operations set and the migration
//! target, from the features the running kernel exposes (never from its version string).
//! Pure: the features are probed, and the resulting writes performed, elsewhere.
use anyhow::{Result, bail};

use crate::error::UsageError;

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
             the {} preset needs; boot a kernel with CONFIG_DAMON_PADDR=y (Debian's kernels \
             have it) and check with `damon-trace scenario list`",
            f.avail_operations,
            action.sysfs_name()
        );
    }
    let name = action.sysfs_name();
    if !f.has_target_nid {
        bail!(
            "this kernel's DAMON has no {name} action (schemes/<N>/target_nid is missing; \
             it appeared in Linux 6.11): boot a kernel >= 6.11 (Debian trixie's 6.12 or \
             newer) and check with `damon-trace scenario list`"
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

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A kernel with these operations sets and (`sym`) both migration symbols.
    pub(in super::super) fn features(
        ops: &[&str],
        dests: bool,
        sym: bool,
        node1: bool,
    ) -> Features {
        Features {
            avail_operations: ops.iter().map(|s| s.to_string()).collect(),
            has_dests: dests,
            has_target_nid: true,
            va_migrate_symbol: sym,
            has_node1: node1,
            migrate_pages_symbol: sym,
        }
    }

    #[test]
    fn kernel_7_2_uses_vaddr_with_dests() {
        let f = features(&["vaddr", "fvaddr", "paddr"], true, true, true);
        let d = choose_ops(&f, Action::MigrateHot).expect("choose");
        assert_eq!(d.kind, OpsKind::Vaddr);
        assert!(d.why.contains("dests"));
        assert_eq!(target_node(&f).0, 1);
    }

    #[test]
    fn kernel_6_12_falls_back_to_paddr_without_dests() {
        let f = features(&["vaddr", "fvaddr", "paddr"], false, false, true);
        let d = choose_ops(&f, Action::MigrateHot).expect("choose");
        assert_eq!(d.kind, OpsKind::Paddr);
        assert!(d.why.contains("cannot migrate"));
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
}
