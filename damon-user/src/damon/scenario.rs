//! `scenario <preset>`: a hot/cold workload under a DAMON scheme with a quota, for a while;
//! then DAMON's previous state comes back. Every preset goes through [`run_preset`], the one
//! start/restore path; `scenario list` probes the kernel through the same guard.
use std::{
    io::{IsTerminal as _, Write as _},
    process::ExitCode,
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

use super::{
    guardian::Guardian,
    kdamond::{KDAMOND_STATE, refresh_stats, turn_on},
    plan::{
        DestNode, Features, Monitor, OpsKind, Tuning, WORKLOAD_NODE, apply, largest_system_ram,
        scheme_writes, skeleton, validate_dest,
    },
    presets::{self, Preset},
    restore::{PriorState, RestoreGuard},
    signals::{StopSignals, signal_name},
    snapshot::{SchemeStats, snapshot},
    sysfs::{SysfsRoot, kallsyms_has, process_node_pages, read_attr},
    workload::WorkloadChild,
};
use crate::cli::ScenarioArgs;

/// Touching a few hundred MiB under TCG emulation takes seconds; allow for slow guests.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

fn status(preset: Preset, msg: &str) {
    eprintln!("damon-trace: {}: {msg}", preset.name());
}

fn require_root(what: &str) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!(
            "run as root: DAMON's sysfs files and the physical addresses in /proc/iomem are \
             root-only (try `sudo damon-trace scenario {what}`)"
        );
    }
    Ok(())
}

/// `scenario list`: probes the kernel's features the way the presets do (through the same
/// guard when the probe has to create the kdamond directories), then prints every preset.
pub fn list(root: &SysfsRoot, json: bool) -> Result<ExitCode> {
    let probed = probe_for_list(root);
    let (features, why) = match &probed {
        Ok(f) => (Some(f), String::new()),
        Err(e) => (None, format!("cannot probe this kernel: {e:#}")),
    };
    let rows = presets::rows(features, &why);
    if json {
        println!("{}", presets::render_json(&rows, features, &why));
    } else {
        print!("{}", presets::render_text(&rows, features));
    }
    Ok(ExitCode::SUCCESS)
}

fn probe_for_list(root: &SysfsRoot) -> Result<Features> {
    require_root("list")?;
    // A scheme directory that already exists is read as it is.
    if root.kdamonds().join("0/contexts/0/schemes/0").is_dir() {
        return probe_features(root);
    }
    let prior = PriorState::capture(root)?;
    let mut guard = RestoreGuard::new(root, prior);
    guard.mark_kdamonds_touched();
    apply(&root.kdamonds(), &skeleton())?;
    let features = probe_features(root);
    guard.restore()?;
    features
}

pub fn run_preset(
    root: &SysfsRoot,
    preset: Preset,
    args: &ScenarioArgs,
    dest: Option<DestNode>,
) -> Result<ExitCode> {
    let status = |msg: &str| status(preset, msg);
    let tuning = Tuning::from_args(args)?;
    if let Some(d) = dest {
        validate_dest(d, root.node_dir(1).is_dir(), |n| root.node_dir(n).is_dir())?;
    }
    require_root(preset.name())?;
    let signals = StopSignals::install()?;
    // Refusals (no DAMON, another DAMON user) happen here, before anything changes.
    let prior = PriorState::capture(root)?;
    // Forked now, while this process has one thread (the workload adds a reader thread).
    let mut guardian = Guardian::start(root, &prior)?;
    let has_node1 = root.node_dir(1).is_dir();
    let mut workload = WorkloadChild::spawn(
        args.workload_mib,
        args.hot_mib,
        has_node1.then_some(WORKLOAD_NODE),
    )?;
    let pid = workload.pid();
    guardian.workload(pid);
    status(&format!(
        "workload pid {pid}: {} MiB mapped, first {} MiB hot",
        args.workload_mib, args.hot_mib
    ));
    if !workload.wait_ready(READY_TIMEOUT, || signals.received().is_some())? {
        return Ok(interrupted(preset, &signals, Duration::ZERO));
    }
    let pages_before = process_node_pages(root, pid);

    // Declared after `workload`, so dropped (DAMON restored) before the workload is killed.
    let mut guard = RestoreGuard::new(root, prior).with_guardian(guardian);
    if guard.disable_damon_stat()? {
        status(
            "DAMON_STAT was enabled: off for the run (its kdamond blocks others), back on after",
        );
    }
    if guard.prior().nr_kdamonds > 0 {
        status(&format!(
            "{} stopped kdamond(s) were configured: their settings are saved and rewritten after",
            guard.prior().nr_kdamonds
        ));
    }
    let kd = root.kdamonds();
    guard.mark_kdamonds_touched();
    apply(&kd, &skeleton())?;
    let features = probe_features(root)?;
    let plan = presets::plan(preset, &features, dest, |n| root.node_dir(n).is_dir())?;
    let decision = &plan.ops;
    let monitor = match decision.kind {
        OpsKind::Vaddr => Monitor::Vaddr { pid },
        OpsKind::Paddr => {
            let (start, end) = paddr_region(root)?;
            Monitor::Paddr { start, end }
        }
    };
    let cfg = plan.config(preset, monitor, tuning);
    apply(&kd, &scheme_writes(&cfg)).context("configuring the kdamond")?;
    let target = match monitor {
        Monitor::Vaddr { pid } => format!("pid {pid}"),
        Monitor::Paddr { start, end } => format!("phys {start:#x}-{end:#x}"),
    };
    status(&format!(
        "ops={} ({target}) action={}: {}",
        decision.kind.name(),
        cfg.action.sysfs_name(),
        decision.why
    ));
    if cfg.action.migrates() {
        status(&format!(
            "target node {} via {}: {}",
            cfg.target_nid,
            if cfg.use_dests {
                "dests/0 and target_nid"
            } else {
                "target_nid"
            },
            plan.node_why
        ));
    }
    status(&format!(
        "exercises {} (and lock_timer_base, system-wide)",
        preset.exercises(&features, decision.kind).join(", ")
    ));
    turn_on(&kd)?;
    status(&format!(
        "kdamond on for {:.1}s",
        args.duration.as_secs_f64()
    ));

    let started = Instant::now();
    let signal = run_loop(root, &signals, &mut workload, args.duration, started)?;
    let ran = started.elapsed();
    // The kdamond is still on: refresh and read the final counters before it stops.
    let stats = refresh_stats(root).unwrap_or_default();
    let config = snapshot(root).ok();
    let pages_after = process_node_pages(root, pid);
    guard.restore()?;
    drop(guard);
    drop(workload);
    let kdamond_pid = config
        .and_then(|s| s.kdamonds.first().and_then(|k| k.pid))
        .map_or_else(|| "?".to_string(), |p| p.to_string());
    let target_nid = if cfg.action.migrates() {
        cfg.target_nid.to_string()
    } else {
        "-".to_string()
    };
    println!(
        "{}: ops={} action={} target_nid={target_nid} kdamond_pid={kdamond_pid} ran_s={:.1} \
         nr_tried={} sz_tried={} nr_applied={} sz_applied={} qt_exceeds={} \
         workload_pages_before={} workload_pages_after={} restored=yes",
        preset.name(),
        decision.kind.name(),
        cfg.action.sysfs_name(),
        ran.as_secs_f64(),
        stats.nr_tried,
        stats.sz_tried,
        stats.nr_applied,
        stats.sz_applied,
        stats.qt_exceeds,
        fmt_pages(&pages_before),
        fmt_pages(&pages_after),
    );
    match signal {
        Some(_) => Ok(interrupted(preset, &signals, ran)),
        None => Ok(ExitCode::SUCCESS),
    }
}

fn interrupted(preset: Preset, signals: &StopSignals, after: Duration) -> ExitCode {
    let sig = signals.received().unwrap_or(libc::SIGINT);
    status(
        preset,
        &format!(
            "interrupted by {} after {:.1}s; DAMON state restored",
            signal_name(sig),
            after.as_secs_f64()
        ),
    );
    ExitCode::from(128u8.saturating_add(u8::try_from(sig).unwrap_or(0)))
}

/// Reads what the freshly created skeleton directories reveal about this kernel.
fn probe_features(root: &SysfsRoot) -> Result<Features> {
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

fn paddr_region(root: &SysfsRoot) -> Result<(u64, u64)> {
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

/// Polls for the end (duration or signal) and prints progress. Returns the stop signal.
fn run_loop(
    root: &SysfsRoot,
    signals: &StopSignals,
    workload: &mut WorkloadChild,
    duration: Duration,
    started: Instant,
) -> Result<Option<i32>> {
    let tty = std::io::stderr().is_terminal();
    let every = if tty {
        Duration::from_secs(1)
    } else {
        Duration::from_secs(5)
    };
    let state = root.kdamonds().join(KDAMOND_STATE);
    let mut next_status = started + every;
    let mut stats_warned = false;
    let result = loop {
        if let Some(sig) = signals.received() {
            break Ok(Some(sig));
        }
        let elapsed = started.elapsed();
        if elapsed >= duration {
            break Ok(None);
        }
        workload.ensure_running()?;
        if read_attr(&state)? != "on" {
            bail!(
                "the kdamond stopped by itself after {:.1}s (its target may have exited, or \
                 the kernel rejected the scheme); see dmesg",
                elapsed.as_secs_f64()
            );
        }
        if Instant::now() >= next_status {
            next_status += every;
            // A progress line is not worth ending the experiment for.
            let stats = refresh_stats(root).unwrap_or_else(|e| {
                if !stats_warned {
                    eprintln!("damon-trace: warning: scheme stats unavailable: {e:#}");
                    stats_warned = true;
                }
                SchemeStats::default()
            });
            let pages = process_node_pages(root, workload.pid());
            let line = format!(
                "[{:>6.1}s] applied {} regions / {:.1} MiB (tried {}), quota hit {}x, \
                 workload pages {}",
                elapsed.as_secs_f64(),
                stats.nr_applied,
                stats.sz_applied as f64 / f64::from(1 << 20),
                stats.nr_tried,
                stats.qt_exceeds,
                fmt_pages(&pages)
            );
            if tty {
                eprint!("\r{line}\x1b[K");
                let _ = std::io::stderr().flush();
            } else {
                eprintln!("{line}");
            }
        }
        thread::sleep(Duration::from_millis(100).min(duration.saturating_sub(elapsed)));
    };
    if tty {
        eprintln!();
    }
    result
}

fn fmt_pages(pages: &[(u32, u64)]) -> String {
    if pages.is_empty() {
        return "-".to_string();
    }
    pages
        .iter()
        .map(|(node, n)| format!("N{node}:{n}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::super::snapshot::tests::fake_kernel_tree;
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
            let kind = super::super::plan::choose_ops(&f, super::super::plan::Action::MigrateHot)
                .expect("choose")
                .kind;
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

    #[test]
    fn page_counts_format() {
        assert_eq!(fmt_pages(&[]), "-");
        assert_eq!(fmt_pages(&[(0, 10), (1, 2)]), "N0:10,N1:2");
    }
}
