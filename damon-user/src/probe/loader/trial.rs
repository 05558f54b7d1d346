//! `doctor`'s trial attach: each function's fentry and kprobe pairs really attached, then
//! detached at once.
use aya::{Btf, Ebpf, EbpfLoader};
use damon_common::MAP_EVENTS;

use crate::probe::{
    facts::kernel::{Kallsyms, SymbolPresence, btf_has_function, kprobes_supported},
    loader::{
        attach::{attach_fentry, attach_kprobe, fentry_failure, kprobe_failure, unload_pair},
        programs::EBPF_OBJECT,
    },
};
use crate::trace::{Attach, TracedFunction};

/// What really attaching one function's probe pairs gave (for `doctor`).
#[derive(Debug, Clone)]
pub struct ProbeTrial {
    pub func: TracedFunction,
    pub in_btf: bool,
    /// "ok" or the error.
    pub fentry: String,
    pub kprobe: String,
}

/// Attaches and immediately detaches each function's fentry and kprobe pairs, so the diagnosis
/// reports what the kernel really allows rather than a guess.
pub fn try_each(functions: &[TracedFunction]) -> Vec<ProbeTrial> {
    let btf = crate::probe::facts::sysfiles::aya_btf();
    let object = crate::timing::phase("object: ELF parsed, maps created (EbpfLoader::load)");
    let mut loaded = EbpfLoader::new()
        .btf(btf.as_deref())
        .map_max_entries(MAP_EVENTS, 4096)
        .load(EBPF_OBJECT)
        .map_err(|e| format!("creating BPF maps failed: {e}"));
    drop(object);
    let kallsyms = Kallsyms::read().unwrap_or_default();
    let mut trials = Vec::new();
    for func in functions {
        let in_btf = btf
            .as_ref()
            .is_some_and(|b| btf_has_function(b, &func.symbol));
        let present = kallsyms.presence(&func.symbol) == SymbolPresence::Present;
        let (fentry, kprobe) = match (&mut loaded, present) {
            (Err(e), _) => (e.clone(), e.clone()),
            (Ok(_), false) => {
                let why = not_present(&kallsyms, &func.symbol);
                (why.clone(), why)
            }
            (Ok(bpf), true) => (
                try_fentry(bpf, func, btf.as_deref(), in_btf),
                try_kprobe(bpf, func, &kallsyms),
            ),
        };
        trials.push(ProbeTrial {
            func: func.clone(),
            in_btf,
            fentry,
            kprobe,
        });
    }
    trials
}

/// Why a function that is not in kallsyms as itself cannot be attached: inlined, or absent
/// (with the closest name the kernel has).
fn not_present(kallsyms: &Kallsyms, symbol: &str) -> String {
    match kallsyms.presence(symbol) {
        SymbolPresence::ClonesOnly(c) => format!(
            "inlined: only compiler clones exist ({}); a clone can be traced by \
             its full name with kprobes",
            c.join(", ")
        ),
        _ => match kallsyms.closest(symbol) {
            Some(c) => format!("function not in /proc/kallsyms; did you mean `{c}`?"),
            None => "function not in /proc/kallsyms".to_owned(),
        },
    }
}

/// Attaches and unloads `func`'s fentry/fexit pair: "ok" or why not.
fn try_fentry(bpf: &mut Ebpf, func: &TracedFunction, btf: Option<&Btf>, in_btf: bool) -> String {
    let fentry = match btf {
        None => "no kernel BTF".to_owned(),
        Some(_) if !in_btf => "function not in the kernel's BTF".to_owned(),
        Some(b) => match attach_fentry(bpf, func, b) {
            Ok(()) => "ok".to_owned(),
            Err(e) => fentry_failure(&e, &func.symbol),
        },
    };
    unload_pair(bpf, func, Attach::Fentry);
    fentry
}

/// Attaches and unloads `func`'s kprobe/kretprobe pair: "ok" or why not.
fn try_kprobe(bpf: &mut Ebpf, func: &TracedFunction, kallsyms: &Kallsyms) -> String {
    if !kprobes_supported(kallsyms) {
        return "kernel has no kprobes (CONFIG_KPROBES off)".to_owned();
    }
    let kprobe = match attach_kprobe(bpf, func) {
        Ok(()) => "ok".to_owned(),
        Err(e) => kprobe_failure(&e, &func.symbol),
    };
    unload_pair(bpf, func, Attach::Kprobe);
    kprobe
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn why_a_function_is_not_present() {
        let k = Kallsyms::parse("0 T vfs_read\n0 t inlined.isra.0\n");
        assert_eq!(
            not_present(&k, "inlined"),
            "inlined: only compiler clones exist (inlined.isra.0); a clone can be traced by its \
             full name with kprobes"
        );
        assert_eq!(
            not_present(&k, "vfs_raed"),
            "function not in /proc/kallsyms; did you mean `vfs_read`?"
        );
        assert_eq!(
            not_present(&k, "something_else"),
            "function not in /proc/kallsyms"
        );
    }
}
