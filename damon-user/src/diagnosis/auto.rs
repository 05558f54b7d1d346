//! What `--attach auto` does on this kernel: the pair it tries first (see
//! [`crate::probe::loader::auto::auto_first`]) and whether that pair, the other one or neither can
//! attach here, from the kernel's facts and the trial attaches. The preemption model alone
//! says which pair comes first, not which one attaches: on a kernel without kprobes a
//! preemptible kernel still ends up on fentry/fexit, or on nothing.
use super::{Check, FunctionDiagnosis, Level, check};
use crate::{
    probe::{
        facts::{KernelFacts, kernel::Lockdown},
        loader::auto::auto_first,
    },
    trace::Attach,
};

/// What the answer rests on, as `diagnose` found it: a view of the kernel's facts
/// ([`KernelFacts`]) with doctor's own findings (kprobes in kallsyms, the trials, the
/// self-tests).
pub(super) struct AutoView<'a> {
    /// A task can be preempted inside a fentry/fexit probe
    /// ([`crate::probe::facts::kernel::Preemption::preempts_trampolines`]).
    pub preempts_trampolines: bool,
    pub lockdown: Option<Lockdown>,
    /// /sys/kernel/btf/vmlinux exists (fentry/fexit need it).
    pub btf: bool,
    /// The kernel has kprobes (CONFIG_KPROBES).
    pub kprobes: bool,
    /// The selected functions with their trial attaches ("not tried" without privileges).
    pub functions: &'a [FunctionDiagnosis],
    /// doctor's kprobe-session self-test held here (false: absent, failed or not run).
    pub kprobe_session: bool,
    /// Its fsession self-test held here.
    pub fsession: bool,
}

impl<'a> AutoView<'a> {
    /// The kernel's facts with doctor's findings: kprobes, the trials and whether each
    /// self-test held.
    pub(super) fn of(
        kernel: &KernelFacts,
        kprobes: bool,
        functions: &'a [FunctionDiagnosis],
        (kprobe_session, fsession): (bool, bool),
    ) -> AutoView<'a> {
        AutoView {
            preempts_trampolines: kernel.preemption().preempts_trampolines(),
            lockdown: kernel.lockdown(),
            btf: kernel.btf(),
            kprobes,
            functions,
            kprobe_session,
            fsession,
        }
    }
}

/// Whether the kernel lets a probe pair attach at all.
#[derive(Debug, PartialEq, Eq)]
enum Allowed {
    Yes,
    /// The kernel refuses the pair whatever the function: why, and the kernel that would not
    /// (completes "boot …").
    No {
        cause: String,
        remedy: &'static str,
    },
    /// Not known: no trial attached the pair and none was refused by the kernel itself (no
    /// privileges, or each failed for a reason of its own function).
    Unknown,
}

/// Whether a trial's error is the kernel refusing the program type: EPERM from a privileged
/// process means lockdown or another security policy, not the function.
pub(super) fn refused_with_eperm(result: &str) -> bool {
    result.contains("Operation not permitted") || result.contains("EPERM")
}

fn pair(m: Attach) -> &'static str {
    m.probes()
}

/// How a kprobe attach refused under `kernel.perf_event_paranoid` > 2 begins its reason.
const PARANOID_REFUSAL: &str = "kernel.perf_event_paranoid is ";

const LOCKDOWN_REMEDY: &str = "a kernel with lockdown=none (Secure Boot off)";

fn allowed(m: Attach, f: &AutoView) -> Allowed {
    let no = |cause: String, remedy| Allowed::No { cause, remedy };
    let confidential = f.lockdown == Some(Lockdown::Confidentiality);
    match m {
        Attach::Fentry if confidential => {
            return no(
                "lockdown=confidentiality forbids fentry/fexit".to_owned(),
                LOCKDOWN_REMEDY,
            );
        }
        Attach::Fentry if !f.btf => {
            return no(
                "the kernel has no BTF (/sys/kernel/btf/vmlinux), which fentry/fexit need"
                    .to_owned(),
                "a kernel with CONFIG_DEBUG_INFO_BTF=y",
            );
        }
        // Before lockdown: without kprobes, lifting lockdown would not help.
        Attach::Kprobe if !f.kprobes => {
            return no(
                "the kernel has no kprobes (CONFIG_KPROBES off)".to_owned(),
                "a kernel with CONFIG_KPROBES=y",
            );
        }
        Attach::Kprobe if confidential => {
            return no(
                "lockdown=confidentiality forbids kprobe/kretprobe".to_owned(),
                LOCKDOWN_REMEDY,
            );
        }
        _ => {}
    }
    let results: Vec<&str> = f
        .functions
        .iter()
        .map(|func| match m {
            Attach::Fentry => func.fentry.as_str(),
            Attach::Kprobe => func.kprobe.as_str(),
            // No per-function trial: doctor's `session` and `fsession` checks test the kernel.
            Attach::KprobeSession | Attach::Fsession => "not tried",
        })
        .collect();
    if results.contains(&"ok") {
        Allowed::Yes
    } else if results.iter().any(|r| refused_with_eperm(r)) {
        no(
            format!(
                "the kernel refuses {} programs with EPERM (lockdown or another security policy)",
                pair(m)
            ),
            "a kernel whose security policy allows tracing programs (lockdown=none)",
        )
    } else if results.iter().any(|r| r.contains(PARANOID_REFUSAL)) {
        // Named by the attach's own error (probe::loader::attach::kprobe_failure).
        no(
            format!(
                "kernel.perf_event_paranoid above 2 refuses {} to a process without \
                 CAP_SYS_ADMIN (a Debian and Ubuntu patch)",
                pair(m)
            ),
            "with kernel.perf_event_paranoid=2 (sysctl), or run as root",
        )
    } else {
        Allowed::Unknown
    }
}

/// The `attach` check: what `--attach auto` ends up with on this kernel, and why.
pub(super) fn auto_check(f: &AutoView) -> Check {
    // Where the session self-test held, auto uses that session (`probe::loader::auto::resolve_auto`).
    if f.preempts_trampolines && f.kprobe_session {
        let pairs = pairs_check(f);
        return check(
            "attach",
            Level::Ok,
            format!(
                "--attach auto uses a kprobe session here (the self-test below held): the kernel \
                 is preemptible, and a kprobe session runs with preemption disabled and keeps \
                 each call's entry time in its cookie, without a stamp map; for damon_hot_score \
                 in stream mode, whose arguments do not fit in the cookie: {}",
                pairs.found
            ),
            None,
        );
    }
    if !f.preempts_trampolines && f.fsession {
        return check(
            "attach",
            Level::Ok,
            "--attach auto uses an fsession here (the self-test below held): probes are not \
             preempted on this kernel, and an fsession keeps each call's entry time in its \
             cookie, without fentry/fexit's stamp map",
            None,
        );
    }
    pairs_check(f)
}

/// What `--attach auto` ends up with among the probe pairs (no session here, or a function
/// that a session does not suit).
fn pairs_check(f: &AutoView) -> Check {
    let first = auto_first(f.preempts_trampolines);
    let second = match first {
        Attach::Fentry => Attach::Kprobe,
        _ => Attach::Fentry,
    };
    let order = match first {
        Attach::Kprobe | Attach::KprobeSession | Attach::Fsession => {
            "kprobe/kretprobe first, as the kernel is preemptible and skips a fentry/fexit run \
             while a task is preempted inside it"
        }
        Attach::Fentry => "fentry/fexit first, the cheaper pair, as probes are not preempted here",
    };
    let (a, b) = (pair(first), pair(second));
    match (allowed(first, f), allowed(second, f)) {
        (Allowed::Yes, _) => check(
            "attach",
            Level::Ok,
            format!("--attach auto uses {a} here (it tries {order})"),
            None,
        ),
        (Allowed::No { cause, .. }, Allowed::Yes) => check(
            "attach",
            Level::Ok,
            format!("--attach auto falls back to {b} here: it tries {order}, but {cause}"),
            None,
        ),
        (
            Allowed::No {
                cause: c1,
                remedy: r1,
            },
            Allowed::No {
                cause: c2,
                remedy: r2,
            },
        ) => {
            let remedy = if r1 == r2 {
                format!("boot {r1}")
            } else {
                format!("boot {r1}, or {r2}")
            };
            check(
                "attach",
                Level::Fail,
                format!("--attach auto can attach nothing here: {c1}; {c2}"),
                Some(&format!("{remedy}; or trace in a VM running such a kernel")),
            )
        }
        // No trial told about one of them (no privileges, or every function failed for a
        // reason of its own): the order, and what is known.
        (x, y) => {
            let mut found = format!("--attach auto tries {order}, then {b}");
            let mut unknown = Vec::new();
            for (m, state) in [(a, x), (b, y)] {
                match state {
                    Allowed::Yes => found.push_str(&format!("; {m} attaches")),
                    Allowed::No { cause, .. } => found.push_str(&format!("; {cause}")),
                    Allowed::Unknown => unknown.push(m),
                }
            }
            found.push_str(&format!(
                "; no trial attach tells whether {} attaches here (see the functions below)",
                unknown.join(" or ")
            ));
            check("attach", Level::Ok, found, None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::facts::kernel::SymbolPresence;

    fn tried(fentry: &str, kprobe: &str) -> FunctionDiagnosis {
        FunctionDiagnosis {
            name: "lock_timer_base".to_owned(),
            kallsyms: SymbolPresence::Present,
            btf: true,
            ftrace: None,
            fentry: fentry.to_owned(),
            kprobe: kprobe.to_owned(),
            traceable: fentry == "ok" || kprobe == "ok",
        }
    }

    /// The development host (DESIGN.md): a preemptible 6.18 without CONFIG_KPROBES that
    /// refuses fentry loads with EPERM although lockdown reports `integrity`.
    const HOST_FENTRY: &str = "Operation not permitted (os error 1) — the kernel refused: \
                               lockdown or another security policy, or missing CAP_BPF/CAP_PERFMON";
    const NO_KPROBES: &str = "kernel has no kprobes (CONFIG_KPROBES off)";

    /// The host's facts, with `functions` as the trials.
    fn host(functions: &[FunctionDiagnosis]) -> AutoView<'_> {
        AutoView {
            preempts_trampolines: true,
            lockdown: Some(Lockdown::Integrity),
            btf: true,
            kprobes: false,
            functions,
            kprobe_session: false,
            fsession: false,
        }
    }

    #[test]
    fn a_session_whose_self_test_held_is_what_auto_uses() {
        let preemptible = AutoView {
            kprobe_session: true,
            fsession: true,
            ..host(&[])
        };
        let c = auto_check(&preemptible);
        assert_eq!(c.level, Level::Ok);
        assert!(
            c.found
                .starts_with("--attach auto uses a kprobe session here"),
            "{}",
            c.found
        );
        let not = AutoView {
            preempts_trampolines: false,
            ..preemptible
        };
        assert!(
            auto_check(&not)
                .found
                .starts_with("--attach auto uses an fsession here")
        );
        // A session that did not hold (or is absent) leaves the pairs' answer.
        let absent = AutoView {
            preempts_trampolines: false,
            fsession: false,
            ..not
        };
        assert!(!auto_check(&absent).found.contains("session"));
    }

    /// The check of `facts`, which must be at `level`.
    fn at(level: Level, facts: AutoView) -> Check {
        let c = auto_check(&facts);
        assert_eq!(c.level, level, "{c:?}");
        c
    }

    #[test]
    fn a_kernel_without_kprobes_that_refuses_fentry_attaches_nothing() {
        let funcs = [tried(HOST_FENTRY, NO_KPROBES)];
        let c = at(Level::Fail, host(&funcs));
        assert_eq!(
            c.found,
            "--attach auto can attach nothing here: the kernel has no kprobes (CONFIG_KPROBES \
             off); the kernel refuses fentry/fexit programs with EPERM (lockdown or another \
             security policy)"
        );
        assert_eq!(
            c.remedy.as_deref(),
            Some(
                "boot a kernel with CONFIG_KPROBES=y, or a kernel whose security policy allows \
                 tracing programs (lockdown=none); or trace in a VM running such a kernel"
            )
        );
        // The same on a kernel that is not preemptible: only the order of the causes changes.
        let not_preemptible = AutoView {
            preempts_trampolines: false,
            ..host(&funcs)
        };
        let c = at(Level::Fail, not_preemptible);
        assert!(
            c.found
                .contains("nothing here: the kernel refuses fentry/fexit"),
            "{c:?}"
        );
        // lockdown=confidentiality forbids both, whatever the trials; one remedy.
        let confidential = AutoView {
            lockdown: Some(Lockdown::Confidentiality),
            kprobes: true,
            ..host(&[])
        };
        let c = at(Level::Fail, confidential);
        assert_eq!(
            (c.found.as_str(), c.remedy.as_deref()),
            (
                "--attach auto can attach nothing here: lockdown=confidentiality forbids \
                 kprobe/kretprobe; lockdown=confidentiality forbids fentry/fexit",
                Some(
                    "boot a kernel with lockdown=none (Secure Boot off); or trace in a VM \
                     running such a kernel"
                )
            )
        );
    }

    #[test]
    fn auto_says_which_pair_it_ends_up_with() {
        let both = [tried("ok", "ok")];
        let guest = |preempts_trampolines| AutoView {
            preempts_trampolines,
            kprobes: true,
            lockdown: None,
            ..host(&both)
        };
        // Debian 7.2 (preemptible) and 6.12 (not): kprobe and fentry.
        let found = at(Level::Ok, guest(true)).found;
        assert!(
            found.starts_with(
                "--attach auto uses kprobe/kretprobe here (it tries kprobe/kretprobe first, as \
                 the kernel is preemptible"
            ),
            "{found}"
        );
        let found = at(Level::Ok, guest(false)).found;
        assert!(
            found.starts_with("--attach auto uses fentry/fexit here"),
            "{found}"
        );
        // Preemptible without kprobes, fentry allowed: the fallback, and why.
        let fentry_only = [tried("ok", NO_KPROBES)];
        let found = at(Level::Ok, host(&fentry_only)).found;
        assert!(
            found.starts_with("--attach auto falls back to fentry/fexit here: it tries kprobe")
                && found.ends_with("but the kernel has no kprobes (CONFIG_KPROBES off)"),
            "{found}"
        );
        // kprobes refused under perf_event_paranoid=3 (CAP_BPF+CAP_PERFMON, no CAP_SYS_ADMIN):
        // the fallback, naming the setting.
        let paranoid = [tried(
            "ok",
            "Permission denied (os error 13) — kernel.perf_event_paranoid is 3: this kernel \
             refuses perf_event_open",
        )];
        let found = at(
            Level::Ok,
            AutoView {
                kprobes: true,
                ..host(&paranoid)
            },
        )
        .found;
        assert!(
            found.starts_with("--attach auto falls back to fentry/fexit here: it tries kprobe")
                && found.ends_with(
                    "but kernel.perf_event_paranoid above 2 refuses kprobe/kretprobe to a \
                     process without CAP_SYS_ADMIN (a Debian and Ubuntu patch)"
                ),
            "{found}"
        );
        // No trial (no privileges): the order and what is known, no claim about the rest.
        let untried = [tried(
            "not tried (no privileges)",
            "not tried (no privileges)",
        )];
        let found = at(
            Level::Ok,
            AutoView {
                kprobes: true,
                ..host(&untried)
            },
        )
        .found;
        assert!(
            found.starts_with("--attach auto tries kprobe/kretprobe first")
                && found.ends_with(
                    "; no trial attach tells whether kprobe/kretprobe or fentry/fexit attaches \
                     here (see the functions below)"
                ),
            "{found}"
        );
        let found = at(Level::Ok, host(&untried)).found;
        assert!(
            found.contains(
                ", then fentry/fexit; the kernel has no kprobes (CONFIG_KPROBES off); no trial \
                 attach tells whether fentry/fexit attaches"
            ),
            "{found}"
        );
    }
}
