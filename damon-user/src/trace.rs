//! The vocabulary of a tracing session, free of command-line types: which functions, how they
//! are attached, what the kernel does with each call, and whether the probe floor is measured.
//!
//! `cli` converts its arguments into these once; the domain (`session`, `probe`, `damon`,
//! `stats`, `capture`) speaks only this language.
use damon_common::FunctionId;

use crate::capture::AttachState;

/// What the kernel does with each timed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceMode {
    /// One record per call to userspace.
    Stream,
    /// Per-CPU histograms in the kernel, no per-call records.
    Kernel,
    /// Both for every call (tests: the kernel's buckets against the records).
    Both,
}

impl TraceMode {
    /// The eBPF `TRACE_MODE` bits.
    pub fn bits(self) -> u32 {
        match self {
            TraceMode::Stream => damon_common::MODE_STREAM,
            TraceMode::Kernel => damon_common::MODE_KERNEL,
            TraceMode::Both => damon_common::MODE_STREAM | damon_common::MODE_KERNEL,
        }
    }

    /// As the capture's `meta.mode` says it.
    pub fn as_str(self) -> &'static str {
        match self {
            TraceMode::Stream => "stream",
            TraceMode::Kernel => "kernel",
            TraceMode::Both => "both",
        }
    }

    /// Whether each call goes to userspace as a record.
    pub fn streams(self) -> bool {
        self.bits() & damon_common::MODE_STREAM != 0
    }

    /// Whether the kernel buckets each call.
    pub fn buckets_in_kernel(self) -> bool {
        self.bits() & damon_common::MODE_KERNEL != 0
    }
}

/// The trace mode and the kernel histograms' linear bucket width (used in kernel mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModeConfig {
    pub mode: TraceMode,
    pub hist_width_ns: u64,
    /// Whether stream-mode calls read the disturbance counters (`--disturbance`).
    pub disturbance: bool,
}

impl Default for ModeConfig {
    fn default() -> ModeConfig {
        ModeConfig {
            mode: TraceMode::Stream,
            hist_width_ns: damon_common::DEFAULT_HIST_WIDTH_NS,
            disturbance: false,
        }
    }
}

/// One way of attaching a function's probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum AttachMethod {
    /// fentry/fexit (BPF trampoline).
    Fentry,
    /// kprobe/kretprobe.
    Kprobe,
    /// One kprobe-session program (fprobe; `BPF_TRACE_KPROBE_SESSION`, Linux ≥ 6.10): the
    /// entry time in the invocation's cookie, no stamp map. Loaded by `probe::session`.
    KprobeSession,
    /// One fsession program (BPF trampoline; `BPF_TRACE_FSESSION`, Linux 7.x), as above.
    Fsession,
}

impl AttachMethod {
    pub const ALL: [AttachMethod; 4] = [
        AttachMethod::Fentry,
        AttachMethod::Kprobe,
        AttachMethod::KprobeSession,
        AttachMethod::Fsession,
    ];

    /// As captures, `--attach` and the calibration name it.
    pub fn as_str(self) -> &'static str {
        self.state().as_str()
    }

    /// The status of a function attached this way.
    pub fn state(self) -> AttachState {
        match self {
            AttachMethod::Fentry => AttachState::Fentry,
            AttachMethod::Kprobe => AttachState::Kprobe,
            AttachMethod::KprobeSession => AttachState::KprobeSession,
            AttachMethod::Fsession => AttachState::Fsession,
        }
    }

    /// The method a function was attached with, if it was attached.
    pub fn of_state(state: AttachState) -> Option<AttachMethod> {
        AttachMethod::ALL.into_iter().find(|m| m.state() == state)
    }

    /// What attaches: the program pair, or the one session program.
    pub fn probes(self) -> &'static str {
        match self {
            AttachMethod::Fentry => "fentry/fexit",
            AttachMethod::Kprobe => "kprobe/kretprobe",
            AttachMethod::KprobeSession => "kprobe session",
            AttachMethod::Fsession => "fsession",
        }
    }

    /// Whether one session program times the call (no stamp map; see `probe::session`).
    pub fn is_session(self) -> bool {
        matches!(self, AttachMethod::KprobeSession | AttachMethod::Fsession)
    }
}

/// What the user asked for: one method, or `Auto` (the better one for this kernel first, the
/// other as fallback; see `probe::attach`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachChoice {
    Auto,
    Only(AttachMethod),
}

impl From<AttachMethod> for AttachChoice {
    fn from(m: AttachMethod) -> AttachChoice {
        AttachChoice::Only(m)
    }
}

/// One function to trace: its id in the records and its kernel symbol. Ids below
/// [`damon_common::FIRST_USER_FUNC`] are the built-in functions (with their own programs, which
/// read arguments); the others use the generic slot programs of their id (`--func NAME`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracedFunction {
    pub id: u32,
    pub symbol: String,
}

impl TracedFunction {
    pub fn builtin(f: FunctionId) -> TracedFunction {
        TracedFunction {
            id: f as u32,
            symbol: f.symbol().to_owned(),
        }
    }

    /// The built-in function this is, if it is one.
    pub fn as_builtin(&self) -> Option<FunctionId> {
        FunctionId::try_from(self.id)
            .ok()
            .filter(|f| f.symbol() == self.symbol)
    }
}

/// The functions a user named: built-in ones (`--functions`) and any others (`--func`), not
/// yet checked; `crate::selection` turns them into [`TracedFunction`]s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FunctionNames {
    pub builtins: Vec<String>,
    pub others: Vec<String>,
}

/// Whether a session measures the probe floor, beside its first seconds (`record`, `live`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CalibrationPlan {
    /// Not measured: the capture says calibration was skipped.
    Skip,
    /// Measured with this many test runs per floor.
    Measure { calls: u64 },
}

/// Which of the probes' diagnostics are logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProbeLogLevel {
    /// None (the log calls are removed at load).
    #[default]
    Off,
    /// The rare paths: orphan exits, stale stamps, a full stamp map or ring, zero cookies.
    Debug,
    /// Those and every call of a task the filter leaves out (one line per call).
    Trace,
}

/// Everything a tracing session needs to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionConfig {
    pub functions: Vec<TracedFunction>,
    pub attach: AttachChoice,
    pub mode: ModeConfig,
    /// Ring buffer size in bytes (a power of two, a page multiple).
    pub ring_size: u32,
    /// `None`: no calibration is stored at all (`serve` writes no capture).
    pub calibration: Option<CalibrationPlan>,
    /// Whose calls are timed (applied in the kernel).
    pub filter: crate::capture::TaskFilter,
    /// Which of the probes' diagnostics they log (`--debug-probes`).
    pub debug_probes: ProbeLogLevel,
    /// The clock the machine runs on (`--clock`), stored in the capture.
    pub clock: crate::capture::Clock,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_say_what_the_kernel_does() {
        assert!(TraceMode::Stream.streams() && !TraceMode::Stream.buckets_in_kernel());
        assert!(!TraceMode::Kernel.streams() && TraceMode::Kernel.buckets_in_kernel());
        assert!(TraceMode::Both.streams() && TraceMode::Both.buckets_in_kernel());
        assert_eq!(
            TraceMode::Both.bits(),
            damon_common::MODE_STREAM | damon_common::MODE_KERNEL
        );
    }

    #[test]
    fn attach_methods_round_trip_through_states() {
        for m in AttachMethod::ALL {
            assert_eq!(AttachMethod::of_state(m.state()), Some(m));
            assert_eq!(m.state().as_str(), m.as_str());
        }
        assert_eq!(AttachMethod::of_state(AttachState::Missing), None);
        // Every method's state is a traced one, by name too, and nothing else is.
        let states: Vec<AttachState> = AttachMethod::ALL.iter().map(|m| m.state()).collect();
        assert_eq!(states, AttachState::TRACED);
        for m in AttachMethod::ALL {
            assert!(AttachState::is_traced_name(m.as_str()));
        }
        for s in [
            AttachState::Missing,
            AttachState::Inlined,
            AttachState::Failed,
        ] {
            assert!(!AttachState::is_traced_name(s.as_str()));
        }
    }

    #[test]
    fn builtin_functions_are_their_own_id_and_symbol() {
        for f in FunctionId::ALL {
            let t = TracedFunction::builtin(f);
            assert_eq!((t.id, t.symbol.as_str()), (f as u32, f.symbol()));
            assert_eq!(t.as_builtin(), Some(f));
        }
        let func = |id, symbol: &str| TracedFunction {
            id,
            symbol: symbol.to_owned(),
        };
        // A built-in id under another name is not the built-in function.
        assert_eq!(
            func(FunctionId::ALL[0] as u32, "vfs_read").as_builtin(),
            None
        );
        assert_eq!(
            func(damon_common::FIRST_USER_FUNC, "vfs_read").as_builtin(),
            None
        );
    }
}
