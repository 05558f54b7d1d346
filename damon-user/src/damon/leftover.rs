//! A kdamond left configured by a damon-trace scenario that did not finish (killed together
//! with its guardian): what `doctor` warns about, with the remedy.
use std::fs;

use super::{
    presets,
    restore::is_yes,
    sysfs::{DAMON_STAT, SysfsRoot, read_attr, read_num, read_opt},
    writes,
};

/// What `doctor` reports about a configuration the scenario writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScenarioLeftover {
    /// A scenario is running now and owns it.
    Running(String),
    /// Nobody owns it: a scenario died without restoring (its guardian killed too).
    Left { found: String, remedy: String },
}

/// A kdamond configured exactly as `scenario migrate-hot` configures it (its intervals,
/// migrate_hot action, quota and weights) is the scenario's. `None`: there is none.
pub fn scenario_leftover(root: &SysfsRoot) -> Option<ScenarioLeftover> {
    let kdamonds = root.kdamonds();
    let nr: u32 = read_num(&kdamonds.join("nr_kdamonds")).ok()?;
    let is_ours = |i: u32| {
        let ctx = kdamonds.join(format!("{i}/contexts/0"));
        let s = ctx.join("schemes/0");
        let q = s.join("quotas");
        // Any preset's action; not the intervals: `--sample-interval`/`--aggr-interval`
        // change them.
        let action = read_attr(&s.join("action")).unwrap_or_default();
        if !presets::ALL
            .iter()
            .any(|p| p.action().sysfs_name() == action.trim())
        {
            return false;
        }
        let expect = [
            (q.join("ms"), writes::QUOTA_MS.to_string()),
            (q.join("bytes"), writes::QUOTA_BYTES.to_string()),
            (
                q.join("weights/nr_accesses_permil"),
                writes::WEIGHT_NR_ACCESSES.to_string(),
            ),
            (q.join("weights/age_permil"), writes::WEIGHT_AGE.to_string()),
        ];
        expect
            .iter()
            .all(|(p, v)| read_attr(p).is_ok_and(|got| got.trim() == v))
    };
    let i = (0..nr).find(|&i| is_ours(i))?;
    if let Some(pid) = running_scenario(root) {
        return Some(ScenarioLeftover::Running(format!(
            "a damon-trace scenario is running (pid {pid}) and owns kdamond {i}"
        )));
    }
    let state = read_attr(&kdamonds.join(format!("{i}/state"))).unwrap_or_default();
    let mut remedy = format!(
        "remove it: `echo off > {dir}/{i}/state; echo 0 > {dir}/nr_kdamonds` (if it is off \
         already, only the second)",
        dir = kdamonds.display()
    );
    let stat = root.module_enabled(DAMON_STAT);
    if read_opt(&stat).ok().flatten().is_some_and(|v| !is_yes(&v)) {
        remedy.push_str(&format!(
            "; DAMON_STAT is off, and the scenario switches it off while it runs: if it was on \
             before, `echo Y > {}`",
            stat.display()
        ));
    }
    Some(ScenarioLeftover::Left {
        found: format!(
            "kdamond {i} (state {state}) still has the configuration of a damon-trace scenario \
             that did not finish and was not restored (the configuration it replaced is lost)"
        ),
        remedy,
    })
}

/// Pid of a live `damon-trace scenario` or its guardian, if any (not this process).
fn running_scenario(root: &SysfsRoot) -> Option<u32> {
    let me = std::process::id();
    let procs = fs::read_dir(root.proc_dir()).ok()?;
    procs.filter_map(Result::ok).find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        if pid == me {
            return None;
        }
        let cmdline = fs::read(e.path().join("cmdline")).ok()?;
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let scenario =
            args.first()?.ends_with(b"damon-trace") && args.iter().any(|a| *a == b"scenario");
        scenario.then_some(pid)
    })
}

#[cfg(test)]
mod tests {
    use super::super::{
        kdamond::apply,
        plan::Action,
        snapshot::tests::fake_kernel_tree,
        sysfs::write_attr,
        writes::{Monitor, SchemeConfig, scheme_writes},
    };
    use super::*;

    #[test]
    fn doctor_recognises_the_scenario_configuration_nobody_restored() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = fake_kernel_tree(dir.path(), true);
        assert_eq!(scenario_leftover(&root), None, "nr_kdamonds is 0");
        let cfg = SchemeConfig {
            action: Action::MigrateHot,
            monitor: Monitor::Vaddr { pid: 1 },
            target_nid: 1,
            use_dests: true,
            tuning: Default::default(),
        };
        apply(&root.kdamonds(), &scheme_writes(&cfg)).expect("apply");
        // No /proc under this root: no scenario is running.
        match scenario_leftover(&root) {
            Some(ScenarioLeftover::Left { found, remedy }) => {
                assert!(found.contains("kdamond 0 (state off)"), "{found}");
                assert!(remedy.contains("nr_kdamonds"), "{remedy}");
            }
            other => panic!("{other:?}"),
        }
        // Another preset's action is ours too; an action no preset uses is not.
        write_attr(
            &root.kdamonds().join("0/contexts/0/schemes/0/action"),
            "pageout",
        )
        .expect("w");
        assert!(matches!(
            scenario_leftover(&root),
            Some(ScenarioLeftover::Left { .. })
        ));
        write_attr(
            &root.kdamonds().join("0/contexts/0/schemes/0/action"),
            "stat",
        )
        .expect("w");
        assert_eq!(scenario_leftover(&root), None);
    }
}
