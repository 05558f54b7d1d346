//! What `--attach auto` means on the running kernel: per function, the methods to try in
//! order, and the note that says why.
use aya::Btf;
use damon_common::attach::{Hook, Timing};

use crate::trace::{Attach, AttachChoice, TracedFunction};

/// The kernel's facts `--attach auto` decides by, read once per session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct AutoFacts {
    /// A task can be preempted inside a trampoline program (fentry/fexit, fsession).
    pub preemptible: bool,
    /// The preemption model, as the note names it.
    pub model: Option<String>,
    /// The kernel has kprobe sessions (the kfuncs are in its BTF: Linux ≥ 6.10).
    pub kprobe_session: bool,
    /// The kernel has fsessions (Linux 7.x).
    pub fsession: bool,
    /// Each call goes to userspace as a record (its arguments with it).
    pub streams: bool,
}

impl AutoFacts {
    pub(super) fn read(btf: Option<&Btf>, streams: bool) -> AutoFacts {
        let _t = crate::timing::phase("auto facts: preemption, kfuncs in BTF, fsession");
        let p = crate::probe::kernel::Preemption::read();
        AutoFacts {
            preemptible: p.preempts_trampolines(),
            model: p.model,
            kprobe_session: crate::probe::session::Kfuncs::resolve(btf).is_ok(),
            fsession: crate::probe::session::has_fsession(),
            streams,
        }
    }
}

/// What `--attach auto` means for `func` on the running kernel, the cheapest method that is
/// exact there first (measured: README "Overhead", the `vm_exact` tests):
/// - preemptible kernels: a kprobe session, else kprobe/kretprobe; both run with preemption
///   disabled, while the kernel skips a trampoline program (fentry/fexit, fsession) on a CPU
///   while another task is preempted inside it. `damon_hot_score` in stream mode stays on
///   kprobe/kretprobe: its arguments do not fit in a kprobe session's cookie.
/// - other kernels: an fsession, else fentry/fexit (no task is preempted inside them there).
///
/// The others follow as fallbacks. The note says why, for the function's attach detail.
pub(super) fn resolve_auto(
    choice: AttachChoice,
    facts: &AutoFacts,
    func: &TracedFunction,
) -> (AttachOrder, Option<String>) {
    if let AttachChoice::Only(m) = choice {
        return (vec![m], None);
    }
    let args_lost =
        facts.streams && func.as_builtin() == Some(damon_common::FunctionId::DamonHotScore);
    let order = auto_order(facts, args_lost);
    let note = match order[0] {
        Attach::Fsession => Some(
            "fsession chosen by --attach auto: probes are not preempted on this kernel, and an \
             fsession keeps each call's entry time in its cookie, without fentry/fexit's stamp \
             map"
            .to_owned(),
        ),
        Attach::Fentry => None,
        first => {
            let model = facts.model.as_deref().unwrap_or("dynamic, model unknown");
            Some(if first == Attach::KprobeSession {
                format!(
                    "kprobe session chosen by --attach auto: the kernel is preemptible ({model}), \
                     where fentry/fexit and fsession runs are skipped while a task is preempted \
                     inside them; a kprobe session runs with preemption disabled, like kprobes, \
                     and keeps each call's entry time in its cookie, without a stamp map"
                )
            } else {
                let why_not_session = if facts.kprobe_session {
                    "; not a kprobe session, whose cookie has no room for damon_hot_score's \
                     arguments in stream mode"
                } else {
                    ""
                };
                format!(
                    "kprobe chosen by --attach auto: the kernel is preemptible ({model}), where \
                     fentry/fexit runs are skipped while a task is preempted inside them; \
                     --attach fentry to override{why_not_session}"
                )
            })
        }
    };
    (order, note)
}

/// Auto's order from the table: the hook that is exact on this kernel first (a kprobe's on a
/// preemptible one, else the cheaper trampoline); its session method if the kernel has it (and,
/// `args_lost`, its cookie carries the arguments the records need), then that hook's stamp
/// pair, then the other hook's stamp pair.
fn auto_order(facts: &AutoFacts, args_lost: bool) -> AttachOrder {
    let (first, other) = if facts.preemptible {
        (Hook::Kprobe, Hook::Trampoline)
    } else {
        (Hook::Trampoline, Hook::Kprobe)
    };
    let session = Attach::with(first, Timing::Cookie);
    let has_session = match session {
        Attach::KprobeSession => facts.kprobe_session,
        Attach::Fsession => facts.fsession,
        _ => false,
    } && (session.facts().carries_args || !args_lost);
    has_session
        .then_some(session)
        .into_iter()
        .chain([
            Attach::with(first, Timing::Stamp),
            Attach::with(other, Timing::Stamp),
        ])
        .collect()
}

/// The pair `--attach auto` tries first, by the preemption model alone (sessions aside: see
/// [`resolve_auto`]); `doctor` tells from it and the kernel's facts which pair auto ends up
/// with.
pub fn auto_first(preempts_trampolines: bool) -> Attach {
    let hook = if preempts_trampolines {
        Hook::Kprobe
    } else {
        Hook::Trampoline
    };
    Attach::with(hook, Timing::Stamp)
}

/// The methods to try for a function, in order: the first that attaches is used.
pub(super) type AttachOrder = Vec<Attach>;

#[cfg(test)]
mod tests {
    use super::*;

    fn func(id: u32, symbol: &str) -> TracedFunction {
        TracedFunction {
            id,
            symbol: symbol.to_owned(),
        }
    }

    fn facts(preemptible: bool, kprobe_session: bool, fsession: bool) -> AutoFacts {
        AutoFacts {
            preemptible,
            model: Some("full".to_owned()),
            kprobe_session,
            fsession,
            streams: true,
        }
    }

    #[test]
    fn explicit_attach_choices_need_no_kernel_facts() {
        let f = facts(true, true, true);
        let hot = TracedFunction::builtin(damon_common::FunctionId::DamonHotScore);
        for m in Attach::ALL {
            assert_eq!(
                resolve_auto(AttachChoice::Only(m), &f, &hot),
                (vec![m], None)
            );
        }
    }

    #[test]
    fn auto_picks_the_cheapest_exact_method_of_the_kernel() {
        use Attach::{Fentry, Fsession, Kprobe, KprobeSession};
        let order =
            |f: &AutoFacts, func: &TracedFunction| resolve_auto(AttachChoice::Auto, f, func);
        let slot = func(4, "vfs_read");
        let hot = TracedFunction::builtin(damon_common::FunctionId::DamonHotScore);
        // 7.x preemptible: the kprobe session; 6.1 preempt=full: kprobes.
        let (o, note) = order(&facts(true, true, true), &slot);
        assert_eq!(o, [KprobeSession, Kprobe, Fentry]);
        assert!(note.unwrap().starts_with(
            "kprobe session chosen by --attach auto: the kernel is preemptible (full)"
        ));
        let (o, note) = order(&facts(true, false, false), &slot);
        assert_eq!(o, [Kprobe, Fentry]);
        assert!(!note.unwrap().contains("session"));
        // damon_hot_score's arguments need kprobes in stream mode, not in kernel mode.
        let (o, note) = order(&facts(true, true, true), &hot);
        assert_eq!(o, [Kprobe, Fentry]);
        assert!(
            note.unwrap()
                .contains("no room for damon_hot_score's arguments")
        );
        let kernel_mode = AutoFacts {
            streams: false,
            ..facts(true, true, true)
        };
        assert_eq!(order(&kernel_mode, &hot).0, [KprobeSession, Kprobe, Fentry]);
        // Not preemptible: the fsession where the kernel has it, fentry elsewhere.
        assert_eq!(
            order(&facts(false, true, true), &hot).0,
            [Fsession, Fentry, Kprobe]
        );
        assert_eq!(
            order(&facts(false, true, false), &slot),
            (vec![Fentry, Kprobe], None)
        );
    }
}
