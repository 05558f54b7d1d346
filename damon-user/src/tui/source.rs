//! Where the screen's records come from: a live tracing session, or a replayed capture.
use std::time::Instant;

use anyhow::Context as _;
use damon_common::CallRecord;

use crate::{
    capture::{Meta, SlowCall, Summary},
    session::{Session, StopReason},
    tui::{app::Event, replay::ReplaySource},
};

/// A tracing session feeding the screen.
pub struct LiveSource {
    session: Session,
    started: Instant,
    batch: Vec<CallRecord>,
    /// An emptied batch the screen handed back, for the next one.
    spare: Vec<CallRecord>,
}

/// The vector the next batch collects into: `spare` (the screen's last batch, emptied) when it
/// holds at least `taken` (the capacity of the batch just taken), else a fresh one of that
/// size. Reusing it matters with musl's allocator (the static build): a fresh vector of a few
/// hundred KiB is mapped and faulted in page by page, and unmapped when dropped, for every
/// batch (`bench-decode` measured half the aggregation's speed); growing one by doubling
/// costs more.
pub fn next_batch(spare: Vec<CallRecord>, taken: usize) -> Vec<CallRecord> {
    if spare.capacity() >= taken {
        spare
    } else {
        Vec::with_capacity(taken)
    }
}

impl LiveSource {
    pub fn new(session: Session) -> LiveSource {
        LiveSource {
            started: session.started(),
            session,
            batch: Vec::new(),
            spare: Vec::new(),
        }
    }

    /// The records drained since the last call, then (`--slow`) the slow calls read with
    /// them.
    fn records(&mut self) -> Vec<Event> {
        let mut out = Vec::new();
        if !self.batch.is_empty() {
            let next = next_batch(std::mem::take(&mut self.spare), self.batch.capacity());
            out.push(Event::Records(std::mem::replace(&mut self.batch, next)));
        }
        let slow = self.session.take_slow_calls();
        if !slow.is_empty() {
            out.push(Event::Slow(slow));
        }
        out
    }

    /// Stops tracing (exact accounting): the last records and slow calls, and the summary
    /// for the capture.
    pub fn stop(self, reason: StopReason) -> anyhow::Result<Stopped> {
        let mut records = Vec::new();
        let mut slow = Vec::new();
        let summary = self.session.stop(reason, &mut records, &mut slow)?;
        Ok(Stopped {
            records,
            slow,
            summary,
        })
    }
}

/// What a live session's end leaves for the capture.
pub struct Stopped {
    pub records: Vec<CallRecord>,
    pub slow: Vec<SlowCall>,
    pub summary: Summary,
}

#[allow(
    clippy::large_enum_variant,
    reason = "one per screen, never moved in a loop: boxing would buy nothing"
)]
pub enum Collector {
    Live(LiveSource),
    Replay(ReplaySource),
}

impl Collector {
    pub fn meta(&self) -> &Meta {
        match self {
            Collector::Live(l) => l.session.meta(),
            Collector::Replay(r) => r.schedule().meta(),
        }
    }

    /// Kernel mode: the linear width of the in-kernel histograms' buckets.
    pub fn kernel_width_ns(&self) -> Option<u64> {
        match self {
            Collector::Live(l) => l.session.kernel_width_ns(),
            Collector::Replay(r) => r.schedule().kernel_width_ns(),
        }
    }

    /// Waits for records (or, in a replay, for the capture clock to move). Cancel-safe.
    pub async fn next(&mut self) -> anyhow::Result<Vec<Event>> {
        match self {
            Collector::Live(l) => {
                l.session
                    .wait_and_drain(&mut l.batch)
                    .await
                    .context("reading the ring buffer")?;
                Ok(l.records())
            }
            Collector::Replay(r) => Ok(r.next().await),
        }
    }

    /// The wall clock's second: a live session drains the ring (against missed wake-ups),
    /// reads the kernel's counters and closes the second. A replay keeps its own clock.
    pub fn second(&mut self) -> anyhow::Result<Vec<Event>> {
        match self {
            Collector::Live(l) => {
                l.session.drain(&mut l.batch);
                let mut out = l.records();
                if l.session.kernel_width_ns().is_some() {
                    // Kernel mode: counters and histograms together, one snapshot.
                    out.push(Event::Histograms(
                        l.session
                            .hist_snapshot()
                            .context("reading the kernel's histograms")?,
                    ));
                } else {
                    out.push(Event::Counters(
                        l.session
                            .counters()
                            .context("reading the kernel's counters")?,
                    ));
                }
                if l.session.meta().slow.is_some() {
                    out.push(Event::SlowCounters(
                        l.session
                            .slow_counters()
                            .context("reading the slow calls' counters")?,
                    ));
                }
                let probe = l.session.probe_lines();
                if !probe.is_empty() {
                    out.push(Event::ProbeLog(probe));
                }
                if let Some(cal) = l.session.calibration_done(true)? {
                    out.push(Event::Calibration(cal, l.session.meta().mode));
                }
                out.push(Event::Second {
                    elapsed: l.started.elapsed(),
                });
                Ok(out)
            }
            Collector::Replay(_) => Ok(Vec::new()),
        }
    }

    /// The records already in the ring (before a save, so the capture is as complete as the
    /// counters read next).
    pub fn drain(&mut self) -> Vec<Event> {
        match self {
            Collector::Live(l) => {
                l.session.drain(&mut l.batch);
                l.records()
            }
            Collector::Replay(_) => Vec::new(),
        }
    }

    /// Takes back a batch of records the screen is done with (emptied), for the next one.
    pub fn recycle(&mut self, spent: Vec<CallRecord>) {
        if let Collector::Live(l) = self
            && spent.capacity() > l.spare.capacity()
        {
            l.spare = spent;
        }
    }

    /// The summary a capture saved now ends with.
    pub fn snapshot_summary(&self) -> anyhow::Result<Summary> {
        match self {
            Collector::Live(l) => Ok(Summary {
                kernel_hist: l.session.kernel_histograms()?,
                calibration: l.session.meta().calibration.clone(),
                slow: l.session.slow_counters()?,
                ..Summary::new(
                    l.started.elapsed().as_nanos() as u64,
                    "snapshot",
                    l.session.counters()?,
                )
            }),
            Collector::Replay(r) => Ok(r.schedule().snapshot_summary()),
        }
    }
}
