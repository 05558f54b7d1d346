//! Slow calls kept whole (`record --slow DURATION`): what a capture holds of them. The kernel
//! side and its bounds are in `damon_common::slow`.
use damon_common::CallRecord;
use serde::{Deserialize, Serialize};

/// One slow call: its record (with its time breakdown when the capture has one) and the kernel
/// stack at its return, symbolized when it was recorded so that any machine shows names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowCall {
    pub call: CallRecord,
    /// Innermost first: `symbol+0xoffset` (`[module]` appended for a module's symbol), or the
    /// address in hex where no symbol covers it.
    pub stack: Vec<String>,
}

/// What `record --slow` was asked (in the capture's metadata).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlowSettings {
    /// A call is slow when its wall time is at least this.
    pub threshold_ns: u64,
    /// Return addresses kept per stack (`damon_common::slow::SLOW_STACK_DEPTH`).
    pub stack_depth: u32,
    /// Slow calls kept per function at most; later ones are only counted.
    pub max_per_function: u64,
}

/// One function's slow calls at the end of a session (in the summary). Every slow call is in
/// `kept` or one of the two losses; each is also an ordinary record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlowCounters {
    /// Kept in the capture with their stacks.
    pub kept: u64,
    /// Lost in the kernel: the slow calls' ring was full (the reader was behind).
    pub ring_full: u64,
    /// Received, but past [`SlowSettings::max_per_function`].
    pub over_limit: u64,
}

impl SlowCounters {
    /// All slow calls the kernel saw.
    pub fn total(&self) -> u64 {
        self.kept + self.ring_full + self.over_limit
    }
}
