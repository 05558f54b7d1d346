//! What `--attach auto` means on the running kernel: per function, the methods to try in
//! order, and the note that says why.
use damon_common::attach::{Hook, Timing};

use crate::{
    probe::facts::KernelFacts,
    trace::{Attach, AttachChoice, TracedFunction},
};

/// What `--attach auto` means for `func` on the running kernel, the cheapest method that is
/// exact there first (measured: README "Overhead", the `vm_exact` tests):
/// - preemptible kernels: a kprobe session, else kprobe/kretprobe; both run with preemption
///   disabled, while the kernel skips a trampoline program (fentry/fexit, fsession) on a CPU
///   while another task is preempted inside it. `damon_hot_score` in stream mode stays on
///   kprobe/kretprobe: its arguments do not fit in a kprobe session's cookie.
/// - other kernels: an fsession, else fentry/fexit (no task is preempted inside them there).
///
/// The others follow as fallbacks. The note says why, for the function's attach detail.
/// `streams`: each call goes to userspace as a record (its arguments with it).
pub(in crate::probe) fn resolve_auto(
    choice: AttachChoice,
    facts: &KernelFacts,
    streams: bool,
    func: &TracedFunction,
) -> (AttachOrder, Option<String>) {
    if let AttachChoice::Only(m) = choice {
        return (vec![m], None);
    }
    let args_lost = streams && func.as_builtin() == Some(damon_common::FunctionId::DamonHotScore);
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
            let preemption = facts.preemption();
            let model = preemption
                .model
                .as_deref()
                .unwrap_or("dynamic, model unknown");
            Some(if first == Attach::KprobeSession {
                format!(
                    "kprobe session chosen by --attach auto: the kernel is preemptible ({model}), \
                     where fentry/fexit and fsession runs are skipped while a task is preempted \
                     inside them; a kprobe session runs with preemption disabled, like kprobes, \
                     and keeps each call's entry time in its cookie, without a stamp map"
                )
            } else {
                let why_not_session = if facts.kprobe_session() {
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
fn auto_order(facts: &KernelFacts, args_lost: bool) -> AttachOrder {
    let (first, other) = if facts.preemption().preempts_trampolines() {
        (Hook::Kprobe, Hook::Trampoline)
    } else {
        (Hook::Trampoline, Hook::Kprobe)
    };
    let session = Attach::with(first, Timing::Cookie);
    let has_session = match session {
        Attach::KprobeSession => facts.kprobe_session(),
        Attach::Fsession => facts.fsession(),
        Attach::Fentry | Attach::Kprobe => false,
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
pub(in crate::probe) type AttachOrder = Vec<Attach>;

#[cfg(test)]
mod tests {
    use super::*;

    fn func(id: u32, symbol: &str) -> TracedFunction {
        TracedFunction {
            id,
            symbol: symbol.to_owned(),
        }
    }

    fn facts(preemptible: bool, kprobe_session: bool, fsession: bool) -> KernelFacts {
        let model = if preemptible { "full" } else { "none" };
        let preemption = crate::probe::facts::kernel::Preemption {
            model: Some(model.to_owned()),
            source: "test".to_owned(),
        };
        KernelFacts::known(preemption, None, true, kprobe_session, fsession)
    }

    #[test]
    fn explicit_attach_choices_need_no_kernel_facts() {
        let f = facts(true, true, true);
        let hot = TracedFunction::builtin(damon_common::FunctionId::DamonHotScore);
        for m in Attach::ALL {
            assert_eq!(
                resolve_auto(AttachChoice::Only(m), &f, true, &hot),
                (vec![m], None)
            );
        }
    }

    #[test]
    fn auto_picks_the_cheapest_exact_method_of_the_kernel() {
        use Attach::{Fentry, Fsession, Kprobe, KprobeSession};
        let order = |f: &KernelFacts, func: &TracedFunction| {
            resolve_auto(AttachChoice::Auto, f, true, func)
        };
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
        let kernel_mode = resolve_auto(AttachChoice::Auto, &facts(true, true, true), false, &hot);
        assert_eq!(kernel_mode.0, [KprobeSession, Kprobe, Fentry]);
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
