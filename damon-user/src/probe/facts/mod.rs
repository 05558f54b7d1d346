//! What the tool knows about the running kernel: [`KernelFacts`], each fact read at most once
//! per process, and the readers and parsers behind them.
pub mod btf;
pub mod cgroup;
pub mod folio_node;
pub mod kernel;
pub mod symbols;
pub mod sysfiles;

use std::sync::OnceLock;

use kernel::{KernelIdentity, Lockdown, Preemption};

/// Everything the tool needs to know about the running kernel, read lazily (a fact no command
/// path asks for is never read: `doctor --leftovers` mounts no debugfs) and once per process:
/// [`KernelFacts::get`]. What decides by these facts takes them by reference, so tests give
/// their own (`KernelFacts::known`).
///
/// Not in here: what a start reads many times but drops afterwards (kallsyms, the BTF:
/// [`sysfiles`]), the process's own capabilities and namespace, and DAMON's state.
#[derive(Debug)]
pub struct KernelFacts {
    identity: OnceLock<KernelIdentity>,
    preemption: OnceLock<Preemption>,
    lockdown: OnceLock<Option<Lockdown>>,
    btf: OnceLock<bool>,
    kprobe_session: OnceLock<bool>,
    fsession: OnceLock<bool>,
    perf_event_paranoid: OnceLock<Option<i32>>,
    damon: OnceLock<bool>,
}

static FACTS: KernelFacts = KernelFacts::unread();

impl KernelFacts {
    /// The running kernel's facts, each read on first use.
    pub fn get() -> &'static KernelFacts {
        &FACTS
    }

    const fn unread() -> KernelFacts {
        KernelFacts {
            identity: OnceLock::new(),
            preemption: OnceLock::new(),
            lockdown: OnceLock::new(),
            btf: OnceLock::new(),
            kprobe_session: OnceLock::new(),
            fsession: OnceLock::new(),
            perf_event_paranoid: OnceLock::new(),
            damon: OnceLock::new(),
        }
    }

    /// Facts given rather than read (tests): the preemption model, lockdown, BTF, kprobe-session
    /// and fsession support. The others are read from the running kernel if asked for.
    #[cfg(test)]
    pub fn known(
        preemption: Preemption,
        lockdown: Option<Lockdown>,
        btf: bool,
        kprobe_session: bool,
        fsession: bool,
    ) -> KernelFacts {
        KernelFacts {
            preemption: preemption.into(),
            lockdown: lockdown.into(),
            btf: btf.into(),
            kprobe_session: kprobe_session.into(),
            fsession: fsession.into(),
            ..KernelFacts::unread()
        }
    }

    /// Release, version, boot id and command line.
    pub fn identity(&self) -> &KernelIdentity {
        self.identity.get_or_init(KernelIdentity::read)
    }

    /// The preemption model (mounts debugfs when missing, to read it).
    pub fn preemption(&self) -> &Preemption {
        self.preemption.get_or_init(Preemption::read)
    }

    /// The lockdown mode (mounts securityfs when missing); `None` without the lockdown LSM.
    pub fn lockdown(&self) -> Option<Lockdown> {
        *self.lockdown.get_or_init(kernel::read_lockdown)
    }

    /// `/sys/kernel/btf/vmlinux` exists (fentry/fexit need it).
    pub fn btf(&self) -> bool {
        *self
            .btf
            .get_or_init(|| std::path::Path::new(sysfiles::VMLINUX_BTF).exists())
    }

    /// The kernel has kprobe sessions: the kfuncs the session programs call are in its BTF
    /// (Linux ≥ 6.10).
    pub fn kprobe_session(&self) -> bool {
        *self
            .kprobe_session
            .get_or_init(|| sysfiles::aya_btf().is_some_and(|b| session_kfunc_ids(&b).is_ok()))
    }

    /// The kernel has fsessions (Linux 7.x): its BTF names `BPF_TRACE_FSESSION` (an enumerator
    /// of `enum bpf_attach_type`, which aya's BTF API does not list, so the string table is
    /// searched).
    pub fn fsession(&self) -> bool {
        *self.fsession.get_or_init(|| {
            sysfiles::vmlinux_btf().is_ok_and(|b| {
                b.windows(b"BPF_TRACE_FSESSION\0".len())
                    .any(|w| w == b"BPF_TRACE_FSESSION\0")
            })
        })
    }

    /// `kernel.perf_event_paranoid`, when readable.
    pub fn perf_event_paranoid(&self) -> Option<i32> {
        *self.perf_event_paranoid.get_or_init(|| {
            std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                .ok()
                .and_then(|t| t.trim().parse().ok())
        })
    }

    /// DAMON's sysfs interface exists (`/sys/kernel/mm/damon/admin/kdamonds`).
    pub fn damon(&self) -> bool {
        *self
            .damon
            .get_or_init(|| std::path::Path::new(DAMON_KDAMONDS).exists())
    }
}

/// Where DAMON's sysfs lists its kdamonds.
pub const DAMON_KDAMONDS: &str = "/sys/kernel/mm/damon/admin/kdamonds";

/// The BTF ids of the kfuncs the session programs call, in the order of
/// `KFUNC_PLACEHOLDERS` (with their placeholders); the first one missing otherwise.
pub fn session_kfunc_ids(btf: &aya::Btf) -> Result<Vec<(i32, u32)>, &'static str> {
    damon_common::KFUNC_PLACEHOLDERS
        .iter()
        .map(|&(placeholder, name)| {
            btf.id_by_type_name_kind(name, aya_obj::btf::BtfKind::Func)
                .map(|id| (placeholder, id))
                .map_err(|_| name)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_facts_are_the_ones_given_and_the_running_kernels_are_one() {
        let full = Preemption {
            model: Some("full".to_owned()),
            source: "given".to_owned(),
        };
        let f = KernelFacts::known(full.clone(), Some(Lockdown::Integrity), false, true, false);
        assert_eq!(
            (f.preemption(), f.lockdown(), f.btf()),
            (&full, Some(Lockdown::Integrity), false)
        );
        assert!(f.kprobe_session() && !f.fsession());
        assert!(std::ptr::eq(KernelFacts::get(), KernelFacts::get()));
    }
}
