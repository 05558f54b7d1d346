//! Attaches one function with fentry/fexit or kprobe/kretprobe, in the order `--attach` asks
//! for, falling back from one to the other, and explains why an attach failed.
use aya::{
    Btf, Ebpf,
    programs::{FEntry, FExit, KProbe, ProgramError},
};

use crate::{
    capture::AttachState,
    probe::{
        facts::kernel::{Kallsyms, SymbolPresence, btf_has_function},
        loader::{
            programs::{program_names, timed_attach, timed_load},
            session::links::SessionLinks,
        },
    },
    trace::{Attach, TracedFunction},
};

/// Explains a program load/attach error with its errno and the likely reason.
pub fn describe_error(err: &ProgramError) -> String {
    let io = match err {
        ProgramError::LoadError {
            io_error,
            verifier_log,
        } => {
            let log = verifier_log.to_string();
            // The verifier's reason comes before its closing statistics: show the last lines
            // that are not statistics, then the statistics.
            let is_stats = |l: &&str| {
                l.starts_with("verification time")
                    || l.starts_with("processed ")
                    || l.starts_with("stack depth")
            };
            let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
            let reason: Vec<&str> = lines.iter().copied().filter(|l| !is_stats(l)).collect();
            let mut tail: Vec<&str> = reason[reason.len().saturating_sub(2)..].to_vec();
            tail.extend(lines.iter().copied().filter(is_stats));
            if !tail.is_empty() && io_error.raw_os_error() != Some(libc::EPERM) {
                return format!(
                    "verifier rejected the program ({io_error}): {}",
                    tail.join(" | ")
                );
            }
            io_error
        }
        ProgramError::SyscallError(e) => &e.io_error,
        // Keep the whole chain: aya's top-level message alone can be just a path.
        other => return error_chain(other),
    };
    let hint = match io.raw_os_error() {
        Some(libc::EPERM) => {
            " — the kernel refused: lockdown or another security policy, or missing CAP_BPF/CAP_PERFMON"
        }
        Some(libc::ENOENT) => " — the kernel has no such attach point",
        Some(libc::ESRCH) => " — function not found in the kernel's BTF",
        Some(libc::EINVAL) => " — the kernel rejected the attach type or target",
        Some(libc::EBUSY) => " — the function is already attached by too many programs",
        Some(ENOTSUPP) => " — not supported by this kernel",
        _ => "",
    };
    format!("{io}{hint}")
}

/// An error's message followed by those of its sources, each after `: `.
pub(in crate::probe) fn error_chain(err: &dyn std::error::Error) -> String {
    let mut msg = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}

/// Kernel-internal ENOTSUPP, which leaks to userspace from some BPF paths.
const ENOTSUPP: i32 = 524;

pub(in crate::probe) fn unload(bpf: &mut Ebpf, name: &str, mode: Attach) {
    let Some(prog) = bpf.program_mut(name) else {
        return;
    };
    // Unloading detaches the program's links; errors here leave nothing we could retry.
    let _ = match mode {
        Attach::Fentry => match <&mut FEntry>::try_from(&mut *prog) {
            Ok(p) => p.unload(),
            Err(_) => <&mut FExit>::try_from(prog).and_then(FExit::unload),
        },
        Attach::Kprobe => <&mut KProbe>::try_from(prog).and_then(KProbe::unload),
        // Loaded by `probe::loader::session`, never by aya: nothing of aya's to unload.
        Attach::KprobeSession | Attach::Fsession => return,
    };
}

/// Attaches `func` if the kernel has it as a plain function; otherwise says why not (missing,
/// or inlined with only compiler clones left). `auto_note` is the detail of a function that
/// `--attach auto` put on kprobes.
pub(in crate::probe) fn attach_present(
    bpf: &mut Ebpf,
    sessions: &mut SessionLinks,
    kallsyms: &Kallsyms,
    func: &TracedFunction,
    order: &[Attach],
    auto_note: &Option<String>,
    btf: Option<&Btf>,
) -> (AttachState, Option<String>) {
    if let Some((state, why)) = not_attachable(kallsyms, func) {
        return (state, Some(why));
    }
    let (state, detail) = attach_one(bpf, sessions, func, order, btf);
    // The note says why auto chose the method that attached first; a fallback says why itself.
    let detail = match (auto_note, detail) {
        (Some(note), None) if state.attach().is_some() => Some(note.clone()),
        (_, detail) => detail,
    };
    (state, detail)
}

/// Why `func` cannot be attached, from kallsyms alone: the kernel does not have it, or has only
/// compiler clones of it (the plain function was inlined). `None`: it is there.
fn not_attachable(kallsyms: &Kallsyms, func: &TracedFunction) -> Option<(AttachState, String)> {
    match kallsyms.presence(&func.symbol) {
        SymbolPresence::Absent => Some((
            AttachState::Missing,
            "not in /proc/kallsyms: this kernel does not have the function".to_owned(),
        )),
        SymbolPresence::ClonesOnly(c) => Some((
            AttachState::Inlined,
            format!(
                "only compiler clones exist ({}); the plain function was inlined{}",
                c.join(", "),
                if func.as_builtin().is_none() {
                    format!("; trace a clone with --func {} (kprobe)", c[0])
                } else {
                    String::new()
                }
            ),
        )),
        SymbolPresence::Present => None,
    }
}

/// Attaches one function with the first method of `order` that attaches; returns the state
/// and, for a fallback or failure, why (each method tried, with its reason).
fn attach_one(
    bpf: &mut Ebpf,
    sessions: &mut SessionLinks,
    func: &TracedFunction,
    order: &[Attach],
    btf: Option<&Btf>,
) -> (AttachState, Option<String>) {
    let mut failures: Vec<(Attach, String)> = Vec::new();
    for &method in order {
        let attempt = match method {
            Attach::Fentry => match btf {
                None => Err("no kernel BTF at /sys/kernel/btf/vmlinux".to_owned()),
                Some(btf) if !btf_has_function(btf, &func.symbol) => {
                    Err("function not in the kernel's BTF".to_owned())
                }
                Some(btf) => {
                    attach_fentry(bpf, func, btf).map_err(|e| fentry_failure(&e, &func.symbol))
                }
            },
            Attach::Kprobe => {
                attach_kprobe(bpf, func).map_err(|e| kprobe_failure(&e, &func.symbol))
            }
            Attach::KprobeSession | Attach::Fsession => sessions
                .attach(bpf, func, method, btf)
                .map_err(|e| e.to_string()),
        };
        match attempt {
            Ok(()) if failures.is_empty() => return (AttachState::Traced(method), None),
            Ok(()) => {
                let tried: Vec<String> = failures
                    .iter()
                    .map(|(m, e)| format!("{} failed ({e})", m.probes()))
                    .collect();
                let why = format!("{}; fell back to {}", tried.join("; "), method.as_str());
                return (AttachState::Traced(method), Some(why));
            }
            Err(e) => failures.push((method, e)),
        }
    }
    let tried: Vec<String> = failures
        .iter()
        .map(|(m, e)| format!("{}: {e}", m.probes()))
        .collect();
    (AttachState::Failed, Some(tried.join("; ")))
}

/// Whether ftrace can patch `symbol` (`None`: its list is unreadable). Read only after a
/// failure: the list is long.
fn in_ftrace(symbol: &str) -> Option<bool> {
    crate::probe::facts::kernel::ftrace_functions()
        .ok()
        .map(|set| set.contains(symbol))
}

/// The errno alone, without [`describe_error`]'s generic guess.
fn errno_only(err: &ProgramError) -> String {
    let d = describe_error(err);
    d.split(" — ").next().unwrap_or(&d).to_owned()
}

/// Why fentry refused `symbol`: the kernel's facts when they explain it (the function is not
/// one ftrace can patch: `notrace`, `noinstr`, ...), else the errno and its usual cause.
pub(in crate::probe) fn fentry_failure(err: &ProgramError, symbol: &str) -> String {
    match in_ftrace(symbol) {
        Some(false) => format!(
            "{} — not in available_filter_functions: the function is notrace or noinstr, which \
             fentry cannot attach to",
            errno_only(err)
        ),
        _ => describe_error(err),
    }
}

/// Why kprobes refused `symbol`: on the kernel's kprobe blacklist, or (EINVAL on a function
/// ftrace cannot patch either) most likely `noinstr` code, which kprobes refuse.
pub(in crate::probe) fn kprobe_failure(err: &ProgramError, symbol: &str) -> String {
    if crate::probe::facts::kernel::kprobe_blacklist().is_some_and(|l| l.contains(symbol)) {
        return format!("{} — on the kernel's kprobe blacklist", errno_only(err));
    }
    let described = describe_error(err);
    if described.contains(&format!("os error {}", libc::EACCES)) {
        let paranoid = crate::probe::facts::KernelFacts::get().perf_event_paranoid();
        let admin = crate::probe::facts::kernel::effective_caps().is_some_and(|c| {
            crate::probe::facts::kernel::has_cap(c, crate::probe::facts::kernel::CAP_SYS_ADMIN)
        });
        if let Some(why) = paranoid.and_then(|p| paranoid_refusal(p, admin)) {
            return format!("{} — {why}", errno_only(err));
        }
    }
    let einval = described.contains(&format!("os error {}", libc::EINVAL));
    if einval && in_ftrace(symbol) == Some(false) {
        return format!(
            "{} — the function is not in available_filter_functions either: most likely \
             noinstr code, which kprobes refuse",
            errno_only(err)
        );
    }
    describe_error(err)
}

/// Why perf_event_open (through which kprobes attach) was refused, when
/// `kernel.perf_event_paranoid` explains it: above 2, a Debian and Ubuntu patch refuses it to
/// every process without CAP_SYS_ADMIN, whatever CAP_PERFMON it holds.
fn paranoid_refusal(paranoid: i32, cap_sys_admin: bool) -> Option<String> {
    (paranoid > 2 && !cap_sys_admin).then(|| {
        format!(
            "kernel.perf_event_paranoid is {paranoid}: this kernel refuses perf_event_open, \
             which kprobes attach through, to processes without CAP_SYS_ADMIN (a Debian and \
             Ubuntu patch); fentry needs only CAP_BPF and CAP_PERFMON, or set \
             kernel.perf_event_paranoid=2"
        )
    })
}

pub(in crate::probe) fn program<'a, T>(
    bpf: &'a mut Ebpf,
    name: &str,
) -> Result<&'a mut T, ProgramError>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program, Error = ProgramError>,
{
    let prog = bpf
        .program_mut(name)
        .ok_or_else(|| ProgramError::InvalidName {
            name: name.to_owned(),
        })?;
    prog.try_into()
}

/// Exit first, then entry: a call that starts while the slow attach runs then either has both
/// probes or only the exit (counted as an orphan), never an entry without its exit. On failure
/// neither program stays loaded.
fn attach_pair(
    bpf: &mut Ebpf,
    func: &TracedFunction,
    mode: Attach,
    attach_exit: impl FnOnce(&mut Ebpf, &str) -> Result<(), ProgramError>,
    attach_entry: impl FnOnce(&mut Ebpf, &str) -> Result<(), ProgramError>,
) -> Result<(), ProgramError> {
    let (entry, exit) = program_names(func, mode);
    let attached = attach_exit(bpf, &exit).and_then(|()| attach_entry(bpf, &entry));
    if attached.is_err() {
        unload_pair(bpf, func, mode);
    }
    attached
}

/// Attaches `func`'s fentry/fexit pair, in [`attach_pair`]'s order.
pub(in crate::probe) fn attach_fentry(
    bpf: &mut Ebpf,
    func: &TracedFunction,
    btf: &Btf,
) -> Result<(), ProgramError> {
    let target = func.symbol.as_str();
    attach_pair(
        bpf,
        func,
        Attach::Fentry,
        |bpf, name| {
            let fexit: &mut FExit = program(bpf, name)?;
            timed_load(name, || fexit.load(target, btf))?;
            timed_attach(name, target, || fexit.attach().map(|_| ()))
        },
        |bpf, name| {
            let fentry: &mut FEntry = program(bpf, name)?;
            timed_load(name, || fentry.load(target, btf))?;
            timed_attach(name, target, || fentry.attach().map(|_| ()))
        },
    )
}

/// Attaches `func`'s kprobe/kretprobe pair, in [`attach_pair`]'s order.
pub(in crate::probe) fn attach_kprobe(
    bpf: &mut Ebpf,
    func: &TracedFunction,
) -> Result<(), ProgramError> {
    let target = func.symbol.as_str();
    let kprobe = |bpf: &mut Ebpf, name: &str| {
        let kprobe: &mut KProbe = program(bpf, name)?;
        timed_load(name, || kprobe.load())?;
        timed_attach(name, target, || kprobe.attach(target, 0).map(|_| ()))
    };
    attach_pair(bpf, func, Attach::Kprobe, kprobe, kprobe)
}

pub(in crate::probe) fn unload_pair(bpf: &mut Ebpf, func: &TracedFunction, mode: Attach) {
    let (entry, exit) = program_names(func, mode);
    unload(bpf, &entry, mode);
    unload(bpf, &exit, mode);
}

#[cfg(test)]
mod tests {
    use std::io;

    use aya::sys::SyscallError;

    use super::*;

    fn syscall(errno: i32) -> ProgramError {
        ProgramError::SyscallError(SyscallError {
            call: "bpf_link_create",
            io_error: io::Error::from_raw_os_error(errno),
        })
    }

    fn rejected(errno: i32, log: &str) -> ProgramError {
        ProgramError::LoadError {
            io_error: io::Error::from_raw_os_error(errno),
            verifier_log: aya_obj::VerifierLog::new(log.to_owned()),
        }
    }

    fn func(id: u32, symbol: &str) -> TracedFunction {
        TracedFunction {
            id,
            symbol: symbol.to_owned(),
        }
    }

    #[test]
    fn errno_hints() {
        let d = describe_error(&syscall(libc::EPERM));
        assert!(d.contains(&format!("os error {}", libc::EPERM)), "{d}");
        assert!(d.ends_with("or missing CAP_BPF/CAP_PERFMON"), "{d}");
        let cases = [
            (libc::ENOENT, " — the kernel has no such attach point"),
            (libc::ESRCH, " — function not found in the kernel's BTF"),
            (
                libc::EINVAL,
                " — the kernel rejected the attach type or target",
            ),
            (
                libc::EBUSY,
                " — the function is already attached by too many programs",
            ),
            (ENOTSUPP, " — not supported by this kernel"),
        ];
        for (errno, hint) in cases {
            let d = describe_error(&syscall(errno));
            assert_eq!(d, format!("{}{hint}", io::Error::from_raw_os_error(errno)));
            assert_eq!(errno_only(&syscall(errno)), d.strip_suffix(hint).unwrap());
        }
        let plain = describe_error(&syscall(libc::E2BIG));
        assert_eq!(plain, io::Error::from_raw_os_error(libc::E2BIG).to_string());
        assert_eq!(errno_only(&syscall(libc::E2BIG)), plain);
    }

    #[test]
    fn verifier_rejections_show_the_reason_then_the_statistics() {
        let log = "func#0 @0\n\n0: R1=ctx() R10=fp0\n; x\ninvalid mem access 'scalar'\n\
                   processed 12 insns (limit 1000000)\nstack depth 8\n";
        let d = describe_error(&rejected(libc::EACCES, log));
        assert!(d.starts_with("verifier rejected the program ("), "{d}");
        assert!(
            d.ends_with(
                "): ; x | invalid mem access 'scalar' | processed 12 insns (limit 1000000) | \
                 stack depth 8"
            ),
            "{d}"
        );
        // EPERM is a policy refusal, not the verifier's: the errno hint, not the log.
        let d = describe_error(&rejected(libc::EPERM, log));
        assert!(d.ends_with("or missing CAP_BPF/CAP_PERFMON"), "{d}");
        // No log at all: the errno and its hint.
        let d = describe_error(&rejected(libc::EINVAL, ""));
        assert!(
            d.ends_with(" — the kernel rejected the attach type or target"),
            "{d}"
        );
    }

    #[test]
    fn other_errors_keep_their_whole_chain() {
        #[derive(Debug)]
        struct Outer(io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("opening /sys/fs/bpf/x")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let err = Outer(io::Error::other("inner"));
        assert_eq!(error_chain(&err), "opening /sys/fs/bpf/x: inner");
        let name = ProgramError::InvalidName {
            name: "fentry_u99".to_owned(),
        };
        assert_eq!(describe_error(&name), name.to_string());
    }

    #[test]
    fn functions_kallsyms_rules_out() {
        let k = Kallsyms::parse(
            "0 T present\n0 t inlined.isra.0\n0 t inlined.constprop.1\n0 T damon_hot_score.cold\n",
        );
        assert_eq!(not_attachable(&k, &func(4, "present")), None);
        assert_eq!(not_attachable(&k, &func(4, "inlined.isra.0")), None);
        assert_eq!(
            not_attachable(&k, &func(4, "absent")),
            Some((
                AttachState::Missing,
                "not in /proc/kallsyms: this kernel does not have the function".to_owned()
            ))
        );
        assert_eq!(
            not_attachable(&k, &func(4, "inlined")),
            Some((
                AttachState::Inlined,
                "only compiler clones exist (inlined.isra.0, inlined.constprop.1); the plain \
                 function was inlined; trace a clone with --func inlined.isra.0 (kprobe)"
                    .to_owned()
            ))
        );
        // Built-in functions have their own programs: no hint to trace a clone with --func.
        let (state, why) = not_attachable(
            &k,
            &TracedFunction::builtin(damon_common::FunctionId::DamonHotScore),
        )
        .unwrap();
        assert_eq!(state, AttachState::Inlined);
        assert_eq!(
            why,
            "only compiler clones exist (damon_hot_score.cold); the plain function was inlined"
        );
    }

    #[test]
    fn perf_event_paranoid_above_2_is_named_only_where_it_refuses() {
        // Debian's default (3) refuses everyone without CAP_SYS_ADMIN, CAP_PERFMON or not.
        let why = paranoid_refusal(3, false).expect("refused at 3 without CAP_SYS_ADMIN");
        assert!(
            why.starts_with("kernel.perf_event_paranoid is 3: "),
            "{why}"
        );
        assert!(
            why.contains("CAP_SYS_ADMIN") && why.contains("fentry"),
            "{why}"
        );
        assert_eq!(paranoid_refusal(3, true), None, "CAP_SYS_ADMIN passes");
        assert_eq!(
            paranoid_refusal(2, false),
            None,
            "2 is upstream's most strict"
        );
        assert_eq!(paranoid_refusal(-1, false), None);
    }
}
