//! The time breakdown's per-task clocks (see `damon_common::breakdown`): the off-CPU clock,
//! kept by the `sched_switch` program below, and the interrupt clock, which follows the
//! interrupt time of the CPU the task runs on (`cpu_irqtime.total` with IRQ time accounting,
//! else our own [`IRQ_CLOCK`]).
//!
//! A snapshot (`disturb::snapshot`) reads the running task's clock: one lookup in
//! [`TASK_CLOCKS`] (at a call's entry, an insert when the task has none yet), and one read of
//! the CPU's interrupt time: the kernel's total on a kernel with IRQ time accounting, else our
//! own [`IRQ_CLOCK`], kept by the programs on the interrupt tracepoints at the end of this
//! file (each a lookup and a few stores per interrupt). Nothing runs while [`BREAKDOWN_ON`]
//! is 0 (a read-only global the verifier knows, so the branch is dropped).
use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{btf_tracepoint, map},
    maps::{LruHashMap, PerCpuArray},
    programs::BtfTracePointContext,
};
use damon_common::{
    breakdown::{IrqClock, IrqStep, MAX_TASK_CLOCKS, TaskClock, UNKNOWN_NS, between},
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
/// 1 when, instead, the CPUs' interrupt time is our own [`IRQ_CLOCK`].
#[unsafe(no_mangle)]
static IRQ_CLOCK_ON: u32 = 0;

/// Each CPU's interrupt time from the interrupt tracepoints (see `damon_common::breakdown::
/// IrqClock`), where the kernel does not account for it.
#[map(name = "IRQ_CLOCK")]
static IRQ_CLOCK: PerCpuArray<IrqClock> = PerCpuArray::with_max_entries(1, 0);

/// Per task (thread id) that has made a traced call: its clocks.
#[map(name = "TASK_CLOCKS")]
static TASK_CLOCKS: LruHashMap<u32, TaskClock> = LruHashMap::with_max_entries(MAX_TASK_CLOCKS, 0);

/// Whether snapshots read the task clocks.
#[inline(always)]
pub(crate) fn on() -> bool {
    global(&BREAKDOWN_ON) != 0
}

/// The interrupt time of the running CPU, whose per-CPU base is `base`: the kernel's (`base`
/// 0: unknown, the clock then stands still), else our own clock's, else 0. A failed read counts
/// as 0.
#[inline(always)]
pub(crate) fn cpu_irq(base: u64) -> u64 {
    let total = global64(&CPU_IRQTIME_TOTAL);
    if total != 0 {
        if base == 0 {
            return 0;
        }
        return kernel_u64(total.wrapping_add(base)).unwrap_or(0);
    }
    if global(&IRQ_CLOCK_ON) == 0 {
        return 0;
    }
    match IRQ_CLOCK.get_ptr(0) {
        // SAFETY: this CPU's entry; a volatile read of one u64 (the interrupt programs of this
        // CPU may write it between two reads of ours, never during one).
        Some(c) => unsafe { core::ptr::read_volatile(core::ptr::addr_of!((*c).total_ns)) },
        None => 0,
    }
}

/// [`cpu_irq`] of the running CPU, its per-CPU base looked up only where the kernel's total
/// needs it.
#[inline(always)]
pub(crate) fn cpu_irq_here() -> u64 {
    if global64(&CPU_IRQTIME_TOTAL) != 0 {
        cpu_irq(crate::disturb::cpu_base())
    } else {
        cpu_irq(0)
    }
}

/// One step of this CPU's interrupt clock.
#[inline(always)]
fn irq_step(step: IrqStep) {
    if global(&IRQ_CLOCK_ON) == 0 {
        return;
    }
    let Some(c) = IRQ_CLOCK.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: helper without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    // SAFETY: this CPU's entry, written only by this CPU's interrupt programs.
    let c = unsafe { &mut *c };
    match step {
        IrqStep::EnterHard => c.enter_hard(now),
        IrqStep::LeaveHard => c.leave_hard(now),
        IrqStep::EnterSoft => c.enter_soft(now),
        IrqStep::LeaveSoft => c.leave_soft(now),
    }
}

/// The interrupt clock's programs, one per tracepoint (`damon_common::breakdown::
/// IRQ_CLOCK_TRACEPOINTS` names them and says which are required).
macro_rules! irq_clock_programs {
    ($($name:ident, $tp:literal, $step:ident;)*) => {$(
        #[btf_tracepoint(function = $tp)]
        pub fn $name(_ctx: BtfTracePointContext) -> i32 {
            irq_step(IrqStep::$step);
            0
        }
    )*};
}

irq_clock_programs! {
    irqc_hard_out, "irq_handler_exit", LeaveHard;
    irqc_soft_out, "softirq_exit", LeaveSoft;
    irqc_timer_out, "local_timer_exit", LeaveHard;
    irqc_resched_out, "reschedule_exit", LeaveHard;
    irqc_call_out, "call_function_exit", LeaveHard;
    irqc_call1_out, "call_function_single_exit", LeaveHard;
    irqc_work_out, "irq_work_exit", LeaveHard;
    irqc_hard_in, "irq_handler_entry", EnterHard;
    irqc_soft_in, "softirq_entry", EnterSoft;
    irqc_timer_in, "local_timer_entry", EnterHard;
    irqc_resched_in, "reschedule_entry", EnterHard;
    irqc_call_in, "call_function_entry", EnterHard;
    irqc_call1_in, "call_function_single_entry", EnterHard;
    irqc_work_in, "irq_work_entry", EnterHard;
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
    let cpu_irq = cpu_irq_here();
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
