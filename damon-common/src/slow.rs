//! Slow calls kept whole (`record --slow DURATION`, stream mode): a call whose wall time is at
//! least the threshold is written a second time, with its kernel stack, into a ring of its own
//! ([`MAP_SLOW_EVENTS`]), so the records' ring never waits for stacks. The stack is taken at the
//! call's return (`bpf_get_stack`, the traced function's callers, innermost first); userspace
//! symbolizes it from `/proc/kallsyms` and stores the names in the capture.
//!
//! Bounded: the ring holds [`SLOW_RING_BYTES`]; a slow call that does not fit is counted
//! ([`SlowCounter::RingFull`]) and its record still goes to the main ring like any call's.

use crate::CallRecord;

/// Return addresses kept per slow call (innermost first).
pub const SLOW_STACK_DEPTH: usize = 32;

/// One slow call, as the exit program writes it into [`MAP_SLOW_EVENTS`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlowEvent {
    /// The call's record, exactly as written into the main ring.
    pub call: CallRecord,
    /// How many of `ips` hold return addresses (0: the stack could not be read).
    pub depth: u32,
    pub _pad: u32,
    pub ips: [u64; SLOW_STACK_DEPTH],
}

impl Default for SlowEvent {
    fn default() -> SlowEvent {
        SlowEvent {
            call: CallRecord::default(),
            depth: 0,
            _pad: 0,
            ips: [0; SLOW_STACK_DEPTH],
        }
    }
}

impl SlowEvent {
    /// The stack's return addresses, innermost first.
    pub fn stack(&self) -> &[u64] {
        &self.ips[..(self.depth as usize).min(SLOW_STACK_DEPTH)]
    }
}

/// Size of a [`SlowEvent`] on the wire.
pub const SLOW_EVENT_SIZE: usize = core::mem::size_of::<SlowEvent>();
const _: () = assert!(SLOW_EVENT_SIZE == 72 + 8 + 8 * SLOW_STACK_DEPTH);

/// Name of the slow calls' ring buffer.
pub const MAP_SLOW_EVENTS: &str = "SLOW_EVENTS";
/// Its size in bytes (a power of two, a multiple of the page size): about 760 slow calls.
pub const SLOW_RING_BYTES: u32 = 256 << 10;
/// `u64` global: the threshold in ns (a call at least this long is slow); 0 = off.
pub const GLOBAL_SLOW_NS: &str = "SLOW_NS";

/// Name of the per-CPU `u64` array of slow-call counts, index [`SlowCounter::index`].
pub const MAP_SLOW_COUNTERS: &str = "SLOW_COUNTERS";

/// What happened to the slow calls of one function.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlowCounter {
    /// Written into the slow calls' ring.
    Kept = 0,
    /// Did not fit in it (the reader was behind): the call's record is in the main ring, its
    /// stack is lost.
    RingFull = 1,
}

pub const NR_SLOW_COUNTERS: u32 = 2;

impl SlowCounter {
    pub const fn index(self, func: u32) -> u32 {
        func * NR_SLOW_COUNTERS + self as u32
    }
}

#[cfg(feature = "user")]
// SAFETY: SlowEvent is repr(C), integers only (a CallRecord without padding, two u32, u64s).
unsafe impl aya::Pod for SlowEvent {}
