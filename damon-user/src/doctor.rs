//! `damon-trace doctor`: can this machine trace the target functions, and if not, why.
//!
//! Every check reports what it found and, when it fails, the remedy. The same diagnosis runs
//! before `record` so that it fails fast with the cause instead of a raw errno.
use std::{path::Path, process::ExitCode};

use damon_common::FunctionId;
use serde::Serialize;

use crate::{
    cli::DoctorArgs,
    probe::{
        attach::{ProbeTrial, try_each},
        kernel::{self, CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN, Kallsyms, Lockdown, SymbolPresence},
    },
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
pub fn diagnose(functions: &[FunctionId]) -> Diagnosis {
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
    checks.push(if kprobes {
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

    let damon = Path::new("/sys/kernel/mm/damon/admin/kdamonds");
    checks.push(if damon.exists() {
        // nr_kdamonds is readable by root only.
        let found = match std::fs::read_to_string(damon.join("nr_kdamonds")) {
            Ok(n) => format!("DAMON sysfs present ({} kdamonds)", n.trim()),
            Err(e) => format!("DAMON sysfs present (number of kdamonds unreadable: {e})"),
        };
        check("damon", Level::Ok, found, None)
    } else {
        check(
            "damon",
            Level::Warn,
            "no /sys/kernel/mm/damon: DAMON functions will not be called",
            Some("use a kernel with CONFIG_DAMON_SYSFS=y"),
        )
    });

    let leftovers = crate::probe::attach::our_loaded_programs();
    if !leftovers.is_empty() {
        checks.push(check(
            "leftovers",
            Level::Warn,
            format!(
                "{} damon-trace programs are loaded now: {}",
                leftovers.len(),
                leftovers.join(", ")
            ),
            Some("another damon-trace is running, or one was killed while attaching"),
        ));
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
    let ftrace = ftrace.ok();
    let trials: Vec<ProbeTrial> = if privileged.is_ok() {
        try_each(functions)
    } else {
        Vec::new()
    };
    let diag_functions: Vec<FunctionDiagnosis> = functions
        .iter()
        .map(|&f| {
            let trial = trials.iter().find(|t| t.func == f);
            let fentry = trial.map_or_else(
                || "not tried (no privileges)".to_owned(),
                |t| t.fentry.clone(),
            );
            let kprobe = trial.map_or_else(
                || "not tried (no privileges)".to_owned(),
                |t| t.kprobe.clone(),
            );
            FunctionDiagnosis {
                name: f.symbol().to_owned(),
                kallsyms: kallsyms.presence(f.symbol()),
                btf: trial.is_some_and(|t| t.in_btf),
                ftrace: ftrace.as_ref().map(|s| s.contains(f.symbol())),
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
        functions: diag_functions,
        can_trace,
        verdict,
    }
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
        reasons.push(
            "no selected function could be attached (see the per-function errors)".to_owned(),
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
    let functions = crate::record::select_functions(&args.selection)?;
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
}
