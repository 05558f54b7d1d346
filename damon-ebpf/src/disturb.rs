//! The disturbance counters (see `damon_common::disturb`): read at a call's entry, before its
//! time stamp, and at its return, after the return's time stamp, so everything that can switch
//! the task or interrupt the CPU between the two stamps falls between the two reads.
//!
//! The task's counts are read from `current` at BTF offsets; the CPU's from its per-CPU
//! variables, at their symbol's address plus the CPU's entry in `__per_cpu_offset` (aya loads
//! no per-CPU ksyms, so the programs compute what `per_cpu_ptr()` does). Every address and
//! offset comes from userspace (`probe::disturb`), which turns the snapshots off when one is
//! missing; a failed read counts as 0 and so can only hide a disturbance, which the host tests
//! of the reading and the guest tests of the flags would show.
use aya_ebpf::{
    helpers::{bpf_get_current_task, bpf_get_smp_processor_id, generated},
    macros::map,
    maps::PerCpuArray,
};
use damon_common::disturb::{MAX_WORDS, Snapshot};

use crate::args::{global, global64, kernel_u64};

#[unsafe(no_mangle)]
static DISTURB_ON: u32 = 0;
#[unsafe(no_mangle)]
static TASK_NVCSW_OFF: u32 = 0;
#[unsafe(no_mangle)]
static TASK_NIVCSW_OFF: u32 = 0;
#[unsafe(no_mangle)]
static PER_CPU_OFFSET_SYM: u64 = 0;
#[unsafe(no_mangle)]
static KSTAT_IRQS_SUM: u64 = 0;
#[unsafe(no_mangle)]
static KSTAT_SOFTIRQS: u64 = 0;
#[unsafe(no_mangle)]
static KSTAT_SOFTIRQS_N: u32 = 0;
#[unsafe(no_mangle)]
static IRQ_STAT_WORDS: u64 = 0;
#[unsafe(no_mangle)]
static IRQ_STAT_N: u32 = 0;

/// Whether the programs take snapshots (stream mode, every counter found).
#[inline(always)]
pub(crate) fn on() -> bool {
    global(&DISTURB_ON) != 0
}

/// Where [`sum_words`] copies the counts it sums: the BPF stack (512 bytes) has no room for
/// them beside a stamp stack. A program that an interrupt's program overwrites it under sums
/// counts read a little later: still counts read between the start and the end of this
/// snapshot, so the snapshot can only move by what happened during itself, outside the timed
/// span.
#[map(name = "DISTURB_SCRATCH")]
static SCRATCH: PerCpuArray<[u32; MAX_WORDS as usize]> = PerCpuArray::with_max_entries(1, 0);

/// The sum of the first `n` (at most [`MAX_WORDS`]) `unsigned int`s at `addr`.
#[inline(always)]
fn sum_words(addr: u64, n: u32) -> u32 {
    let Some(buf) = SCRATCH.get_ptr_mut(0) else {
        return 0;
    };
    // SAFETY: the helper checks the source address and fails instead of faulting; `buf` is a
    // map value of exactly the size copied.
    let rc = unsafe {
        generated::bpf_probe_read_kernel(
            buf.cast(),
            MAX_WORDS * 4,
            addr as *const core::ffi::c_void,
        )
    };
    if addr == 0 || rc != 0 {
        return 0;
    }
    // SAFETY: as above.
    let words = unsafe { &*buf };
    let mut sum = 0u32;
    for (i, w) in words.iter().enumerate() {
        if (i as u32) < n {
            sum = sum.wrapping_add(*w);
        }
    }
    sum
}

/// The counters now: the task's switch counts, then the CPU's interrupt counts.
#[inline(always)]
pub(crate) fn snapshot() -> Snapshot {
    // SAFETY: helper without preconditions.
    let task = unsafe { bpf_get_current_task() };
    let nvcsw = kernel_u64(task + u64::from(global(&TASK_NVCSW_OFF))).unwrap_or(0) as u32;
    let nivcsw = kernel_u64(task + u64::from(global(&TASK_NIVCSW_OFF))).unwrap_or(0) as u32;
    // SAFETY: helper without preconditions.
    let cpu = unsafe { bpf_get_smp_processor_id() };
    let base = kernel_u64(global64(&PER_CPU_OFFSET_SYM) + 8 * u64::from(cpu)).unwrap_or(0);
    let irqs_sum = kernel_u64(global64(&KSTAT_IRQS_SUM).wrapping_add(base)).unwrap_or(0) as u32;
    let words = global64(&IRQ_STAT_WORDS);
    let arch = if words == 0 {
        0
    } else {
        sum_words(words.wrapping_add(base), global(&IRQ_STAT_N))
    };
    let softirqs = sum_words(
        global64(&KSTAT_SOFTIRQS).wrapping_add(base),
        global(&KSTAT_SOFTIRQS_N),
    );
    Snapshot {
        nvcsw,
        nivcsw,
        hardirqs: irqs_sum.wrapping_add(arch),
        softirqs,
    }
}

/// [`snapshot`] when snapshots are on, zeros otherwise.
#[inline(always)]
pub(crate) fn snapshot_if_on() -> Snapshot {
    if on() {
        snapshot()
    } else {
        Snapshot::default()
    }
}
