//! The vocabulary of a tracing session, free of command-line types: which functions, how they
//! are attached, what the kernel does with each call, and whether the probe floor is measured.
//!
//! `cli` converts its arguments into these once; the domain (`session`, `probe`, `damon`,
//! `stats`, `capture`) speaks only this language.
use damon_common::FunctionId;

pub use crate::capture::Mode;
pub use damon_common::attach::Attach;

/// The trace mode and the kernel histograms' linear bucket width (used in kernel mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModeConfig {
    pub mode: Mode,
    pub hist_width_ns: u64,
    /// Whether stream-mode calls read the disturbance counters (`--disturbance`).
    pub disturbance: bool,
}

impl Default for ModeConfig {
    fn default() -> ModeConfig {
        ModeConfig {
            mode: Mode::Stream,
            hist_width_ns: damon_common::DEFAULT_HIST_WIDTH_NS,
            disturbance: false,
        }
    }
}

/// What the user asked for: one method, or `Auto` (the better one for this kernel first, the
/// other as fallback; see `probe::loader::attach`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachChoice {
    Auto,
    Only(Attach),
}

impl From<Attach> for AttachChoice {
    fn from(m: Attach) -> AttachChoice {
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
    /// `--slow`: calls at least this long are also kept with their kernel stacks (stream
    /// mode); `None`: off.
    pub slow: Option<crate::capture::SlowSettings>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::AttachState;

    #[test]
    fn modes_say_what_the_kernel_does() {
        assert!(Mode::Stream.streams() && !Mode::Stream.buckets_in_kernel());
        assert!(!Mode::Kernel.streams() && Mode::Kernel.buckets_in_kernel());
        assert!(Mode::Both.streams() && Mode::Both.buckets_in_kernel());
        assert_eq!(
            Mode::Both.bits(),
            damon_common::MODE_STREAM | damon_common::MODE_KERNEL
        );
    }

    #[test]
    fn attach_methods_round_trip_through_states() {
        for m in Attach::ALL {
            assert_eq!(AttachState::from(m).attach(), Some(m));
            assert_eq!(AttachState::from(m).as_str(), m.as_str());
            assert!(AttachState::from(m).is_traced());
        }
        assert_eq!(AttachState::Missing.attach(), None);
        for s in [
            AttachState::Missing,
            AttachState::Inlined,
            AttachState::Failed,
        ] {
            assert!(!s.is_traced());
            assert_eq!(AttachState::from_name(s.as_str()), Some(s));
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
