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
    features::{paddr_region, probe_features},
    guardian::Guardian,
    kdamond::{KDAMOND_STATE, apply, refresh_stats, turn_on},
    plan::{DestNode, Features, OpsKind, WORKLOAD_NODE, validate_dest},
    presets::{self, Plan, Preset},
    restore::{PriorState, RestoreGuard},
    signals::{StopSignals, signal_name},
    snapshot::{SchemeStats, snapshot},
    sysfs::{SysfsRoot, process_node_pages, read_attr},
    workload::WorkloadChild,
    writes::{Monitor, SchemeConfig, Tuning, scheme_writes, skeleton},
};
use crate::error::UsageError;

/// What `scenario <preset>` is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioSettings {
    /// How long the kdamond runs before DAMON's previous state comes back.
    pub duration: Duration,
    /// Size of the workload's mapping, and of its hot part (MiB).
    pub workload_mib: u64,
    pub hot_mib: u64,
    pub sample_interval: Duration,
    pub aggr_interval: Duration,
    /// `None`: the scheme applies every aggregation (the kernel's default).
    pub apply_interval: Option<Duration>,
    /// At least this many DAMON regions; `None`: the kernel's defaults.
    pub regions: Option<u64>,
}

impl ScenarioSettings {
    /// The DAMON tuning asked for, checked.
    pub fn tuning(&self) -> Result<Tuning, UsageError> {
        let us = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let mut t = Tuning {
            sample_us: us(self.sample_interval),
            aggr_us: us(self.aggr_interval),
            apply_us: self.apply_interval.map(us),
            regions: None,
        };
        if let Some(n) = self.regions {
            t = t.with_regions(n);
        }
        t.validate()?;
        Ok(t)
    }
}

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
        crate::output::write_stdout(&crate::output::json_document(&presets::render_json(
            &rows, features, &why,
        ))?)?;
    } else {
        crate::output::write_stdout(&presets::render_text(&rows, features))?;
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

/// Runs `preset` for `settings.duration`: refusals first (before anything changes), then the
/// workload, DAMON taken over and configured, the run, and DAMON's previous state restored
/// (also on error or signal) before the workload is killed.
pub fn run_preset(
    root: &SysfsRoot,
    preset: Preset,
    settings: &ScenarioSettings,
    dest: Option<DestNode>,
) -> Result<ExitCode> {
    let tuning = settings.tuning()?;
    if let Some(d) = dest {
        validate_dest(d, root.node_dir(1).is_dir(), |n| root.node_dir(n).is_dir())?;
    }
    require_root(preset.name())?;
    let signals = StopSignals::install()?;
    // Refusals (no DAMON, another DAMON user) happen here, before anything changes.
    let prior = PriorState::capture(root)?;
    // Forked now, while this process has one thread (the workload adds a reader thread).
    let mut guardian = Guardian::start(root, &prior)?;
    let mut workload = start_workload(root, preset, settings, &mut guardian)?;
    if !workload.wait_ready(READY_TIMEOUT, || signals.received().is_some())? {
        return Ok(interrupted(preset, &signals, Duration::ZERO));
    }
    let pid = workload.pid();
    let pages_before = process_node_pages(root, pid);

    // Declared after `workload`, so dropped (DAMON restored) before the workload is killed.
    let mut guard = RestoreGuard::new(root, prior).with_guardian(guardian);
    let setup = configure(root, preset, &mut guard, dest, pid, tuning)?;
    for line in setup_lines(preset, &setup) {
        status(preset, &line);
    }
    turn_on(&root.kdamonds())?;
    status(
        preset,
        &format!("kdamond on for {:.1}s", settings.duration.as_secs_f64()),
    );

    let started = Instant::now();
    let signal = run_loop(root, &signals, &mut workload, settings.duration, started)?;
    // The kdamond is still on: refresh and read the final counters before it stops.
    let outcome = Outcome {
        ran: started.elapsed(),
        stats: refresh_stats(root).unwrap_or_default(),
        kdamond_pid: snapshot(root)
            .ok()
            .and_then(|s| s.kdamonds.first().and_then(|k| k.pid)),
        pages_before,
        pages_after: process_node_pages(root, pid),
    };
    guard.restore()?;
    drop(guard);
    drop(workload);
    println!("{}", summary_line(preset, &setup, &outcome));
    match signal {
        Some(_) => Ok(interrupted(preset, &signals, outcome.ran)),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// Spawns the workload (on node 0 when there are two nodes) and tells the guardian its pid.
fn start_workload(
    root: &SysfsRoot,
    preset: Preset,
    settings: &ScenarioSettings,
    guardian: &mut Guardian,
) -> Result<WorkloadChild> {
    let has_node1 = root.node_dir(1).is_dir();
    let workload = WorkloadChild::spawn(
        settings.workload_mib,
        settings.hot_mib,
        has_node1.then_some(WORKLOAD_NODE),
    )?;
    let pid = workload.pid();
    guardian.workload(pid);
    status(
        preset,
        &format!(
            "workload pid {pid}: {} MiB mapped, first {} MiB hot",
            settings.workload_mib, settings.hot_mib
        ),
    );
    Ok(workload)
}

/// How the preset runs here: what the kernel offers, the plan chosen from it, and the
/// configuration written.
struct Setup {
    features: Features,
    plan: Plan,
    cfg: SchemeConfig,
}

/// Takes DAMON over through `guard` (DAMON_STAT off, the kdamond directories rewritten),
/// probes what the kernel offers, and writes the preset's scheme for the workload `pid`.
fn configure(
    root: &SysfsRoot,
    preset: Preset,
    guard: &mut RestoreGuard,
    dest: Option<DestNode>,
    pid: u32,
    tuning: Tuning,
) -> Result<Setup> {
    if guard.disable_damon_stat()? {
        status(
            preset,
            "DAMON_STAT was enabled: off for the run (its kdamond blocks others), back on after",
        );
    }
    if guard.prior().nr_kdamonds > 0 {
        status(
            preset,
            &format!(
                "{} stopped kdamond(s) were configured: their settings are saved and rewritten after",
                guard.prior().nr_kdamonds
            ),
        );
    }
    let kd = root.kdamonds();
    guard.mark_kdamonds_touched();
    apply(&kd, &skeleton())?;
    let features = probe_features(root)?;
    let plan = presets::plan(preset, &features, dest, |n| root.node_dir(n).is_dir())?;
    let monitor = match plan.ops.kind {
        OpsKind::Vaddr => Monitor::Vaddr { pid },
        OpsKind::Paddr => {
            let (start, end) = paddr_region(root)?;
            Monitor::Paddr { start, end }
        }
    };
    let cfg = plan.config(preset, monitor, tuning);
    apply(&kd, &scheme_writes(&cfg)).context("configuring the kdamond")?;
    Ok(Setup {
        features,
        plan,
        cfg,
    })
}

/// The status lines that say how the preset was set up: operations set and target, the
/// migration target, and the traced functions it exercises.
fn setup_lines(preset: Preset, setup: &Setup) -> Vec<String> {
    let Setup {
        features,
        plan,
        cfg,
    } = setup;
    let decision = &plan.ops;
    let target = match cfg.monitor {
        Monitor::Vaddr { pid } => format!("pid {pid}"),
        Monitor::Paddr { start, end } => format!("phys {start:#x}-{end:#x}"),
    };
    let mut lines = vec![format!(
        "ops={} ({target}) action={}: {}",
        decision.kind.name(),
        cfg.action.sysfs_name(),
        decision.why
    )];
    if cfg.action.migrates() {
        lines.push(format!(
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
    lines.push(format!(
        "exercises {} (and lock_timer_base, system-wide)",
        preset.exercises(features, decision.kind).join(", ")
    ));
    lines
}

/// What a run measured, read while its kdamond was still on.
struct Outcome {
    ran: Duration,
    stats: SchemeStats,
    kdamond_pid: Option<u32>,
    pages_before: Vec<(u32, u64)>,
    pages_after: Vec<(u32, u64)>,
}

/// The one line on stdout a run ends with (`key=value` pairs, for scripts).
fn summary_line(preset: Preset, setup: &Setup, outcome: &Outcome) -> String {
    let cfg = &setup.cfg;
    let kdamond_pid = outcome
        .kdamond_pid
        .map_or_else(|| "?".to_string(), |p| p.to_string());
    let target_nid = if cfg.action.migrates() {
        cfg.target_nid.to_string()
    } else {
        "-".to_string()
    };
    let stats = &outcome.stats;
    format!(
        "{}: ops={} action={} target_nid={target_nid} kdamond_pid={kdamond_pid} ran_s={:.1} \
         nr_tried={} sz_tried={} nr_applied={} sz_applied={} qt_exceeds={} \
         workload_pages_before={} workload_pages_after={} restored=yes",
        preset.name(),
        setup.plan.ops.kind.name(),
        cfg.action.sysfs_name(),
        outcome.ran.as_secs_f64(),
        stats.nr_tried,
        stats.sz_tried,
        stats.nr_applied,
        stats.sz_applied,
        stats.qt_exceeds,
        fmt_pages(&outcome.pages_before),
        fmt_pages(&outcome.pages_after),
    )
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
    use super::*;

    fn settings() -> ScenarioSettings {
        ScenarioSettings {
            duration: Duration::from_secs(30),
            workload_mib: 256,
            hot_mib: 32,
            sample_interval: Duration::from_millis(5),
            aggr_interval: Duration::from_millis(100),
            apply_interval: None,
            regions: None,
        }
    }

    #[test]
    fn settings_become_a_checked_tuning() {
        assert_eq!(settings().tuning().expect("defaults"), Tuning::default());
        let dense = ScenarioSettings {
            sample_interval: Duration::from_millis(1),
            aggr_interval: Duration::from_millis(10),
            apply_interval: Some(Duration::from_micros(10_500)),
            regions: Some(50),
            ..settings()
        };
        assert_eq!(
            dense.tuning().expect("dense"),
            Tuning {
                sample_us: 1_000,
                aggr_us: 10_000,
                apply_us: Some(10_500),
                regions: Some((50, 1000)),
            }
        );
        let inverted = ScenarioSettings {
            aggr_interval: Duration::from_millis(1),
            ..settings()
        };
        let err = inverted.tuning().expect_err("aggr < sample");
        assert!(err.0.contains("--aggr-interval (1000 µs)"), "{}", err.0);
        let few = ScenarioSettings {
            regions: Some(2),
            ..settings()
        };
        assert!(few.tuning().is_err());
    }

    /// How `preset` is set up on a two-node 7.2 kernel (vaddr with dests) for `monitor`.
    fn setup(preset: Preset, monitor: Monitor) -> Setup {
        let features = super::super::plan::tests::features(&["vaddr", "paddr"], true, true, true);
        let plan = presets::plan(preset, &features, None, |n| n <= 1).expect("plan");
        let cfg = plan.config(preset, monitor, Tuning::default());
        Setup {
            features,
            plan,
            cfg,
        }
    }

    /// migrate-hot of the workload (pid 42), and pageout of a physical range.
    fn setups() -> (Setup, Setup) {
        let paddr = Monitor::Paddr {
            start: 0x1000,
            end: 0x2000,
        };
        (
            setup(Preset::MigrateHot, Monitor::Vaddr { pid: 42 }),
            setup(Preset::Pageout, paddr),
        )
    }

    #[test]
    fn setup_lines_name_ops_target_node_and_functions() {
        let (hot, pageout) = setups();
        let lines = setup_lines(Preset::MigrateHot, &hot);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(
            lines[0].starts_with("ops=vaddr (pid 42) action=migrate_hot: vaddr monitors"),
            "{lines:?}"
        );
        assert_eq!(
            lines[1],
            "target node 1 via dests/0 and target_nid: hot pages move from node 0 to node 1"
        );
        assert_eq!(
            lines[2],
            "exercises damon_hot_score, damos_va_migrate_dests_add, damon_migrate_pages (and \
             lock_timer_base, system-wide)"
        );
        let lines = setup_lines(Preset::Pageout, &pageout);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].starts_with("ops=paddr (phys 0x1000-0x2000) action=pageout: "),
            "{lines:?}"
        );
        assert_eq!(
            lines[1],
            "exercises damon_hot_score (and lock_timer_base, system-wide)"
        );
    }

    #[test]
    fn summary_line_has_every_counter() {
        let (hot, pageout) = setups();
        let outcome = Outcome {
            ran: Duration::from_millis(30_040),
            stats: SchemeStats {
                nr_tried: 1,
                sz_tried: 2,
                nr_applied: 3,
                sz_applied: 4,
                qt_exceeds: 5,
            },
            kdamond_pid: Some(99),
            pages_before: vec![(0, 10)],
            pages_after: vec![(0, 4), (1, 6)],
        };
        assert_eq!(
            summary_line(Preset::MigrateHot, &hot, &outcome),
            "migrate-hot: ops=vaddr action=migrate_hot target_nid=1 kdamond_pid=99 ran_s=30.0 \
             nr_tried=1 sz_tried=2 nr_applied=3 sz_applied=4 qt_exceeds=5 \
             workload_pages_before=N0:10 workload_pages_after=N0:4,N1:6 restored=yes"
        );
        let unknown = Outcome {
            kdamond_pid: None,
            pages_after: Vec::new(),
            ..outcome
        };
        let line = summary_line(Preset::Pageout, &pageout, &unknown);
        assert!(
            line.starts_with("pageout: ops=paddr action=pageout target_nid=- kdamond_pid=? "),
            "{line}"
        );
        assert!(
            line.ends_with("workload_pages_after=- restored=yes"),
            "{line}"
        );
    }

    #[test]
    fn page_counts_format() {
        assert_eq!(fmt_pages(&[]), "-");
        assert_eq!(fmt_pages(&[(0, 10), (1, 2)]), "N0:10,N1:2");
    }
}
