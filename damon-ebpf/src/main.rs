//! Kernel side of damon-trace: per-call latency of the traced functions.
//!
//! Each function has two program pairs, fentry/fexit and kprobe/kretprobe; the loader attaches
//! one pair. Entry pushes a timestamp, tagged with its invocation frame, on a small
//! per-(task, function) stack; the exit of the same frame takes it and writes one
//! [`CallRecord`] into the ring buffer (or adds the call to a histogram). Every outcome that is
//! not a record bumps a per-CPU counter, so userspace can account for every call.
#![no_std]
#![no_main]
// The bpf target has no compare-and-swap in its spec, so `AtomicU64` lacks `fetch_add` and
// `compare_exchange`; the intrinsics lower to the BPF atomic instructions the kernel accepts.
#![allow(internal_features)]
#![feature(core_intrinsics)]

use aya_ebpf::{
    EbpfContext as _,
    bindings::{BPF_NOEXIST, BPF_RB_AVAIL_DATA, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP},
    helpers::{
        bpf_get_current_cgroup_id, bpf_get_current_pid_tgid, bpf_get_smp_processor_id,
        bpf_ktime_get_ns,
    },
    macros::{fentry, fexit, kprobe, kretprobe, map, tracepoint},
    maps::{HashMap, PerCpuArray, RingBuf},
    programs::{FEntryContext, FExitContext, ProbeContext, RetProbeContext, TracePointContext},
};
use core::intrinsics::{AtomicOrdering, atomic_xadd};

mod args;
mod clocks;
mod disturb;
mod disturbed;
mod floor;
#[macro_use]
mod plog;
#[macro_use]
mod session;
mod slots;
mod slow;
use args::{Frame, dests_add_args, global, global64, hot_score_args, migrate_pages_args, no_args};
use damon_common::{
    AGGR_TP_NR_REGIONS_OFFSET, AGGR_TP_START_OFFSET, AGGR_TP_TARGET_ID_OFFSET, AGGREGATION_MARK,
    CallRecord, Counter, DEFAULT_HIST_WIDTH_NS, DEFAULT_RING_BYTES, FunctionId, HIST_BUCKETS,
    HistStats, MAX_FUNCS, MAX_IN_FLIGHT, MODE_KERNEL, MODE_STREAM, NR_COUNTERS, StampStack,
    hist_bucket, stamp_key,
};

/// What exit programs do with a timed call: [`MODE_STREAM`] and/or [`MODE_KERNEL`] bits, set by
/// the loader.
#[unsafe(no_mangle)]
static TRACE_MODE: u32 = MODE_STREAM;
/// Width of the linear histogram buckets, ns (kernel mode).
#[unsafe(no_mangle)]
static HIST_WIDTH_NS: u64 = DEFAULT_HIST_WIDTH_NS;
/// Bytes waiting in the ring before a record wakes the reader (0: the kernel's default).
#[unsafe(no_mangle)]
static RING_WAKE_BYTES: u64 = 0;

/// The task filter (`--tgid`, `--pid`, `--cgroup`), 0 = off: a call of another task is
/// counted as [`Counter::Filtered`] at entry, before any stamp work, and ignored at exit.
#[unsafe(no_mangle)]
static FILTER_TGID: u32 = 0;
#[unsafe(no_mangle)]
static FILTER_TID: u32 = 0;
#[unsafe(no_mangle)]
static FILTER_CGROUP: u64 = 0;

/// Whether the task filter leaves out the current task (`pid_tgid` from the helper). The
/// cgroup helper runs only when a cgroup is set.
#[inline(always)]
fn filtered_out(pid_tgid: u64) -> bool {
    let tgid = global(&FILTER_TGID);
    if tgid != 0 && (pid_tgid >> 32) as u32 != tgid {
        return true;
    }
    let tid = global(&FILTER_TID);
    if tid != 0 && pid_tgid as u32 != tid {
        return true;
    }
    let cgroup = global64(&FILTER_CGROUP);
    // SAFETY: helper without preconditions.
    cgroup != 0 && unsafe { bpf_get_current_cgroup_id() } != cgroup
}

/// The entry side of the task filter: the current task's `pid_tgid` when the filter keeps its
/// call of `func` (invocation `frame`); `None` when it leaves it out, counted as
/// [`Counter::Filtered`] (and logged at trace level).
#[inline(always)]
fn admitted(func: u32, frame: u64) -> Option<u64> {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !filtered_out(pid_tgid) {
        return Some(pid_tgid);
    }
    bump(func, Counter::Filtered);
    probe_event!(trace, "filtered task", func, pid_tgid as u32, frame, 0u64);
    None
}

/// Ring bytes one record takes (8-byte header + the record).
const RING_RECORD_BYTES: u64 = 8 + core::mem::size_of::<CallRecord>() as u64;

/// Wake-up flags for a record about to be submitted (its bytes already reserved): a forced
/// wake-up when the bytes waiting in the ring cross a multiple of the threshold, none
/// otherwise. So a reader that keeps up is woken once per threshold's worth of records, not
/// per record; one that is behind is woken again for every further threshold's worth (a
/// crossing missed because another CPU reserved in between is made up at the next one); and
/// the reader drains on a short timer too, so a trickle of records is never left unread.
#[inline(always)]
fn wake_flags() -> u64 {
    let threshold = global64(&RING_WAKE_BYTES);
    if threshold == 0 {
        return 0;
    }
    let waiting = EVENTS.query(BPF_RB_AVAIL_DATA as u64);
    if waiting >= threshold
        && waiting / threshold != waiting.saturating_sub(RING_RECORD_BYTES) / threshold
    {
        BPF_RB_FORCE_WAKEUP as u64
    } else {
        BPF_RB_NO_WAKEUP as u64
    }
}

#[map(name = "EVENTS")]
pub(crate) static EVENTS: RingBuf = RingBuf::with_byte_size(DEFAULT_RING_BYTES, 0);

#[map(name = "COUNTERS")]
static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(MAX_FUNCS * NR_COUNTERS, 0);

/// Entry stamp stacks, one per (task, function) that has called the function since attach.
/// An entry is created at a task's first call and kept when its depth returns to 0, so a task
/// that calls again pays two lookups per call and no insert/delete; userspace deletes the
/// entries of exited tasks once a second (`Tracer::collect_stamps`, which explains why that is
/// safe). A failed insert (map full) is counted as `StampFull`, as before.
///
/// The benchmark's stamp floor (`floor.rs`) keeps its stamps here too, under keys of its own.
#[map(name = "STAMPS")]
pub(crate) static STAMPS: HashMap<u64, StampStack> = HashMap::with_max_entries(MAX_IN_FLIGHT, 0);

/// Per kdamond (tid): start address of the last region of its first target that
/// `damon:damon_aggregated` reported.
#[map(name = "AGGR_LAST")]
static AGGR_LAST: HashMap<u32, u64> = HashMap::with_max_entries(256, 0);

/// Per-CPU histogram bucket counts (kernel mode), index `func * HIST_BUCKETS + bucket`.
#[map(name = "HIST")]
static HIST: PerCpuArray<u64> = PerCpuArray::with_max_entries(MAX_FUNCS * HIST_BUCKETS, 0);

/// Per-CPU count/sum/min/max per function (kernel mode).
#[map(name = "HSTATS")]
static HSTATS: PerCpuArray<HistStats> = PerCpuArray::with_max_entries(MAX_FUNCS, 0);

/// Adds `v` to a per-CPU slot with one atomic instruction: for a slot that two programs write
/// (an entry and an exit program of the same function may nest on one CPU, an interrupt's
/// call inside a task's), neither can lose an update.
#[inline(always)]
fn add(slot: *mut u64, v: u64) {
    // SAFETY: a valid, aligned map value pointer that lives as long as the map.
    unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(slot, v) };
}

/// Adds `v` to a per-CPU slot that one program alone writes, with a plain load and store.
///
/// Exact because that program cannot run twice at once on one CPU: the kernel guards every
/// fentry/fexit program with a per-CPU, per-program `active` count (`__bpf_prog_enter_recur`)
/// and every kprobe, kretprobe and tracepoint program with the per-CPU `bpf_prog_active`
/// (`trace_call_bpf`); a run that would nest, from an interrupt or from a task that preempted
/// this one, is skipped and counted by the kernel (the session's `skipped_*`), never run. So
/// between this load and this store no other writer of the slot runs on this CPU, and other
/// CPUs have their own slot.
#[inline(always)]
pub(crate) fn add_own(slot: *mut u64, v: u64) {
    // SAFETY: as in `add`; see above for why no other writer runs in between.
    unsafe { *slot += v };
}

/// Counters written by one program of their function only (entry: `Calls`, `StampFull`,
/// `Filtered`; exit: `Emitted`, `RingFull`, `OrphanExits`): a plain add (see [`add_own`]).
#[inline(always)]
fn bump(func: u32, counter: Counter) {
    if let Some(slot) = COUNTERS.get_ptr_mut(counter.index(func)) {
        add_own(slot, 1);
    }
}

/// `StaleEntries`, which both the entry and the exit program of a function add to: atomic.
#[inline(always)]
fn add_stale(func: u32, v: u64) {
    if let Some(slot) = COUNTERS.get_ptr_mut(Counter::StaleEntries.index(func)) {
        add(slot, v);
    }
}

/// Adds one timed call to its function's per-CPU histogram and statistics. Only the function's
/// exit program writes these slots, so plain loads and stores are exact (see [`add_own`]);
/// the count is not kept per call: it is the sum of the buckets, which userspace adds up.
/// For the minimum, 0 means "not set yet" (the map starts zeroed): a call timed at exactly
/// 0 ns cannot happen, the two clock reads are a trampoline apart.
///
/// A disturbed call (`dist` not all 0, only when the snapshots are on) is counted in the
/// disturbed-calls maps first, then in the histogram: the order userspace's reads rely on
/// (`probe::tracer::kernel_maps::disturbed`).
#[inline(always)]
fn histogram(func: u32, duration: u64, dist: [u16; 4]) {
    let bucket = hist_bucket(duration, global64(&HIST_WIDTH_NS));
    disturbed::count(func, bucket, duration, dist);
    if let Some(slot) = HIST.get_ptr_mut(func * HIST_BUCKETS + bucket) {
        add_own(slot, 1);
    }
    if let Some(st) = HSTATS.get_ptr_mut(func) {
        // SAFETY: a valid map value that only this program writes on this CPU (see `add_own`).
        let st = unsafe { &mut *st };
        st.sum_ns += duration;
        if st.min_ns == 0 || duration < st.min_ns {
            st.min_ns = duration;
        }
        if duration > st.max_ns {
            st.max_ns = duration;
        }
    }
}

#[inline(always)]
fn current() -> (u32, u32, u32) {
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: helper without preconditions.
    let cpu = unsafe { bpf_get_smp_processor_id() };
    ((pid_tgid >> 32) as u32, pid_tgid as u32, cpu)
}

/// The CPU number for the stamp key: only the idle tasks (tid 0) need it, 0 for every other
/// task (so the helper runs only for them).
#[inline(always)]
fn idle_cpu(tid: u32) -> u32 {
    if tid == 0 {
        // SAFETY: helper without preconditions.
        unsafe { bpf_get_smp_processor_id() }
    } else {
        0
    }
}

/// Opens a call of invocation `frame` (see [`StampStack`]): stamps it on the task's stack.
#[inline(always)]
fn on_entry(func: u32, frame: u64, args: [i64; 2]) {
    let Some(pid_tgid) = admitted(func, frame) else {
        return;
    };
    bump(func, Counter::Calls);
    let tid = pid_tgid as u32;
    let key = stamp_key(tid, idle_cpu(tid), func);
    if let Some(stack) = STAMPS.get_ptr_mut(key) {
        // SAFETY: only this task (or code nested in it on this CPU) uses this key.
        let stack = unsafe { &mut *stack };
        let (slot, stale) = stack.open(frame, args);
        if stale > 0 {
            add_stale(func, u64::from(stale));
            probe_event!(
                debug,
                "stale stamps at entry",
                func,
                tid,
                frame,
                u64::from(stale)
            );
        }
        if disturb::on()
            && let Some(snap) = stack.snaps.get_mut(slot)
        {
            *snap = disturb::snapshot(true);
        }
        if let Some(s) = stack.stamps.get_mut(slot) {
            // SAFETY: helper without preconditions; read last so the stamp excludes our own work.
            *s = unsafe { bpf_ktime_get_ns() };
        }
        return;
    }
    let mut stack = StampStack::default();
    stack.open(frame, args);
    stack.snaps[0] = disturb::snapshot_if_on(true);
    // SAFETY: helper without preconditions.
    stack.stamps[0] = unsafe { bpf_ktime_get_ns() };
    if STAMPS.insert(key, stack, BPF_NOEXIST as u64).is_err() {
        bump(func, Counter::StampFull);
        probe_event!(debug, "stamp map full", func, tid, frame, 0u64);
    }
}

/// Closes the call of invocation `frame`: a record (stream) and/or a histogram entry (kernel).
#[inline(always)]
fn on_exit(ctx: *mut core::ffi::c_void, func: u32, frame: u64, value: i64) {
    // SAFETY: helper without preconditions; read first so the duration excludes our own work.
    let now = unsafe { bpf_ktime_get_ns() };
    let pid_tgid = bpf_get_current_pid_tgid();
    if filtered_out(pid_tgid) {
        // Its entry was filtered too (a task keeps its ids; see docs/usage.md for a task moved
        // to another cgroup inside a call): no stamp to look for, nothing to count.
        return;
    }
    let exit_snap = disturb::snapshot_if_on(false);
    let tid = pid_tgid as u32;
    let cpu = idle_cpu(tid);
    let key = stamp_key(tid, cpu, func);
    let Some(stack) = STAMPS.get_ptr_mut(key) else {
        bump(func, Counter::OrphanExits);
        probe_event!(debug, "orphan exit (no stamps)", func, tid, frame, 0u64);
        return;
    };
    // SAFETY: see on_entry.
    let stack = unsafe { &mut *stack };
    // The entry stays (at depth 0 once nothing is open): the task's next call finds it with a
    // lookup, with no insert or delete (bucket lock, free list) per call. Userspace deletes
    // the entries of tasks that have exited (`Tracer::collect_stamps`). The stamp and its args
    // are copied out before anything else runs: a program nested on this CPU could reuse the
    // slot just freed.
    let Some(call) = stack.close(frame) else {
        bump(func, Counter::OrphanExits);
        probe_event!(
            debug,
            "orphan exit (no stamp of this frame)",
            func,
            tid,
            frame,
            0u64
        );
        return;
    };
    if call.stale > 0 {
        add_stale(func, u64::from(call.stale));
        probe_event!(
            debug,
            "stale stamps at exit",
            func,
            tid,
            frame,
            u64::from(call.stale)
        );
    }
    let dist = if disturb::on() {
        damon_common::disturb::between(&call.snap, &exit_snap)
    } else {
        [0; 4]
    };
    let ended = Ended {
        entry_ns: call.stamp,
        now,
        args: call.args,
        value,
        dist,
        clocks: clocks::fields(&call.snap, &exit_snap),
    };
    finish(ctx, func, pid_tgid, cpu, ended);
}

/// What the exit side knows of a timed call.
pub(crate) struct Ended {
    pub entry_ns: u64,
    /// Read at the call's return, before any of our work.
    pub now: u64,
    pub args: [i64; 2],
    pub value: i64,
    /// The record's `[slept, preempted, hardirqs, softirqs]` (`damon_common::disturb`).
    pub dist: [u16; 4],
    /// The record's `[off_cpu_ns, irq_ns]` (`damon_common::breakdown`).
    pub clocks: [u32; 2],
}

/// A timed call's end, for every attach method: the histogram (kernel mode) and/or the record
/// (stream mode). `idle` is [`idle_cpu`]'s answer for the task (the CPU of an idle task, 0
/// otherwise). `ctx` is the exit program's context, for a slow call's stack (`slow.rs`).
#[inline(always)]
pub(crate) fn finish(
    ctx: *mut core::ffi::c_void,
    func: u32,
    pid_tgid: u64,
    idle: u32,
    call: Ended,
) {
    let Ended {
        entry_ns,
        now,
        args: [arg0, arg1],
        value,
        dist: [slept, preempted, hardirqs, softirqs],
        clocks: [off_cpu_ns, irq_ns],
    } = call;
    let duration_ns = now.wrapping_sub(entry_ns);
    let mode = global(&TRACE_MODE);
    if mode & MODE_KERNEL != 0 {
        histogram(func, duration_ns, [slept, preempted, hardirqs, softirqs]);
    }
    if mode & MODE_STREAM == 0 {
        // Kernel mode: the call is in the histogram, which is its "record". `Emitted` is not
        // bumped: in kernel mode it equals the histogram's count (HSTATS), which userspace
        // reads instead, so the exact number costs no second per-CPU slot per call.
        return;
    }
    let tid = pid_tgid as u32;
    let pid = (pid_tgid >> 32) as u32;
    let cpu = if tid == 0 {
        idle
    } else {
        // SAFETY: helper without preconditions.
        unsafe { bpf_get_smp_processor_id() }
    };
    // Built where it is stored: in the reserved slot, not on the stack and copied (a slow
    // call's copy is made from the slot).
    let record = || CallRecord {
        entry_ns,
        duration_ns,
        value,
        arg0,
        arg1,
        pid,
        tid,
        cpu,
        func,
        slept,
        preempted,
        hardirqs,
        softirqs,
        off_cpu_ns,
        irq_ns,
    };
    match EVENTS.reserve::<CallRecord>(0) {
        Some(mut slot) => {
            slow::keep_if_slow(ctx, slot.write(record()));
            slot.submit(wake_flags());
            bump(func, Counter::Emitted);
        }
        None => {
            slow::keep_if_slow(ctx, &record());
            bump(func, Counter::RingFull);
            probe_event!(debug, "ring full", func, tid, 0u64, duration_ns);
        }
    }
}

/// Defines the six programs of one traced function. `$args` reads the record's `arg0`/`arg1`
/// at entry (the same function for both pairs, so fentry and kprobe record the same; an
/// fsession reads them at return), `$kargs` those a kprobe session keeps in its cookie (see
/// `damon_common::cookie`); `$value` turns the raw return value into the record's `value`.
macro_rules! traced {
    ($id:expr, $sym:literal, $fentry:ident, $fexit:ident, $kprobe:ident, $kretprobe:ident,
     $ksession:ident, $fsession:ident, $args:expr, $kargs:expr,
     |$raw:ident : $ty:ty| $value:expr) => {
        sessions!($id, $ksession, $fsession, $kargs, $args, |$raw: $ty| $value);

        #[fentry(function = $sym)]
        pub fn $fentry(ctx: FEntryContext) -> u32 {
            on_entry($id, ctx.frame(), $args(&ctx));
            0
        }

        #[fexit(function = $sym)]
        pub fn $fexit(ctx: FExitContext) -> u32 {
            let $raw: $ty = ctx.ret().unwrap_or_default();
            on_exit(ctx.as_ptr(), $id, ctx.frame(), $value);
            0
        }

        #[kprobe]
        pub fn $kprobe(ctx: ProbeContext) -> u32 {
            on_entry($id, ctx.frame(), $args(&ctx));
            0
        }

        #[kretprobe]
        pub fn $kretprobe(ctx: RetProbeContext) -> u32 {
            let $raw: $ty = ctx.ret();
            on_exit(ctx.as_ptr(), $id, ctx.frame(), $value);
            0
        }
    };
}

// int damon_hot_score(struct damon_ctx *, struct damon_region *, struct damos *)
traced!(
    FunctionId::DamonHotScore as u32,
    "damon_hot_score",
    fentry_damon_hot_score,
    fexit_damon_hot_score,
    kprobe_damon_hot_score,
    kretprobe_damon_hot_score,
    ksession_damon_hot_score,
    fsession_damon_hot_score,
    hot_score_args,
    no_args,
    |r: i32| r as i64
);
// void damos_va_migrate_dests_add(struct folio *, struct vm_area_struct *, unsigned long, ...)
traced!(
    FunctionId::DamosVaMigrateDestsAdd as u32,
    "damos_va_migrate_dests_add",
    fentry_damos_va_migrate_dests_add,
    fexit_damos_va_migrate_dests_add,
    kprobe_damos_va_migrate_dests_add,
    kretprobe_damos_va_migrate_dests_add,
    ksession_damos_va_migrate_dests_add,
    fsession_damos_va_migrate_dests_add,
    dests_add_args,
    dests_add_args,
    |_r: u64| 0
);
// unsigned long damon_migrate_pages(struct list_head *folio_list, int target_nid)
traced!(
    FunctionId::DamonMigratePages as u32,
    "damon_migrate_pages",
    fentry_damon_migrate_pages,
    fexit_damon_migrate_pages,
    kprobe_damon_migrate_pages,
    kretprobe_damon_migrate_pages,
    ksession_damon_migrate_pages,
    fsession_damon_migrate_pages,
    migrate_pages_args,
    migrate_pages_args,
    |r: u64| r as i64
);
// struct timer_base *lock_timer_base(struct timer_list *, unsigned long *): the pointer is not kept.
traced!(
    FunctionId::LockTimerBase as u32,
    "lock_timer_base",
    fentry_lock_timer_base,
    fexit_lock_timer_base,
    kprobe_lock_timer_base,
    kretprobe_lock_timer_base,
    ksession_lock_timer_base,
    fsession_lock_timer_base,
    no_args,
    no_args,
    |_r: u64| 0
);

/// Calibration trigger: never attached by a session. Userspace loads it against
/// `bpf_fentry_test1` and runs it with `BPF_PROG_TEST_RUN`, whose tracing path
/// (`bpf_prog_test_run_tracing`) calls `bpf_fentry_test1..N` once each: the calls the
/// calibration programs time. It does nothing itself.
#[fentry(function = "bpf_fentry_test1")]
pub fn calib_trigger(_ctx: FEntryContext) -> u32 {
    0
}

/// Aggregation-interval boundaries.
///
/// mm/damon/core.c (6.12 and 7.x alike): at the end of every aggregation interval `kdamond_fn`
/// merges regions, applies the schemes (`kdamond_apply_schemes`, where the traced DAMON
/// functions run), then calls `kdamond_reset_aggregated`, which fires
/// `trace_damon_aggregated(ti, r, damon_nr_regions(t))` once per region of every target, in
/// list (= address) order, before it splits regions and sleeps for the next sample. Every
/// once-per-interval function there (`kdamond_reset_aggregated`, `kdamond_merge_regions`,
/// `kdamond_apply_schemes`, `kdamond_split_regions`) is static and inlined in the Debian
/// kernels, so this tracepoint is the one hook both kernels share.
///
/// One burst = one boundary: a burst starts where target 0's region start address does not
/// increase (the first region of a new pass; equal when the target has one region). This
/// resynchronises by itself, unlike counting `nr_regions` events, if attaching lands inside a
/// burst. Classic tracepoint (not tp_btf): stable `format` ABI, offsets checked by userspace.
#[tracepoint(category = "damon", name = "damon_aggregated")]
pub fn damon_aggregated(ctx: TracePointContext) -> u32 {
    // SAFETY: offsets of fields inside the tracepoint's record, checked against the running
    // kernel's format file before attaching; the helper copes with bad reads.
    let target_id: u64 = unsafe { ctx.read_at(AGGR_TP_TARGET_ID_OFFSET) }.unwrap_or(1);
    if target_id != 0 {
        return 0;
    }
    // SAFETY: as above.
    let start: u64 = unsafe { ctx.read_at(AGGR_TP_START_OFFSET) }.unwrap_or(0);
    // SAFETY: as above.
    let nr_regions: u32 = unsafe { ctx.read_at(AGGR_TP_NR_REGIONS_OFFSET) }.unwrap_or(0);
    let (pid, tid, cpu) = current();
    // SAFETY: only this kdamond's thread writes its key.
    let last = unsafe { AGGR_LAST.get(tid) }.copied();
    let _ = AGGR_LAST.insert(tid, start, 0);
    if matches!(last, Some(prev) if start > prev) {
        return 0; // a later region of the same pass
    }
    bump(AGGREGATION_MARK, Counter::Calls);
    match EVENTS.reserve::<CallRecord>(0) {
        Some(mut slot) => {
            slot.write(CallRecord {
                // SAFETY: helper without preconditions.
                entry_ns: unsafe { bpf_ktime_get_ns() },
                duration_ns: 0,
                value: i64::from(nr_regions),
                arg0: 0,
                arg1: 0,
                pid,
                tid,
                cpu,
                func: AGGREGATION_MARK,
                ..CallRecord::default()
            });
            slot.submit(0);
            bump(AGGREGATION_MARK, Counter::Emitted);
        }
        None => bump(AGGREGATION_MARK, Counter::RingFull),
    }
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
