//! Where a call's wall time went (`--disturbance`, stream mode): time off the CPU, time in
//! interrupts, and the rest, the function's own on-CPU time.
//!
//! Two clocks per task, read at the call's entry and at its return with the disturbance
//! counters (they are part of [`Snapshot`]), so a call's share of each is a difference:
//! - the **off-CPU clock**, which advances only while the task is switched out (asleep or
//!   preempted): the `sched_switch` program stamps a task's switch-out and adds the time to its
//!   clock when it is switched back in, in `bpf_ktime_get_ns()` time, the durations' own clock;
//! - the **interrupt clock**, which advances by the interrupt time of the CPU the task is on
//!   while it is on it: the kernel's IRQ time accounting (`cpu_irqtime.total`, hard and soft
//!   interrupts, `CONFIG_IRQ_TIME_ACCOUNTING`) read at entry, at return and at each switch, or,
//!   on a kernel without it, damon-trace's own per-CPU [`IrqClock`] from the interrupt
//!   tracepoints.
//!
//! Both live in one [`TaskClock`] per task that has made a traced call ([`MAP_TASK_CLOCKS`]),
//! created at the task's first traced call; tasks that never make one are only looked up at a
//! switch. A call whose task has no clock (the map was full) or whose entry snapshot was lost
//! has both fields [`UNKNOWN_NS`].
//!
//! [`Snapshot`]: crate::disturb::Snapshot

use crate::disturb::Snapshot;

/// A breakdown field that is not known.
pub const UNKNOWN_NS: u32 = u32::MAX;
/// A breakdown field of 2^32 - 2 ns (about 4.3 s) or more.
pub const SATURATED_NS: u32 = u32::MAX - 1;

/// One task's two clocks (see the module).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskClock {
    /// `bpf_ktime_get_ns()` at the task's last switch-out; 0 while it runs.
    pub out_ns: u64,
    /// The off-CPU clock: time switched out since the clock was created.
    pub off_ns: u64,
    /// The task's CPU's interrupt time when the task last got that CPU.
    pub irq_in: u64,
    /// The interrupt clock up to the task's last switch-out.
    pub irq_acc: u64,
}

impl TaskClock {
    /// A clock for a task running on a CPU whose interrupt time is `cpu_irq`.
    #[inline(always)]
    pub fn new(cpu_irq: u64) -> TaskClock {
        TaskClock {
            irq_in: cpu_irq,
            ..TaskClock::default()
        }
    }

    /// The interrupt clock now, for the running task on a CPU whose interrupt time is
    /// `cpu_irq`. A `cpu_irq` older than the task's last switch-in (read before a preemption
    /// inside a tracing program, which a preemptible kernel allows) counts as that switch-in:
    /// the clock never runs backwards.
    #[inline(always)]
    pub fn irq_now(&self, cpu_irq: u64) -> u64 {
        self.irq_acc
            .wrapping_add(cpu_irq.saturating_sub(self.irq_in))
    }

    /// The task leaves its CPU at `now`.
    #[inline(always)]
    pub fn switch_out(&mut self, now: u64, cpu_irq: u64) {
        self.irq_acc = self.irq_now(cpu_irq);
        self.irq_in = cpu_irq;
        self.out_ns = now;
    }

    /// The task gets a CPU (whose interrupt time is `cpu_irq`) at `now`.
    #[inline(always)]
    pub fn switch_in(&mut self, now: u64, cpu_irq: u64) {
        if self.out_ns != 0 {
            self.off_ns = self.off_ns.wrapping_add(now.wrapping_sub(self.out_ns));
            self.out_ns = 0;
        }
        self.irq_in = cpu_irq;
    }
}

/// A clock difference as a record field.
#[inline(always)]
fn field(entry: u64, exit: u64) -> u32 {
    let d = exit.wrapping_sub(entry);
    if d >= u64::from(SATURATED_NS) {
        SATURATED_NS
    } else {
        d as u32
    }
}

/// The record's `[off_cpu_ns, irq_ns]` for a call with these snapshots (both taken with the
/// task's clock: see [`Snapshot::clocked`]).
#[inline(always)]
pub fn between(entry: &Snapshot, exit: &Snapshot) -> [u32; 2] {
    if entry.clocked == 0 || exit.clocked == 0 {
        return [UNKNOWN_NS; 2];
    }
    [
        field(entry.off_ns, exit.off_ns),
        field(entry.irq_ns, exit.irq_ns),
    ]
}

/// Name of the LRU hash map of [`TaskClock`]s, keyed by thread id.
pub const MAP_TASK_CLOCKS: &str = "TASK_CLOCKS";
/// Its entries: tasks that have made a traced call (the least recently used goes first).
pub const MAX_TASK_CLOCKS: u32 = 16384;
/// `u32` global: 1 when the programs keep the task clocks (the `sched_switch` program is
/// attached), 0 off.
pub const GLOBAL_BREAKDOWN_ON: &str = "BREAKDOWN_ON";
/// `u32` global: byte offset of `pid` (the thread id) in `struct task_struct`, for the task
/// switched in.
pub const GLOBAL_TASK_PID_OFF: &str = "TASK_PID_OFF";
/// `u64` global: the per-CPU symbol address of `cpu_irqtime.total` (a `u64`, ns); 0 when the
/// kernel has no IRQ time accounting: the interrupt clock then stands still, and a call's
/// interrupt time is in its on-CPU time (the capture's metadata says so).
pub const GLOBAL_CPU_IRQTIME_TOTAL: &str = "CPU_IRQTIME_TOTAL";

/// `u32` global: 1 when the interrupt clock is damon-trace's own [`IrqClock`] (the kernel has
/// no IRQ time accounting and the interrupt tracepoints' programs are attached), 0 otherwise.
pub const GLOBAL_IRQ_CLOCK_ON: &str = "IRQ_CLOCK_ON";
/// Name of the per-CPU array (one entry) of [`IrqClock`]s.
pub const MAP_IRQ_CLOCK: &str = "IRQ_CLOCK";

/// A CPU's interrupt time, kept by programs on the interrupt tracepoints where the kernel does
/// not account for it ([`IRQ_CLOCK_TRACEPOINTS`]): the time between a handler's entry and exit
/// tracepoints, hard (device handlers and the x86 system vectors: local timer, reschedule,
/// function calls, irq work) and soft (each softirq action). A hard interrupt inside a softirq
/// is already in the softirq's time and is not added again. What it cannot see: the kernel's
/// interrupt entry and exit around the handlers, interrupts without a tracepoint, and NMIs.
///
/// Each kind has its own start and flag, and an entry always restarts its kind: a missed exit
/// (a program attached between the two) costs at most one interval, never a clock that stops.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IrqClock {
    /// Interrupt time on this CPU since the clock started (ns, `bpf_ktime_get_ns()` time).
    pub total_ns: u64,
    pub hard_since: u64,
    pub soft_since: u64,
    /// 1 while in a hard interrupt handler / a softirq action.
    pub hard: u32,
    pub soft: u32,
}

impl IrqClock {
    #[inline(always)]
    pub fn enter_hard(&mut self, now: u64) {
        self.hard = 1;
        self.hard_since = now;
    }

    #[inline(always)]
    pub fn leave_hard(&mut self, now: u64) {
        if self.hard == 1 {
            self.hard = 0;
            if self.soft == 0 {
                self.total_ns = self
                    .total_ns
                    .wrapping_add(now.wrapping_sub(self.hard_since));
            }
        }
    }

    #[inline(always)]
    pub fn enter_soft(&mut self, now: u64) {
        self.soft = 1;
        self.soft_since = now;
    }

    #[inline(always)]
    pub fn leave_soft(&mut self, now: u64) {
        if self.soft == 1 {
            self.soft = 0;
            self.total_ns = self
                .total_ns
                .wrapping_add(now.wrapping_sub(self.soft_since));
        }
    }
}

/// Which [`IrqClock`] step a tracepoint's program takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IrqStep {
    EnterHard,
    LeaveHard,
    EnterSoft,
    LeaveSoft,
}

/// The interrupt clock's programs: (program name, tracepoint, step, required). Userspace
/// attaches the exits first, so that no entry is seen whose exit is not; the clock is used only
/// when every required one is attached (the x86 system vectors' are taken where the kernel has
/// them).
pub const IRQ_CLOCK_TRACEPOINTS: [(&str, &str, IrqStep, bool); 14] = [
    (
        "irqc_hard_out",
        "irq_handler_exit",
        IrqStep::LeaveHard,
        true,
    ),
    ("irqc_soft_out", "softirq_exit", IrqStep::LeaveSoft, true),
    (
        "irqc_timer_out",
        "local_timer_exit",
        IrqStep::LeaveHard,
        false,
    ),
    (
        "irqc_resched_out",
        "reschedule_exit",
        IrqStep::LeaveHard,
        false,
    ),
    (
        "irqc_call_out",
        "call_function_exit",
        IrqStep::LeaveHard,
        false,
    ),
    (
        "irqc_call1_out",
        "call_function_single_exit",
        IrqStep::LeaveHard,
        false,
    ),
    ("irqc_work_out", "irq_work_exit", IrqStep::LeaveHard, false),
    (
        "irqc_hard_in",
        "irq_handler_entry",
        IrqStep::EnterHard,
        true,
    ),
    ("irqc_soft_in", "softirq_entry", IrqStep::EnterSoft, true),
    (
        "irqc_timer_in",
        "local_timer_entry",
        IrqStep::EnterHard,
        false,
    ),
    (
        "irqc_resched_in",
        "reschedule_entry",
        IrqStep::EnterHard,
        false,
    ),
    (
        "irqc_call_in",
        "call_function_entry",
        IrqStep::EnterHard,
        false,
    ),
    (
        "irqc_call1_in",
        "call_function_single_entry",
        IrqStep::EnterHard,
        false,
    ),
    ("irqc_work_in", "irq_work_entry", IrqStep::EnterHard, false),
];

/// A call's time, split (user side; see [`crate::CallRecord::breakdown`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Breakdown {
    pub wall_ns: u64,
    pub off_cpu_ns: u64,
    pub irq_ns: u64,
    /// `wall_ns - off_cpu_ns - irq_ns` (0 if those exceed it: the clocks are read a few
    /// instructions apart from the time stamps).
    pub on_cpu_ns: u64,
}

impl crate::CallRecord {
    /// The record's breakdown; `None` when a part is unknown or saturated (only meaningful in a
    /// capture whose metadata says it was measured).
    pub fn breakdown(&self) -> Option<Breakdown> {
        let known = |v: u32| (v < SATURATED_NS).then_some(u64::from(v));
        let off_cpu_ns = known(self.off_cpu_ns)?;
        let irq_ns = known(self.irq_ns)?;
        Some(Breakdown {
            wall_ns: self.duration_ns,
            off_cpu_ns,
            irq_ns,
            on_cpu_ns: self
                .duration_ns
                .saturating_sub(off_cpu_ns)
                .saturating_sub(irq_ns),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CPU interrupt time read before the task was switched out and back in (a tracing
    /// program preempted between its two reads) does not turn the clock back.
    #[test]
    fn an_interrupt_time_older_than_the_switch_in_does_not_turn_the_clock_back() {
        let mut c = TaskClock::new(1_000);
        let stale = 1_200;
        c.switch_out(5_000, 1_500);
        c.switch_in(9_000, 2_000);
        assert_eq!(c.irq_now(stale), 500);
        assert_eq!(c.irq_now(2_300), 800);
    }

    /// A hard interrupt, then a softirq with a hard interrupt inside it: the total is the hard
    /// interrupt's time and the softirq's whole, the nested one not twice.
    #[test]
    fn irq_clock_counts_nested_hard_interrupts_once() {
        let mut c = IrqClock::default();
        c.enter_hard(100);
        c.leave_hard(130);
        assert_eq!(c.total_ns, 30);
        c.enter_soft(200);
        c.enter_hard(210);
        c.leave_hard(220);
        assert_eq!(c.total_ns, 30, "inside the softirq");
        c.leave_soft(300);
        assert_eq!(c.total_ns, 130);
        assert_eq!((c.hard, c.soft), (0, 0));
    }

    /// An exit whose entry was not seen adds nothing; an entry whose exit was not seen is
    /// restarted by the next entry, so the clock goes on.
    #[test]
    fn irq_clock_survives_unpaired_tracepoints() {
        let mut c = IrqClock::default();
        c.leave_hard(50);
        c.leave_soft(60);
        assert_eq!(c.total_ns, 0);
        c.enter_soft(100);
        // Its exit missed; the next softirq restarts it.
        c.enter_soft(1_000);
        c.leave_soft(1_010);
        assert_eq!(c.total_ns, 10);
        c.enter_hard(2_000);
        c.enter_hard(2_100);
        c.leave_hard(2_105);
        assert_eq!(c.total_ns, 15);
    }

    /// Exits are attached before entries, and every entry has its exit among the tracepoints.
    #[test]
    fn irq_clock_tracepoints_come_in_pairs_exits_first() {
        let n = IRQ_CLOCK_TRACEPOINTS.len();
        let (exits, entries) = IRQ_CLOCK_TRACEPOINTS.split_at(n / 2);
        for ((out_prog, out_tp, out_step, out_req), (in_prog, in_tp, in_step, in_req)) in
            exits.iter().zip(entries)
        {
            assert!(matches!(out_step, IrqStep::LeaveHard | IrqStep::LeaveSoft));
            assert!(matches!(in_step, IrqStep::EnterHard | IrqStep::EnterSoft));
            assert_eq!(out_tp.replace("_exit", ""), in_tp.replace("_entry", ""));
            assert_eq!(out_prog.replace("_out", ""), in_prog.replace("_in", ""));
            assert_eq!(out_req, in_req);
        }
    }

    fn snap(off_ns: u64, irq_ns: u64) -> Snapshot {
        Snapshot {
            clocked: 1,
            off_ns,
            irq_ns,
            ..Snapshot::default()
        }
    }

    #[test]
    fn a_clock_counts_switched_out_time_and_interrupts_on_each_cpu() {
        // Runs on CPU A (interrupt time 1000 at creation), 50 ns of interrupts, switched out
        // at t=500, back at t=800 on CPU B (interrupt time 7000), 20 ns of interrupts there.
        let mut c = TaskClock::new(1000);
        let at_entry = (c.off_ns, c.irq_now(1000));
        assert_eq!(at_entry, (0, 0));
        c.switch_out(500, 1050);
        c.switch_in(800, 7000);
        assert_eq!((c.off_ns, c.irq_now(7020)), (300, 70));
        // A second stint off the CPU adds to the first.
        c.switch_out(900, 7020);
        c.switch_in(1000, 10);
        assert_eq!((c.off_ns, c.irq_now(15)), (400, 75));
    }

    #[test]
    fn a_call_gets_the_differences_and_unknown_without_a_clock() {
        assert_eq!(between(&snap(100, 40), &snap(400, 45)), [300, 5]);
        assert_eq!(
            between(&Snapshot::default(), &snap(400, 45)),
            [UNKNOWN_NS; 2]
        );
        assert_eq!(
            between(&snap(0, 0), &snap(10_000_000_000, 0)),
            [SATURATED_NS, 0]
        );
    }

    #[test]
    fn the_breakdown_adds_up_to_the_wall_time() {
        let r = crate::CallRecord {
            duration_ns: 1_000,
            off_cpu_ns: 600,
            irq_ns: 150,
            ..Default::default()
        };
        let b = r.breakdown().unwrap();
        assert_eq!(b.on_cpu_ns, 250);
        assert_eq!(b.on_cpu_ns + b.off_cpu_ns + b.irq_ns, b.wall_ns);
        let unknown = crate::CallRecord {
            off_cpu_ns: UNKNOWN_NS,
            ..r
        };
        assert_eq!(unknown.breakdown(), None);
    }
}
