//! What `--attach auto` means on the running kernel: per function, the methods to try in
//! order, and the note that says why.
use crate::{
    probe::facts::KernelFacts,
    trace::{AttachChoice, AttachMethod, TracedFunction},
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
    use AttachMethod::{Fentry, Fsession, Kprobe, KprobeSession};
    if let AttachChoice::Only(m) = choice {
        return (vec![m], None);
    }
    let preemption = facts.preemption();
    if !preemption.preempts_trampolines() {
        return if facts.fsession() {
            (
                vec![Fsession, Fentry, Kprobe],
                Some(
                    "fsession chosen by --attach auto: probes are not preempted on this \
                     kernel, and an fsession keeps each call's entry time in its cookie, \
                     without fentry/fexit's stamp map"
                        .to_owned(),
                ),
            )
        } else {
            (vec![Fentry, Kprobe], None)
        };
    }
    let model = preemption
        .model
        .as_deref()
        .unwrap_or("dynamic, model unknown");
    let args_lost = streams && func.as_builtin() == Some(damon_common::FunctionId::DamonHotScore);
    if facts.kprobe_session() && !args_lost {
        return (
            vec![KprobeSession, Kprobe, Fentry],
            Some(format!(
                "kprobe session chosen by --attach auto: the kernel is preemptible ({model}), \
                 where fentry/fexit and fsession runs are skipped while a task is preempted \
                 inside them; a kprobe session runs with preemption disabled, like kprobes, and \
                 keeps each call's entry time in its cookie, without a stamp map"
            )),
        );
    }
    let why_not_session = if facts.kprobe_session() {
        "; not a kprobe session, whose cookie has no room for damon_hot_score's arguments in \
         stream mode"
    } else {
        ""
    };
    (
        vec![Kprobe, Fentry],
        Some(format!(
            "kprobe chosen by --attach auto: the kernel is preemptible ({model}), where \
             fentry/fexit runs are skipped while a task is preempted inside them; --attach \
             fentry to override{why_not_session}"
        )),
    )
}

/// The pair `--attach auto` tries first, by the preemption model alone (sessions aside: see
/// [`resolve_auto`]); `doctor` tells from it and the kernel's facts which pair auto ends up
/// with.
pub fn auto_first(preempts_trampolines: bool) -> AttachMethod {
    if preempts_trampolines {
        AttachMethod::Kprobe
    } else {
        AttachMethod::Fentry
    }
}

/// The methods to try for a function, in order: the first that attaches is used.
pub(in crate::probe) type AttachOrder = Vec<AttachMethod>;

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
        for m in AttachMethod::ALL {
            assert_eq!(
                resolve_auto(AttachChoice::Only(m), &f, true, &hot),
                (vec![m], None)
            );
        }
    }

    #[test]
    fn auto_picks_the_cheapest_exact_method_of_the_kernel() {
        use AttachMethod::{Fentry, Fsession, Kprobe, KprobeSession};
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
