//! Kernel mode with disturbance measured: the disturbed calls counted beside the histogram, per
//! bucket and per reason (`damon_common::disturb::DisturbedStats`), so that userspace gets the
//! clean calls' histogram as the difference.
use aya_ebpf::{macros::map, maps::PerCpuArray};
use damon_common::{
    HIST_BUCKETS, MAX_FUNCS,
    disturb::{Class, DisturbedStats},
};

/// Per-CPU counts of disturbed calls per bucket, laid out as `HIST`.
#[map(name = "DISTURBED_HIST")]
static DISTURBED_HIST: PerCpuArray<u64> =
    PerCpuArray::with_max_entries(MAX_FUNCS * HIST_BUCKETS, 0);

/// Per-CPU disturbed calls by reason and their summed durations, per function.
#[map(name = "DISTURBED_STATS")]
static DISTURBED_STATS: PerCpuArray<DisturbedStats> = PerCpuArray::with_max_entries(MAX_FUNCS, 0);

/// Counts a call of `func` in `bucket` taking `duration` ns when `dist` (its `[slept,
/// preempted, hardirqs, softirqs]`) says it was disturbed. Only the function's exit program
/// writes these slots, so plain adds are exact (`add_own`).
#[inline(always)]
pub(crate) fn count(func: u32, bucket: u32, duration: u64, dist: [u16; 4]) {
    let class = Class::of(dist);
    if class == Class::Clean {
        return;
    }
    if let Some(slot) = DISTURBED_HIST.get_ptr_mut(func * HIST_BUCKETS + bucket) {
        crate::add_own(slot, 1);
    }
    if let Some(st) = DISTURBED_STATS.get_ptr_mut(func) {
        // SAFETY: a valid map value that only this program writes on this CPU.
        unsafe { &mut *st }.add(class, duration);
    }
}
