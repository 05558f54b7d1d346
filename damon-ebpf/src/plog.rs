//! Diagnostics of the rare paths (an orphan exit, stale stamps, a full stamp map or ring, a zero
//! cookie at a session's return, a filtered task), through aya-log: `record` and `live` show
//! them with `--debug-probes`.
//!
//! Off by default at no cost: userspace writes the level (`AYA_LOG_LEVEL`) into the object's
//! read-only data, which the kernel freezes, so the verifier knows it and drops every log call
//! of a level that is off as dead code before the program runs. Built without the `probe-log`
//! feature, the calls are not compiled in at all (the benchmark compares the two).

/// One rare event of `func`'s call: `probe_event!(level, "what", func, tid, frame, n)` logs
/// "what fn#FUNC tid TID cpu CPU frame 0xFRAME n N" (userspace puts the function's name for
/// `fn#FUNC`). `level` is `debug` or `trace` (a filtered task: one per call of another task).
/// The CPU is read only when the event is logged.
#[cfg(feature = "probe-log")]
macro_rules! probe_event {
    ($level:ident, $what:literal, $func:expr, $tid:expr, $frame:expr, $n:expr) => {
        aya_log_ebpf::$level!(
            &(),
            "{} fn#{} tid {} cpu {} frame {:x} n {}",
            $what,
            $func,
            $tid,
            // SAFETY: helper without preconditions.
            unsafe { aya_ebpf::helpers::bpf_get_smp_processor_id() },
            $crate::plog::frame_number($frame),
            $n
        )
    };
}

/// `frame` as a plain number the log can print. A trampoline program's frame is its context
/// pointer, which the verifier lets us compare and store but not take apart (aya-log writes a
/// value byte by byte, with shifts: "pointer arithmetic with >>= operator prohibited", measured
/// on 7.2): the value is copied through the stack with `bpf_probe_read_kernel`, whose result
/// is an ordinary number. Runs only when an event is logged.
#[cfg(feature = "probe-log")]
#[inline(always)]
pub(crate) fn frame_number(frame: u64) -> u64 {
    let slot = core::hint::black_box(frame);
    // SAFETY: reads 8 bytes of our own stack.
    unsafe { aya_ebpf::helpers::bpf_probe_read_kernel(&slot as *const u64) }.unwrap_or(0)
}

#[cfg(not(feature = "probe-log"))]
macro_rules! probe_event {
    ($level:ident, $what:literal, $func:expr, $tid:expr, $frame:expr, $n:expr) => {{
        let _ = ($func, $tid, $frame, $n);
    }};
}
