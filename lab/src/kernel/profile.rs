//! The kernel matrix as data: one [`KernelProfile`] per Debian kernel the lab boots, with the
//! facts the code and the guest tests branch on. A new kernel is a new row of [`PROFILES`].

/// The kernel's default preemption model (what it runs without a `preempt=` parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preemption {
    /// `CONFIG_PREEMPT_VOLUNTARY`: a task is not preempted inside a traced function's
    /// trampoline.
    Voluntary,
    /// `PREEMPT_LAZY`: tasks can be preempted anywhere, trampoline runs included (they are
    /// skipped while a task is preempted inside them).
    Lazy,
}

impl Preemption {
    /// Whether a task can be preempted inside kernel code by default.
    pub fn preemptible(self) -> bool {
        self != Self::Voluntary
    }
}

/// One Debian kernel of the matrix.
#[derive(Debug, PartialEq, Eq)]
pub struct KernelProfile {
    /// The name `--kernel` takes and tests print: `7.2`.
    pub name: &'static str,
    /// The Debian suite whose `linux-image-amd64` is this kernel.
    pub suite: &'static str,
    /// The suite whose userland (e.g. bpftrace) goes with this kernel: a backports suite
    /// carries the kernel, its base release the rest.
    pub userland_suite: &'static str,
    /// Kprobe sessions (`kprobe.session`, Linux 6.10 and later).
    pub has_kprobe_session: bool,
    /// fentry/fexit sessions (fsession, 7.x).
    pub has_fsession: bool,
    /// The default preemption model.
    pub preemption: Preemption,
}

/// Debian trixie-backports' current 7.3.x: like 7.2 (all four functions, DAMON).
pub const DEBIAN_7_3: KernelProfile = KernelProfile {
    name: "7.3",
    suite: "trixie-backports",
    userland_suite: "trixie",
    has_kprobe_session: true,
    has_fsession: true,
    preemption: Preemption::Lazy,
};

/// Debian sid's current 7.2.x: all four traced functions, DAMON vaddr+paddr.
pub const DEBIAN_7_2: KernelProfile = KernelProfile {
    name: "7.2",
    suite: "sid",
    userland_suite: "sid",
    has_kprobe_session: true,
    has_fsession: true,
    preemption: Preemption::Lazy,
};

/// Debian trixie's 6.12.x: the "older kernel" (lacks two of the functions).
pub const DEBIAN_6_12: KernelProfile = KernelProfile {
    name: "6.12",
    suite: "trixie",
    userland_suite: "trixie",
    has_kprobe_session: true,
    has_fsession: false,
    preemption: Preemption::Voluntary,
};

/// Debian bookworm's 6.1.x: no DAMON, only `lock_timer_base` of the four; its virtio drivers
/// are modules.
pub const DEBIAN_6_1: KernelProfile = KernelProfile {
    name: "6.1",
    suite: "bookworm",
    userland_suite: "bookworm",
    has_kprobe_session: false,
    has_fsession: false,
    preemption: Preemption::Voluntary,
};

/// Every Debian kernel the lab boots, newest first (the order `--kernel`'s help names them).
pub static PROFILES: &[KernelProfile] = &[DEBIAN_7_3, DEBIAN_7_2, DEBIAN_6_12, DEBIAN_6_1];

impl KernelProfile {
    /// The profile `--kernel NAME` names.
    pub fn named(name: &str) -> Option<&'static KernelProfile> {
        PROFILES.iter().find(|p| p.name == name)
    }
}
