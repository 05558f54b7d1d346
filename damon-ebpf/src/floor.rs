//! The benchmark's floors (`damon-trace bench-floor`; no session attaches them): the least a
//! tracer of each kind does per call, measured next to ours by `cargo xtask bench`.
use aya_ebpf::{
    bindings::BPF_RB_NO_WAKEUP,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{fentry, fexit, kprobe, kretprobe},
    programs::{FEntryContext, FExitContext, ProbeContext, RetProbeContext},
};
use damon_common::{CallRecord, FLOOR_STAMP_FUNC, StampStack, stamp_key};

use crate::{
    EVENTS, STAMPS,
    session::{session_cookie, session_is_return},
};

/// The benchmark's floor (`damon-trace bench-floor`, never attached by a session): an
/// fentry/fexit pair and a kprobe/kretprobe pair that only read the clock, once each, as the
/// timing of a call must. Attached to the benchmark's function, they show what the kernel's
/// attach path and the two clock reads cost on their own, below which no tracer of either kind
/// can go; the same work in both pairs, so ours minus each floor compares like with like.
#[fentry]
pub fn floor_fentry(_ctx: FEntryContext) -> u32 {
    // SAFETY: helper without preconditions.
    core::hint::black_box(unsafe { bpf_ktime_get_ns() });
    0
}

#[fexit]
pub fn floor_fexit(_ctx: FExitContext) -> u32 {
    // SAFETY: helper without preconditions.
    core::hint::black_box(unsafe { bpf_ktime_get_ns() });
    0
}

#[kprobe]
pub fn floor_kprobe(_ctx: ProbeContext) -> u32 {
    // SAFETY: helper without preconditions.
    core::hint::black_box(unsafe { bpf_ktime_get_ns() });
    0
}

#[kretprobe]
pub fn floor_kretprobe(_ctx: RetProbeContext) -> u32 {
    // SAFETY: helper without preconditions.
    core::hint::black_box(unsafe { bpf_ktime_get_ns() });
    0
}

/// The stamp floor's key in [`STAMPS`], the sessions' stamp map (a map of its own would be
/// created in every session, see [`FLOOR_STAMP_FUNC`]): one per task, under a function id no
/// traced function has. The idle tasks of all CPUs share one (the benchmark's loop is one
/// task).
#[inline(always)]
fn floor_key() -> u64 {
    stamp_key(bpf_get_current_pid_tgid() as u32, 0, FLOOR_STAMP_FUNC)
}

/// The stamp floor's entry side: the task's entry time into its stack's first stamp (a
/// lookup, an insert at the task's first call; never deleted). The depth stays 0, so a reader
/// of the map that counts open calls would not count it.
#[inline(always)]
fn floor_stamp_entry() {
    let key = floor_key();
    // SAFETY: helper without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    match STAMPS.get_ptr_mut(key) {
        // SAFETY: a valid map value; only this task writes its key.
        Some(stack) => unsafe { (*stack).stamps[0] = now },
        None => {
            let mut stack = StampStack::default();
            stack.stamps[0] = now;
            let _ = STAMPS.insert(key, stack, 0);
        }
    }
}

/// The stamp floor's exit side: (entry time, duration) of the task's call, if it was stamped.
#[inline(always)]
fn floor_stamp_exit() -> Option<(u64, u64)> {
    // SAFETY: helper without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    // SAFETY: a valid map value.
    let entry = unsafe { (*STAMPS.get_ptr(floor_key())?).stamps[0] };
    Some((entry, now.wrapping_sub(entry)))
}

/// The benchmark's stamp floor: an fentry/fexit pair that times each call of a task through a
/// hash map keyed by its tid (a lookup on each side, an insert at the task's first call),
/// which is what any exact timing must do when a task can be preempted inside the call and
/// another call of the function starts on its CPU (bpftrace's `@start[tid]` does the same).
/// Ours does this, plus the per-function keys, the call stack, the counters and the record or
/// histogram; this floor shows what the stamp alone costs.
#[fentry]
pub fn floor_st_fentry(_ctx: FEntryContext) -> u32 {
    floor_stamp_entry();
    0
}

#[fexit]
pub fn floor_st_fexit(_ctx: FExitContext) -> u32 {
    core::hint::black_box(floor_stamp_exit().map_or(0, |(_, duration)| duration));
    0
}

/// The same stamp floor as a kprobe/kretprobe pair: the least an exact kprobe timing costs.
#[kprobe]
pub fn floor_sk_entry(_ctx: ProbeContext) -> u32 {
    floor_stamp_entry();
    0
}

#[kretprobe]
pub fn floor_sk_exit(_ctx: RetProbeContext) -> u32 {
    core::hint::black_box(floor_stamp_exit().map_or(0, |(_, duration)| duration));
    0
}

/// The kprobe stamp floor plus one record per call: a [`CallRecord`] (entry time and
/// duration, the other fields 0) reserved in the ring and submitted without a wake-up, the
/// least a stream tracer that is exact under kprobe does per call. `bench-floor` sizes the
/// ring to hold every record of the benchmark's loop, as the benchmark does for ours.
#[kprobe]
pub fn floor_skr_entry(_ctx: ProbeContext) -> u32 {
    floor_stamp_entry();
    0
}

#[kretprobe]
pub fn floor_skr_exit(_ctx: RetProbeContext) -> u32 {
    if let Some((entry_ns, duration_ns)) = floor_stamp_exit() {
        floor_record(entry_ns, duration_ns);
    }
    0
}

/// The session floor: one kprobe session program (loaded by `damon-user`'s `probe::loader::session`)
/// whose entry run keeps the time in the invocation's cookie and whose return run reads the
/// clock and subtracts: exact timing (the cookie belongs to the call) with no map at all.
#[kprobe]
pub fn floor_session(ctx: ProbeContext) -> u32 {
    core::hint::black_box(session_floor(&ctx).map_or(0, |(_, duration)| duration));
    0
}

/// The session floor plus one 72-byte ring record per call (no wake-up): the least an exact
/// stream tracer on kprobe sessions does.
#[kprobe]
pub fn floor_session_rec(ctx: ProbeContext) -> u32 {
    if let Some((entry_ns, duration_ns)) = session_floor(&ctx) {
        floor_record(entry_ns, duration_ns);
    }
    0
}

/// The record floors' record: a [`CallRecord`] with the call's time, the other fields 0,
/// reserved and submitted without a wake-up.
#[inline(always)]
fn floor_record(entry_ns: u64, duration_ns: u64) {
    if let Some(mut slot) = EVENTS.reserve::<CallRecord>(0) {
        slot.write(CallRecord {
            entry_ns,
            duration_ns,
            value: 0,
            arg0: 0,
            arg1: 0,
            pid: 0,
            tid: 0,
            cpu: 0,
            func: 0,
            ..CallRecord::default()
        });
        slot.submit(BPF_RB_NO_WAKEUP as u64);
    }
}

/// The session floor on the trampoline: one fsession program (Linux 7.x), as
/// [`floor_session`] otherwise.
#[fentry]
pub fn floor_fsession(ctx: FEntryContext) -> u32 {
    core::hint::black_box(session_floor(&ctx).map_or(0, |(_, duration)| duration));
    0
}

/// Entry: the time into the cookie, `None`. Return: (entry time, duration).
#[inline(always)]
fn session_floor(ctx: &impl aya_ebpf::EbpfContext) -> Option<(u64, u64)> {
    let cookie = session_cookie(ctx);
    if session_is_return(ctx) {
        // SAFETY: helper without preconditions; the kfunc's pointer is valid for this run.
        let (now, entry) = unsafe { (bpf_ktime_get_ns(), *cookie) };
        return Some((entry, now.wrapping_sub(entry)));
    }
    // SAFETY: as above.
    unsafe { *cookie = bpf_ktime_get_ns() };
    None
}
