//! What the scenario found in DAMON's sysfs before touching it, and a guard that puts it back
//! on every path (normal end, error, signal, panic unwind).
use std::{
    fs,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, anyhow, bail};

use super::{
    guardian::Guardian,
    kdamond::{retry_busy, stop_all},
    sysfs::{DAMON_STAT, SysfsRoot, read_attr, read_num, read_opt, write_attr, write_raw},
};

/// Modules that start their kdamond exclusively: while one runs, no other kdamond can start.
/// DAMON_STAT ([`DAMON_STAT`]) is switched off for the run (it only collects statistics); the
/// other two change memory placement, so their operator decides.
const EXCLUSIVE_POLICY_MODULES: [(&str, &str); 2] = [
    ("damon_reclaim", "DAMON_RECLAIM"),
    ("damon_lru_sort", "DAMON_LRU_SORT"),
];
/// Attributes that are state or results, not configuration.
const SKIP_FILES: [&str; 5] = [
    "state",
    "pid",
    "avail_operations",
    "effective_bytes",
    "total_bytes",
];
const SKIP_DIRS: [&str; 2] = ["stats", "tried_regions"];

/// The DAMON state the scenario will change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriorState {
    pub nr_kdamonds: u32,
    /// Writable configuration of the existing (stopped) kdamonds, relative to `kdamonds/`, in
    /// an order that can be replayed: `nr_*` before the directories they create. Writing
    /// `nr_kdamonds` wipes these, so they are replayed after the run.
    pub attrs: Vec<(PathBuf, String)>,
    /// `Some` when the kernel has DAMON_STAT.
    pub damon_stat_enabled: Option<bool>,
}

impl PriorState {
    /// Records the current state, refusing (before any change) if another DAMON user is active.
    pub fn capture(root: &SysfsRoot) -> Result<Self> {
        let kdamonds = root.kdamonds();
        if !root.damon_dir().is_dir() {
            bail!(
                "this kernel has no DAMON sysfs interface (CONFIG_DAMON_SYSFS): {} is missing; \
                 boot a kernel built with it (Debian's linux-image-amd64 of trixie, 6.12, \
                 or newer has it); `damon-trace scenario list` shows what a kernel supports",
                root.damon_dir().display()
            );
        }
        let nr_kdamonds: u32 = read_num(&kdamonds.join("nr_kdamonds"))?;
        for i in 0..nr_kdamonds {
            let dir = kdamonds.join(i.to_string());
            let state = read_attr(&dir.join("state"))?;
            if state != "off" {
                let pid = read_opt(&dir.join("pid"))?.unwrap_or_default();
                bail!(
                    "another DAMON user is active (kdamond {i} state {state}, pid {pid}); stop it \
                     (`echo off > {}`) or wait until it is done, then retry",
                    dir.join("state").display()
                );
            }
        }
        for (module, name) in EXCLUSIVE_POLICY_MODULES {
            let path = root.module_enabled(module);
            if read_opt(&path)?.as_deref().is_some_and(is_yes) {
                bail!(
                    "{name} is enabled and runs DAMON exclusively, so no other kdamond can \
                     start; disable it (`echo N > {}`) for the experiment and re-enable it after",
                    path.display()
                );
            }
        }
        let damon_stat_enabled = read_opt(&root.module_enabled(DAMON_STAT))?.map(|v| is_yes(&v));
        let mut attrs = Vec::new();
        for i in 0..nr_kdamonds {
            let rel = PathBuf::from(i.to_string());
            collect_attrs(&kdamonds.join(&rel), &rel, &mut attrs)?;
        }
        Ok(Self {
            nr_kdamonds,
            attrs,
            damon_stat_enabled,
        })
    }
}

pub(super) fn is_yes(v: &str) -> bool {
    matches!(v.trim(), "Y" | "y" | "1")
}

fn collect_attrs(dir: &Path, rel: &Path, out: &mut Vec<(PathBuf, String)>) -> Result<()> {
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    for entry in fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let meta = entry.metadata().with_context(|| format!("stat {name}"))?;
        if meta.is_dir() {
            if !SKIP_DIRS.contains(&name.as_str()) {
                dirs.push(name);
            }
        } else if meta.permissions().mode() & 0o222 != 0 && !SKIP_FILES.contains(&name.as_str()) {
            files.push(name);
        }
    }
    // `nr_*` first: replaying them recreates the child directories the rest is written into.
    files.sort_by_key(|n| (!n.starts_with("nr_"), n.clone()));
    dirs.sort_by_key(|n| (n.parse::<u64>().unwrap_or(u64::MAX), n.clone()));
    for name in files {
        // Unreadable (write-only) files carry no state to restore.
        if let Ok(value) = read_attr(&dir.join(&name)) {
            out.push((rel.join(&name), value));
        }
    }
    for name in dirs {
        collect_attrs(&dir.join(&name), &rel.join(&name), out)?;
    }
    Ok(())
}

/// Restores [`PriorState`] when dropped, unless [`RestoreGuard::restore`] already did.
pub struct RestoreGuard {
    root: SysfsRoot,
    prior: PriorState,
    stat_disabled: bool,
    kdamonds_touched: bool,
    done: bool,
    /// Told about every change, so that it can restore if this process is killed.
    guardian: Option<Guardian>,
}

impl RestoreGuard {
    pub fn new(root: &SysfsRoot, prior: PriorState) -> Self {
        Self {
            root: root.clone(),
            prior,
            stat_disabled: false,
            kdamonds_touched: false,
            done: false,
            guardian: None,
        }
    }

    /// Mirrors every change to `guardian` from now on.
    pub fn with_guardian(mut self, guardian: Guardian) -> Self {
        self.guardian = Some(guardian);
        self
    }

    /// For the guardian: the changes the (dead) scenario had announced.
    pub fn assume(&mut self, stat_disabled: bool, kdamonds_touched: bool) {
        self.stat_disabled = stat_disabled;
        self.kdamonds_touched = kdamonds_touched;
    }

    pub fn prior(&self) -> &PriorState {
        &self.prior
    }

    /// Switches DAMON_STAT off (its exclusive kdamond makes `state=on` fail with EBUSY).
    /// Returns whether it had to.
    pub fn disable_damon_stat(&mut self) -> Result<bool> {
        if self.prior.damon_stat_enabled != Some(true) {
            return Ok(false);
        }
        // Marked first: a write that fails halfway must still be undone.
        self.stat_disabled = true;
        if let Some(g) = &mut self.guardian {
            g.stat_disabled();
        }
        write_attr(&self.root.module_enabled(DAMON_STAT), "N")?;
        Ok(true)
    }

    /// Must be called before the first write under `kdamonds/`.
    pub fn mark_kdamonds_touched(&mut self) {
        self.kdamonds_touched = true;
        if let Some(g) = &mut self.guardian {
            g.kdamonds_touched();
        }
    }

    /// Stops kdamonds started since, restores `nr_kdamonds`, the previous kdamonds'
    /// configuration and DAMON_STAT. Keeps going after a failure and reports all of them.
    pub fn restore(&mut self) -> Result<()> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        let mut problems: Vec<String> = Vec::new();
        if self.kdamonds_touched
            && let Err(e) = self.restore_kdamonds()
        {
            problems.push(format!("{e:#}"));
        }
        if self.stat_disabled {
            let path = self.root.module_enabled(DAMON_STAT);
            if let Err(e) = write_attr(&path, "Y") {
                problems.push(format!("re-enabling DAMON_STAT: {e:#}"));
            }
        }
        if problems.is_empty() {
            if let Some(g) = &mut self.guardian {
                g.restored();
            }
            Ok(())
        } else {
            Err(anyhow!(
                "could not fully restore DAMON's previous state: {}",
                problems.join("; ")
            ))
        }
    }

    fn restore_kdamonds(&self) -> Result<()> {
        let kdamonds = self.root.kdamonds();
        stop_all(&kdamonds)?;
        retry_busy(
            &kdamonds.join("nr_kdamonds"),
            &self.prior.nr_kdamonds.to_string(),
        )?;
        let failed: Vec<String> = self
            .prior
            .attrs
            .iter()
            .filter_map(|(rel, value)| {
                write_raw(&kdamonds.join(rel), value)
                    .err()
                    .map(|e| format!("{}={value:?} ({e})", rel.display()))
            })
            .collect();
        if failed.is_empty() {
            Ok(())
        } else {
            Err(anyhow!(
                "{} of {} previous kdamond settings could not be written back: {}",
                failed.len(),
                self.prior.attrs.len(),
                failed.join(", ")
            ))
        }
    }
}

impl Drop for RestoreGuard {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!("damon-trace: warning: {e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DAMON sysfs tree in a fresh temporary directory (removed when the first value drops).
    fn seed(damon_stat: Option<&str>) -> (tempfile::TempDir, SysfsRoot) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = seed_at(dir.path(), damon_stat);
        (dir, root)
    }

    /// A stopped kdamond left configured by someone else, plus read-only and result files.
    fn seed_at(root: &Path, damon_stat: Option<&str>) -> SysfsRoot {
        let kd = root.join("sys/kernel/mm/damon/admin/kdamonds");
        let ctx = kd.join("0/contexts/0");
        let s = ctx.join("schemes/0");
        for d in [
            &s.join("quotas/weights"),
            &s.join("stats"),
            &ctx.join("targets/0/regions/0"),
        ] {
            fs::create_dir_all(d).expect("mkdir");
        }
        let files = [
            (kd.join("nr_kdamonds"), "1"),
            (kd.join("0/state"), "off"),
            (kd.join("0/pid"), "-1"),
            (kd.join("0/contexts/nr_contexts"), "1"),
            (ctx.join("operations"), "paddr"),
            (ctx.join("avail_operations"), "vaddr fvaddr paddr"),
            (ctx.join("targets/nr_targets"), "1"),
            (ctx.join("targets/0/pid_target"), "0"),
            (ctx.join("targets/0/regions/nr_regions"), "1"),
            (ctx.join("targets/0/regions/0/start"), "4096"),
            (ctx.join("targets/0/regions/0/end"), "8192"),
            (ctx.join("schemes/nr_schemes"), "1"),
            (s.join("action"), "pageout"),
            (s.join("quotas/ms"), "50"),
            (s.join("quotas/weights/age_permil"), "1000"),
            (s.join("stats/nr_applied"), "7"),
        ];
        for (path, value) in files {
            fs::write(&path, format!("{value}\n")).expect("seed");
        }
        fs::set_permissions(
            ctx.join("avail_operations"),
            fs::Permissions::from_mode(0o444),
        )
        .expect("chmod");
        if let Some(v) = damon_stat {
            let p = root.join("sys/module/damon_stat/parameters");
            fs::create_dir_all(&p).expect("mkdir");
            fs::write(p.join("enabled"), format!("{v}\n")).expect("seed");
        }
        SysfsRoot::at(root)
    }

    #[test]
    fn capture_orders_config_and_skips_state_and_results() {
        let (_dir, root) = seed(None);
        let prior = PriorState::capture(&root).expect("capture");
        assert_eq!(prior.nr_kdamonds, 1);
        assert_eq!(prior.damon_stat_enabled, None);
        let rels: Vec<String> = prior
            .attrs
            .iter()
            .map(|(p, _)| p.display().to_string())
            .collect();
        assert_eq!(
            rels,
            [
                "0/contexts/nr_contexts",
                "0/contexts/0/operations",
                "0/contexts/0/schemes/nr_schemes",
                "0/contexts/0/schemes/0/action",
                "0/contexts/0/schemes/0/quotas/ms",
                "0/contexts/0/schemes/0/quotas/weights/age_permil",
                "0/contexts/0/targets/nr_targets",
                "0/contexts/0/targets/0/pid_target",
                "0/contexts/0/targets/0/regions/nr_regions",
                "0/contexts/0/targets/0/regions/0/end",
                "0/contexts/0/targets/0/regions/0/start",
            ]
        );
    }

    #[test]
    fn guard_restores_counts_config_and_damon_stat_on_drop() {
        let (_dir, root) = seed(Some("Y"));
        let kd = root.kdamonds();
        let prior = PriorState::capture(&root).expect("capture");
        assert_eq!(prior.damon_stat_enabled, Some(true));
        {
            let mut guard = RestoreGuard::new(&root, prior);
            assert!(guard.disable_damon_stat().expect("disable"));
            assert_eq!(
                read_attr(&root.module_enabled(DAMON_STAT)).expect("read"),
                "N"
            );
            guard.mark_kdamonds_touched();
            // What a run leaves behind (the real kernel would also have recreated the dirs).
            write_attr(&kd.join("nr_kdamonds"), "1").expect("w");
            write_attr(&kd.join("0/contexts/0/operations"), "vaddr").expect("w");
            write_attr(&kd.join("0/contexts/0/schemes/0/action"), "migrate_hot").expect("w");
            write_attr(&kd.join("0/contexts/0/schemes/0/quotas/ms"), "100").expect("w");
        }
        assert_eq!(
            read_attr(&root.module_enabled(DAMON_STAT)).expect("read"),
            "Y"
        );
        let ctx = kd.join("0/contexts/0");
        assert_eq!(read_attr(&ctx.join("operations")).expect("read"), "paddr");
        assert_eq!(
            read_attr(&ctx.join("schemes/0/action")).expect("read"),
            "pageout"
        );
        assert_eq!(
            read_attr(&ctx.join("schemes/0/quotas/ms")).expect("read"),
            "50"
        );
        assert_eq!(read_attr(&kd.join("nr_kdamonds")).expect("read"), "1");
        // Results are not "restored".
        assert_eq!(
            read_attr(&ctx.join("schemes/0/stats/nr_applied")).expect("read"),
            "7"
        );
    }

    #[test]
    fn explicit_restore_turns_our_kdamond_off_and_resets_the_count() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kd = dir.path().join("sys/kernel/mm/damon/admin/kdamonds");
        fs::create_dir_all(&kd).expect("mkdir");
        fs::write(kd.join("nr_kdamonds"), "0\n").expect("seed");
        let root = SysfsRoot::at(dir.path());
        let prior = PriorState::capture(&root).expect("capture");
        assert!(prior.attrs.is_empty());
        let mut guard = RestoreGuard::new(&root, prior);
        assert!(!guard.disable_damon_stat().expect("no damon_stat here"));
        guard.mark_kdamonds_touched();
        fs::create_dir_all(kd.join("0")).expect("mkdir");
        fs::write(kd.join("nr_kdamonds"), "1").expect("w");
        // A tree cannot emulate the kernel turning the kdamond off, so it starts `off`: the
        // guard must not write `off` again in that case (the kernel would reject it).
        fs::write(kd.join("0/state"), "off").expect("w");
        fs::set_permissions(kd.join("0/state"), fs::Permissions::from_mode(0o444)).expect("chmod");
        guard.restore().expect("restore");
        assert_eq!(read_attr(&kd.join("nr_kdamonds")).expect("read"), "0");
        guard.restore().expect("second restore is a no-op");
    }

    #[test]
    fn refuses_when_another_kdamond_runs_or_an_exclusive_module_is_on() {
        let (dir, root) = seed(Some("Y"));
        write_attr(&root.kdamonds().join("0/state"), "on").expect("w");
        write_attr(&root.kdamonds().join("0/pid"), "77").expect("w");
        let err = PriorState::capture(&root).expect_err("must refuse");
        let msg = err.to_string();
        assert!(
            msg.contains("another DAMON user is active (kdamond 0 state on, pid 77)"),
            "{msg}"
        );
        // Nothing was changed by the refusal.
        assert_eq!(
            read_attr(&root.module_enabled(DAMON_STAT)).expect("read"),
            "Y"
        );

        write_attr(&root.kdamonds().join("0/state"), "off").expect("w");
        let p = dir.path().join("sys/module/damon_reclaim/parameters");
        fs::create_dir_all(&p).expect("mkdir");
        fs::write(p.join("enabled"), "Y\n").expect("seed");
        let err = PriorState::capture(&root).expect_err("must refuse");
        assert!(
            err.to_string().contains("DAMON_RECLAIM is enabled"),
            "{err}"
        );
    }

    #[test]
    fn guardian_restores_what_a_killed_scenario_announced() {
        use super::super::guardian::{Heard, act};
        let (_dir, root) = seed(Some("Y"));
        let kd = root.kdamonds();
        let prior = PriorState::capture(&root).expect("capture");
        // What the scenario did before it was killed.
        write_attr(&root.module_enabled(DAMON_STAT), "N").expect("w");
        write_attr(&kd.join("0/contexts/0/operations"), "vaddr").expect("w");
        // The scenario announced both changes, then how it ended (if it could).
        let killed = Heard {
            stat_disabled: true,
            kdamonds_touched: true,
            ..Heard::default()
        };
        let dismissed = Heard {
            dismissed: true,
            ..killed.clone()
        };
        assert!(!act(&root, &prior, &dismissed).expect("nothing to do"));
        let restored = Heard {
            restored: true,
            ..killed.clone()
        };
        assert!(!act(&root, &prior, &restored).expect("nothing to do"));
        let ctx = kd.join("0/contexts/0");
        assert_eq!(read_attr(&ctx.join("operations")).expect("r"), "vaddr");
        assert!(act(&root, &prior, &killed).expect("restore"));
        assert_eq!(read_attr(&ctx.join("operations")).expect("r"), "paddr");
        assert_eq!(read_attr(&root.module_enabled(DAMON_STAT)).expect("r"), "Y");
    }

    #[test]
    fn missing_sysfs_names_the_config_option() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = PriorState::capture(&SysfsRoot::at(dir.path())).expect_err("no damon");
        assert!(err.to_string().contains("CONFIG_DAMON_SYSFS"));
    }
}
