//! The time breakdown's per-task clocks (see `damon_common::breakdown`): the off-CPU clock,
//! kept by the `sched_switch` program below, and the interrupt clock, which follows the
//! interrupt time of the CPU the task runs on (`cpu_irqtime.total`, IRQ time accounting).
//!
//! A snapshot (`disturb::snapshot`) reads the running task's clock: one lookup in
//! [`TASK_CLOCKS`] (at a call's entry, an insert when the task has none yet), and, on a kernel
//! with IRQ time accounting, one read of the CPU's total. Nothing runs while [`BREAKDOWN_ON`]
//! is 0 (a read-only global the verifier knows, so the branch is dropped).
use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{btf_tracepoint, map},
    maps::LruHashMap,
    programs::BtfTracePointContext,
};
use damon_common::{
    breakdown::{MAX_TASK_CLOCKS, TaskClock, UNKNOWN_NS, between},
    disturb::Snapshot,
};

use crate::args::{global, global64, kernel_u64};

/// 1 when the task clocks are kept (stream mode with `--disturbance`, the `sched_switch`
/// program attached).
#[unsafe(no_mangle)]
static BREAKDOWN_ON: u32 = 0;
/// Byte offset of `pid` (the thread id) in `struct task_struct`.
#[unsafe(no_mangle)]
static TASK_PID_OFF: u32 = 0;
/// Per-CPU symbol address of `cpu_irqtime.total`; 0 without IRQ time accounting.
#[unsafe(no_mangle)]
static CPU_IRQTIME_TOTAL: u64 = 0;

/// Per task (thread id) that has made a traced call: its clocks.
#[map(name = "TASK_CLOCKS")]
static TASK_CLOCKS: LruHashMap<u32, TaskClock> = LruHashMap::with_max_entries(MAX_TASK_CLOCKS, 0);

/// Whether snapshots read the task clocks.
#[inline(always)]
pub(crate) fn on() -> bool {
    global(&BREAKDOWN_ON) != 0
}

/// The interrupt time of the CPU whose per-CPU base is `base` (0: unknown, the clock then
/// stands still); 0 on a kernel without IRQ time accounting. A failed read counts as 0.
#[inline(always)]
pub(crate) fn cpu_irq(base: u64) -> u64 {
    let total = global64(&CPU_IRQTIME_TOTAL);
    if base == 0 || total == 0 {
        return 0;
    }
    kernel_u64(total.wrapping_add(base)).unwrap_or(0)
}

/// Fills `snap`'s clock fields from the running task's clock, on a CPU whose interrupt time is
/// `cpu_irq`; `open` (a call's entry) creates the clock when the task has none. Left
/// unclocked for the idle tasks (tid 0, one per CPU) and when the map has no clock to give.
#[inline(always)]
pub(crate) fn read(snap: &mut Snapshot, cpu_irq: u64, open: bool) {
    let tid = bpf_get_current_pid_tgid() as u32;
    if tid == 0 {
        return;
    }
    if let Some(c) = TASK_CLOCKS.get_ptr(tid) {
        // SAFETY: a valid map value; only this task's switches write it, never while it runs.
        let c = unsafe { &*c };
        snap.clocked = 1;
        snap.off_ns = c.off_ns;
        snap.irq_ns = c.irq_now(cpu_irq);
        return;
    }
    if open
        && TASK_CLOCKS
            .insert(tid, TaskClock::new(cpu_irq), u64::from(BPF_NOEXIST))
            .is_ok()
    {
        // A new clock reads 0 on both.
        snap.clocked = 1;
    }
}

/// The record's `[off_cpu_ns, irq_ns]` for a call with these snapshots; zeros while the
/// clocks are off.
#[inline(always)]
pub(crate) fn fields(entry: &Snapshot, exit: &Snapshot) -> [u32; 2] {
    if on() { between(entry, exit) } else { [0; 2] }
}

/// The fields of a session call whose entry snapshot was lost.
#[inline(always)]
pub(crate) fn lost() -> [u32; 2] {
    if on() { [UNKNOWN_NS; 2] } else { [0; 2] }
}

/// `sched_switch(preempt, prev, next, prev_state)`: `prev` (the running task) leaves the CPU,
/// `next` gets it; each one's clock, if it has one, is moved on.
#[btf_tracepoint(function = "sched_switch")]
pub fn task_clocks(ctx: BtfTracePointContext) -> i32 {
    if !on() {
        return 0;
    }
    // SAFETY: helper without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let cpu_irq = cpu_irq(crate::disturb::cpu_base());
    let prev = bpf_get_current_pid_tgid() as u32;
    if prev != 0
        && let Some(c) = TASK_CLOCKS.get_ptr_mut(prev)
    {
        // SAFETY: a valid map value; this task's switch-out, on its CPU.
        unsafe { &mut *c }.switch_out(now, cpu_irq);
    }
    // SAFETY: argument 2 of the tracepoint is `struct task_struct *next`, a pointer the
    // verifier knows by BTF; `TASK_PID_OFF` is the offset of its `pid_t pid` (from BTF), and
    // the verifier checks the load against the kernel's BTF.
    let next = unsafe {
        let task: *const u8 = ctx.arg(2);
        core::ptr::read_volatile(task.add(global(&TASK_PID_OFF) as usize).cast::<u32>())
    };
    if next != 0
        && let Some(c) = TASK_CLOCKS.get_ptr_mut(next)
    {
        // SAFETY: a valid map value; the task is not running (it is being switched in).
        unsafe { &mut *c }.switch_in(now, cpu_irq);
    }
    0
}
