//! `damon-trace serve --listen ADDR`: trace, and answer OpenMetrics scrapes while tracing.
//!
//! Once a second the tracing loop folds the records that arrived into a shared
//! [`MetricsSnapshot`] together with the kernel's counters; each scrape renders the snapshot
//! as it is (under a lock held only for the rendering).
pub mod http;

use std::{
    net::SocketAddr,
    process::ExitCode,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use anyhow::Context as _;
use tokio::net::TcpListener;

use crate::{
    cli::ServeArgs,
    export::openmetrics::{MetricsSnapshot, render},
    session::{Session, StopReason, runtime_with_signals},
};

pub type Shared = Arc<Mutex<MetricsSnapshot>>;

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
                    let _ = http::serve_connection(stream, || with(&shared, |s| render(s))).await;
                });
            }
            // Out of file descriptors and the like: back off instead of spinning.
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let config = args
        .selection
        .session_config(args.mode, args.ring_size, None, &args.tasks)?;
    let (runtime, mut signals) = runtime_with_signals()?;
    let _rt = runtime.enter();
    // Bind before the (slow) attach, so a taken port fails at once and nothing is attached.
    let std_listener = std::net::TcpListener::bind(args.listen)
        .with_context(|| format!("listening on {}", args.listen))?;
    std_listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(std_listener)?;
    let local: SocketAddr = listener.local_addr()?;

    let mut session = Session::start(&config)?;
    let meta = session.meta().clone();
    let shared: Shared = Arc::new(Mutex::new(MetricsSnapshot::new(
        &meta.kernel.release,
        &meta.mode,
        &meta.functions,
    )));
    eprintln!("serving OpenMetrics on http://{local}/metrics");
    let server = tokio::spawn(accept_loop(listener, shared.clone()));

    let stop = runtime.block_on(async {
        let deadline = tokio::time::sleep(args.duration.unwrap_or(Duration::MAX));
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut batch = Vec::new();
        let stop = loop {
            tokio::select! {
                r = session.wait_and_drain(&mut batch) => { r?; continue; }
                _ = tick.tick() => {}
                _ = &mut deadline => break StopReason::Duration,
                reason = signals.recv() => break reason,
            }
            // Once a second, records and counters go in together, the ring drained before the
            // counters are read: every record then has its entry in `calls`, so a scrape
            // never shows more records than calls.
            session.drain(&mut batch);
            // Kernel mode: the kernel's cumulative histograms replace the records (read before
            // the counters, so no bucketed call is missing from `calls`).
            if session.kernel_width_ns().is_some() {
                let snapshot = session.hist_snapshot()?;
                with(&shared, |s| {
                    for f in &mut s.functions {
                        if let Some((c, h)) = snapshot.functions.get(&f.id) {
                            f.set_hist(h);
                            f.counters = *c;
                        }
                    }
                });
                continue;
            }
            let counters = session.counters()?;
            with(&shared, |s| {
                for r in batch.drain(..) {
                    s.observe(&r);
                }
                for f in &mut s.functions {
                    f.counters = counters.get(&f.id).copied().unwrap_or_default();
                }
            });
        };
        anyhow::Ok(stop)
    })?;
    server.abort();
    let mut rest = Vec::new();
    let summary = session.stop(stop, &mut rest)?;
    let calls: u64 = summary.counters.values().map(|c| c.made()).sum();
    eprintln!(
        "served for {:.1} s; {calls} calls made; ended: {}",
        summary.duration_ns as f64 / 1e9,
        stop.as_str()
    );
    Ok(ExitCode::SUCCESS)
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
        let scrape = |rt: &tokio::runtime::Runtime| {
            let client = std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(addr).expect("connect");
                s.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
                    .expect("send");
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
        let first = scrape(&rt);
        assert!(first.starts_with("HTTP/1.1 200 OK"), "{first}");
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
        let second = scrape(&rt);
        assert!(
            second.contains(
                "damon_trace_call_duration_seconds_count{function=\"lock_timer_base\"} 1"
            )
        );
        assert!(second.contains("damon_trace_calls_total{function=\"lock_timer_base\"} 1"));
        assert!(second.ends_with("# EOF\n"));
    }
}
