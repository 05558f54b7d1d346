//! The scenario presets: what each one configures, which of the four traced functions it
//! makes the kernel call (from the operations set it gets here), and `scenario list`.
use std::fmt::Write as _;

use anyhow::Result;
use serde_json::json;

use super::{
    plan::{Action, DestNode, Features, OpsDecision, OpsKind, choose_ops, dest_node},
    writes::{Monitor, SchemeConfig, Tuning},
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    MigrateHot,
    MigrateCold,
    Pageout,
    LruPrio,
    LruDeprio,
}

pub const ALL: [Preset; 5] = [
    Preset::MigrateHot,
    Preset::MigrateCold,
    Preset::Pageout,
    Preset::LruPrio,
    Preset::LruDeprio,
];

/// Traced functions a preset can make DAMON call (in `FunctionId` order).
pub const HOT_SCORE: &str = "damon_hot_score";
pub const DESTS_ADD: &str = "damos_va_migrate_dests_add";
pub const MIGRATE_PAGES: &str = "damon_migrate_pages";
/// Called by every timer_list user on the machine, so by no preset in particular.
pub const LOCK_TIMER_BASE: &str = "lock_timer_base";

impl Preset {
    pub fn name(self) -> &'static str {
        match self {
            Preset::MigrateHot => "migrate-hot",
            Preset::MigrateCold => "migrate-cold",
            Preset::Pageout => "pageout",
            Preset::LruPrio => "lru-prio",
            Preset::LruDeprio => "lru-deprio",
        }
    }

    pub fn action(self) -> Action {
        match self {
            Preset::MigrateHot => Action::MigrateHot,
            Preset::MigrateCold => Action::MigrateCold,
            Preset::Pageout => Action::Pageout,
            Preset::LruPrio => Action::LruPrio,
            Preset::LruDeprio => Action::LruDeprio,
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Preset::MigrateHot => "the workload's hot pages to the other NUMA node (migrate_hot)",
            Preset::MigrateCold => {
                "the workload's cold pages to the other NUMA node (migrate_cold)"
            }
            Preset::Pageout => "reclaim never-accessed physical memory (paddr, pageout)",
            Preset::LruPrio => "activate the hottest physical memory on the LRU (paddr, lru_prio)",
            Preset::LruDeprio => {
                "deactivate never-accessed physical memory on the LRU (paddr, lru_deprio)"
            }
        }
    }

    /// The traced functions DAMON calls under this preset with `ops`, on a kernel with `f`.
    ///
    /// The scheme has a quota, so every apply interval core.c's `damos_adjust_quota` asks the
    /// ops' `get_scheme_score` for each matching region: paddr answers with `damon_hot_score`
    /// for migrate_hot and lru_prio and with `damon_cold_score` (which calls
    /// `damon_hot_score`) for migrate_cold, pageout and lru_deprio; vaddr does the same for
    /// migrate_hot, migrate_cold and pageout. vaddr's `damos_va_migrate` calls
    /// `damos_va_migrate_dests_add` for each mapped folio of the region and then
    /// `damon_migrate_pages` once per destination; paddr's `damon_pa_migrate` calls
    /// `damon_migrate_pages` where that ops-common helper exists (6.12's paddr has a static
    /// `damon_pa_migrate_pages` instead). pageout and the LRU actions migrate nothing.
    pub fn exercises(self, f: &Features, ops: OpsKind) -> Vec<&'static str> {
        let mut out = vec![HOT_SCORE];
        if self.action().migrates() {
            if ops == OpsKind::Vaddr {
                out.push(DESTS_ADD);
            }
            if f.migrate_pages_symbol {
                out.push(MIGRATE_PAGES);
            }
        }
        out
    }
}

/// How a preset will run on this kernel, or why it cannot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub ops: OpsDecision,
    pub target_nid: u32,
    /// Why that target (migrations), or empty.
    pub node_why: String,
    pub use_dests: bool,
}

/// Picks ops and destination for `preset`: the part of the configuration that depends on the
/// kernel and on `--dest-node`.
pub fn plan(
    preset: Preset,
    f: &Features,
    dest: Option<DestNode>,
    node_exists: impl Fn(u32) -> bool,
) -> Result<Plan> {
    let action = preset.action();
    let ops = choose_ops(f, action)?;
    if !action.migrates() {
        return Ok(Plan {
            ops,
            target_nid: 0,
            node_why: String::new(),
            use_dests: false,
        });
    }
    let (target_nid, node_why) = dest_node(dest, f, node_exists)?;
    Ok(Plan {
        ops,
        target_nid,
        node_why,
        use_dests: f.has_dests,
    })
}

impl Plan {
    pub fn config(&self, preset: Preset, monitor: Monitor, tuning: Tuning) -> SchemeConfig {
        SchemeConfig {
            action: preset.action(),
            monitor,
            target_nid: self.target_nid,
            use_dests: self.use_dests,
            tuning,
        }
    }
}

/// One row of `scenario list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub preset: Preset,
    /// `None`: this kernel cannot run it (the reason is in `note`).
    pub ops: Option<OpsKind>,
    pub exercises: Vec<&'static str>,
    pub note: String,
}

/// What each preset would do on a kernel with `f` (`None`: the kernel could not be probed,
/// `why_unprobed` says why).
pub fn rows(f: Option<&Features>, why_unprobed: &str) -> Vec<Row> {
    ALL.iter()
        .map(|&preset| {
            let Some(f) = f else {
                return Row {
                    preset,
                    ops: None,
                    exercises: Vec::new(),
                    note: why_unprobed.to_string(),
                };
            };
            match plan(preset, f, None, |n| n == 0 || (n == 1 && f.has_node1)) {
                Ok(p) => {
                    let mut note = p.ops.why.clone();
                    if preset.action().migrates() && !f.has_node1 {
                        note.push_str("; only one NUMA node, so nothing will move");
                    }
                    Row {
                        preset,
                        ops: Some(p.ops.kind),
                        exercises: preset.exercises(f, p.ops.kind),
                        note,
                    }
                }
                Err(e) => Row {
                    preset,
                    ops: None,
                    exercises: Vec::new(),
                    note: format!("{e:#}"),
                },
            }
        })
        .collect()
}

pub fn render_text(rows: &[Row], f: Option<&Features>) -> String {
    let mut out = String::new();
    if let Some(f) = f {
        let _ = writeln!(
            out,
            "kernel: ops {}; dests/ {}; damos_va_migrate_dests_add {}; damon_migrate_pages {}; \
             NUMA node1 {}",
            f.avail_operations.join(","),
            yes_no(f.has_dests),
            yes_no(f.va_migrate_symbol),
            yes_no(f.migrate_pages_symbol),
            yes_no(f.has_node1),
        );
    }
    let _ = writeln!(
        out,
        "{:<13} {:<5} {:<6} {:<62} description",
        "PRESET", "RUNS", "OPS", "EXERCISES"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<13} {:<5} {:<6} {:<62} {}",
            r.preset.name(),
            yes_no(r.ops.is_some()),
            r.ops.map_or("-", OpsKind::name),
            if r.exercises.is_empty() {
                "-".to_string()
            } else {
                r.exercises.join(",")
            },
            r.preset.description()
        );
        let _ = writeln!(out, "{:<13} {}", "", r.note);
    }
    let _ = writeln!(
        out,
        "{LOCK_TIMER_BASE} is called by every timer user on the machine, under any preset or none."
    );
    out
}

pub fn render_json(rows: &[Row], f: Option<&Features>, why_unprobed: &str) -> serde_json::Value {
    let features = f.map(|f| {
        json!({
            "avail_operations": f.avail_operations,
            "has_dests": f.has_dests,
            "has_target_nid": f.has_target_nid,
            "va_migrate_symbol": f.va_migrate_symbol,
            "migrate_pages_symbol": f.migrate_pages_symbol,
            "has_node1": f.has_node1,
        })
    });
    let presets: Vec<_> = rows
        .iter()
        .map(|r| {
            json!({
                "name": r.preset.name(),
                "action": r.preset.action().sysfs_name(),
                "description": r.preset.description(),
                "runnable": r.ops.is_some(),
                "ops": r.ops.map(OpsKind::name),
                "exercises": r.exercises,
                "note": r.note,
            })
        })
        .collect();
    json!({
        "features": features,
        "probe_error": if f.is_none() { Some(why_unprobed) } else { None },
        "presets": presets,
        "background": [LOCK_TIMER_BASE],
    })
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

#[cfg(test)]
mod tests {
    use super::super::{
        plan::{tests::features, validate_dest},
        writes::{SysfsWrite, scheme_writes, tests::value_of},
    };
    use super::*;

    fn kernel_7_2() -> Features {
        features(&["vaddr", "fvaddr", "paddr"], true, true, true)
    }

    fn kernel_6_12() -> Features {
        features(&["vaddr", "fvaddr", "paddr"], false, false, true)
    }

    const S: &str = "0/contexts/0/schemes/0";
    const PADDR: Monitor = Monitor::Paddr {
        start: 0x100000,
        end: 0x4000_0000,
    };

    fn writes(preset: Preset, f: &Features, dest: Option<DestNode>) -> Vec<SysfsWrite> {
        let p = plan(preset, f, dest, |n| n <= 1).expect("plan");
        let monitor = match p.ops.kind {
            OpsKind::Vaddr => Monitor::Vaddr { pid: 77 },
            OpsKind::Paddr => PADDR,
        };
        scheme_writes(&p.config(preset, monitor, Tuning::default()))
    }

    #[test]
    fn migrate_cold_on_7_2_sends_never_accessed_workload_pages_to_node_1() {
        let ws = writes(Preset::MigrateCold, &kernel_7_2(), None);
        assert_eq!(value_of(&ws, "0/contexts/0/operations"), Some("vaddr"));
        assert_eq!(
            value_of(&ws, "0/contexts/0/targets/0/pid_target"),
            Some("77")
        );
        assert_eq!(value_of(&ws, &format!("{S}/action")), Some("migrate_cold"));
        assert_eq!(value_of(&ws, &format!("{S}/target_nid")), Some("1"));
        assert_eq!(value_of(&ws, &format!("{S}/dests/nr_dests")), Some("1"));
        assert_eq!(value_of(&ws, &format!("{S}/dests/0/id")), Some("1"));
        let ap = format!("{S}/access_pattern");
        assert_eq!(value_of(&ws, &format!("{ap}/nr_accesses/max")), Some("0"));
        assert_eq!(
            value_of(&ws, &format!("{S}/quotas/bytes")),
            Some("33554432")
        );
    }

    #[test]
    fn migrate_cold_on_6_12_falls_back_to_paddr_without_dests() {
        let f = kernel_6_12();
        let p = plan(Preset::MigrateCold, &f, None, |n| n <= 1).expect("plan");
        assert_eq!(p.ops.kind, OpsKind::Paddr);
        assert!(p.ops.why.contains("migrate_cold"), "{}", p.ops.why);
        let ws = writes(Preset::MigrateCold, &f, None);
        assert_eq!(value_of(&ws, "0/contexts/0/operations"), Some("paddr"));
        assert_eq!(value_of(&ws, &format!("{S}/target_nid")), Some("1"));
        assert!(
            ws.iter()
                .all(|w| !w.rel.to_string_lossy().contains("dests"))
        );
    }

    #[test]
    fn pageout_and_lru_presets_are_paddr_without_a_target_node() {
        for (preset, action, nr_max) in [
            (Preset::Pageout, "pageout", "0"),
            (Preset::LruPrio, "lru_prio", "200"),
            (Preset::LruDeprio, "lru_deprio", "0"),
        ] {
            for f in [kernel_7_2(), kernel_6_12()] {
                let ws = writes(preset, &f, None);
                assert_eq!(value_of(&ws, "0/contexts/0/operations"), Some("paddr"));
                assert_eq!(
                    value_of(&ws, "0/contexts/0/targets/0/regions/0/start"),
                    Some("1048576")
                );
                assert_eq!(value_of(&ws, &format!("{S}/action")), Some(action));
                let ap = format!("{S}/access_pattern/nr_accesses/max");
                assert_eq!(value_of(&ws, &ap), Some(nr_max), "{action}");
                // A quota with non-zero weights: what makes the kernel score regions.
                assert_eq!(value_of(&ws, &format!("{S}/quotas/ms")), Some("100"));
                assert_eq!(
                    value_of(&ws, &format!("{S}/quotas/weights/nr_accesses_permil")),
                    Some("700")
                );
                assert!(
                    ws.iter().all(|w| {
                        let rel = w.rel.to_string_lossy();
                        !rel.contains("dests") && !rel.contains("target_nid")
                    }),
                    "{action}"
                );
            }
        }
    }

    #[test]
    fn pageout_needs_paddr() {
        let f = Features {
            avail_operations: vec!["vaddr".into()],
            ..kernel_7_2()
        };
        let err = plan(Preset::Pageout, &f, None, |_| true).expect_err("no paddr");
        assert!(format!("{err:#}").contains("CONFIG_DAMON_PADDR"));
        // migrate-hot still runs on vaddr there.
        assert!(plan(Preset::MigrateHot, &f, None, |_| true).is_ok());
    }

    #[test]
    fn dest_node_same_other_and_numbers() {
        let f = kernel_7_2();
        let tn = |d| plan(Preset::MigrateHot, &f, Some(d), |n| n <= 1).map(|p| p.target_nid);
        assert_eq!(tn(DestNode::Same).expect("same"), 0);
        assert_eq!(tn(DestNode::Other).expect("other"), 1);
        assert_eq!(tn(DestNode::Node(1)).expect("1"), 1);
        let err = tn(DestNode::Node(5)).expect_err("no node 5");
        assert!(format!("{err:#}").contains("node5"));
        let ws = writes(Preset::MigrateHot, &f, Some(DestNode::Same));
        assert_eq!(value_of(&ws, &format!("{S}/target_nid")), Some("0"));
        assert_eq!(value_of(&ws, &format!("{S}/dests/0/id")), Some("0"));
        let one_node = Features {
            has_node1: false,
            ..f
        };
        let err = plan(Preset::MigrateHot, &one_node, Some(DestNode::Other), |n| {
            n == 0
        })
        .expect_err("one node");
        assert!(format!("{err:#}").contains("second NUMA node"));
        assert!(validate_dest(DestNode::Node(7), true, |n| n <= 1).is_err());
        assert!(validate_dest(DestNode::Other, false, |n| n == 0).is_err());
        assert!(validate_dest(DestNode::Same, false, |n| n == 0).is_ok());
        assert_eq!("same".parse::<DestNode>(), Ok(DestNode::Same));
        assert_eq!("3".parse::<DestNode>(), Ok(DestNode::Node(3)));
        assert!("x".parse::<DestNode>().is_err());
    }

    #[test]
    fn exercised_functions_follow_ops_and_symbols() {
        let new = rows(Some(&kernel_7_2()), "");
        let get = |rows: &[Row], p: Preset| rows.iter().find(|r| r.preset == p).cloned();
        let hot = get(&new, Preset::MigrateHot).expect("row");
        assert_eq!(hot.exercises, [HOT_SCORE, DESTS_ADD, MIGRATE_PAGES]);
        assert_eq!(hot.ops, Some(OpsKind::Vaddr));
        let cold = get(&new, Preset::MigrateCold).expect("row");
        assert_eq!(cold.exercises, [HOT_SCORE, DESTS_ADD, MIGRATE_PAGES]);
        for p in [Preset::Pageout, Preset::LruPrio, Preset::LruDeprio] {
            let r = get(&new, p).expect("row");
            assert_eq!(r.exercises, [HOT_SCORE]);
            assert_eq!(r.ops, Some(OpsKind::Paddr));
        }
        let old = rows(Some(&kernel_6_12()), "");
        let hot = get(&old, Preset::MigrateHot).expect("row");
        assert_eq!(hot.ops, Some(OpsKind::Paddr));
        assert_eq!(hot.exercises, [HOT_SCORE]);
        let unprobed = rows(None, "run as root");
        assert!(
            unprobed
                .iter()
                .all(|r| r.ops.is_none() && r.note == "run as root")
        );
        let text = render_text(&new, Some(&kernel_7_2()));
        assert!(
            text.lines()
                .any(|l| l.starts_with("lru-deprio") && l.contains("yes"))
        );
        let j = render_json(&new, Some(&kernel_7_2()), "");
        assert_eq!(j["presets"].as_array().map(Vec::len), Some(ALL.len()));
        assert_eq!(j["presets"][0]["exercises"][1], DESTS_ADD);
        assert!(j["probe_error"].is_null());
    }
}
