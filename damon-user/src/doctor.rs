//! `damon-trace doctor`: can this machine trace the target functions, and if not, why.
//!
//! Every check reports what it found and, when it fails, the remedy. The same diagnosis runs
//! before `record` so that it fails fast with the cause instead of a raw errno.
use std::{
    path::Path,
    process::ExitCode,
    time::{Duration, Instant},
};

use serde::Serialize;

use crate::{
    cli::DoctorArgs,
    damon::ScenarioLeftover,
    probe::{
        inventory::{BpfObjects, list_bpf_objects},
        kernel::{self, CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN, Kallsyms, Lockdown, SymbolPresence},
        trial::{ProbeTrial, try_each},
    },
    trace::TracedFunction,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub level: Level,
    pub found: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remedy: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct FunctionDiagnosis {
    pub name: String,
    pub kallsyms: SymbolPresence,
    pub btf: bool,
    /// In ftrace's available_filter_functions (needed by fentry); null if tracefs is unavailable.
    pub ftrace: Option<bool>,
    /// Result of really loading and attaching the fentry/fexit pair ("ok" or the error).
    pub fentry: String,
    /// Same for kprobe/kretprobe.
    pub kprobe: String,
    pub traceable: bool,
}

#[derive(Debug, Serialize)]
pub struct Diagnosis {
    pub kernel_release: String,
    pub checks: Vec<Check>,
    /// Every BPF program, map and link the kernel held when doctor started (before its own
    /// trial attaches), ours marked.
    pub bpf_objects: BpfObjects,
    pub functions: Vec<FunctionDiagnosis>,
    /// Whether at least one selected function can be traced.
    pub can_trace: bool,
    /// One sentence: the main reason tracing cannot work, and what to do.
    pub verdict: String,
}

fn check(
    name: &'static str,
    level: Level,
    found: impl Into<String>,
    remedy: Option<&str>,
) -> Check {
    Check {
        name,
        level,
        found: found.into(),
        remedy: remedy.map(str::to_owned),
    }
}

/// Runs every check; `functions` are those the user selected.
pub fn diagnose(functions: &[TracedFunction]) -> Diagnosis {
    // First, before anything here loads a program of its own (the trials below do).
    let bpf_objects = settled_bpf_objects();
    let ident = kernel::KernelIdentity::read();
    let mut checks = Vec::new();

    let privileged = privileges();
    checks.push(match &privileged {
        Ok(found) => check("privileges", Level::Ok, found, None),
        Err(missing) => Check {
            name: "privileges",
            level: Level::Fail,
            found: missing.found(),
            remedy: Some(missing.remedy()),
        },
    });

    let btf = Path::new("/sys/kernel/btf/vmlinux").exists();
    checks.push(if btf {
        check("btf", Level::Ok, "/sys/kernel/btf/vmlinux present", None)
    } else {
        check(
            "btf",
            Level::Warn,
            "no /sys/kernel/btf/vmlinux: fentry/fexit impossible",
            Some("use a kernel built with CONFIG_DEBUG_INFO_BTF=y; kprobes still work"),
        )
    });

    let lockdown = kernel::read_lockdown();
    checks.push(match lockdown {
        Some(Lockdown::Confidentiality) => check(
            "lockdown",
            Level::Fail,
            "lockdown=confidentiality forbids fentry/fexit and kprobe programs (they read kernel memory)",
            Some("boot with lockdown=none (or without Secure Boot lockdown), or trace in a VM: `cargo xtask vm`"),
        ),
        Some(Lockdown::Integrity) => check("lockdown", Level::Ok, "lockdown=integrity (does not forbid tracing programs by itself)", None),
        Some(Lockdown::None) => check("lockdown", Level::Ok, "lockdown=none", None),
        None => check("lockdown", Level::Ok, "no lockdown LSM (or securityfs unavailable)", None),
    });

    let kallsyms = Kallsyms::read().unwrap_or_default();
    let kprobes = kernel::kprobes_supported(&kallsyms);
    let kprobes_off = std::fs::read_to_string(KPROBES_ENABLED).is_ok_and(|v| v.trim() == "0");
    checks.push(if kprobes && kprobes_off {
        check(
            "kprobes",
            Level::Warn,
            format!("kprobes are disabled globally ({KPROBES_ENABLED} is 0): kprobe probes attach but never fire"),
            Some("echo 1 > /sys/kernel/debug/kprobes/enabled (fentry, the default, is not affected)"),
        )
    } else if kprobes {
        check(
            "kprobes",
            Level::Ok,
            "CONFIG_KPROBES=y (register_kprobe in kallsyms)",
            None,
        )
    } else {
        check(
            "kprobes",
            Level::Warn,
            "kernel built without kprobes (no register_kprobe in kallsyms): no kprobe fallback",
            Some("use a kernel with CONFIG_KPROBES=y, or rely on fentry"),
        )
    });

    checks.push(preemption_check(&ident.release));
    checks.push(damon_check());
    checks.push(
        match crate::damon::scenario_leftover(&crate::damon::SysfsRoot::system()) {
            None => check(
                "scenario",
                Level::Ok,
                "no kdamond configured by an unfinished damon-trace scenario",
                None,
            ),
            Some(ScenarioLeftover::Running(found)) => check("scenario", Level::Ok, found, None),
            Some(ScenarioLeftover::Left { found, remedy }) => {
                check("scenario", Level::Warn, found, Some(&remedy))
            }
        },
    );
    checks.push(leftovers_check(&bpf_objects));
    if let Some(c) = memlock_check(&ident.release) {
        checks.push(c);
    }

    let ftrace = kernel::ftrace_functions();
    checks.push(match &ftrace {
        Ok(set) => check(
            "tracefs",
            Level::Ok,
            format!("{} functions available to ftrace", set.len()),
            None,
        ),
        Err(e) => check(
            "tracefs",
            Level::Warn,
            e.clone(),
            Some("fentry needs ftrace; an EPERM here means a security policy restricts tracing"),
        ),
    });
    if std::fs::read_to_string(FTRACE_ENABLED).is_ok_and(|v| v.trim() == "0") {
        checks.push(check(
            "ftrace",
            Level::Warn,
            format!(
                "function tracing is off ({FTRACE_ENABLED} is 0): fentry/fexit probes attach \
                 but never fire"
            ),
            Some("sysctl kernel.ftrace_enabled=1, or trace with --attach kprobe"),
        ));
    }
    let ftrace = ftrace.ok();
    let trials: Vec<ProbeTrial> = if privileged.is_ok() {
        try_each(functions)
    } else {
        Vec::new()
    };
    let diag_functions: Vec<FunctionDiagnosis> = functions
        .iter()
        .map(|f| {
            let trial = trials.iter().find(|t| t.func == *f);
            let fentry = trial.map_or_else(
                || "not tried (no privileges)".to_owned(),
                |t| t.fentry.clone(),
            );
            let kprobe = trial.map_or_else(
                || "not tried (no privileges)".to_owned(),
                |t| t.kprobe.clone(),
            );
            FunctionDiagnosis {
                name: f.symbol.clone(),
                kallsyms: kallsyms.presence(&f.symbol),
                btf: trial.is_some_and(|t| t.in_btf),
                ftrace: ftrace.as_ref().map(|s| s.contains(&f.symbol)),
                traceable: fentry == "ok" || kprobe == "ok",
                fentry,
                kprobe,
            }
        })
        .collect();
    let can_trace = diag_functions.iter().any(|f| f.traceable);
    let verdict = verdict(&checks, &diag_functions, lockdown, kprobes, can_trace);
    Diagnosis {
        kernel_release: ident.release,
        checks,
        bpf_objects,
        functions: diag_functions,
        can_trace,
        verdict,
    }
}

/// The preemption model and what it means for each attach method (see `Preemption`).
fn preemption_check(release: &str) -> Check {
    let p = kernel::Preemption::read();
    let model = p.model.as_deref().unwrap_or("unknown");
    let kprobe_skips = if crate::probe::skips::kernel_counts_kprobe_skips(release) {
        "the kernel counts every probe run it skips (shown as skipped entries/exits)"
    } else {
        "this kernel (< 6.7) counts skipped fentry/fexit runs but not skipped kprobe runs"
    };
    let found = if p.preempts_trampolines() {
        format!(
            "preemption model {model} ({}): a task can be preempted inside a fentry/fexit probe, \
             and the kernel then skips that probe for the other tasks on the CPU; kprobe probes \
             run with preemption disabled, so --attach auto uses kprobe here; {kprobe_skips}",
            p.source
        )
    } else {
        format!(
            "preemption model {model} ({}): probes are not preempted, so --attach auto uses \
             fentry/fexit (the cheaper pair); {kprobe_skips}",
            p.source
        )
    };
    check("preemption", Level::Ok, found, None)
}

/// kernel.ftrace_enabled: 0 leaves fentry/fexit trampolines unpatched (verified on 7.2: the
/// attach succeeds and no call is counted).
const FTRACE_ENABLED: &str = "/proc/sys/kernel/ftrace_enabled";

/// Writing 0 here disarms every kprobe in the kernel without unregistering them (verified on
/// 7.2: the attach succeeds and no call is counted).
const KPROBES_ENABLED: &str = "/sys/kernel/debug/kprobes/enabled";

fn damon_check() -> Check {
    let kdamonds = Path::new("/sys/kernel/mm/damon/admin/kdamonds");
    if !kdamonds.exists() {
        return check(
            "damon",
            Level::Warn,
            "no /sys/kernel/mm/damon: DAMON functions will not be called",
            Some("use a kernel with CONFIG_DAMON_SYSFS=y"),
        );
    }
    // nr_kdamonds is readable by root only.
    let n: u32 = match std::fs::read_to_string(kdamonds.join("nr_kdamonds")) {
        Ok(t) => t.trim().parse().unwrap_or(0),
        Err(e) => {
            return check(
                "damon",
                Level::Ok,
                format!("DAMON sysfs present (number of kdamonds unreadable: {e})"),
                None,
            );
        }
    };
    let running = (0..n)
        .filter(|i| {
            std::fs::read_to_string(kdamonds.join(format!("{i}/state")))
                .is_ok_and(|s| s.trim() == "on")
        })
        .count();
    let found = if running > 0 {
        format!("DAMON sysfs present ({n} kdamonds, {running} running)")
    } else {
        format!(
            "DAMON sysfs present ({n} kdamonds, none running: the three DAMON functions are \
             called only while a kdamond runs, e.g. under `damon-trace scenario migrate-hot`)"
        )
    };
    check("damon", Level::Ok, found, None)
}

/// Programs, maps or links of ours loaded now: another damon-trace is running (named, with its
/// pid, from /proc/*/fdinfo), or something pinned them.
fn leftovers_check(objects: &BpfObjects) -> Check {
    if let Some(e) = &objects.error
        && e.contains("Operation not permitted")
    {
        // BPF_*_GET_NEXT_ID needs CAP_SYS_ADMIN even where CAP_BPF suffices to trace.
        return check(
            "leftovers",
            Level::Ok,
            "not checked: listing the kernel's BPF objects needs CAP_SYS_ADMIN",
            None,
        );
    }
    if let Some(e) = &objects.error {
        return check(
            "leftovers",
            Level::Warn,
            format!("cannot list the kernel's BPF objects: {e}"),
            Some("run as root to list them"),
        );
    }
    let ours = objects.ours();
    if ours.is_empty() {
        return check(
            "leftovers",
            Level::Ok,
            format!(
                "no damon-trace program, map or link loaded (kernel holds {} programs, {} maps, {} links)",
                objects.programs.len(),
                objects.maps.len(),
                objects.links.len()
            ),
            None,
        );
    }
    let holders = holders(objects);
    let who = if holders.is_empty() {
        "held by no process (pinned in bpffs?)".to_owned()
    } else {
        format!("held by {}", holders.join(", "))
    };
    check(
        "leftovers",
        Level::Warn,
        format!(
            "{} damon-trace objects are loaded now, {who}: {}",
            ours.len(),
            ours.join(", ")
        ),
        Some(if holders.is_empty() {
            "look for pins: `grep -rl . /sys/fs/bpf`, and remove them"
        } else {
            "another damon-trace is running: its probes add to the same functions; stop it first"
        }),
    )
}

/// How long doctor waits for objects of ours that nobody holds to go away.
const FREEING_GRACE: Duration = Duration::from_secs(3);

/// The kernel's BPF objects, once those of ours that no process holds are gone: the kernel
/// frees the maps of a closed program only after an RCU grace period, so right after a
/// damon-trace exits its maps are still listed for a moment (seen in the 7.2 guest).
fn settled_bpf_objects() -> BpfObjects {
    let deadline = Instant::now() + FREEING_GRACE;
    loop {
        let objects = list_bpf_objects();
        let unheld = !objects.ours().is_empty() && holders(&objects).is_empty();
        if !unheld || Instant::now() >= deadline {
            return objects;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Processes holding a file descriptor of one of our objects: `pid N (comm)`.
fn holders(objects: &BpfObjects) -> Vec<String> {
    let ids = |v: &[crate::probe::inventory::BpfObject]| -> Vec<u32> {
        v.iter().filter(|o| o.ours).map(|o| o.id).collect()
    };
    let (progs, maps, links) = (
        ids(&objects.programs),
        ids(&objects.maps),
        ids(&objects.links),
    );
    let me = std::process::id().to_string();
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.filter_map(Result::ok) {
        let pid = p.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) || pid == me {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fdinfo")) else {
            continue;
        };
        let holds = fds.filter_map(Result::ok).any(|fd| {
            let info = std::fs::read_to_string(fd.path()).unwrap_or_default();
            info.lines().any(|l| {
                let mut kv = l.splitn(2, ':');
                let (k, v) = (kv.next().unwrap_or(""), kv.next().unwrap_or("").trim());
                let Ok(id) = v.parse::<u32>() else {
                    return false;
                };
                match k {
                    "prog_id" => progs.contains(&id),
                    "map_id" => maps.contains(&id),
                    "link_id" => links.contains(&id),
                    _ => false,
                }
            })
        });
        if holds {
            let comm = std::fs::read_to_string(p.path().join("comm")).unwrap_or_default();
            out.push(format!("pid {pid} ({})", comm.trim()));
        }
    }
    out
}

/// `(major, minor)` of a release string such as `5.10.0-21-amd64`.
fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Bytes our maps lock with the default ring size (ring, stamp hash, per-CPU counters) plus
/// room for the programs: what RLIMIT_MEMLOCK must allow on kernels that charge it.
fn memlock_needed() -> u64 {
    let cpus = std::thread::available_parallelism().map_or(64, |n| n.get() as u64);
    let stamp = 8 + std::mem::size_of::<damon_common::StampStack>() as u64 + 64;
    u64::from(damon_common::DEFAULT_RING_BYTES)
        + u64::from(damon_common::MAX_IN_FLIGHT) * stamp
        + cpus * u64::from(damon_common::MAX_FUNCS * damon_common::NR_COUNTERS) * 8
        + (1 << 20)
}

/// Kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK (later ones to the memory cgroup):
/// a low limit there makes map creation fail with EPERM.
fn memlock_check(release: &str) -> Option<Check> {
    let old = kernel_version(release).is_some_and(|v| v < (5, 11));
    if !old {
        return None;
    }
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) } != 0 {
        return None;
    }
    let need = memlock_needed();
    let cur = lim.rlim_cur;
    Some(if cur == libc::RLIM_INFINITY || cur >= need {
        check(
            "memlock",
            Level::Ok,
            format!(
                "RLIMIT_MEMLOCK allows the {} KiB the maps lock on this kernel (< 5.11)",
                need >> 10
            ),
            None,
        )
    } else {
        check(
            "memlock",
            Level::Fail,
            format!(
                "RLIMIT_MEMLOCK is {} KiB; this kernel (< 5.11) charges BPF maps to it and they need about {} KiB",
                cur >> 10,
                need >> 10
            ),
            Some("raise it: `ulimit -l unlimited` (or LimitMEMLOCK=infinity in a systemd unit)"),
        )
    })
}

/// The capabilities tracing needs and this process lacks (in its effective set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingCaps(pub Vec<&'static str>);

impl MissingCaps {
    /// "CAP_BPF and CAP_PERFMON".
    pub fn names(&self) -> String {
        self.0.join(" and ")
    }

    /// What the doctor table shows.
    pub fn found(&self) -> String {
        format!("missing {} (CAP_SYS_ADMIN would also do)", self.names())
    }

    pub fn remedy(&self) -> String {
        let caps = self.0.iter().map(|c| c.to_lowercase()).collect::<Vec<_>>();
        format!(
            "run as root (sudo damon-trace ...) or grant {}, e.g. `sudo setcap {}+ep $(command -v damon-trace)`",
            self.names(),
            caps.join(",")
        )
    }
}

/// Which capabilities tracing needs and this process lacks: CAP_BPF to load programs and
/// CAP_PERFMON to attach them; CAP_SYS_ADMIN stands in for either.
pub fn privileges() -> Result<String, MissingCaps> {
    has_caps(kernel::effective_caps().unwrap_or(0))
}

/// The one-line error `record`, `live` and `serve` give before trying to trace without the
/// privileges to (exit status 1: the invocation is right, the process lacks rights).
pub fn require_privileges() -> anyhow::Result<()> {
    privileges().map(drop).map_err(|m| {
        anyhow::anyhow!(
            "tracing needs {}, which this process does not have: {}",
            m.names(),
            m.remedy()
        )
    })
}

fn has_caps(caps: u64) -> Result<String, MissingCaps> {
    let (bpf, perfmon, admin) = (
        kernel::has_cap(caps, CAP_BPF),
        kernel::has_cap(caps, CAP_PERFMON),
        kernel::has_cap(caps, CAP_SYS_ADMIN),
    );
    match (bpf && perfmon, admin) {
        (true, _) => Ok("CAP_BPF and CAP_PERFMON".to_owned()),
        (false, true) => Ok("CAP_SYS_ADMIN".to_owned()),
        _ => {
            let mut missing = Vec::new();
            if !bpf {
                missing.push("CAP_BPF");
            }
            if !perfmon {
                missing.push("CAP_PERFMON");
            }
            Err(MissingCaps(missing))
        }
    }
}

fn verdict(
    checks: &[Check],
    funcs: &[FunctionDiagnosis],
    lockdown: Option<Lockdown>,
    kprobes: bool,
    can_trace: bool,
) -> String {
    if can_trace {
        let n = funcs.iter().filter(|f| f.traceable).count();
        return format!(
            "tracing works: {n} of {} functions can be traced",
            funcs.len()
        );
    }
    if let Some(c) = checks
        .iter()
        .find(|c| c.name == "privileges" && c.level == Level::Fail)
    {
        return format!(
            "cannot trace: {}; {}",
            c.found,
            c.remedy.as_deref().unwrap_or("")
        );
    }
    if let Some(c) = checks
        .iter()
        .find(|c| c.name == "memlock" && c.level == Level::Fail)
    {
        return format!(
            "cannot trace: {}; {}",
            c.found,
            c.remedy.as_deref().unwrap_or("")
        );
    }
    let fentry_eperm = funcs
        .iter()
        .any(|f| f.fentry.contains("Operation not permitted") || f.fentry.contains("EPERM"));
    let mut reasons = Vec::new();
    match lockdown {
        Some(Lockdown::Confidentiality) => reasons.push("kernel lockdown=confidentiality forbids fentry/fexit".to_owned()),
        Some(mode) if fentry_eperm => reasons.push(format!(
            "the kernel refuses fentry/fexit program loads with EPERM although lockdown reports `{}`: \
             a security policy of this kernel forbids tracing programs",
            serde_json::to_value(mode).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
        )),
        None if fentry_eperm => reasons.push("the kernel refuses fentry/fexit program loads with EPERM".to_owned()),
        _ => {}
    }
    if !kprobes {
        reasons.push("the kernel has no kprobes (CONFIG_KPROBES off)".to_owned());
    }
    if funcs.iter().all(|f| f.kallsyms == SymbolPresence::Absent) {
        reasons.push("none of the selected functions exists in this kernel".to_owned());
    }
    if reasons.is_empty() {
        // Tracing works here; the functions themselves refuse (notrace, blacklisted,
        // inlined): booting another kernel is not the remedy.
        let names: Vec<&str> = funcs.iter().map(|f| f.name.as_str()).collect();
        return format!(
            "cannot trace the selected functions ({}): see the per-function errors above; \
             choose functions that `doctor --func NAME` shows as traceable",
            names.join(", ")
        );
    }
    format!(
        "cannot trace here: {}. Remedy: boot a kernel with lockdown=none and CONFIG_KPROBES=y, or run inside the VM: `cargo xtask vm --kernel 7.2 -- damon-trace ...`",
        reasons.join("; ")
    )
}

pub fn render_text(d: &Diagnosis) -> String {
    use std::fmt::Write as _;
    let mut out = format!("damon-trace doctor — kernel {}\n", d.kernel_release);
    for c in &d.checks {
        let tag = match c.level {
            Level::Ok => "ok  ",
            Level::Warn => "warn",
            Level::Fail => "FAIL",
        };
        let _ = writeln!(out, "  {tag}  {:<11} {}", c.name, c.found);
        if let Some(r) = &c.remedy {
            let _ = writeln!(out, "        {:<11} → {r}", "");
        }
    }
    let _ = writeln!(out, "functions:");
    for f in &d.functions {
        let sym = match &f.kallsyms {
            SymbolPresence::Present => "yes".to_owned(),
            SymbolPresence::Absent => "no".to_owned(),
            SymbolPresence::ClonesOnly(c) => format!("inlined ({})", c.join(",")),
        };
        let ftrace = f.ftrace.map_or("?", |b| if b { "yes" } else { "no" });
        let _ = writeln!(
            out,
            "  {:<27} kallsyms {sym}  btf {}  ftrace {ftrace}",
            f.name,
            if f.btf { "yes" } else { "no" }
        );
        let _ = writeln!(out, "  {:<27} fentry/fexit: {}", "", f.fentry);
        let _ = writeln!(out, "  {:<27} kprobe/kretprobe: {}", "", f.kprobe);
    }
    let _ = writeln!(out, "verdict: {}", d.verdict);
    out
}

pub fn run(args: &DoctorArgs) -> anyhow::Result<ExitCode> {
    let functions = crate::selection::select_functions(&(&args.selection).into())?;
    let d = diagnose(&functions);
    let text = if args.json {
        serde_json::to_string_pretty(&d)? + "\n"
    } else {
        render_text(&d)
    };
    // Not print!: it panics when stdout is a closed pipe.
    std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes())?;
    Ok(if d.can_trace {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(list: &[u32]) -> u64 {
        list.iter().fold(0, |acc, &c| acc | 1u64 << c)
    }

    #[test]
    fn names_exactly_the_missing_capabilities() {
        assert!(has_caps(caps(&[CAP_BPF, CAP_PERFMON])).is_ok());
        assert!(has_caps(caps(&[CAP_SYS_ADMIN])).is_ok());
        assert_eq!(
            has_caps(0).expect_err("none"),
            MissingCaps(vec!["CAP_BPF", "CAP_PERFMON"])
        );
        let m = has_caps(caps(&[CAP_PERFMON])).expect_err("no bpf");
        assert_eq!(m, MissingCaps(vec!["CAP_BPF"]));
        assert!(m.remedy().contains("setcap cap_bpf+ep"), "{}", m.remedy());
        assert_eq!(
            has_caps(caps(&[CAP_BPF])).expect_err("no perfmon"),
            MissingCaps(vec!["CAP_PERFMON"])
        );
    }

    #[test]
    fn kernel_versions_and_the_memlock_cutoff() {
        assert_eq!(kernel_version("5.10.0-21-amd64"), Some((5, 10)));
        assert_eq!(kernel_version("7.2.0-rc3"), Some((7, 2)));
        assert_eq!(kernel_version("garbage"), None);
        assert!(
            memlock_check("6.12.1").is_none(),
            "5.11+ charges the memory cgroup"
        );
        assert!(memlock_check("5.10.0").is_some());
        assert!(memlock_needed() > u64::from(damon_common::DEFAULT_RING_BYTES));
    }

    #[test]
    fn leftovers_name_our_objects_and_stay_ok_without_them() {
        use crate::probe::inventory::BpfObject;
        let obj = |id, kind: &str, name: Option<&str>, ours| BpfObject {
            id,
            kind: kind.to_owned(),
            name: name.map(str::to_owned),
            program_id: None,
            ours,
        };
        let mut objects = BpfObjects {
            programs: vec![obj(3, "tracing", Some("iter_prog"), false)],
            ..BpfObjects::default()
        };
        let c = leftovers_check(&objects);
        assert_eq!(c.level, Level::Ok, "{c:?}");
        assert!(c.found.contains("1 programs, 0 maps, 0 links"), "{c:?}");
        objects
            .programs
            .push(obj(9, "tracing", Some("fentry_lock_tim"), true));
        objects.maps.push(obj(4, "ringbuf", Some("EVENTS"), true));
        let c = leftovers_check(&objects);
        assert_eq!(c.level, Level::Warn, "{c:?}");
        assert!(
            c.found.contains("program fentry_lock_tim (id 9, tracing)")
                && c.found.contains("map EVENTS (id 4, ringbuf)"),
            "{c:?}"
        );
        objects.error = Some("listing maps: Operation not permitted (os error 1)".to_owned());
        let c = leftovers_check(&objects);
        assert!(
            c.level == Level::Ok && c.found.contains("CAP_SYS_ADMIN"),
            "{c:?}"
        );
        objects.error = Some("listing maps: Bad address".to_owned());
        let c = leftovers_check(&objects);
        assert!(
            c.level == Level::Warn && c.found.contains("cannot list"),
            "{c:?}"
        );
    }
}
