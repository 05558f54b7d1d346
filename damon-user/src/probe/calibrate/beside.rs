//! Calibration beside the session (`record`, `live`): the session attaches its probes first and
//! starts recording; the floors of the attach methods its functions ended up on are measured
//! meanwhile on a thread of their own, with the calibration's own tracer (never the session's
//! ring), so the first record does not wait for them (on the 7.2 guest, two floors took 6 s of
//! a 9 s start).
//!
//! The price: during those seconds the session's calls share the machine's CPUs with the
//! floor's test runs (one syscall after another on one CPU), and the floor's calls share them
//! with the session's. The floor is a median of tens of thousands of calls and does not move
//! with that (docs/accuracy.md); a call that the test runs delay is disturbed like any other
//! (`--disturbance` flags it).
//!
//! The calibration's own system calls after the attach are a session's calls like any other
//! where it traces their paths: its thread is started before the attach and reads the
//! kernel's version there ([`Prepared`]), so `uname` is not among them (a guest test traces
//! it and counts exactly its workload's calls); its tracer's load (bpf(2), BTF and kallsyms
//! reads) and its test runs are.
//!
//! The capture's header says `pending`; the summary at its end holds the floors, and reading
//! the capture puts them where a calibration made before the attach would be
//! (`meta.calibration`).
use std::{thread::JoinHandle, time::Instant};

use super::{FloorRequest, calibrate, missing_floors};
use crate::{
    capture::{AttachState, FunctionStatus},
    stats::calibration::{Calibration, CalibrationStatus},
    trace::ModeConfig,
};

/// A calibration running beside a session.
pub struct Beside {
    handle: Option<JoinHandle<Option<Calibration>>>,
    began: Instant,
    calls: u64,
    /// `attach/mode` of each floor, for the lines that say what runs.
    floors: Vec<String>,
}

/// The calibration's thread, started before the session attaches: it reads the kernel's
/// version first, as aya does before its first program load (once per thread, with uname(2)),
/// so that a session tracing `uname` does not count the calibration's; then it waits for the
/// floors to measure. Dropped without [`Prepared::start`], it ends.
pub struct Prepared {
    go: std::sync::mpsc::Sender<Vec<FloorRequest>>,
    handle: JoinHandle<Option<Calibration>>,
    calls: u64,
}

impl Prepared {
    /// The thread, waiting; `None` if it cannot be started (no calibration then).
    pub fn new(calls: u64) -> Option<Prepared> {
        let (go, requests) = std::sync::mpsc::channel::<Vec<FloorRequest>>();
        let handle = std::thread::Builder::new()
            .name("calibration".into())
            .spawn(move || {
                let _ = aya::util::KernelVersion::current();
                let requests = requests.recv().ok()?;
                Some(calibrate(&requests, calls, &mut |_, _, _| {}))
            })
            .ok()?;
        Some(Prepared { go, handle, calls })
    }

    /// Starts measuring the floor of every attach method that `statuses` (the session's
    /// functions, attached) use, in the session's trace `mode`; `None` when no function is
    /// attached (nothing to correct).
    pub fn start(self, statuses: &[FunctionStatus], mode: ModeConfig) -> Option<Beside> {
        let used: Vec<AttachState> = statuses.iter().map(|s| s.attach).collect();
        let requests = floor_requests(&used, mode);
        let floors = requests
            .iter()
            .map(|r| format!("{}/{}", r.attach, r.mode.mode))
            .collect();
        if requests.is_empty() || self.go.send(requests).is_err() {
            return None;
        }
        Some(Beside {
            handle: Some(self.handle),
            began: Instant::now(),
            calls: self.calls,
            floors,
        })
    }
}

impl Beside {
    /// What the capture's header holds meanwhile.
    pub fn pending(&self) -> Calibration {
        Calibration {
            calls: self.calls,
            ..Calibration::not_run(
                CalibrationStatus::Pending,
                format!(
                    "the probe floor ({}) is measured beside the session's first seconds; the \
                     capture's summary holds it",
                    self.floors.join(", ")
                ),
            )
        }
    }

    /// The line that says it started.
    pub fn started_line(&self) -> String {
        format!(
            "calibrating the probe floor ({}, {} test runs each) beside the first seconds of \
             tracing",
            self.floors.join(", "),
            self.calls
        )
    }

    /// The calibration if it has finished (once); `None` while it runs.
    pub fn try_finish(&mut self) -> Option<Calibration> {
        if self.handle.as_ref()?.is_finished() {
            self.finish()
        } else {
            None
        }
    }

    /// Waits for the calibration (once; `None` after it was taken), saying so on stderr when
    /// it has to wait.
    pub fn finish(&mut self) -> Option<Calibration> {
        let handle = self.handle.take()?;
        if !handle.is_finished() {
            eprintln!(
                "waiting for the probe floor's calibration (started {:.1} s ago) to finish",
                self.began.elapsed().as_secs_f64()
            );
        }
        Some(handle.join().ok().flatten().unwrap_or_else(|| {
            Calibration::not_run(
                CalibrationStatus::Failed,
                "the calibration thread panicked".to_owned(),
            )
        }))
    }
}

/// One floor per attach method in `used` (each once, in order of first use), in `mode`.
fn floor_requests(used: &[AttachState], mode: ModeConfig) -> Vec<FloorRequest> {
    let none = Calibration::not_run(CalibrationStatus::Ok, String::new());
    missing_floors(&none, used)
        .into_iter()
        .map(|attach| FloorRequest { attach, mode })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Attach, Mode};

    #[test]
    fn one_floor_per_method_in_use_in_the_sessions_mode() {
        let mode = ModeConfig {
            mode: Mode::Kernel,
            hist_width_ns: 7,
            disturbance: true,
        };
        let used = [
            AttachState::Traced(Attach::Kprobe),
            AttachState::Traced(Attach::KprobeSession),
            AttachState::Missing,
            AttachState::Traced(Attach::KprobeSession),
            AttachState::Failed,
        ];
        let r = floor_requests(&used, mode);
        let attach: Vec<Attach> = r.iter().map(|r| r.attach).collect();
        assert_eq!(attach, [Attach::Kprobe, Attach::KprobeSession]);
        assert!(
            r.iter()
                .all(|r| r.mode == mode && r.mode.mode == Mode::Kernel)
        );
        assert!(floor_requests(&[AttachState::Missing], mode).is_empty());
    }
}
