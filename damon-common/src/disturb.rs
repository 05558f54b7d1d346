//! Calls the CPU was taken from: what a call's record says about its disturbance, and how the
//! eBPF programs compute it from the kernel's own counters read at the call's entry and again
//! at its return (damon-ebpf's `disturb.rs`).
//!
//! - the task's context-switch counts (`task_struct.nvcsw`: it slept; `nivcsw`: it was
//!   preempted), which `__schedule` bumps only when it switches to another task;
//! - the CPU's interrupt counts: hard interrupts (`kstat.irqs_sum`, the generic IRQ layer's
//!   count, plus every count in x86's `irq_stat`: local timer, IPIs, NMIs and the other system
//!   vectors, which bypass the generic layer) and softirqs (`kstat.softirqs[]`).
//!
//! A call is **clean** when all four differences are 0. The interrupt counts are kept only for
//! a call that stayed on its task: once it was switched out, the CPU's counts include other
//! tasks' time (and the call may end on another CPU), so they are [`UNKNOWN`].

impl crate::CallRecord {
    /// The record's disturbance fields, `[slept, preempted, hardirqs, softirqs]`.
    pub fn disturbance(&self) -> [u16; 4] {
        [self.slept, self.preempted, self.hardirqs, self.softirqs]
    }

    /// Sets the disturbance fields from `[slept, preempted, hardirqs, softirqs]`.
    pub fn set_disturbance(&mut self, [slept, preempted, hardirqs, softirqs]: [u16; 4]) {
        self.slept = slept;
        self.preempted = preempted;
        self.hardirqs = hardirqs;
        self.softirqs = softirqs;
    }

    /// Whether nothing took the CPU from the call: no switch, no interrupt (meaningful only in
    /// a capture that measured disturbance).
    pub fn is_clean(&self) -> bool {
        self.disturbance() == [0; 4]
    }

    /// Why the call was disturbed, or [`Class::Clean`].
    pub fn class(&self) -> Class {
        Class::of(self.disturbance())
    }
}

/// Why a call was disturbed, the first of these that applies (each call counts once): the one
/// classification the kernel-mode programs and every command use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// All four counts 0.
    Clean,
    /// Every count unknown: a session call whose entry snapshot another call took.
    Lost,
    /// The task slept (it may also have been preempted).
    Slept,
    /// The task was preempted, and did not sleep.
    Preempted,
    /// It kept its CPU, which handled hard or soft interrupts meanwhile.
    Interrupted,
}

impl Class {
    /// The class of a call with these `[slept, preempted, hardirqs, softirqs]`.
    #[inline(always)]
    pub fn of(dist: [u16; 4]) -> Class {
        match dist {
            [0, 0, 0, 0] => Class::Clean,
            LOST => Class::Lost,
            [slept, ..] if slept != 0 => Class::Slept,
            [_, preempted, ..] if preempted != 0 => Class::Preempted,
            _ => Class::Interrupted,
        }
    }
}

/// Kernel mode with disturbance measured: per CPU and function, the disturbed calls by
/// [`Class`] and the sum of their durations. With the per-bucket counts of disturbed calls
/// ([`MAP_DISTURBED_HIST`], laid out as `HIST`), userspace gets the clean calls' histogram
/// as the difference.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DisturbedStats {
    pub slept: u64,
    pub preempted: u64,
    pub interrupted: u64,
    pub lost: u64,
    pub sum_ns: u64,
}

impl DisturbedStats {
    /// Counts one disturbed call (a clean one is not counted here).
    #[inline(always)]
    pub fn add(&mut self, class: Class, duration_ns: u64) {
        match class {
            Class::Clean => return,
            Class::Lost => self.lost += 1,
            Class::Slept => self.slept += 1,
            Class::Preempted => self.preempted += 1,
            Class::Interrupted => self.interrupted += 1,
        }
        self.sum_ns += duration_ns;
    }
}

// SAFETY: DisturbedStats is repr(C), five u64, no padding.
#[cfg(feature = "user")]
unsafe impl aya::Pod for DisturbedStats {}

/// Name of the per-CPU array of [`DisturbedStats`], one per function id (kernel mode).
pub const MAP_DISTURBED_STATS: &str = "DISTURBED_STATS";
/// Name of the per-CPU array of disturbed calls per bucket (kernel mode), index
/// `func * HIST_BUCKETS + bucket`.
pub const MAP_DISTURBED_HIST: &str = "DISTURBED_HIST";

/// A count that could not be taken (see the record's fields); also the value of every field of a
/// disturbed call whose entry snapshot was lost (a kprobe session or fsession whose per-CPU slot
/// another call on that CPU reused: only a call that was switched out or interrupted lets one
/// in).
pub const UNKNOWN: u16 = u16::MAX;
/// Counts above this are written as this (saturated).
pub const SATURATED: u16 = u16::MAX - 1;

/// The counters read at one moment, low 32 bits each (differences wrap correctly).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// `current->nvcsw`.
    pub nvcsw: u32,
    /// `current->nivcsw`.
    pub nivcsw: u32,
    /// The CPU's hard interrupts so far.
    pub hardirqs: u32,
    /// The CPU's softirqs so far.
    pub softirqs: u32,
    /// 1 when the two clocks below were read (the task has a clock, see
    /// [`crate::breakdown`]), 0 otherwise.
    pub clocked: u32,
    pub _pad: u32,
    /// The task's off-CPU clock.
    pub off_ns: u64,
    /// The task's interrupt clock.
    pub irq_ns: u64,
}

/// A difference of two 32-bit counter reads as a record field.
#[inline(always)]
fn count(entry: u32, exit: u32) -> u16 {
    let d = exit.wrapping_sub(entry);
    if d > u32::from(SATURATED) {
        SATURATED
    } else {
        d as u16
    }
}

/// The record's `[slept, preempted, hardirqs, softirqs]` for a call with these snapshots.
#[inline(always)]
pub fn between(entry: &Snapshot, exit: &Snapshot) -> [u16; 4] {
    let slept = count(entry.nvcsw, exit.nvcsw);
    let preempted = count(entry.nivcsw, exit.nivcsw);
    if slept != 0 || preempted != 0 {
        return [slept, preempted, UNKNOWN, UNKNOWN];
    }
    [
        0,
        0,
        count(entry.hardirqs, exit.hardirqs),
        count(entry.softirqs, exit.softirqs),
    ]
}

/// The fields of a call whose entry snapshot was lost (see [`UNKNOWN`]).
pub const LOST: [u16; 4] = [UNKNOWN; 4];

/// Per-CPU entry snapshots of one function's session calls (kprobe session, fsession), which
/// have only their 8-byte cookie per invocation: the entry writes its snapshot into the next of
/// [`SESSION_SLOTS`] slots of its CPU and keeps the slot's number in the cookie; the return
/// finds it there when the slot still holds the same entry time. Another entry of the function
/// on that CPU can only reuse the slot after [`SESSION_SLOTS`] more calls began while this one
/// ran, and nothing runs on a CPU during a call that no interrupt or switch let in (except the
/// call's own recursion, [`SESSION_SLOTS`] deep): so a lost slot is a disturbed call.
pub const SESSION_SLOTS: usize = 4;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionSlot {
    /// The entry time (full 64 bits) of the call whose snapshot this is.
    pub entry_ns: u64,
    pub snap: Snapshot,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionSnaps {
    /// Calls begun on this CPU (the next slot is `next % SESSION_SLOTS`).
    pub next: u32,
    pub _pad: u32,
    pub slots: [SessionSlot; SESSION_SLOTS],
}

/// Name of the per-CPU array of [`SessionSnaps`], one per function id.
pub const MAP_SESSION_SNAPS: &str = "SESSION_SNAPS";
/// Name of the per-CPU scratch array the programs copy counts into before summing them; it
/// also keeps its CPU's per-CPU base (`__per_cpu_offset[cpu]`), read at the CPU's first
/// snapshot.
pub const MAP_DISTURB_SCRATCH: &str = "DISTURB_SCRATCH";

/// `u32` global: 1 when the programs take snapshots (userspace found every counter), 0 off.
pub const GLOBAL_DISTURB_ON: &str = "DISTURB_ON";
/// `u32` globals: byte offsets of `nvcsw` and `nivcsw` in `struct task_struct` (the programs
/// load them from `bpf_get_current_task_btf()`, which the verifier checks against BTF).
pub const GLOBAL_TASK_NVCSW_OFF: &str = "TASK_NVCSW_OFF";
pub const GLOBAL_TASK_NIVCSW_OFF: &str = "TASK_NIVCSW_OFF";
/// `u64` global: the kernel address of `__per_cpu_offset` (an array, one `unsigned long` per
/// possible CPU: a per-CPU variable's address on CPU n is its symbol's address plus entry n).
pub const GLOBAL_PER_CPU_OFFSET_SYM: &str = "PER_CPU_OFFSET_SYM";
/// `u64` global: the per-CPU symbol address of `kstat.irqs_sum` (an `unsigned long`).
pub const GLOBAL_KSTAT_IRQS_SUM: &str = "KSTAT_IRQS_SUM";
/// `u64` global: the per-CPU symbol address of `kstat.softirqs[0]` (`unsigned int`s). When it
/// is [`GLOBAL_KSTAT_IRQS_SUM`]'s plus 8 (as in `struct kernel_stat` of 6.1, 6.12 and 7.2), the
/// programs copy `irqs_sum` and the softirqs in one read, else in two.
pub const GLOBAL_KSTAT_SOFTIRQS: &str = "KSTAT_SOFTIRQS";
/// `u32` global: how many `kstat.softirqs` entries (NR_SOFTIRQS), at most [`MAX_WORDS`].
pub const GLOBAL_KSTAT_SOFTIRQS_N: &str = "KSTAT_SOFTIRQS_N";
/// `u64` global: the per-CPU symbol address of the first `unsigned int` count of x86's
/// `irq_stat` (0: no such variable; then only `kstat.irqs_sum` counts hard interrupts).
pub const GLOBAL_IRQ_STAT_WORDS: &str = "IRQ_STAT_WORDS";
/// `u32` global: how many `unsigned int` counts follow there, at most [`MAX_WORDS`].
pub const GLOBAL_IRQ_STAT_N: &str = "IRQ_STAT_N";
/// The most `unsigned int` counts one read sums (the programs copy and sum exactly the counts
/// there are: 10 softirqs; 19 words of `irq_stat` on 6.1 and 6.12, 24 on 7.2).
pub const MAX_WORDS: u32 = 32;

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(nvcsw: u32, nivcsw: u32, hardirqs: u32, softirqs: u32) -> Snapshot {
        Snapshot {
            nvcsw,
            nivcsw,
            hardirqs,
            softirqs,
            ..Snapshot::default()
        }
    }

    #[test]
    fn a_call_nothing_touched_is_clean() {
        let s = snap(5, 7, 1000, 200);
        assert_eq!(between(&s, &s), [0, 0, 0, 0]);
    }

    #[test]
    fn interrupts_are_counted_on_a_call_that_kept_its_cpu() {
        assert_eq!(
            between(&snap(5, 7, 1000, 200), &snap(5, 7, 1003, 201)),
            [0, 0, 3, 1]
        );
        // The counters wrap at 32 bits: the difference does not.
        assert_eq!(
            between(&snap(0, 0, u32::MAX - 1, u32::MAX), &snap(0, 0, 2, 0)),
            [0, 0, 4, 1]
        );
    }

    #[test]
    fn a_switched_call_has_no_interrupt_counts() {
        assert_eq!(
            between(&snap(5, 7, 1000, 200), &snap(6, 7, 1003, 201)),
            [1, 0, UNKNOWN, UNKNOWN]
        );
        assert_eq!(
            between(&snap(5, 7, 1000, 200), &snap(5, 9, 0, 0)),
            [0, 2, UNKNOWN, UNKNOWN]
        );
    }

    #[test]
    fn large_counts_saturate_below_unknown() {
        assert_eq!(
            between(&snap(0, 0, 0, 0), &snap(0, 0, 1 << 20, 70_000)),
            [0, 0, SATURATED, SATURATED]
        );
        assert_eq!(
            between(&snap(0, 0, 0, 0), &snap(100_000, 0, 0, 0))[0],
            SATURATED
        );
    }
}
