//! The disturbance counters (see `damon_common::disturb`): read at a call's entry, before its
//! time stamp, and at its return, after the return's time stamp, so everything that can switch
//! the task or interrupt the CPU between the two stamps falls between the two reads.
//!
//! The task's counts are loaded from `current` (`bpf_get_current_task_btf`, a pointer the
//! verifier knows as `struct task_struct`) at BTF offsets; the CPU's are copied from its
//! per-CPU variables, at their symbol's address plus the CPU's entry in `__per_cpu_offset`
//! (aya loads no per-CPU ksyms, so the programs compute what `per_cpu_ptr()` does). Every
//! address and offset comes from userspace (`probe::tracer::disturb`), which turns the snapshots off
//! when one is missing; a failed read counts as 0 and so can only hide a disturbance, which
//! the host tests of the reading and the guest tests of the flags would show.
//!
//! What a snapshot costs, per call twice: the globals are read-only data the kernel freezes,
//! so the verifier knows every offset, address and count below (the loads from the task need
//! that) and can drop the branches they decide (the layout test, the sums' exits); what runs
//! is two loads from the task, one lookup of this CPU's [`Scratch`] (which keeps the CPU's
//! per-CPU base after its first snapshot), one copy of `kstat` (`irqs_sum` and `softirqs[]`,
//! adjacent in `struct kernel_stat`), one of exactly the words of `irq_stat`, and a sum over
//! each.
use core::mem::offset_of;

use aya_ebpf::{
    helpers::{bpf_get_smp_processor_id, generated},
    macros::map,
    maps::PerCpuArray,
};
use damon_common::disturb::{MAX_WORDS, Snapshot};

use crate::{
    args::{global, global64, kernel_u64},
    clocks,
};

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

/// One CPU's scratch value: its per-CPU base, and where a snapshot copies the CPU's counts
/// before summing them (the BPF stack, 512 bytes, has no room for them beside a stamp stack).
///
/// A program that an interrupt's program overwrites the counts under sums counts read a
/// little later: still counts read between the start and the end of this snapshot, so the
/// snapshot can only move by what happened during itself, outside the timed span. The base
/// it would write is the same (programs do not migrate while they run).
#[repr(C)]
struct Scratch {
    /// `__per_cpu_offset[cpu]` of the CPU this value belongs to, once `based` is 1: set at
    /// boot and never changed, so each CPU reads it once.
    base: u64,
    based: u64,
    /// `kstat.irqs_sum`, then `kstat.softirqs[]`: one copy when they are adjacent.
    irqs_sum: u64,
    softirqs: [u32; MAX_WORDS as usize],
    /// x86's `irq_stat` counts.
    irq_stat: [u32; MAX_WORDS as usize],
}

#[map(name = "DISTURB_SCRATCH")]
static SCRATCH: PerCpuArray<Scratch> = PerCpuArray::with_max_entries(1, 0);

/// Copies `size` bytes at kernel address `addr` to `dst`. The return code is not looked at:
/// a failed read leaves zeros (`bpf_probe_read_kernel` clears the destination on failure),
/// which is the 0 a failed read counts as.
#[inline(always)]
fn copy(dst: *mut u8, size: u32, addr: u64) {
    // SAFETY: the helper checks the source address and fails instead of faulting; `dst` is a
    // map value with at least `size` bytes from there (callers bound `size`).
    unsafe { generated::bpf_probe_read_kernel(dst.cast(), size, addr as *const _) };
}

/// The sum of the first `n` (at most [`MAX_WORDS`]) of `words`, which the compiler unrolls:
/// each word is a load, an add and a test of `n` (known to the verifier, see above).
#[inline(always)]
fn sum(words: &[u32; MAX_WORDS as usize], n: u32) -> u32 {
    let mut sum = 0u32;
    for (i, w) in words.iter().enumerate() {
        if (i as u32) < n {
            sum = sum.wrapping_add(*w);
        }
    }
    sum
}

/// The task's switch counts, `(nvcsw, nivcsw)`: plain loads from `current`, which the
/// verifier turns into loads that count a fault as 0 (as a failed read would).
#[inline(always)]
fn switches() -> (u32, u32) {
    // SAFETY: helper without preconditions: the running task, never null.
    let task = unsafe { generated::bpf_get_current_task_btf() } as *const u8;
    // SAFETY: the offsets are those of `task_struct`'s `unsigned long` members `nvcsw` and
    // `nivcsw` (from BTF); the verifier checks each load against the kernel's BTF.
    let count = |off: &u32| unsafe {
        core::ptr::read_volatile(task.add(global(off) as usize).cast::<u64>()) as u32
    };
    (count(&TASK_NVCSW_OFF), count(&TASK_NIVCSW_OFF))
}

/// This CPU's per-CPU base (`__per_cpu_offset[cpu]`); 0 when it cannot be read. A plain
/// number, not an `Option`: the compiler loads an `Option`'s payload before testing it, and
/// Linux 6.1's verifier refuses that read of stack never written (a `None`'s payload).
#[inline(always)]
pub(crate) fn cpu_base() -> u64 {
    SCRATCH.get_ptr_mut(0).and_then(base_of).unwrap_or(0)
}

/// The per-CPU base kept in this CPU's [`Scratch`] `p`, read at the CPU's first snapshot.
#[inline(always)]
fn base_of(p: *mut Scratch) -> Option<u64> {
    // SAFETY: this CPU's map value, valid for the program's run.
    let s = unsafe { &mut *p };
    if s.based != 0 {
        return Some(s.base);
    }
    // SAFETY: helper without preconditions.
    let cpu = unsafe { bpf_get_smp_processor_id() };
    let base = kernel_u64(global64(&PER_CPU_OFFSET_SYM) + 8 * u64::from(cpu))?;
    s.base = base;
    s.based = 1;
    Some(base)
}

/// This CPU's counts, `(hardirqs, softirqs)`, and its per-CPU base (0: unknown, see
/// [`cpu_base`]).
#[inline(always)]
fn interrupts() -> (u32, u32, u64) {
    let Some(p) = SCRATCH.get_ptr_mut(0) else {
        return (0, 0, 0);
    };
    let Some(base) = base_of(p) else {
        return (0, 0, 0);
    };
    // SAFETY: field offsets within the map value.
    let field = |off: usize| unsafe { p.cast::<u8>().add(off) };
    let (irqs_sum, softirqs) = (global64(&KSTAT_IRQS_SUM), global64(&KSTAT_SOFTIRQS));
    let nr_softirqs = global(&KSTAT_SOFTIRQS_N).min(MAX_WORDS);
    let to = field(offset_of!(Scratch, irqs_sum));
    if softirqs == irqs_sum + 8 {
        copy(to, 8 + 4 * nr_softirqs, irqs_sum.wrapping_add(base));
    } else {
        copy(to, 8, irqs_sum.wrapping_add(base));
        let to = field(offset_of!(Scratch, softirqs));
        copy(to, 4 * nr_softirqs, softirqs.wrapping_add(base));
    }
    // SAFETY: as above; the copies are done.
    let s = unsafe { &*p };
    let (mut hardirqs, softirqs) = (s.irqs_sum as u32, sum(&s.softirqs, nr_softirqs));
    let words = global64(&IRQ_STAT_WORDS);
    if words != 0 {
        let n = global(&IRQ_STAT_N).min(MAX_WORDS);
        copy(
            field(offset_of!(Scratch, irq_stat)),
            4 * n,
            words.wrapping_add(base),
        );
        // SAFETY: as above.
        let s = unsafe { &*p };
        hardirqs = hardirqs.wrapping_add(sum(&s.irq_stat, n));
    }
    (hardirqs, softirqs, base)
}

/// The counters now: the task's switch counts, the CPU's interrupt counts and, when they are
/// kept, the task's clocks (`clocks`; `open`: at a call's entry, which creates the task's
/// clock). The clocks are read last at an entry and first at a return, next to the call's
/// stamps: an interrupt or a switch that lands in a snapshot is then in the call's counts
/// whenever it is in its clocks (it may be in the counts only), so no call has interrupt time
/// without an interrupt counted, nor off-CPU time without a switch.
#[inline(always)]
pub(crate) fn snapshot(open: bool) -> Snapshot {
    let mut snap = Snapshot::default();
    if !open && clocks::on() {
        clocks::read(&mut snap, clocks::cpu_irq_here(), false);
    }
    let (nvcsw, nivcsw) = switches();
    let (hardirqs, softirqs, base) = interrupts();
    snap.nvcsw = nvcsw;
    snap.nivcsw = nivcsw;
    snap.hardirqs = hardirqs;
    snap.softirqs = softirqs;
    if open && clocks::on() {
        clocks::read(&mut snap, clocks::cpu_irq(base), true);
    }
    snap
}

/// [`snapshot`] when snapshots are on, zeros otherwise.
#[inline(always)]
pub(crate) fn snapshot_if_on(open: bool) -> Snapshot {
    if on() {
        snapshot(open)
    } else {
        Snapshot::default()
    }
}
