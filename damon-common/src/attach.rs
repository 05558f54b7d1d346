//! The attach methods: one enum, and one table of what each method is (its name, its programs
//! in the eBPF object, how the entry time reaches the exit, what it hooks, which kernels have
//! it, whether it is exact under preemption, and how the tool words it). Everything else that
//! differs by method derives from [`Attach::facts`].

/// One way of attaching a function's probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Attach {
    /// fentry/fexit (BPF trampoline).
    #[cfg_attr(feature = "serde", serde(rename = "fentry"))]
    Fentry,
    /// kprobe/kretprobe.
    #[cfg_attr(feature = "serde", serde(rename = "kprobe"))]
    Kprobe,
    /// One kprobe-session program (fprobe; `BPF_TRACE_KPROBE_SESSION`, Linux ≥ 6.10): the
    /// entry time in the invocation's cookie, no stamp map.
    #[cfg_attr(feature = "serde", serde(rename = "kprobe-session"))]
    KprobeSession,
    /// One fsession program (BPF trampoline; `BPF_TRACE_FSESSION`, Linux 7.x), as above.
    #[cfg_attr(feature = "serde", serde(rename = "fsession"))]
    Fsession,
}

/// How a call's entry time reaches its exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// A per-task stamp in the stamp map (`MAP_STAMPS`), written at entry, read at exit.
    Stamp,
    /// The invocation's session cookie: one program runs at both ends, no map.
    Cookie,
}

/// What the kernel runs the programs from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// A BPF trampoline (fentry/fexit, fsession): runs with preemption enabled; the kernel
    /// skips it on a CPU while another task is preempted inside it.
    Trampoline,
    /// A kprobe (kprobe/kretprobe, fprobe sessions): runs with preemption disabled.
    Kprobe,
}

/// What one attach method is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttachFacts {
    pub attach: Attach,
    /// As captures, `--attach`, the calibration and JSON name it.
    pub name: &'static str,
    /// The entry program's name in the eBPF object, before `_<function>`.
    pub entry_program: &'static str,
    /// The exit program's (a session's one program is both).
    pub exit_program: &'static str,
    pub timing: Timing,
    pub hook: Hook,
    /// The first Linux release that has it (major, minor).
    pub min_kernel: (u32, u32),
    /// Its durations stay exact on a preemptible kernel (its runs are not skipped while a
    /// task is preempted inside one).
    pub exact_under_preemption: bool,
    /// Whether a stream record can carry the built-in functions' arguments (a kprobe
    /// session's cookie has no room for them).
    pub carries_args: bool,
    /// What attaches, in words: the program pair, or the one session program.
    pub probes: &'static str,
}

/// Every attach method, in [`Attach`]'s order.
pub const ATTACH_TABLE: [AttachFacts; 4] = [
    AttachFacts {
        attach: Attach::Fentry,
        name: "fentry",
        entry_program: "fentry",
        exit_program: "fexit",
        timing: Timing::Stamp,
        hook: Hook::Trampoline,
        min_kernel: (5, 5),
        exact_under_preemption: false,
        carries_args: true,
        probes: "fentry/fexit",
    },
    AttachFacts {
        attach: Attach::Kprobe,
        name: "kprobe",
        entry_program: "kprobe",
        exit_program: "kretprobe",
        timing: Timing::Stamp,
        hook: Hook::Kprobe,
        min_kernel: (4, 1),
        exact_under_preemption: true,
        carries_args: true,
        probes: "kprobe/kretprobe",
    },
    AttachFacts {
        attach: Attach::KprobeSession,
        name: "kprobe-session",
        entry_program: "ksession",
        exit_program: "ksession",
        timing: Timing::Cookie,
        hook: Hook::Kprobe,
        min_kernel: (6, 10),
        exact_under_preemption: true,
        carries_args: false,
        probes: "kprobe session",
    },
    AttachFacts {
        attach: Attach::Fsession,
        name: "fsession",
        entry_program: "fsession",
        exit_program: "fsession",
        timing: Timing::Cookie,
        hook: Hook::Trampoline,
        min_kernel: (7, 0),
        exact_under_preemption: false,
        carries_args: true,
        probes: "fsession",
    },
];

impl Attach {
    pub const ALL: [Attach; 4] = [
        Attach::Fentry,
        Attach::Kprobe,
        Attach::KprobeSession,
        Attach::Fsession,
    ];

    /// Its row of [`ATTACH_TABLE`].
    pub const fn facts(self) -> &'static AttachFacts {
        &ATTACH_TABLE[self as usize]
    }

    /// As captures, `--attach`, the calibration and JSON name it.
    pub const fn as_str(self) -> &'static str {
        self.facts().name
    }

    /// The method named `name` (as [`Attach::as_str`] says it).
    pub fn from_name(name: &str) -> Option<Attach> {
        Attach::ALL.into_iter().find(|a| a.as_str() == name)
    }

    /// What attaches: the program pair, or the one session program.
    pub const fn probes(self) -> &'static str {
        self.facts().probes
    }

    /// Whether one session program times the call (the entry time in its cookie).
    pub fn is_session(self) -> bool {
        self.facts().timing == Timing::Cookie
    }

    /// Whether its programs run from a kprobe (with preemption disabled).
    pub fn is_kprobe_hook(self) -> bool {
        self.facts().hook == Hook::Kprobe
    }

    /// The method with this hook and timing.
    pub fn with(hook: Hook, timing: Timing) -> Attach {
        Attach::ALL
            .into_iter()
            .find(|a| a.facts().hook == hook && a.facts().timing == timing)
            .unwrap_or(Attach::Fentry)
    }
}

impl core::fmt::Display for Attach {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.pad(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_in_the_enums_order_and_names_are_unique() {
        for (i, a) in Attach::ALL.into_iter().enumerate() {
            assert_eq!(ATTACH_TABLE[i].attach, a);
            assert_eq!(Attach::from_name(a.as_str()), Some(a));
            assert_eq!(Attach::with(a.facts().hook, a.facts().timing), a);
        }
        assert_eq!(Attach::from_name("session"), None);
    }
}
