//! Measures the probe floor: the duration our own programs report for a kernel function that
//! does nothing, called tens of thousands of times on demand (the statistics are in
//! [`crate::stats::calibration`]).
//!
//! # Which functions
//!
//! The floor pools **`bpf_fentry_test1`, `2`, `4`, `5`, `6`, `7` and `8`**; the held-out check
//! is **`bpf_fentry_test3`** (net/bpf/test_run.c; all in Debian 6.1, 6.12 and 7.2, in kallsyms,
//! BTF and `available_filter_functions`). Why they are
//! the most faithful stand-in for "the probe's cost on an empty function":
//! - they are empty: `noinline` integer arithmetic on their register arguments (`a + 1`,
//!   `a + b`, `a + b + c`, ...; test4 and test5 add pointer-typed arguments as integers, never
//!   dereferenced), traceable (ftrace entry), with the same prologue and fentry/kprobe attach
//!   path as any traced function, so the timed interval holds the probe's work and nothing else;
//! - the kernel calls them **on demand, from userspace**, with `BPF_PROG_TEST_RUN` of a
//!   never-attached tracing program (`calib_trigger`): one syscall calls
//!   `bpf_fentry_test1..N` once each, in process context on the calling CPU, without side
//!   effects, so tens of thousands of calls take a second or two and touch nothing else;
//! - they are timed with **exactly the session's programs**: the generic slot programs of
//!   `--func` (same entry/exit code as the built-in functions, same maps, same trace-mode
//!   global), attached with the same method (fentry/fexit or kprobe/kretprobe), in the same
//!   trace mode;
//! - **several, pooled**, because the probe does not cost the same on every function:
//!   measured under TCG, one empty function's median differs from another's by up to ~10 %
//!   (e.g. 631 vs 721 ns), consistently across runs and whichever is called first (code
//!   placement). A floor from one function would carry that function's quirk into every
//!   correction; the pool's median does not, and the spread of the pooled functions' medians
//!   gives the between-function term of the stated uncertainty
//!   (see [`crate::stats::calibration`]);
//! - **seven**, because that term is a prediction from the pooled medians with a t quantile on
//!   k − 1 degrees of freedom: with four (test1, 2, 4, 5 until December 2026) one function
//!   ~150 ns off the others made the bound wide enough to pass the wrong attach method's
//!   floor, and four that happened to agree made it narrow enough to fail the held-out
//!   function (both seen in the 7.2 guest test). test6 has six register arguments; test7
//!   returns its pointer argument and test8 reads one field through it; measured, they
//!   differ from the other four about as much as those differ among themselves
//!   (docs/accuracy.md: Calibration);
//! - the held-out function is the same kind of function, called in the same syscalls, but not
//!   in the pool: its corrected median must come out at 0 within the stated ±; it would not if
//!   the floor held anything but the probe (trigger overhead, a function's own work, another
//!   attach method's cost) or if the ± understated how much the probe varies between
//!   functions.
//!
//! What it cannot capture: a traced function called from a cold path may pay more for the
//! probe (cache misses on the maps) than these warm back-to-back calls; the floor is the
//! probe's cost when warm, a lower bound of its cost in general.
//!
//! Calibration loads its own, short-lived [`Tracer`](crate::probe::tracer::Tracer) (never the session's), so the floor's
//! calls are never in a capture's records.
use std::time::Instant;

use damon_common::FIRST_USER_FUNC;

use crate::{
    capture::AttachState,
    stats::calibration::{Calibration, CalibrationStatus, Floor, METHOD},
    trace::{Attach, ModeConfig},
};

/// The empty functions whose probe durations, pooled, make the floor.
pub const FLOOR_FUNCTIONS: [&str; 7] = [
    "bpf_fentry_test1",
    "bpf_fentry_test2",
    "bpf_fentry_test4",
    "bpf_fentry_test5",
    "bpf_fentry_test6",
    "bpf_fentry_test7",
    "bpf_fentry_test8",
];
/// Another empty function, timed in the same run, not in the pool, corrected with the floor:
/// the check.
pub const HELD_OUT_FUNCTION: &str = "bpf_fentry_test3";

/// Calls per floor by default: under TCG emulation 20 000 calls take about a second per floor
/// (see docs/accuracy.md); the median of that many is good to well under a nanosecond.
pub const DEFAULT_CALLS: u64 = 20_000;

/// Untimed calls first (code and maps warm, emulator translation done); not in the floor.
const WARM_UP: u64 = 200;
/// Test runs between ring drains: 2 records of 64 bytes each, far below the ring's size.
const BATCH: u64 = 1000;
/// Ring size of the calibration tracer (power of two, page multiple).
const RING_BYTES: u32 = 1 << 20;

/// One floor to measure: an attach method and a trace mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FloorRequest {
    pub attach: Attach,
    /// The trace mode and kernel bucket width, as the session loads them.
    pub mode: ModeConfig,
}

/// Measures each requested floor with `calls` calls; `progress(request, done, calls)` is called
/// as calls complete. Never fails as a whole: a floor that cannot be measured carries its
/// error, and the status says whether any was measured.
pub fn calibrate(
    requests: &[FloorRequest],
    calls: u64,
    progress: &mut dyn FnMut(&FloorRequest, u64, u64),
) -> Calibration {
    let floors: Vec<Floor> = requests
        .iter()
        .map(|r| {
            let _t = crate::timing::phase(format_args!(
                "floor {}/{}: {calls} test runs",
                r.attach, r.mode.mode
            ));
            let started = Instant::now();
            let mut floor = match measure(r, calls, &mut |done| progress(r, done, calls)) {
                Ok(f) => f,
                Err(e) => Floor {
                    error: Some(format!("{e:#}")),
                    ..Floor::empty(r.attach, r.mode.mode)
                },
            };
            floor.took_ns = started.elapsed().as_nanos() as u64;
            floor
        })
        .collect();
    let mut cal = Calibration {
        status: CalibrationStatus::Failed,
        detail: None,
        functions: FLOOR_FUNCTIONS.map(str::to_owned).to_vec(),
        calls,
        method: METHOD.to_owned(),
        floors,
    };
    settle_status(&mut cal);
    cal
}

mod beside;
// Attached by the instrument command `bench-floor` only (its program names are checked here).
#[cfg_attr(not(any(test, feature = "instruments")), allow(dead_code))]
pub mod floor;
mod measure;
pub mod text;
pub use beside::{Beside, Prepared};
use measure::measure;

/// Ids of the calibration tracer's functions: the floor's first, the held-out one last.
fn ids() -> impl Iterator<Item = (u32, &'static str)> {
    FLOOR_FUNCTIONS
        .iter()
        .chain([&HELD_OUT_FUNCTION])
        .enumerate()
        .map(|(i, f)| (FIRST_USER_FUNC + i as u32, *f))
}

/// Attach methods in use that a calibration has no floor for.
pub fn missing_floors(cal: &Calibration, used: &[AttachState]) -> Vec<Attach> {
    let mut out = Vec::new();
    for method in used.iter().filter_map(|s| s.attach()) {
        if !cal.floors.iter().any(|f| f.attach == method) && !out.contains(&method) {
            out.push(method);
        }
    }
    out
}

/// Progress on stderr: rewritten in place on a terminal, one line per floor otherwise.
pub fn progress_line(r: &FloorRequest, done: u64, calls: u64) {
    use std::io::{IsTerminal as _, Write as _};
    let mut err = std::io::stderr();
    if err.is_terminal() {
        let _ = write!(
            err,
            "\rcalibrating the probe floor ({}/{}): {done}/{calls} test runs   ",
            r.attach, r.mode.mode
        );
        if done >= calls {
            let _ = writeln!(err);
        }
        let _ = err.flush();
    } else if done >= calls {
        let _ = writeln!(
            err,
            "calibrated the probe floor ({}/{}): {calls} test runs",
            r.attach, r.mode.mode
        );
    }
}

/// Whether any floor was measured, and why not when none was.
fn settle_status(cal: &mut Calibration) {
    let measured = cal.floors.iter().any(|f| f.floor.is_some());
    cal.status = if measured {
        CalibrationStatus::Ok
    } else {
        CalibrationStatus::Failed
    };
    cal.detail = (!measured)
        .then(|| {
            cal.floors
                .iter()
                .filter_map(|f| {
                    f.error
                        .as_ref()
                        .map(|e| format!("{}/{}: {e}", f.attach, f.mode))
                })
                .collect::<Vec<_>>()
                .join("; ")
        })
        .filter(|d| !d.is_empty());
}

/// One line per floor for stderr: `probe floor fentry/stream 812 ± 40 ns (20000 calls of
/// bpf_fentry_test1); held-out bpf_fentry_test2 +2.0 ns; 1.9 s`.
pub fn summary_lines(cal: &Calibration, unit: &str) -> Vec<String> {
    use crate::probe::calibrate::text::describe_floor;
    if cal.status == CalibrationStatus::Skipped {
        return vec!["probe floor not measured (--no-calibrate): latencies are raw only".into()];
    }
    cal.floors
        .iter()
        .map(|f| {
            let mut line = format!("probe {}", describe_floor(f, unit));
            if let Some(h) = &f.held_out {
                line.push_str(&format!(
                    "; held-out {} corrected {:+.1} {unit}",
                    h.function, h.corrected_median_ns
                ));
            }
            line.push_str(&format!("; {:.1} s", f.took_ns as f64 / 1e9));
            line
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Mode;

    fn floor(attach: Attach) -> Floor {
        Floor::empty(attach, Mode::Stream)
    }

    #[test]
    fn missing_floors_are_the_used_methods_without_one_each_once() {
        let mut cal = Calibration::not_run(CalibrationStatus::Ok, String::new());
        cal.floors.push(floor(Attach::Fentry));
        let used = [
            AttachState::Traced(Attach::Fentry),
            AttachState::Traced(Attach::Kprobe),
            AttachState::Missing,
            AttachState::Traced(Attach::Kprobe),
            AttachState::Failed,
        ];
        assert_eq!(missing_floors(&cal, &used), [Attach::Kprobe]);
        cal.floors.push(floor(Attach::Kprobe));
        assert!(missing_floors(&cal, &used).is_empty());
        assert!(missing_floors(&cal, &[]).is_empty());
    }
}
