//! Per-invocation sessions (kprobe session, `BPF_TRACE_KPROBE_SESSION`, Linux ≥ 6.10; fsession,
//! `BPF_TRACE_FSESSION`, its trampoline twin, Linux 7.x): one program runs at a call's entry
//! and again at its return, and the kernel keeps 8 bytes per invocation for it
//! (`bpf_session_cookie`). aya loads neither the attach type nor kfunc
//! calls: these programs are loaded by `damon-user`'s `probe::loader::session`, which rewrites the
//! placeholder calls below into kfunc calls.
use aya_ebpf::{
    EbpfContext,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::map,
    maps::{Array, PerCpuArray},
    programs::{FEntryContext, ProbeContext},
};
use core::intrinsics::{AtomicOrdering, atomic_xadd};
use damon_common::{
    KFUNC_SESSION_COOKIE, KFUNC_SESSION_IS_RETURN, MAX_FUNCS, SESSION_PROBE_SLOTS,
    cookie::{TIME_MASK, entry_time, pack_slot, pack_small, unpack_slot, unpack_small},
    disturb::{LOST, SESSION_SLOTS, SessionSnaps, Snapshot, between},
};

use crate::{
    Ended, admitted,
    args::{Frame, global},
    bump, clocks, disturb, filtered_out, finish, idle_cpu,
};
use damon_common::Counter;

/// `__u64 *bpf_session_cookie(...)`: this invocation's 8 bytes. The context goes in the first
/// argument register: kernels whose kfunc takes it (`void *ctx`) check it there, those whose
/// kfunc takes nothing ignore the register.
#[inline(always)]
pub(crate) fn session_cookie(ctx: &impl EbpfContext) -> *mut u64 {
    // SAFETY: a call to the kfunc the loader substitutes for the placeholder; the verifier
    // checks its use (a pointer to 8 bytes valid for this run).
    unsafe {
        let f: unsafe extern "C" fn(*mut core::ffi::c_void) -> *mut u64 =
            core::mem::transmute(KFUNC_SESSION_COOKIE as usize);
        f(ctx.as_ptr())
    }
}

/// `bool bpf_session_is_return(...)`: whether this run is the return part.
#[inline(always)]
pub(crate) fn session_is_return(ctx: &impl EbpfContext) -> bool {
    // SAFETY: as in `session_cookie`.
    unsafe {
        let f: unsafe extern "C" fn(*mut core::ffi::c_void) -> u64 =
            core::mem::transmute(KFUNC_SESSION_IS_RETURN as usize);
        f(ctx.as_ptr()) & 1 != 0
    }
}

/// Per CPU and function, the entry snapshots of session calls (see
/// `damon_common::disturb::SESSION_SLOTS`).
#[map(name = "SESSION_SNAPS")]
static SESSION_SNAPS: PerCpuArray<SessionSnaps> = PerCpuArray::with_max_entries(MAX_FUNCS, 0);

/// The entry side of a session call's snapshot: takes it, keeps it in this CPU's next slot of
/// the function and returns the slot's number, for the cookie. The slot's entry time is set by
/// [`stamp_slot`] once the time is read; nothing when snapshots are off.
#[inline(always)]
fn snapshot_slot(func: u32) -> Option<(*mut SessionSnaps, u32)> {
    if !disturb::on() {
        return None;
    }
    let snap = disturb::snapshot(true);
    let snaps = SESSION_SNAPS.get_ptr_mut(func)?;
    // SAFETY: this CPU's value; only the function's session program writes it, and the kernel
    // runs that program at most once at a time per CPU (see `add_own` in main.rs).
    let s = unsafe { &mut *snaps };
    let slot = s.next % SESSION_SLOTS as u32;
    s.next = s.next.wrapping_add(1);
    if let Some(k) = s.slots.get_mut(slot as usize) {
        k.snap = snap;
        k.entry_ns = 0;
    }
    Some((snaps, slot))
}

/// Writes the entry time into the slot [`snapshot_slot`] chose.
#[inline(always)]
fn stamp_slot(chosen: Option<(*mut SessionSnaps, u32)>, entry_ns: u64) -> u64 {
    let Some((snaps, slot)) = chosen else {
        return 0;
    };
    // SAFETY: as in `snapshot_slot`, within the same program run.
    if let Some(k) = unsafe { &mut *snaps }.slots.get_mut(slot as usize) {
        k.entry_ns = entry_ns;
    }
    pack_slot(slot)
}

/// The return side: the record's disturbance fields and time breakdown for the call that
/// began at `entry_ns` with its snapshot in `slot` of this CPU; [`LOST`] and unknown times
/// when the slot holds another call's (this one was switched out, maybe to another CPU, or
/// interrupted by calls that reused it).
#[inline(always)]
fn disturbance(func: u32, slot: u32, entry_ns: u64, exit: &Snapshot) -> ([u16; 4], [u32; 2]) {
    if !disturb::on() {
        return ([0; 4], [0; 2]);
    }
    let Some(snaps) = SESSION_SNAPS.get_ptr_mut(func) else {
        return (LOST, clocks::lost());
    };
    // SAFETY: as in `snapshot_slot`.
    match unsafe { &*snaps }.slots.get(slot as usize) {
        Some(k) if k.entry_ns == entry_ns => {
            (between(&k.snap, exit), clocks::fields(&k.snap, exit))
        }
        _ => (LOST, clocks::lost()),
    }
}

/// The self-test's counts (see `damon_common::MAP_SESSION_PROBE`).
#[map(name = "SESSION_PROBE")]
static SESSION_PROBE: Array<u64> = Array::with_max_entries(SESSION_PROBE_SLOTS, 0);

#[unsafe(no_mangle)]
static SESSION_PROBE_TGID: u32 = 0;

#[inline(always)]
fn probe_add(slot: u32) {
    if let Some(p) = SESSION_PROBE.get_ptr_mut(slot) {
        // SAFETY: a valid, aligned map value; atomic because every CPU shares the array.
        unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(p, 1) };
    }
}

/// `doctor`'s self-test of kprobe sessions, attached to the function behind getppid(2) while
/// the tool itself calls it; only the calls of the tool's own tgid count. At entry it stores
/// the time in the cookie; while the decline flag (slot 4) is set it writes no cookie and
/// declines the return run (returns 1), which the kernel must then skip. At return it counts
/// the run and any cookie found zero. Userspace compares the counts with the calls it made.
///
/// Written without aya's `#[kprobe]`, whose wrapper returns 0 whatever the function returns:
/// a session's entry must be able to return 1.
#[unsafe(no_mangle)]
#[unsafe(link_section = "kprobe")]
pub extern "C" fn sess_probe(ctx: *mut core::ffi::c_void) -> u32 {
    session_probe::<true>(&ProbeContext::new(ctx))
}

/// The same self-test as an fsession (trampoline) program, attached by BTF id. The verifier
/// holds an fsession to returning 0 (measured on 7.2: "R0 ... should have been in [0, 0]"), so
/// its entry cannot decline: with the flag set it only leaves the cookie unwritten, and the
/// return run shows whether the kernel gave the invocation a zeroed cookie.
#[unsafe(no_mangle)]
#[unsafe(link_section = "fentry")]
pub extern "C" fn fsess_probe(ctx: *mut core::ffi::c_void) -> u32 {
    session_probe::<false>(&FEntryContext::new(ctx))
}

#[inline(always)]
fn session_probe<const CAN_DECLINE: bool>(ctx: &impl EbpfContext) -> u32 {
    let cookie = session_cookie(ctx);
    let ours = (bpf_get_current_pid_tgid() >> 32) as u32 == global(&SESSION_PROBE_TGID);
    let decline = if CAN_DECLINE { 1 } else { 0 };
    if session_is_return(ctx) {
        if ours {
            probe_add(1);
            // SAFETY: the kfunc's pointer is valid for this run.
            if unsafe { *cookie } == 0 {
                probe_add(2);
            }
        }
        return 0;
    }
    if !ours {
        return decline;
    }
    probe_add(0);
    if SESSION_PROBE.get(4).copied().unwrap_or(0) != 0 {
        probe_add(3);
        return decline;
    }
    // SAFETY: as above; helper without preconditions.
    unsafe { *cookie = bpf_ktime_get_ns() };
    0
}

/// A kprobe session's entry run: counts the call and keeps its entry time (and `args`, read
/// only for a task the filter keeps) in the cookie. Returns 1 for a filtered task, so the
/// kernel runs nothing at its return.
#[inline(always)]
pub(crate) fn ksession_entry(
    ctx: &ProbeContext,
    func: u32,
    args: impl FnOnce(&ProbeContext) -> [i64; 2],
) -> u32 {
    if admitted(func, ctx.frame()).is_none() {
        return 1;
    }
    bump(func, Counter::Calls);
    let packed = pack_small(args(ctx));
    let cookie = session_cookie(ctx);
    let chosen = snapshot_slot(func);
    // SAFETY: helper without preconditions, read last (but for two stores) so the time
    // excludes our own work.
    let now = unsafe { bpf_ktime_get_ns() };
    let slot = stamp_slot(chosen, now);
    // SAFETY: the kfunc's pointer is valid for this run.
    unsafe { *cookie = (packed | slot | (now & TIME_MASK)).max(1) };
    0
}

/// A kprobe session's return run (only after an entry run that returned 0): the duration from
/// the cookie, then [`finish`]. `now` was read first.
#[inline(always)]
pub(crate) fn ksession_return(ctx: &ProbeContext, func: u32, now: u64, value: i64) {
    // SAFETY: as in `ksession_entry`.
    let cookie = unsafe { *session_cookie(ctx) };
    // A zero cookie is not expected here (the entry always writes one); counted, so it would
    // show.
    let pid_tgid = bpf_get_current_pid_tgid();
    session_return(
        ctx.as_ptr(),
        (func, pid_tgid, now, value),
        ctx.frame(),
        cookie,
        || unpack_small(cookie),
    );
}

/// An fsession's entry run: counts the call and keeps its entry time in the cookie. It cannot
/// decline the return run (the verifier holds an fsession to 0), so a filtered task's return
/// runs too and checks the filter again.
#[inline(always)]
pub(crate) fn fsession_entry(ctx: &FEntryContext, func: u32) {
    if admitted(func, ctx.frame()).is_none() {
        return;
    }
    bump(func, Counter::Calls);
    let cookie = session_cookie(ctx);
    let chosen = snapshot_slot(func);
    // SAFETY: as in `ksession_entry`.
    let now = unsafe { bpf_ktime_get_ns() };
    let slot = stamp_slot(chosen, now);
    // SAFETY: as in `ksession_entry`.
    unsafe { *cookie = (slot | (now & TIME_MASK)).max(1) };
}

/// An fsession's return run: the arguments are read here (the trampoline keeps them for both
/// runs), after `now`. A zero cookie is a call whose entry run the kernel skipped (counted in
/// the program's `recursion_misses`): an orphan exit, as with fexit.
#[inline(always)]
pub(crate) fn fsession_return(
    ctx: &FEntryContext,
    func: u32,
    now: u64,
    args: impl FnOnce(&FEntryContext) -> [i64; 2],
    value: i64,
) {
    let pid_tgid = bpf_get_current_pid_tgid();
    if filtered_out(pid_tgid) {
        return;
    }
    // SAFETY: as in `ksession_entry`.
    let cookie = unsafe { *session_cookie(ctx) };
    session_return(
        ctx.as_ptr(),
        (func, pid_tgid, now, value),
        ctx.frame(),
        cookie,
        || args(ctx),
    );
}

/// The return run of either session once it has its cookie, for `(func, pid_tgid, now,
/// value)` with `now` read first: a zero cookie is an orphan exit (counted and logged);
/// otherwise the exit snapshot, the duration from the cookie, `args` (read after both), then
/// [`finish`].
#[inline(always)]
fn session_return(
    ctx: *mut core::ffi::c_void,
    (func, pid_tgid, now, value): (u32, u64, u64, i64),
    frame: u64,
    cookie: u64,
    args: impl FnOnce() -> [i64; 2],
) {
    if cookie == 0 {
        bump(func, Counter::OrphanExits);
        let tid = pid_tgid as u32;
        probe_event!(debug, "zero cookie at return", func, tid, frame, 0u64);
        return;
    }
    let exit = disturb::snapshot_if_on(false);
    let entry_ns = entry_time(cookie, now);
    let (dist, clocks) = disturbance(func, unpack_slot(cookie), entry_ns, &exit);
    let ended = Ended {
        entry_ns,
        now,
        args: args(),
        value,
        dist,
        clocks,
    };
    finish(ctx, func, pid_tgid, idle_cpu(pid_tgid as u32), ended);
}

/// The two session programs of one traced slot: `$ks`, a kprobe session (`ksession_*`), and
/// `$fs`, an fsession (`fsession_*`). `$kargs` reads the arguments a kprobe session keeps in
/// its cookie (at entry), `$fargs` those an fsession reads at return; `$value` turns the raw
/// return value into the record's `value`, as for the other methods. Written without aya's
/// program macros, whose wrappers return 0 whatever the function returns.
macro_rules! sessions {
    ($id:expr, $ks:ident, $fs:ident, $kargs:expr, $fargs:expr, |$raw:ident : $ty:ty| $value:expr) => {
        #[unsafe(no_mangle)]
        #[unsafe(link_section = "kprobe")]
        pub extern "C" fn $ks(ctx: *mut core::ffi::c_void) -> u32 {
            let ctx = ProbeContext::new(ctx);
            if !session::session_is_return(&ctx) {
                return session::ksession_entry(&ctx, $id, $kargs);
            }
            // SAFETY: helper without preconditions; read first.
            let now = unsafe { bpf_ktime_get_ns() };
            // SAFETY: a kprobe's context is the task's pt_regs, here at the return.
            let $raw: $ty = unsafe { (*ctx.regs).rax } as $ty;
            session::ksession_return(&ctx, $id, now, $value);
            0
        }

        #[unsafe(no_mangle)]
        #[unsafe(link_section = "fentry")]
        pub extern "C" fn $fs(ctx: *mut core::ffi::c_void) -> u32 {
            let entry = FEntryContext::new(ctx);
            if !session::session_is_return(&entry) {
                session::fsession_entry(&entry, $id);
                return 0;
            }
            // SAFETY: as above.
            let now = unsafe { bpf_ktime_get_ns() };
            let $raw: $ty = FExitContext::new(ctx).ret().unwrap_or_default();
            session::fsession_return(&entry, $id, now, $fargs, $value);
            0
        }
    };
}
