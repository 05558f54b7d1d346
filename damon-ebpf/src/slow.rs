//! Slow calls kept with their kernel stacks (`record --slow`, stream mode; see
//! `damon_common::slow`). A call whose wall time is at least the global [`SLOW_NS`] is written
//! a second time, with the stack at its return, into a ring of its own; a call that does not
//! fit is counted ([`SlowCounter::RingFull`]). With the threshold at 0 (off) the exit path pays
//! one global load and compare.
//!
//! The stack is `bpf_get_stack(ctx, .., 0)`: kernel addresses, innermost first. What its first
//! frames are depends on the attach method (checked in the guest, `lab/tests/vm_slow.rs`):
//! under a kretprobe or kprobe session the walk starts at the probed function's caller (the
//! return address the rethook restored into `regs->ip`); under fexit and fsession it starts
//! inside the BPF machinery (this program, then the function's trampoline, both
//! `[bpf]` symbols in kallsyms), then the traced function's caller. Userspace drops those
//! leading `[bpf]` frames when it symbolizes (`probe::symbols`), so every method's stack starts
//! at the caller of the traced function.
use aya_ebpf::{
    helpers::bpf_get_stack,
    macros::map,
    maps::{PerCpuArray, RingBuf},
};
use damon_common::{
    CallRecord, MAX_FUNCS,
    slow::{NR_SLOW_COUNTERS, SLOW_RING_BYTES, SLOW_STACK_DEPTH, SlowCounter, SlowEvent},
};

use crate::args::global64;

/// The threshold in ns (`damon_common::slow::GLOBAL_SLOW_NS`), 0 = off; set by the loader.
#[unsafe(no_mangle)]
static SLOW_NS: u64 = 0;

#[map(name = "SLOW_EVENTS")]
static SLOW_EVENTS: RingBuf = RingBuf::with_byte_size(SLOW_RING_BYTES, 0);

/// Per-CPU counts, index [`SlowCounter::index`]; only a function's exit program writes its
/// slots (plain adds, see `crate::add_own`).
#[map(name = "SLOW_COUNTERS")]
static SLOW_COUNTERS: PerCpuArray<u64> =
    PerCpuArray::with_max_entries(MAX_FUNCS * NR_SLOW_COUNTERS, 0);

/// Keeps `record` with the kernel stack of the program's `ctx` when the call is slow.
#[inline(always)]
pub(crate) fn keep_if_slow(ctx: *mut core::ffi::c_void, record: &CallRecord) {
    let threshold = global64(&SLOW_NS);
    if threshold == 0 || record.duration_ns < threshold {
        return;
    }
    keep(ctx, record);
}

#[inline(never)]
fn keep(ctx: *mut core::ffi::c_void, record: &CallRecord) {
    let func = record.func;
    let Some(mut slot) = SLOW_EVENTS.reserve::<SlowEvent>(0) else {
        count(func, SlowCounter::RingFull);
        return;
    };
    let event = slot.as_mut_ptr();
    // SAFETY: `event` points at the reserved bytes of one SlowEvent; the helper writes at most
    // the size given into `ips` and returns the bytes written or a negative error.
    let depth = unsafe {
        (*event).call = *record;
        (*event)._pad = 0;
        let ips = core::ptr::addr_of_mut!((*event).ips);
        let n = bpf_get_stack(ctx, ips.cast(), (SLOW_STACK_DEPTH * 8) as u32, 0);
        if n > 0 { (n as u32) / 8 } else { 0 }
    };
    // SAFETY: as above.
    unsafe { (*event).depth = depth };
    slot.submit(0);
    count(func, SlowCounter::Kept);
}

#[inline(always)]
fn count(func: u32, counter: SlowCounter) {
    if let Some(slot) = SLOW_COUNTERS.get_ptr_mut(counter.index(func)) {
        crate::add_own(slot, 1);
    }
}
