//! The embedded eBPF object and the names userspace asks it for: programs per traced function
//! and attach method, the calibration trigger, and our maps.
use damon_common::{
    FunctionId, MAP_AGGR_LAST, MAP_COUNTERS, MAP_EVENTS, MAP_HIST, MAP_HIST_STATS, MAP_NODE_PFNS,
    MAP_STAMPS,
};

use crate::probe::attach::TracedFunction;

/// The compiled eBPF object, embedded so the binary is self-contained (also inside the VM).
pub(super) static EBPF_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/damon"));

/// How one function is traced: fentry/fexit or kprobe/kretprobe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Fentry,
    Kprobe,
}

/// Program names in the eBPF object for one function and mode: (entry, exit).
pub(super) fn program_names(func: &TracedFunction, mode: Mode) -> (String, String) {
    match (func.as_builtin(), mode) {
        (Some(f), Mode::Fentry) => (
            format!("fentry_{}", f.symbol()),
            format!("fexit_{}", f.symbol()),
        ),
        (Some(f), Mode::Kprobe) => (
            format!("kprobe_{}", f.symbol()),
            format!("kretprobe_{}", f.symbol()),
        ),
        (None, Mode::Fentry) => (
            format!("fentry_u{}", func.id),
            format!("fexit_u{}", func.id),
        ),
        (None, Mode::Kprobe) => (
            format!("kprobe_u{}", func.id),
            format!("kretprobe_u{}", func.id),
        ),
    }
}

/// The never-attached program that calibration runs with `BPF_PROG_TEST_RUN` (see the eBPF
/// object), and the kernel function it is loaded against.
pub const CALIB_TRIGGER: &str = "calib_trigger";
#[allow(dead_code, reason = "used by calibration")]
pub const CALIB_TRIGGER_TARGET: &str = "bpf_fentry_test1";

/// Every program name of ours, in full: each built-in function and user slot in both modes
/// (entry and exit), the interval hook and the calibration trigger.
pub(super) fn all_program_names() -> Vec<String> {
    let user =
        (damon_common::FIRST_USER_FUNC..=damon_common::LAST_USER_FUNC).map(|id| TracedFunction {
            id,
            symbol: String::new(),
        });
    FunctionId::ALL
        .iter()
        .map(|f| TracedFunction::builtin(*f))
        .chain(user)
        .flat_map(|f| {
            let (a, b) = program_names(&f, Mode::Fentry);
            let (c, d) = program_names(&f, Mode::Kprobe);
            [a, b, c, d]
        })
        .chain([
            super::intervals::PROGRAM.to_owned(),
            CALIB_TRIGGER.to_owned(),
        ])
        .collect()
}

/// Every map name of ours, in full.
pub(super) const MAP_NAMES: [&str; 7] = [
    MAP_EVENTS,
    MAP_COUNTERS,
    MAP_STAMPS,
    MAP_AGGR_LAST,
    MAP_NODE_PFNS,
    MAP_HIST,
    MAP_HIST_STATS,
];
