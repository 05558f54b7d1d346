//! Measures the probe floor: the duration our own programs report for a kernel function that
//! does nothing, called tens of thousands of times on demand (the statistics are in
//! [`crate::stats::calibration`]).
//!
//! # Which functions
//!
//! The floor pools **`bpf_fentry_test1`, `bpf_fentry_test2`, `bpf_fentry_test4` and
//! `bpf_fentry_test5`**; the held-out check is **`bpf_fentry_test3`** (net/bpf/test_run.c; all
//! in Debian 6.12 and 7.2, in kallsyms, BTF and `available_filter_functions`). Why they are
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
//! Calibration loads its own, short-lived [`Tracer`] (never the session's), so the floor's
//! calls are never in a capture's records.
use std::{
    collections::BTreeMap,
    os::fd::{AsRawFd as _, RawFd},
    time::Instant,
};

use anyhow::{Context as _, bail};
use damon_common::{FIRST_USER_FUNC, hist_bucket_bounds};

use crate::{
    capture::AttachState,
    probe::{
        ring::decode,
        tracer::{LoadOptions, Tracer},
    },
    stats::calibration::{
        Calibration, CalibrationStatus, Floor, FloorBucket, FloorDistribution, FunctionMedian,
        HeldOut, METHOD,
    },
    trace::{AttachChoice, AttachMethod, CalibrationPlan, ModeConfig, TracedFunction},
};

/// The empty functions whose probe durations, pooled, make the floor.
pub const FLOOR_FUNCTIONS: [&str; 4] = [
    "bpf_fentry_test1",
    "bpf_fentry_test2",
    "bpf_fentry_test4",
    "bpf_fentry_test5",
];
/// Another empty function, timed in the same run, not in the pool, corrected with the floor:
/// the check.
pub const HELD_OUT_FUNCTION: &str = "bpf_fentry_test3";

/// Calls per floor by default: under TCG emulation 20 000 calls take about a second per floor
/// (see the README); the median of that many is good to well under a nanosecond.
pub const DEFAULT_CALLS: u64 = 20_000;

/// Untimed calls first (code and maps warm, emulator translation done); not in the floor.
const WARM_UP: u64 = 200;
/// Test runs between ring drains: 2 records of 56 bytes each, far below the ring's size.
const BATCH: u64 = 1000;
/// Ring size of the calibration tracer (power of two, page multiple).
const RING_BYTES: u32 = 1 << 20;

/// One floor to measure: an attach method and a trace mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FloorRequest {
    pub attach: AttachMethod,
    /// The trace mode and kernel bucket width, as the session loads them.
    pub mode: ModeConfig,
}

impl FloorRequest {
    pub fn attach_name(&self) -> &'static str {
        self.attach.as_str()
    }

    /// "stream", "kernel" (or "both"), as the capture's `meta.mode` says it.
    pub fn mode_name(&self) -> &'static str {
        self.mode.mode.as_str()
    }
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
            let started = Instant::now();
            let mut floor = match measure(r, calls, &mut |done| progress(r, done, calls)) {
                Ok(f) => f,
                Err(e) => Floor {
                    attach: r.attach_name().to_owned(),
                    mode: r.mode_name().to_owned(),
                    floor: None,
                    functions: Vec::new(),
                    between_functions_ns: 0.0,
                    uncertainty_ns: 0.0,
                    held_out: None,
                    untimed: 0,
                    error: Some(format!("{e:#}")),
                    took_ns: 0,
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

/// Ids of the calibration tracer's functions: the floor's first, the held-out one last.
fn ids() -> impl Iterator<Item = (u32, &'static str)> {
    FLOOR_FUNCTIONS
        .iter()
        .chain([&HELD_OUT_FUNCTION])
        .enumerate()
        .map(|(i, f)| (FIRST_USER_FUNC + i as u32, *f))
}

const HELD_OUT_ID: u32 = FIRST_USER_FUNC + FLOOR_FUNCTIONS.len() as u32;

/// One function's calls as the kernel histogram saw them between two readings.
type HistDelta = (Vec<FloorBucket>, u128, u64, u64);

/// Loads a calibration tracer for one request, calls the empty functions, and summarises.
fn measure(r: &FloorRequest, calls: u64, progress: &mut dyn FnMut(u64)) -> anyhow::Result<Floor> {
    let mut tracer = Tracer::load(&LoadOptions {
        functions: ids()
            .map(|(id, symbol)| TracedFunction {
                id,
                symbol: symbol.to_owned(),
            })
            .collect(),
        attach: r.attach.into(),
        ring_size: RING_BYTES,
        mode: r.mode,
    })
    .context("loading the calibration probes")?;
    let want = r.attach.state();
    for s in tracer.statuses() {
        if s.attach != want {
            let why = s.detail.as_deref().unwrap_or("not attached");
            match s.attach {
                AttachState::Missing => bail!(
                    "{} is not in this kernel ({why}); it comes with the BPF test-run code \
                     (CONFIG_BPF_SYSCALL and CONFIG_NET)",
                    s.name
                ),
                _ => bail!(
                    "{} could not be traced with {}: {why}",
                    s.name,
                    r.attach_name()
                ),
            }
        }
    }
    let trigger: RawFd = tracer
        .calibration_trigger()
        .context("loading the calibration trigger")?
        .as_raw_fd();
    let stream = r.mode.mode.streams();
    let mut ring = if stream {
        Some(tracer.take_ring()?)
    } else {
        None
    };
    // Stream mode: every duration, per function id.
    let mut timed: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    let mut drain = |timed: Option<&mut BTreeMap<u32, Vec<u64>>>| {
        let Some(ring) = ring.as_mut() else { return };
        let mut timed = timed;
        while let Some(item) = ring.next() {
            if let (Some(rec), Some(t)) = (decode(&item), timed.as_deref_mut())
                && rec.func >= FIRST_USER_FUNC
                && rec.func <= HELD_OUT_ID
            {
                t.entry(rec.func).or_default().push(rec.duration_ns);
            }
        }
    };
    for _ in 0..WARM_UP {
        test_run(trigger)?;
    }
    drain(None);
    let before = if stream {
        None
    } else {
        Some(tracer.kernel_histograms()?)
    };
    let counters_before = tracer.counters()?;
    let mut done = 0;
    while done < calls {
        let n = BATCH.min(calls - done);
        for _ in 0..n {
            test_run(trigger)?;
        }
        done += n;
        drain(Some(&mut timed));
        progress(done);
    }
    tracer.detach();
    drain(Some(&mut timed));
    let counters = tracer.counters()?;
    let seen = |id: u32| {
        counters.get(&id).map_or(0, |c| c.calls) - counters_before.get(&id).map_or(0, |c| c.calls)
    };
    // Per function: its own distribution, and what it adds to the pooled floor.
    let (per_function, pooled) = match before {
        None => {
            let per: Vec<(u32, Option<FloorDistribution>)> = ids()
                .map(|(id, _)| {
                    let d = timed.get(&id).map(Vec::as_slice).unwrap_or_default();
                    (id, FloorDistribution::from_durations(d))
                })
                .collect();
            let pool: Vec<u64> = ids()
                .filter(|&(id, _)| id != HELD_OUT_ID)
                .flat_map(|(id, _)| timed.get(&id).cloned().unwrap_or_default())
                .collect();
            (per, FloorDistribution::from_durations(&pool))
        }
        Some(before) => {
            let after = tracer.kernel_histograms()?;
            let delta = |id: u32| -> Option<HistDelta> {
                let (s1, b1) = after.get(&id)?;
                let (s0, b0) = before.get(&id)?;
                let buckets = b1
                    .iter()
                    .zip(b0)
                    .enumerate()
                    .map(|(i, (n1, n0))| {
                        let (lo, hi) = hist_bucket_bounds(i as u32, r.mode.hist_width_ns);
                        FloorBucket {
                            lo_ns: lo,
                            hi_ns: hi,
                            count: n1 - n0,
                        }
                    })
                    .collect();
                // The kernel's min and max are since load (warm-up included): bounds, not
                // exact for the counted calls; the sum is exact.
                Some((
                    buckets,
                    u128::from(s1.sum_ns - s0.sum_ns),
                    s1.min_ns,
                    s1.max_ns,
                ))
            };
            let per = ids()
                .map(|(id, _)| {
                    let d = delta(id).and_then(|(b, sum, min, max)| {
                        FloorDistribution::from_buckets(b, Some(sum), min, max)
                    });
                    (id, d)
                })
                .collect();
            let mut pool: Option<HistDelta> = None;
            for (id, _) in ids().filter(|&(id, _)| id != HELD_OUT_ID) {
                let Some((b, sum, min, max)) = delta(id) else {
                    continue;
                };
                pool = Some(match pool {
                    None => (b, sum, min, max),
                    Some((mut pb, ps, pmin, pmax)) => {
                        for (p, x) in pb.iter_mut().zip(&b) {
                            p.count += x.count;
                        }
                        (pb, ps + sum, pmin.min(min), pmax.max(max))
                    }
                });
            }
            let pooled = pool.and_then(|(b, sum, min, max)| {
                FloorDistribution::from_buckets(b, Some(sum), min, max)
            });
            (per, pooled)
        }
    };
    let floor = pooled.context("the probes timed no call of the empty functions")?;
    let untimed = ids()
        .filter(|&(id, _)| id != HELD_OUT_ID)
        .map(|(id, _)| seen(id))
        .sum::<u64>()
        .saturating_sub(floor.count);
    let name = |id: u32| ids().find(|&(i, _)| i == id).map_or("", |(_, f)| f);
    let held_out = per_function
        .iter()
        .find(|(id, _)| *id == HELD_OUT_ID)
        .and_then(|(_, d)| d.as_ref())
        .map(|h| HeldOut {
            function: HELD_OUT_FUNCTION.to_owned(),
            count: h.count,
            median_ns: h.median_ns,
            corrected_median_ns: floor.correct(h.median_ns),
            uncertainty_ns: 0.0,
        });
    let functions = per_function
        .iter()
        .filter(|(id, _)| *id != HELD_OUT_ID)
        .filter_map(|(id, d)| {
            d.as_ref().map(|d| FunctionMedian {
                function: name(*id).to_owned(),
                count: d.count,
                median_ns: d.median_ns,
            })
        })
        .collect();
    let mut out = Floor {
        attach: r.attach_name().to_owned(),
        mode: r.mode_name().to_owned(),
        floor: Some(floor),
        functions,
        between_functions_ns: 0.0,
        uncertainty_ns: 0.0,
        held_out,
        untimed,
        error: None,
        took_ns: 0,
    };
    out.settle_uncertainty();
    Ok(out)
}

/// `BPF_PROG_TEST_RUN` of the trigger: the kernel calls `bpf_fentry_test1..N` once each.
///
/// A raw bpf(2) call: aya 0.14 offers test runs for fexit programs only, and the tracing
/// handler needs nothing but the program fd (it rejects any flag, CPU or batch size).
fn test_run(prog_fd: RawFd) -> anyhow::Result<()> {
    /// `union bpf_attr`, zeroed but for `test.prog_fd` (its first field); larger than the
    /// kernel's `test` member, and the kernel requires the tail beyond what it knows be zero.
    #[repr(C, align(8))]
    struct Attr([u32; 32]);
    const BPF_PROG_TEST_RUN: libc::c_long = 10;
    let mut attr = Attr([0; 32]);
    attr.0[0] = prog_fd as u32;
    // SAFETY: `attr` is a valid, writable bpf_attr-sized buffer for the duration of the call;
    // the kernel reads and writes only within the size passed.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_TEST_RUN,
            &mut attr as *mut Attr,
            std::mem::size_of::<Attr>(),
        )
    };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        bail!("BPF_PROG_TEST_RUN of the calibration trigger failed: {e}");
    }
    Ok(())
}

/// The floors a session needs: one per attach method its functions use (in the session's
/// trace mode). `Auto` measures fentry (what auto picks wherever it can); functions that fell
/// back to kprobe add that floor afterwards ([`missing_floors`]).
pub fn requests_for(attach: AttachChoice, mode: ModeConfig) -> Vec<FloorRequest> {
    let attach = match attach {
        AttachChoice::Only(m) => m,
        AttachChoice::Auto => AttachMethod::Fentry,
    };
    vec![FloorRequest { attach, mode }]
}

/// Attach methods in use that a calibration has no floor for.
pub fn missing_floors(cal: &Calibration, used: &[AttachState]) -> Vec<AttachMethod> {
    let mut out = Vec::new();
    for method in used.iter().filter_map(|s| AttachMethod::of_state(*s)) {
        if !cal.floors.iter().any(|f| f.attach == method.as_str()) && !out.contains(&method) {
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
            r.attach_name(),
            r.mode_name()
        );
        if done >= calls {
            let _ = writeln!(err);
        }
        let _ = err.flush();
    } else if done >= calls {
        let _ = writeln!(
            err,
            "calibrated the probe floor ({}/{}): {calls} test runs",
            r.attach_name(),
            r.mode_name()
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
pub fn summary_lines(cal: &Calibration) -> Vec<String> {
    use crate::probe::calibration_text::describe_floor;
    if cal.status == CalibrationStatus::Skipped {
        return vec!["probe floor not measured (--no-calibrate): latencies are raw only".into()];
    }
    cal.floors
        .iter()
        .map(|f| {
            let mut line = format!("probe {}", describe_floor(f));
            if let Some(h) = &f.held_out {
                line.push_str(&format!(
                    "; held-out {} corrected {:+.1} ns",
                    h.function, h.corrected_median_ns
                ));
            }
            line.push_str(&format!("; {:.1} s", f.took_ns as f64 / 1e9));
            line
        })
        .collect()
}

/// Calibration when a session starts, before its probes are attached (so the floor's calls
/// and the session's never share the ring or the CPU time): the floor of the attach method the
/// session asks for, in its trace mode. `--no-calibrate` gives a `skipped` calibration.
pub fn before_session(
    plan: CalibrationPlan,
    attach: AttachChoice,
    mode: ModeConfig,
) -> Calibration {
    let CalibrationPlan::Measure { calls } = plan else {
        return Calibration::not_run(CalibrationStatus::Skipped, "--no-calibrate".to_owned());
    };
    // The method `auto` will try first on this kernel (what the attach does, see
    // `probe::attach`); a function that falls back is calibrated after the attach.
    let first = match attach {
        AttachChoice::Auto if crate::probe::kernel::Preemption::read().preempts_trampolines() => {
            AttachChoice::Only(AttachMethod::Kprobe)
        }
        other => other,
    };
    calibrate(&requests_for(first, mode), calls, &mut progress_line)
}

/// After the session attached: measures the floors of attach methods its functions use that
/// [`before_session`] did not (functions `auto` moved to kprobe), then prints the floors.
pub fn after_attach(
    cal: &mut Calibration,
    statuses: &[crate::capture::FunctionStatus],
    plan: CalibrationPlan,
    mode: ModeConfig,
) {
    if let CalibrationPlan::Measure { calls } = plan {
        let used: Vec<AttachState> = statuses.iter().map(|s| s.attach).collect();
        for attach in missing_floors(cal, &used) {
            let extra = calibrate(
                &requests_for(attach.into(), mode),
                calls,
                &mut progress_line,
            );
            cal.floors.extend(extra.floors);
        }
        settle_status(cal);
    }
    for line in summary_lines(cal) {
        eprintln!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn floor(attach: &str) -> Floor {
        Floor {
            attach: attach.to_owned(),
            mode: "stream".to_owned(),
            floor: None,
            functions: Vec::new(),
            between_functions_ns: 0.0,
            uncertainty_ns: 0.0,
            held_out: None,
            untimed: 0,
            error: None,
            took_ns: 0,
        }
    }

    #[test]
    fn a_session_asks_for_the_floor_of_the_method_it_tries_first() {
        let mode = ModeConfig {
            mode: crate::trace::TraceMode::Kernel,
            hist_width_ns: 7,
        };
        let only = |m| requests_for(AttachChoice::Only(m), mode);
        assert_eq!(
            only(AttachMethod::Kprobe),
            [FloorRequest {
                attach: AttachMethod::Kprobe,
                mode
            }]
        );
        assert_eq!(only(AttachMethod::Fentry)[0].attach, AttachMethod::Fentry);
        // Auto: fentry, what auto picks wherever it can (before_session resolves it first
        // on preemptible kernels); a fallback to kprobe is found by missing_floors.
        let auto = requests_for(AttachChoice::Auto, mode);
        assert_eq!(auto.len(), 1);
        assert_eq!(auto[0].attach, AttachMethod::Fentry);
        assert_eq!(auto[0].mode_name(), "kernel");
        assert_eq!(auto[0].attach_name(), "fentry");
    }

    #[test]
    fn missing_floors_are_the_used_methods_without_one_each_once() {
        let mut cal = Calibration::not_run(CalibrationStatus::Ok, String::new());
        cal.floors.push(floor("fentry"));
        let used = [
            AttachState::Fentry,
            AttachState::Kprobe,
            AttachState::Missing,
            AttachState::Kprobe,
            AttachState::Failed,
        ];
        assert_eq!(missing_floors(&cal, &used), [AttachMethod::Kprobe]);
        cal.floors.push(floor("kprobe"));
        assert!(missing_floors(&cal, &used).is_empty());
        assert!(missing_floors(&cal, &[]).is_empty());
    }
}
