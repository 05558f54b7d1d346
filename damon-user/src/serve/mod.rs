//! `damon-trace serve [--listen ADDR] [--output FILE]`: trace, and answer Prometheus scrapes
//! (OpenMetrics or the 0.0.4 text format, as the scraper's Accept header asks) while tracing.
//!
//! Once a second the tracing loop folds the records that arrived into a shared
//! [`MetricsSnapshot`] together with the kernel's counters; each scrape renders the snapshot
//! as it is (under a lock held only for the rendering).
pub mod http;
mod usage;

use std::{
    collections::{BTreeMap, BTreeSet},
    net::SocketAddr,
    process::ExitCode,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use anyhow::Context as _;
use damon_common::{AGGREGATION_MARK, CallRecord, FunctionId};
use tokio::net::TcpListener;

use crate::{
    analysis::damon::wants_intervals,
    capture::format::CaptureWriter,
    cli::ServeArgs,
    export::openmetrics::{FunctionMetrics, MetricsSnapshot, ProcessMetrics, render_as},
    session::{Session, StopReason, StopSignals, runtime_with_signals},
    stats::calibration::Calibration,
    stats::interval_tracker::IntervalTracker,
};

pub type Shared = Arc<Mutex<MetricsSnapshot>>;

/// Folds records into the snapshot: their latencies and values, and, from the aggregation
/// markers among them, the time each DAMON function took per interval (as the live screen
/// tracks it: a kdamond's calls come before its marker in the ring). As in `report`, every
/// complete interval of a kdamond that called the function counts, those before its first
/// call as 0.
#[derive(Debug, Default)]
struct Fold {
    intervals: IntervalTracker,
    /// Complete intervals per kdamond so far (a kdamond's first marker opens its first).
    completed: BTreeMap<u32, u64>,
    /// (thread, DAMON function id) pairs seen calling.
    callers: BTreeSet<(u32, u32)>,
}

impl Fold {
    fn record(&mut self, s: &mut MetricsSnapshot, r: &CallRecord) {
        if r.func == AGGREGATION_MARK {
            match self.completed.get_mut(&r.tid) {
                Some(n) => *n += 1,
                None => {
                    self.completed.insert(r.tid, 0);
                }
            }
            let (functions, damon) = (&s.functions, &mut s.damon);
            self.intervals.mark(r, |id, _calls, ns| {
                if let Some(f) = interval_function(functions, id) {
                    damon.interval_cost_of(&f.name).observe(ns);
                }
            });
            return;
        }
        // Only DAMON functions have an interval cost: lock_timer_base, the busy one, costs no
        // set lookup per record.
        let damon = FunctionId::try_from(r.func).is_ok_and(FunctionId::is_damon);
        if damon && self.callers.insert((r.tid, r.func)) {
            let earlier = self.completed.get(&r.tid).copied().unwrap_or(0);
            if let Some(f) = interval_function(&s.functions, r.func) {
                let h = s.damon.interval_cost_of(&f.name);
                for _ in 0..earlier {
                    h.observe(0);
                }
            }
        }
        self.intervals.call(r);
        s.observe(r);
    }
}

/// The traced function `id` when its per-interval cost is kept (the DAMON functions).
fn interval_function(functions: &[FunctionMetrics], id: u32) -> Option<&FunctionMetrics> {
    functions
        .iter()
        .find(|f| f.id == id && wants_intervals(f.attach, id))
}

/// The tool's CPU time and resident memory as of this scrape (left unset if /proc cannot be
/// read: a scrape never fails for it).
fn refresh_usage(s: &mut MetricsSnapshot) {
    if let Ok(u) = usage::read() {
        s.process.cpu_seconds = Some(u.cpu_seconds);
        s.process.resident_memory_bytes = Some(u.resident_bytes);
    }
}

fn with<T>(shared: &Shared, f: impl FnOnce(&mut MetricsSnapshot) -> T) -> T {
    // A panic while holding the lock cannot leave the counters half-written in a way that
    // matters more than serving nothing at all, so a poisoned lock is used as is.
    let mut guard = shared.lock().unwrap_or_else(PoisonError::into_inner);
    f(&mut guard)
}

/// Accepts connections forever, one task each.
pub async fn accept_loop(listener: TcpListener, shared: Shared) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let shared = shared.clone();
                tokio::spawn(async move {
                    let _ = http::serve_connection(stream, |e| {
                        with(&shared, |s| {
                            refresh_usage(s);
                            render_as(s, e)
                        })
                    })
                    .await;
                });
            }
            // Out of file descriptors and the like: back off instead of spinning.
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let config = args.trace.session_config(args.ring_size)?;
    let (runtime, mut signals) = runtime_with_signals()?;
    let _rt = runtime.enter();
    // Bind before the (slow) calibration and attach, so a taken port fails at once and nothing
    // is attached.
    let std_listener = args.listen.bind()?;
    std_listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(std_listener)?;
    let local: SocketAddr = listener.local_addr()?;

    let mut session = Session::start(&config)?;
    let meta = session.meta().clone();
    let mut capture = match &args.output {
        Some(path) => {
            let mut w = CaptureWriter::create(path, args.force, &meta)
                .with_context(|| format!("creating capture {}", path.display()))?;
            w.flush().context("writing the capture header")?;
            Some(w)
        }
        None => None,
    };
    let mut snapshot = MetricsSnapshot::new(&meta.kernel.release, meta.mode, &meta.functions)
        .with_disturbance(crate::capture::DisturbanceStatus::measured(&meta));
    snapshot.clock = meta.clock;
    if let Some(cal) = Calibration::from_meta(meta.calibration.as_ref()) {
        snapshot.process.probe_floors = ProcessMetrics::floors_from(&cal);
    }
    let shared: Shared = Arc::new(Mutex::new(snapshot));
    eprintln!("serving metrics on http://{local}/metrics");
    let server = tokio::spawn(accept_loop(listener, shared.clone()));

    let mut fold = Fold::default();
    let stop = runtime.block_on(serve_until_stopped(
        &mut session,
        &mut fold,
        &shared,
        capture.as_mut(),
        &mut signals,
        args.duration,
    ))?;
    let mut rest = Vec::new();
    // serve has no --slow: no slow calls come.
    let summary = session.stop(stop, &mut rest, &mut Vec::new())?;
    // The session's end as the capture has it: the last records, the final counters and, in
    // kernel mode, the final histograms.
    with(&shared, |s| {
        for r in &rest {
            fold.record(s, r);
        }
        for f in &mut s.functions {
            if let Some(c) = summary.counters.get(&f.id) {
                f.counters = *c;
            }
            if let Some(h) = summary.kernel_hist.get(&f.id) {
                f.set_hist(h);
            }
        }
    });
    if let Some(linger) = args.linger.filter(|l| !l.is_zero()) {
        eprintln!("tracing ended; answering scrapes with the final numbers for {linger:?}");
        // A stop signal ends the wait: whoever scraped the final numbers need not sit it out.
        runtime.block_on(async {
            tokio::select! {
                () = tokio::time::sleep(linger) => {}
                reason = signals.recv() => {
                    eprintln!("stopped answering with the final numbers early: {}", reason.as_str());
                }
            }
        });
    }
    server.abort();
    let calls: u64 = summary.counters.values().map(|c| c.made()).sum();
    eprintln!(
        "served for {:.1} s; {calls} calls made; ended: {}",
        summary.duration_ns as f64 / 1e9,
        stop.as_str()
    );
    if let (Some(mut w), Some(path)) = (capture, &args.output) {
        for r in &rest {
            w.push(r).context("writing the capture")?;
        }
        let written = w
            .finish(&summary)
            .with_context(|| format!("finishing capture {}", path.display()))?;
        eprintln!("wrote {written} records to {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Traces until the duration ends or a stop signal comes. Once a second, records and counters
/// go into the snapshot together (and into the capture, if any).
async fn serve_until_stopped(
    session: &mut Session,
    fold: &mut Fold,
    shared: &Shared,
    mut capture: Option<&mut CaptureWriter>,
    signals: &mut StopSignals,
    duration: Option<Duration>,
) -> anyhow::Result<StopReason> {
    let deadline = tokio::time::sleep(duration.unwrap_or(Duration::MAX));
    tokio::pin!(deadline);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut batch = Vec::new();
    loop {
        tokio::select! {
            r = session.wait_and_drain(&mut batch) => { r?; continue; }
            _ = tick.tick() => {}
            _ = &mut deadline => return Ok(StopReason::Duration),
            reason = signals.recv() => return Ok(reason),
        }
        // The ring drained before the counters are read: every record then has its entry in
        // `calls`, so a scrape never shows more records than calls.
        session.drain(&mut batch);
        for line in session.probe_lines() {
            eprintln!("{line}");
        }
        if let Some(w) = capture.as_deref_mut() {
            for r in &batch {
                w.push(r).context("writing the capture")?;
            }
            w.flush().context("writing the capture")?;
        }
        // Kernel mode: the kernel's cumulative histograms replace the records (read before
        // the counters, so no bucketed call is missing from `calls`).
        if session.buckets_in_kernel() {
            let snapshot = session
                .hist_snapshot()
                .context("reading the kernel's histograms")?;
            if let Some(w) = capture.as_deref_mut() {
                w.push_snapshot(&snapshot).context("writing the capture")?;
            }
            if session.kernel_width_ns().is_some() {
                batch.clear();
                with(shared, |s| {
                    for f in &mut s.functions {
                        if let Some((c, h)) = snapshot.functions.get(&f.id) {
                            f.set_hist(h);
                            f.counters = *c;
                        }
                    }
                });
                continue;
            }
        }
        let counters = session.counters()?;
        with(shared, |s| {
            for r in batch.drain(..) {
                fold.record(s, &r);
            }
            for f in &mut s.functions {
                f.counters = counters.get(&f.id).copied().unwrap_or_default();
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read as _, Write as _};

    use super::*;
    use crate::capture::{AttachState, FunctionStatus};

    /// A real scrape over loopback TCP against the accept loop, while "tracing" updates the
    /// shared snapshot in between.
    #[test]
    fn scrapes_over_tcp_see_updates() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let status = FunctionStatus {
            name: "lock_timer_base".into(),
            id: 3,
            attach: AttachState::Traced(crate::trace::Attach::Fentry),
            detail: None,
        };
        let shared: Shared = Arc::new(Mutex::new(MetricsSnapshot::new(
            "7.2",
            crate::capture::Mode::Stream,
            &[status],
        )));
        let listener = rt
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("bind loopback");
        let addr = listener.local_addr().expect("addr");
        rt.spawn(accept_loop(listener, shared.clone()));
        let scrape = |rt: &tokio::runtime::Runtime, accept: &'static str| {
            let client = std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(addr).expect("connect");
                let request = format!("GET /metrics HTTP/1.1\r\nHost: t\r\n{accept}\r\n");
                s.write_all(request.as_bytes()).expect("send");
                let mut text = String::new();
                s.read_to_string(&mut text).expect("read");
                text
            });
            // Drive the server until the client has its answer.
            rt.block_on(async {
                while !client.is_finished() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            });
            client.join().expect("client")
        };
        // No Accept header: the 0.0.4 text format.
        let first = scrape(&rt, "");
        assert!(first.starts_with("HTTP/1.1 200 OK"), "{first}");
        assert!(
            first.contains("text/plain; version=0.0.4") && !first.contains("# EOF"),
            "{first}"
        );
        assert!(
            first.contains(
                "damon_trace_call_duration_seconds_count{function=\"lock_timer_base\"} 0"
            )
        );
        with(&shared, |s| {
            s.observe(&damon_common::CallRecord {
                duration_ns: 1500,
                func: 3,
                ..Default::default()
            });
            s.functions[0].counters.calls = 1;
        });
        let second = scrape(
            &rt,
            "Accept: application/openmetrics-text; version=1.0.0\r\n",
        );
        assert!(
            second.contains("application/openmetrics-text; version=1.0.0"),
            "{second}"
        );
        assert!(
            second.contains(
                "damon_trace_call_duration_seconds_count{function=\"lock_timer_base\"} 1"
            )
        );
        assert!(second.contains("damon_trace_calls_total{function=\"lock_timer_base\"} 1"));
        // The tool's own cost, read from /proc/self at each scrape.
        for family in [
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
        ] {
            assert!(second.contains(family), "{family}missing:\n{second}");
        }
        assert!(second.ends_with("# EOF\n"));
    }

    /// Fed a real capture's records and markers in ring order (a call is written at its
    /// exit, a marker when the interval ends), serve's per-interval cost equals what `report`
    /// and `export` compute from the boundaries afterwards (the two intervals before the
    /// kdamond's first migration count as 0 in both).
    #[test]
    fn interval_cost_while_serving_equals_the_report() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/intervals-7.2.dtcap");
        let c = crate::capture::format::read_file(&path).expect("fixture");
        let mut ring: Vec<CallRecord> = c.records.iter().chain(&c.marks).copied().collect();
        ring.sort_by_key(|r| r.entry_ns + r.duration_ns);
        let mut s = MetricsSnapshot::new("7.2", crate::capture::Mode::Stream, &c.meta.functions);
        let mut fold = Fold::default();
        for r in &ring {
            fold.record(&mut s, r);
        }
        let want = crate::analysis::damon::per_interval_of(&c);
        assert_eq!(want.len(), 3, "the three DAMON functions");
        for (name, p) in want {
            let h = s.damon.interval_cost_of(&name);
            assert_eq!(
                h.count,
                p.per_interval_totals.len() as u64,
                "{name}: intervals"
            );
            let sum: u64 = p.per_interval_totals.iter().sum();
            assert_eq!(h.sum_ns, u128::from(sum), "{name}: ns");
        }
        assert_eq!(s.damon.interval_cost.len(), 3, "lock_timer_base has none");
    }
}
