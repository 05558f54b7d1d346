//! What this kernel's DAMON offers, read from sysfs and kallsyms: the [`Features`] a plan is
//! chosen from, and the physical range paddr monitors.
use anyhow::{Context, Result};

use super::{
    plan::Features,
    presets,
    sysfs::{SysfsRoot, kallsyms_has, read_attr},
    writes::largest_system_ram,
};

/// Reads what the freshly created skeleton directories reveal about this kernel.
pub fn probe_features(root: &SysfsRoot) -> Result<Features> {
    let ctx = root.kdamonds().join("0/contexts/0");
    let scheme = ctx.join("schemes/0");
    let avail = read_attr(&ctx.join("avail_operations"))?;
    // kallsyms is only corroboration (the symbol may be inlined away), so a read error is no
    // reason to stop.
    let kallsyms = std::fs::read_to_string(root.kallsyms()).unwrap_or_default();
    Ok(Features {
        avail_operations: avail.split_whitespace().map(str::to_string).collect(),
        has_dests: scheme.join("dests").is_dir(),
        has_target_nid: scheme.join("target_nid").is_file(),
        va_migrate_symbol: kallsyms_has(&kallsyms, presets::DESTS_ADD),
        has_node1: root.node_dir(1).is_dir(),
        migrate_pages_symbol: kallsyms_has(&kallsyms, presets::MIGRATE_PAGES),
    })
}

pub fn paddr_region(root: &SysfsRoot) -> Result<(u64, u64)> {
    let path = root.iomem();
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading {} for the paddr monitoring region", path.display()))?;
    largest_system_ram(&text).with_context(|| {
        format!(
            "no usable \"System RAM\" range in {} (all addresses read as 0 unless you run \
             as root with CAP_SYS_ADMIN)",
            path.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::super::{
        kdamond::apply,
        plan::{Action, OpsKind, choose_ops},
        snapshot::tests::fake_kernel_tree,
        writes::skeleton,
    };
    use super::*;

    #[test]
    fn features_follow_the_tree_layout() {
        for dests in [true, false] {
            let dir = tempfile::tempdir().expect("tempdir");
            let root = fake_kernel_tree(dir.path(), dests);
            apply(&root.kdamonds(), &skeleton()).expect("skeleton");
            let f = probe_features(&root).expect("probe");
            assert_eq!(f.has_dests, dests);
            assert!(f.has_target_nid);
            assert!(!f.va_migrate_symbol);
            assert!(!f.has_node1);
            assert_eq!(f.avail_operations, ["vaddr", "fvaddr", "paddr"]);
            let kind = choose_ops(&f, Action::MigrateHot).expect("choose").kind;
            assert_eq!(
                kind,
                if dests {
                    OpsKind::Vaddr
                } else {
                    OpsKind::Paddr
                }
            );
        }
    }

    #[test]
    fn paddr_region_needs_real_addresses() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("proc")).expect("mkdir");
        let root = SysfsRoot::at(dir.path());
        assert!(paddr_region(&root).is_err());
        std::fs::write(root.iomem(), "00000000-00000000 : System RAM\n").expect("w");
        let err = paddr_region(&root).expect_err("hidden addresses");
        assert!(format!("{err:#}").contains("root"));
        std::fs::write(root.iomem(), "00100000-3fffffff : System RAM\n").expect("w");
        assert_eq!(
            paddr_region(&root).expect("region"),
            (0x100000, 0x4000_0000)
        );
    }
}
