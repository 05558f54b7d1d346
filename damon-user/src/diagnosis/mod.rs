//! Can this machine trace the selected functions, and if not, why: what the kernel allows
//! (BTF, lockdown, kprobes, ftrace, preemption, memlock), the privileges of this process, DAMON
//! and leftovers of earlier runs, and a real attach trial of each function.
//!
//! Every check reports what it found and, when it fails, the remedy. `doctor` prints the
//! diagnosis; `record`, `live` and `serve` run it first so that they fail fast with the cause
//! instead of a raw errno.
mod auto;
mod disturbance;
mod leftovers;
mod memlock;
pub mod privileges;
pub mod render;
mod session;

use std::{collections::HashSet, path::Path};

use serde::Serialize;

use crate::{
    damon::ScenarioLeftover,
    probe::{
        facts::{
            KernelFacts,
            kernel::{self, Kallsyms, Lockdown, SymbolPresence},
        },
        loader::{
            inventory::BpfObjects,
            session::selftest::SelfTest,
            trial::{ProbeTrial, try_each},
        },
    },
    trace::TracedFunction,
};
use auto::{AutoView, auto_check, refused_with_eperm};
use leftovers::{leftovers_check, settled_bpf_objects};
use memlock::memlock_check;
use privileges::{MissingCaps, privileges};
pub use render::render_text;

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
    /// What the kprobe-session self-test measured (the `session` check), when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_test: Option<crate::probe::loader::session::selftest::SelfTest>,
    /// The same for fsession (the `fsession` check).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fsession_test: Option<crate::probe::loader::session::selftest::SelfTest>,
}

/// What `doctor --leftovers` reports: the `leftovers` check alone, with the listing it judged.
#[derive(Debug, Serialize)]
pub struct Leftovers {
    pub kernel_release: String,
    pub checks: Vec<Check>,
    pub bpf_objects: BpfObjects,
    /// Whether no object of ours is loaded (and the listing worked).
    pub clean: bool,
}

/// The kernel's BPF objects, once those of ours that nobody holds are freed, and the
/// `leftovers` check on them; loads nothing.
pub fn leftovers() -> Leftovers {
    leftovers_of(
        settled_bpf_objects(),
        KernelFacts::get().identity().release.clone(),
    )
}

fn leftovers_of(bpf_objects: BpfObjects, kernel_release: String) -> Leftovers {
    let check = leftovers_check(&bpf_objects);
    Leftovers {
        kernel_release,
        clean: check.level == Level::Ok && bpf_objects.error.is_none(),
        checks: vec![check],
        bpf_objects,
    }
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
    use crate::timing::phase;
    // First, before anything here loads a program of its own (the trials below do).
    let bpf_objects = {
        let _t = phase("BPF objects listed (leftovers of earlier runs)");
        settled_bpf_objects()
    };
    let facts = phase("kernel facts: privileges, BTF, lockdown, kallsyms, preemption");
    let kernel_facts = KernelFacts::get();
    let ident = kernel_facts.identity().clone();
    let privileged = privileges();
    let btf = kernel_facts.btf();
    let mut checks = vec![privileges_check(&privileged), btf_check(btf)];
    let lockdown = kernel_facts.lockdown();
    checks.push(lockdown_check(lockdown));
    let kallsyms = Kallsyms::read().unwrap_or_default();
    let kprobes = kernel::kprobes_supported(&kallsyms);
    checks.push(kprobes_check(kprobes));
    checks.push(preemption_check(kernel_facts.preemption(), &ident.release));
    drop(facts);
    let others = phase("checks: DAMON, scenario, leftovers, memlock, tracefs");
    // The `attach` check goes here, once the trials below have run.
    let auto_at = checks.len();
    checks.push(damon_check());
    checks.push(scenario_check(crate::damon::scenario_leftover(
        &crate::damon::SysfsRoot::system(),
    )));
    checks.push(leftovers_check(&bpf_objects));
    checks.extend(memlock_check(&ident.release));
    let ftrace = kernel::ftrace_functions();
    checks.push(tracefs_check(&ftrace));
    checks.extend(ftrace_enabled_check());
    drop(others);
    let trials: Vec<ProbeTrial> = if privileged.is_ok() {
        let _t = phase("attach trials: each function's fentry and kprobe pair");
        try_each(functions)
    } else {
        Vec::new()
    };
    // Without trials (no privileges), BTF is still world-readable: read it for them.
    let parsed_btf = if trials.is_empty() && btf {
        crate::probe::facts::sysfiles::aya_btf()
    } else {
        None
    };
    let diag_functions = function_diagnoses(
        functions,
        &trials,
        &kallsyms,
        ftrace.ok().as_ref(),
        parsed_btf.as_deref(),
    );
    let (sessions, session_test, fsession_test) = {
        let _t = phase("self-tests: kprobe session, fsession");
        session::session_checks(privileged.is_ok(), btf)
    };
    let holds = |t: &Option<SelfTest>| t.as_ref().is_some_and(SelfTest::holds);
    checks.insert(
        auto_at,
        auto_check(&AutoView::of(
            kernel_facts,
            kprobes,
            &diag_functions,
            (holds(&session_test), holds(&fsession_test)),
        )),
    );
    checks.extend(sessions);
    checks.push({
        let _t = phase("disturbance check");
        disturbance::disturbance_check(privileged.is_ok())
    });
    let can_trace = diag_functions.iter().any(|f| f.traceable);
    let verdict = verdict(&checks, &diag_functions, lockdown, kprobes, can_trace);
    Diagnosis {
        kernel_release: ident.release,
        checks,
        bpf_objects,
        functions: diag_functions,
        can_trace,
        verdict,
        session_test,
        fsession_test,
    }
}

fn privileges_check(privileged: &Result<String, MissingCaps>) -> Check {
    match privileged {
        Ok(found) => check("privileges", Level::Ok, found, None),
        Err(missing) => Check {
            name: "privileges",
            level: Level::Fail,
            found: missing.found(),
            remedy: Some(missing.remedy()),
        },
    }
}

fn btf_check(btf: bool) -> Check {
    if btf {
        check("btf", Level::Ok, "/sys/kernel/btf/vmlinux present", None)
    } else {
        check(
            "btf",
            Level::Warn,
            "no /sys/kernel/btf/vmlinux: fentry/fexit impossible",
            Some("use a kernel built with CONFIG_DEBUG_INFO_BTF=y; kprobes still work"),
        )
    }
}

fn lockdown_check(lockdown: Option<Lockdown>) -> Check {
    match lockdown {
        Some(Lockdown::Confidentiality) => check(
            "lockdown",
            Level::Fail,
            "lockdown=confidentiality forbids fentry/fexit and kprobe programs (they read kernel memory)",
            Some(
                "boot with lockdown=none (or with Secure Boot off), or trace in a VM whose kernel is not locked down; run `damon-trace doctor` there",
            ),
        ),
        Some(Lockdown::Integrity) => check(
            "lockdown",
            Level::Ok,
            "lockdown=integrity (does not forbid tracing programs by itself)",
            None,
        ),
        Some(Lockdown::None) => check("lockdown", Level::Ok, "lockdown=none", None),
        None => check(
            "lockdown",
            Level::Ok,
            "no lockdown LSM (or securityfs unavailable)",
            None,
        ),
    }
}

/// `kprobes`: the kernel has them (register_kprobe in kallsyms); they may still be disarmed.
fn kprobes_check(kprobes: bool) -> Check {
    let kprobes_off = std::fs::read_to_string(KPROBES_ENABLED).is_ok_and(|v| v.trim() == "0");
    if kprobes && kprobes_off {
        check(
            "kprobes",
            Level::Warn,
            format!(
                "kprobes are disabled globally ({KPROBES_ENABLED} is 0): kprobe probes attach but never fire"
            ),
            Some(
                "echo 1 > /sys/kernel/debug/kprobes/enabled (fentry, the default, is not affected)",
            ),
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
    }
}

/// A kdamond an unfinished scenario left configured (see [`crate::damon::scenario_leftover`]).
fn scenario_check(leftover: Option<ScenarioLeftover>) -> Check {
    match leftover {
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
    }
}

/// `ftrace`: the functions ftrace can patch (fentry needs them), or why they cannot be read.
fn tracefs_check(ftrace: &Result<HashSet<String>, String>) -> Check {
    match ftrace {
        Ok(set) => check(
            "tracefs",
            Level::Ok,
            format!("{} functions available to ftrace", set.len()),
            None,
        ),
        // EACCES: tracefs is root's (mode 0700), as for a user holding only CAP_BPF and
        // CAP_PERFMON; EPERM: a security policy.
        Err(e) if e.contains(&format!("os error {}", libc::EACCES)) => check(
            "tracefs",
            Level::Warn,
            e.clone(),
            Some(
                "tracefs is readable by root only: which functions ftrace can patch (fentry \
                 needs that) is unknown until an attach is tried (`ftrace ?` below); an attach \
                 that fails says why",
            ),
        ),
        Err(e) => check(
            "tracefs",
            Level::Warn,
            e.clone(),
            Some("fentry needs ftrace; an EPERM here means a security policy restricts tracing"),
        ),
    }
}

/// A warning only when function tracing is switched off.
fn ftrace_enabled_check() -> Option<Check> {
    std::fs::read_to_string(FTRACE_ENABLED)
        .is_ok_and(|v| v.trim() == "0")
        .then(|| {
            check(
                "ftrace",
                Level::Warn,
                format!(
                    "function tracing is off ({FTRACE_ENABLED} is 0): fentry/fexit probes \
                     attach but never fire"
                ),
                Some("sysctl kernel.ftrace_enabled=1, or trace with --attach kprobe"),
            )
        })
}

/// Each selected function: where it appears, and what its attach trial (if any) gave. `btf`
/// answers "in the kernel's BTF?" for a function without a trial.
fn function_diagnoses(
    functions: &[TracedFunction],
    trials: &[ProbeTrial],
    kallsyms: &Kallsyms,
    ftrace: Option<&HashSet<String>>,
    btf: Option<&aya::Btf>,
) -> Vec<FunctionDiagnosis> {
    functions
        .iter()
        .map(|f| {
            let trial = trials.iter().find(|t| t.func == *f);
            let tried = |result: fn(&ProbeTrial) -> &String| {
                trial.map_or_else(
                    || "not tried (no privileges)".to_owned(),
                    |t| result(t).clone(),
                )
            };
            let fentry = tried(|t| &t.fentry);
            let kprobe = tried(|t| &t.kprobe);
            FunctionDiagnosis {
                name: f.symbol.clone(),
                kallsyms: kallsyms.presence(&f.symbol),
                btf: trial.map_or_else(
                    || btf.is_some_and(|b| kernel::btf_has_function(b, &f.symbol)),
                    |t| t.in_btf,
                ),
                ftrace: ftrace.map(|s| s.contains(&f.symbol)),
                traceable: fentry == "ok" || kprobe == "ok",
                fentry,
                kprobe,
            }
        })
        .collect()
}

/// The preemption model and what it means for each attach method (see `Preemption`); the
/// `attach` check says which pair `--attach auto` then really gets.
fn preemption_check(p: &kernel::Preemption, release: &str) -> Check {
    let model = p.model.as_deref().unwrap_or("unknown");
    let kprobe_skips = if crate::probe::loader::skips::kernel_counts_kprobe_skips(release) {
        "the kernel counts every probe run it skips (shown as skipped entries/exits)"
    } else {
        "this kernel (< 6.7) counts skipped fentry/fexit runs but not skipped kprobe runs"
    };
    let found = if p.preempts_trampolines() {
        format!(
            "preemption model {model} ({}): a task can be preempted inside a fentry/fexit probe, \
             and the kernel then skips that probe for the other tasks on the CPU; kprobe probes \
             run with preemption disabled, so --attach auto tries kprobe first; {kprobe_skips}",
            p.source
        )
    } else {
        format!(
            "preemption model {model} ({}): probes are not preempted, so --attach auto tries \
             fentry/fexit (the cheaper pair) first; {kprobe_skips}",
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
    let kdamonds = Path::new(crate::probe::facts::DAMON_KDAMONDS);
    if !KernelFacts::get().damon() {
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

/// One sentence: whether tracing works, else the main reason and the remedy.
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
    // A process that may not trace, or may not lock its maps: the remedy is on this side.
    for name in ["privileges", "memlock"] {
        if let Some(c) = checks
            .iter()
            .find(|c| c.name == name && c.level == Level::Fail)
        {
            return format!(
                "cannot trace: {}; {}",
                c.found,
                c.remedy.as_deref().unwrap_or("")
            );
        }
    }
    let fentry_eperm = funcs.iter().any(|f| refused_with_eperm(&f.fentry));
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
        "cannot trace here: {}. Remedy: boot a kernel with lockdown=none and CONFIG_KPROBES=y (Debian's stock kernels without Secure Boot lockdown), or trace in a VM running one; `damon-trace doctor` there says what works",
        reasons.join("; ")
    )
}

#[cfg(test)]
mod tests;
