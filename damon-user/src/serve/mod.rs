//! `damon-trace serve [--listen ADDR] [--output FILE]`: trace, and answer Prometheus scrapes
//! (OpenMetrics or the 0.0.4 text format, as the scraper's Accept header asks) while tracing.
//!
//! Once a second the tracing loop folds the records that arrived into a shared
//! [`MetricsSnapshot`] together with the kernel's counters; each scrape renders the snapshot
//! as it is (under a lock held only for the rendering).
pub mod http;
mod usage;

use std::{
    net::SocketAddr,
    process::ExitCode,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use anyhow::Context as _;
use tokio::net::TcpListener;

use crate::{
    capture::format::CaptureWriter,
    cli::ServeArgs,
    export::openmetrics::{MetricsSnapshot, ProcessMetrics, render_as},
    session::{Session, StopReason, StopSignals, runtime_with_signals},
    stats::calibration::Calibration,
};

pub type Shared = Arc<Mutex<MetricsSnapshot>>;

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
    let mut snapshot = MetricsSnapshot::new(&meta.kernel.release, &meta.mode, &meta.functions);
    if let Some(cal) = Calibration::from_meta(meta.calibration.as_ref()) {
        snapshot.process.probe_floors = ProcessMetrics::floors_from(&cal);
    }
    let shared: Shared = Arc::new(Mutex::new(snapshot));
    eprintln!("serving metrics on http://{local}/metrics");
    let server = tokio::spawn(accept_loop(listener, shared.clone()));

    let stop = runtime.block_on(serve_until_stopped(
        &mut session,
        &shared,
        capture.as_mut(),
        &mut signals,
        args.duration,
    ))?;
    let mut rest = Vec::new();
    let summary = session.stop(stop, &mut rest)?;
    // The session's end as the capture has it: the last records, the final counters and, in
    // kernel mode, the final histograms.
    with(&shared, |s| {
        for r in &rest {
            s.observe(r);
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
        runtime.block_on(tokio::time::sleep(linger));
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
                s.observe(&r);
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
            attach: AttachState::Fentry,
            detail: None,
        };
        let shared: Shared = Arc::new(Mutex::new(MetricsSnapshot::new("7.2", "stream", &[status])));
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
        assert!(second.ends_with("# EOF\n"));
    }
}
