//! A tracing session: diagnose, attach, stream records, stop with exact accounting.
//!
//! `record`, `live` and `serve` drive one; it owns the probes and the ring reader, and knows the
//! order in which stopping keeps `calls == records + dropped + in_flight` true.
use std::{
    collections::BTreeMap,
    task::Poll,
    time::{Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::Context as _;
use damon_common::CallRecord;
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::{
    capture::{FunctionCounters, HistSnapshot, KernelHist, Meta, SlowCall, SlowCounters, Summary},
    diagnosis,
    probe::{
        calibrate,
        facts::KernelFacts,
        loader::probe_log::{ProbeLog, ProbeLogLevel},
        tracer::{LoadOptions, Tracer, ring::RingReader, slow::SlowCollector},
    },
    stats::calibration::{Calibration, CalibrationStatus},
    timing,
    trace::{CalibrationPlan, Mode, ModeConfig, SessionConfig},
};

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Duration,
    /// SIGINT (Ctrl-C).
    Interrupted,
    /// SIGTERM or SIGHUP.
    Terminated,
    /// The user quit the live view.
    Quit,
    /// The live view failed (its error is reported separately).
    Error,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Duration => "duration",
            StopReason::Interrupted => "interrupted",
            StopReason::Terminated => "terminated",
            StopReason::Quit => "quit",
            StopReason::Error => "error",
        }
    }
}

/// The single-threaded runtime a session runs on, with the stop signals already caught.
///
/// Signals are caught before the (slow) attach: a Ctrl-C during it then ends the session as
/// soon as it starts, cleanly, instead of killing us half-attached; this also overrides a
/// SIG_IGN inherited by background jobs of non-interactive shells. Callers `enter()` the
/// runtime before [`Session::start`], which registers the ring buffer with its reactor.
pub fn runtime_with_signals() -> anyhow::Result<(tokio::runtime::Runtime, StopSignals)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let signals = {
        let _rt = runtime.enter();
        StopSignals::install()?
    };
    Ok((runtime, signals))
}

/// Handlers for the stop signals, installed before the (slow) attach so that an early signal
/// still ends the session cleanly.
pub struct StopSignals {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
}

impl StopSignals {
    /// Must run inside the tokio runtime.
    pub fn install() -> std::io::Result<StopSignals> {
        Ok(StopSignals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// The next stop signal.
    pub async fn recv(&mut self) -> StopReason {
        std::future::poll_fn(|cx| {
            if self.interrupt.poll_recv(cx).is_ready() {
                return Poll::Ready(StopReason::Interrupted);
            }
            if self.terminate.poll_recv(cx).is_ready() || self.hangup.poll_recv(cx).is_ready() {
                return Poll::Ready(StopReason::Terminated);
            }
            Poll::Pending
        })
        .await
    }
}

/// Clock `clock` now, in ns.
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer for the duration of the call.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// DAMON configuration in sysfs, for the capture's metadata; `None` without DAMON, and with a
/// warning when DAMON is there but could not be read. A process that may not read DAMON's
/// root-only files at all (the serve unit's user, with capabilities but no root) records none
/// and is not warned.
fn damon_config() -> Option<serde_json::Value> {
    let root = crate::damon::SysfsRoot::system();
    let read = crate::damon::snapshot(&root).and_then(|s| Ok(serde_json::to_value(s)?));
    read.map_err(|e| {
        let denied = e
            .chain()
            .filter_map(|c| c.downcast_ref::<std::io::Error>())
            .any(|io| io.kind() == std::io::ErrorKind::PermissionDenied);
        if root.damon_dir().exists() && !denied {
            eprintln!(
                "damon-trace: warning: DAMON's configuration could not be read, so it is not \
                 recorded: {e:#}"
            );
        }
    })
    .ok()
}

/// When the session cannot start, or is about to fail for sure: `doctor`'s diagnosis, run
/// only then (its attach trials and self-tests took 3.7–8.4 s of every start in the guests,
/// `--debug-timing`). Prints it and returns the error when it finds nothing traceable here;
/// `None` when something is (the caller's own error, if any, then stands).
fn nothing_traceable(config: &SessionConfig) -> Option<anyhow::Error> {
    let found = {
        let _t = timing::phase("diagnosis (the session could not start)");
        diagnosis::diagnose(&config.functions)
    };
    if found.can_trace {
        return None;
    }
    eprint!("{}", diagnosis::render_text(&found));
    Some(anyhow::anyhow!(
        "the selected functions cannot be traced here (diagnosis above)"
    ))
}

/// The calibration the capture's header states, and the one to measure beside the session:
/// `--no-calibrate` says skipped, `serve` asks for none.
fn start_calibration(
    config: &SessionConfig,
    tracer: &Tracer,
    prepared: Option<calibrate::Prepared>,
) -> (Option<Calibration>, Option<calibrate::Beside>) {
    match config.calibration {
        None => (None, None),
        Some(CalibrationPlan::Skip) => {
            let cal = Calibration::not_run(CalibrationStatus::Skipped, "--no-calibrate".into());
            for line in calibrate::summary_lines(&cal, config.clock.unit()) {
                eprintln!("{line}");
            }
            (Some(cal), None)
        }
        Some(CalibrationPlan::Measure { .. }) => {
            match prepared.and_then(|p| p.start(tracer.statuses(), config.mode)) {
                Some(b) => {
                    eprintln!("{}", b.started_line());
                    (Some(b.pending()), Some(b))
                }
                None => (None, None),
            }
        }
    }
}

/// The capture's metadata of a session whose probes are attached.
fn session_meta(
    config: &SessionConfig,
    tracer: &Tracer,
    floor: Option<Calibration>,
) -> anyhow::Result<Meta> {
    let mode = config.mode;
    Ok(Meta {
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        kernel: KernelFacts::get().identity().clone(),
        hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap_or_default()
            .trim()
            .to_owned(),
        start_unix_ns: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
        start_monotonic_ns: clock_ns(libc::CLOCK_MONOTONIC),
        command_line: std::env::args().collect(),
        mode: mode.mode,
        ring_size: config.ring_size,
        functions: tracer.statuses().to_vec(),
        damon: damon_config(),
        cpu_model: crate::capture::host_cpu_model(),
        calibration: floor.map(serde_json::to_value).transpose()?,
        intervals: Some(tracer.interval_hook().clone()),
        args: tracer.arg_statuses().to_vec(),
        filter: config.filter.clone(),
        disturbance: Some(tracer.disturbance().clone()),
        clock: config.clock,
        slow: config.slow.filter(|_| mode.mode.streams()),
    })
}

pub struct Session {
    tracer: Tracer,
    reader: RingReader,
    /// `--slow`: the slow calls' reader.
    slow: Option<SlowCollector>,
    /// `--debug-probes`: the probes' own log.
    probe_log: Option<ProbeLog>,
    meta: Meta,
    started: Instant,
    mode: ModeConfig,
    /// `--debug-timing`: whether a record of a call has been drained yet.
    first_record_seen: bool,
    /// `--debug-timing`: print the table at the first record (`record`, `serve`), or leave it
    /// to the end (`live`, whose screen is on the terminal then).
    timing_at_first_record: bool,
    /// The probe floor being measured beside the session, until taken.
    beside: Option<calibrate::Beside>,
}

impl Session {
    /// Attaches the configured functions and prints how each is traced; when that fails, the
    /// diagnosis says why (see [`nothing_traceable`]). Must run inside a tokio runtime (the ring
    /// buffer is registered with its reactor).
    ///
    /// With a calibration, the probe floor is measured first (see `probe::calibrate`) and
    /// stored in the metadata; `serve` gives none (it writes no capture).
    pub fn start(config: &SessionConfig) -> anyhow::Result<Session> {
        // Locked down, no tracing program loads: say why at once rather than after calibrating.
        if KernelFacts::get().lockdown()
            == Some(crate::probe::facts::kernel::Lockdown::Confidentiality)
            && let Some(e) = nothing_traceable(config)
        {
            return Err(e);
        }
        let mode = config.mode;
        // The calibration's thread starts before the attach (see `calibrate::Prepared`).
        let prepared = match config.calibration {
            Some(CalibrationPlan::Measure { calls }) => calibrate::Prepared::new(calls),
            _ => None,
        };
        let loaded = {
            let _t = timing::phase("the session's probes: Tracer::load");
            Tracer::load(&LoadOptions {
                functions: config.functions.clone(),
                attach: config.attach,
                ring_size: config.ring_size,
                mode,
                filter: config.filter.clone(),
                debug_probes: config.debug_probes,
                slow_ns: config.slow.map_or(0, |s| s.threshold_ns),
            })
        };
        let mut tracer = loaded.map_err(|e| nothing_traceable(config).unwrap_or(e))?;
        if !config.filter.is_off() {
            eprintln!(
                "task filter {}: only these tasks' calls are timed; other tasks' calls are \
                 counted as filtered, in the kernel",
                config.filter.describe()
            );
        }
        for s in tracer.statuses() {
            match &s.detail {
                Some(d) => eprintln!("{:<27} {:<14} {d}", s.name, s.attach.as_str()),
                None => eprintln!("{:<27} {}", s.name, s.attach.as_str()),
            }
        }
        if !tracer.any_attached() {
            drop(tracer);
            return Err(nothing_traceable(config).unwrap_or_else(|| {
                anyhow::anyhow!(
                    "none of the selected functions could be attached (reasons above); see \
                     `damon-trace doctor`"
                )
            }));
        }
        let (floor, beside) = start_calibration(config, &tracer, prepared);
        let meta = {
            let _t = timing::phase("metadata: kernel identity, DAMON's sysfs");
            session_meta(config, &tracer, floor)?
        };
        let _t = timing::phase("ring buffer: registered with epoll; probe log");
        let ring = tracer.take_ring()?;
        let reader = RingReader::new(ring).context("registering the ring buffer with epoll")?;
        let slow = match meta.slow {
            Some(settings) => Some(SlowCollector::start(&mut tracer, settings)?),
            None => None,
        };
        let probe_log = match config.debug_probes {
            ProbeLogLevel::Off => None,
            _ => Some(tracer.start_probe_log()?),
        };
        if beside.is_none() {
            // The start is over: drop the big files it read (see `sysfiles`).
            crate::probe::release();
        }
        Ok(Session {
            tracer,
            reader,
            slow,
            probe_log,
            meta,
            started: Instant::now(),
            mode,
            first_record_seen: false,
            timing_at_first_record: true,
            beside,
        })
    }

    /// `--debug-timing`: the table is printed at the end, not at the first record (`live`:
    /// the screen is on the terminal then).
    pub fn timing_report_at_end(&mut self) {
        self.timing_at_first_record = false;
    }

    /// `--debug-timing`: marks the first record of a call among `new`, and prints the table
    /// then unless it waits for the end. Off, nothing.
    fn note_first_record(&mut self, new: &[CallRecord]) {
        if self.first_record_seen || !timing::enabled() {
            return;
        }
        if new.iter().any(|r| r.func != damon_common::AGGREGATION_MARK) {
            self.first_record_seen = true;
            timing::mark("first record");
            if self.timing_at_first_record {
                timing::print_once();
            }
        }
    }

    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// The calibration measured beside the session, once it has finished (and only then, once):
    /// the session's metadata now holds it, its floors are printed on stderr (unless `quiet`:
    /// `live`'s screen is on the terminal), and the capture's summary will hold it.
    pub fn calibration_done(&mut self, quiet: bool) -> anyhow::Result<Option<Calibration>> {
        let Some(cal) = self.beside.as_mut().and_then(calibrate::Beside::try_finish) else {
            return Ok(None);
        };
        // Its tracers are loaded and gone: so is the start's need for the big files.
        crate::probe::release();
        if quiet {
            self.meta.calibration = Some(serde_json::to_value(&cal)?);
        } else {
            self.took_calibration(&cal)?;
        }
        Ok(Some(cal))
    }

    /// Puts `cal` in the metadata and prints its floors.
    fn took_calibration(&mut self, cal: &Calibration) -> anyhow::Result<()> {
        self.meta.calibration = Some(serde_json::to_value(cal)?);
        for line in calibrate::summary_lines(cal, self.meta.clock.unit()) {
            eprintln!("{line}");
        }
        Ok(())
    }

    pub fn started(&self) -> Instant {
        self.started
    }

    /// Waits for the kernel's wake-up, then appends every record in the ring to `out`.
    pub async fn wait_and_drain(&mut self, out: &mut Vec<CallRecord>) -> std::io::Result<()> {
        let before = out.len();
        self.reader.drain_when_ready(&mut |r| out.push(r)).await?;
        if let Some(slow) = self.slow.as_mut() {
            slow.drain();
        }
        self.note_first_record(&out[before..]);
        Ok(())
    }

    /// Appends every record now in the ring to `out` (the timer path, against missed wake-ups;
    /// `record`, `live` and `serve` call it once a second in both modes). At most once a
    /// second it also deletes the stamp entries of exited tasks ([`Tracer::collect_stamps`]),
    /// so a long session's stamp map holds the live tasks only. That is housekeeping: a failure
    /// there costs nothing now (a map that then fills counts `StampFull`), so it is not fatal.
    pub fn drain(&mut self, out: &mut Vec<CallRecord>) {
        let before = out.len();
        self.reader.drain(&mut |r| out.push(r));
        if let Some(slow) = self.slow.as_mut() {
            slow.drain();
        }
        self.note_first_record(&out[before..]);
        let _ = self.tracer.collect_stamps();
    }

    /// `--slow`: each function's slow calls kept and lost so far (the kernel's ring-full
    /// counts and the recorder's bound); empty without it.
    pub fn slow_counters(&self) -> anyhow::Result<BTreeMap<u32, SlowCounters>> {
        match &self.slow {
            Some(c) => c.counters(&self.tracer),
            None => Ok(BTreeMap::new()),
        }
    }

    /// `--slow`: the slow calls read since the last call (with the records' drains), in
    /// arrival order; none without it.
    pub fn take_slow_calls(&mut self) -> Vec<SlowCall> {
        self.slow
            .as_mut()
            .map(SlowCollector::take)
            .unwrap_or_default()
    }

    /// What the probes logged since the last call (`--debug-probes`; nothing without it), as
    /// lines to show: each prefixed `probe: `, and a line for any not kept.
    pub fn probe_lines(&mut self) -> Vec<String> {
        let Some(log) = self.probe_log.as_mut() else {
            return Vec::new();
        };
        let read = log.read();
        let mut out: Vec<String> = read.lines.iter().map(|l| format!("probe: {l}")).collect();
        if read.dropped > 0 {
            out.push(format!(
                "probe: {} more lines since the last read, not shown",
                read.dropped
            ));
        }
        out
    }

    /// The kernel's counters now (calls still running count as in flight).
    pub fn counters(&self) -> anyhow::Result<BTreeMap<u32, FunctionCounters>> {
        self.tracer.counters()
    }

    /// The kernel's histograms now (kernel mode), per function id; empty in stream mode.
    pub fn kernel_histograms(&self) -> anyhow::Result<BTreeMap<u32, KernelHist>> {
        if !self.mode.mode.buckets_in_kernel() {
            return Ok(BTreeMap::new());
        }
        let hists = self.tracer.kernel_histograms()?;
        // After the histograms (see `Tracer::kernel_disturbed`).
        let mut disturbed = self.tracer.kernel_disturbed()?;
        Ok(hists
            .into_iter()
            .map(|(id, (s, buckets))| {
                let h = KernelHist {
                    count: s.count,
                    sum_ns: s.sum_ns,
                    min_ns: s.min_ns,
                    max_ns: s.max_ns,
                    width_ns: self.mode.hist_width_ns,
                    buckets,
                    disturbed: disturbed.remove(&id),
                };
                (id, h)
            })
            .collect())
    }

    /// Whether the kernel buckets calls (kernel mode, or both).
    pub fn buckets_in_kernel(&self) -> bool {
        self.mode.mode.buckets_in_kernel()
    }

    /// Kernel mode: the linear bucket width (`None` when records are streamed).
    pub fn kernel_width_ns(&self) -> Option<u64> {
        (self.mode.mode == Mode::Kernel).then_some(self.mode.hist_width_ns)
    }

    /// Kernel mode: the counters and histograms now, for a capture's periodic snapshot
    /// (the histograms first: calls they hold are then surely in the counters read next).
    pub fn hist_snapshot(&self) -> anyhow::Result<HistSnapshot> {
        let hists = self.kernel_histograms()?;
        let counters = self.tracer.counters()?;
        let functions = hists
            .into_iter()
            .map(|(id, h)| (id, (counters.get(&id).copied().unwrap_or_default(), h)))
            .collect();
        Ok(HistSnapshot {
            elapsed_ns: self.started.elapsed().as_nanos() as u64,
            functions,
        })
    }

    /// Entries off, running calls finish, exits off; the last records go to `out`, and the
    /// summary carries the final counters with the calls still in flight. `--slow`: the last
    /// slow calls go to `slow_out`, and the summary counts each function's kept and lost.
    pub fn stop(
        mut self,
        reason: StopReason,
        out: &mut Vec<CallRecord>,
        slow_out: &mut Vec<SlowCall>,
    ) -> anyhow::Result<Summary> {
        self.tracer.detach();
        self.drain(out);
        slow_out.extend(self.take_slow_calls());
        let slow = self.slow_counters()?;
        let slow_malformed = self.slow.as_ref().map_or(0, SlowCollector::malformed);
        // The probes' last lines (since the last second's read, and any the detach logged):
        // on stderr, where `record` and `serve` printed the others (`live` has left the
        // screen by now).
        for line in self.probe_lines() {
            eprintln!("{line}");
        }
        let kernel_hist = self.kernel_histograms()?;
        // A calibration beside the session ends up in the summary, waited for if need be.
        if let Some(cal) = self.beside.as_mut().and_then(calibrate::Beside::finish) {
            self.took_calibration(&cal)?;
        }
        Ok(Summary {
            duration_ns: self.started.elapsed().as_nanos() as u64,
            end_reason: reason.as_str().to_owned(),
            counters: self.tracer.counters()?,
            malformed_items: self.reader.malformed + slow_malformed,
            damon_end: damon_config(),
            intervals: self.tracer.mark_counters(),
            kernel_hist,
            calibration: self
                .beside
                .is_some()
                .then(|| self.meta.calibration.clone())
                .flatten(),
            slow,
        })
    }
}
