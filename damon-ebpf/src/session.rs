//! Per-invocation sessions (kprobe session, `BPF_TRACE_KPROBE_SESSION`, Linux ≥ 6.10; fsession,
//! `BPF_TRACE_FSESSION`, its trampoline twin, Linux 7.x): one program runs at a call's entry
//! and again at its return, and the kernel keeps 8 bytes per invocation for it
//! (`bpf_session_cookie`). aya loads neither the attach type nor kfunc
//! calls: these programs are loaded by `damon-user`'s `probe::session`, which rewrites the
//! placeholder calls below into kfunc calls.
use aya_ebpf::{
    EbpfContext,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::map,
    maps::Array,
    programs::{FEntryContext, ProbeContext},
};
use core::intrinsics::{AtomicOrdering, atomic_xadd};
use damon_common::{KFUNC_SESSION_COOKIE, KFUNC_SESSION_IS_RETURN, SESSION_PROBE_SLOTS};

use crate::args::global;

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
