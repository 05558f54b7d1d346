//! Slow calls (`record --slow`): the ring the exit programs write them into with their kernel
//! stacks, and the kernel's per-function counts of those kept and lost (`damon_common::slow`).
//!
//! The ring is drained without a wake-up of its own: the records' reader wakes at least every
//! [`super::ring::DRAIN_PERIOD`], and the session drains this ring each time.
use std::collections::BTreeMap;

use anyhow::Context as _;
use aya::maps::{MapData, PerCpuArray, RingBuf};
use damon_common::slow::{
    MAP_SLOW_COUNTERS, MAP_SLOW_EVENTS, SLOW_EVENT_SIZE, SlowCounter, SlowEvent,
};

use super::Tracer;
use crate::{
    capture::{SlowCall, SlowCounters, SlowSettings},
    probe::facts::symbols::Symbols,
};

/// Reads [`SlowEvent`]s from the slow calls' ring.
pub struct SlowRing {
    ring: RingBuf<MapData>,
    /// Items whose size was not that of a [`SlowEvent`]; never expected, counted to be sure.
    pub malformed: u64,
}

/// Decodes one ring item; `None` if its size is wrong.
pub fn decode(bytes: &[u8]) -> Option<SlowEvent> {
    debug_assert_eq!(SLOW_EVENT_SIZE, std::mem::size_of::<SlowEvent>());
    super::ring::decode_as(bytes)
}

impl SlowRing {
    /// Hands every slow call now in the ring to `sink`; returns how many.
    pub fn drain(&mut self, sink: &mut impl FnMut(SlowEvent)) -> usize {
        let mut n = 0;
        while let Some(item) = self.ring.next() {
            match decode(&item) {
                Some(e) => {
                    sink(e);
                    n += 1;
                }
                None => self.malformed += 1,
            }
        }
        n
    }
}

/// What the kernel counted of one function's slow calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelSlowCounts {
    /// Written into the ring.
    pub kept: u64,
    /// Lost: the ring was full.
    pub ring_full: u64,
}

/// The threshold the programs get: `--slow`'s in stream mode, else 0 (off).
pub(super) fn threshold(opts: &super::LoadOptions) -> u64 {
    if opts.mode.mode.streams() {
        opts.slow_ns
    } else {
        0
    }
}

/// Writes the threshold into the programs, and without one makes the ring and counters as
/// small as they can be.
pub(super) fn configure<'a>(loader: &mut aya::EbpfLoader<'a>, slow_ns: &'a u64) {
    loader.override_global(damon_common::slow::GLOBAL_SLOW_NS, slow_ns, true);
    if *slow_ns == 0 {
        // Never written: the smallest ring (one page) and one counter.
        loader.map_max_entries(MAP_SLOW_EVENTS, 4096);
        loader.map_max_entries(MAP_SLOW_COUNTERS, 1);
    }
}

impl Tracer {
    /// Takes the slow calls' ring out of the object for its reader.
    pub fn take_slow_ring(&mut self) -> anyhow::Result<SlowRing> {
        let map = self
            .bpf
            .take_map(MAP_SLOW_EVENTS)
            .context("the slow calls' ring is missing from the eBPF object")?;
        let ring = RingBuf::try_from(map).context("SLOW_EVENTS is not a ring buffer")?;
        Ok(SlowRing { ring, malformed: 0 })
    }

    /// The kernel's slow-call counts per traced function id (functions with none left out).
    pub fn slow_counters(&self) -> anyhow::Result<BTreeMap<u32, KernelSlowCounts>> {
        let map = self
            .bpf
            .map(MAP_SLOW_COUNTERS)
            .context("the slow calls' counter map is missing")?;
        let counters: PerCpuArray<_, u64> = PerCpuArray::try_from(map)?;
        let mut out = BTreeMap::new();
        for (func, _) in &self.attached {
            let sum = |c: SlowCounter| -> anyhow::Result<u64> {
                Ok(counters.get(&c.index(func.id), 0)?.iter().sum())
            };
            let c = KernelSlowCounts {
                kept: sum(SlowCounter::Kept)?,
                ring_full: sum(SlowCounter::RingFull)?,
            };
            if c != KernelSlowCounts::default() {
                out.insert(func.id, c);
            }
        }
        Ok(out)
    }
}

/// A session's slow calls: read from the ring, symbolized, bounded per function, counted.
pub struct SlowCollector {
    ring: SlowRing,
    symbols: Symbols,
    settings: SlowSettings,
    /// Per function id, its symbol (where a stack starts).
    symbols_of: BTreeMap<u32, String>,
    /// Per function id: slow calls kept and those past the bound.
    per_function: BTreeMap<u32, (u64, u64)>,
    pending: Vec<SlowCall>,
}

impl SlowCollector {
    /// Takes the ring and reads `/proc/kallsyms` (after the attach: the probes' programs and
    /// trampolines are in it). When kallsyms hides the addresses, says so on stderr: the
    /// frames are then kept as `[unknown]`.
    pub fn start(tracer: &mut Tracer, settings: SlowSettings) -> anyhow::Result<SlowCollector> {
        let symbols = {
            let _t = crate::timing::phase("slow calls: /proc/kallsyms read for the stacks");
            Symbols::read().context("reading /proc/kallsyms for the slow calls' stacks")?
        };
        if symbols.hidden() {
            eprintln!(
                "damon-trace: warning: /proc/kallsyms shows every address as 0 to this process \
                 (kernel.kptr_restrict, or no CAP_SYSLOG): the slow calls' stack frames are \
                 kept as [unknown]; run as root, or set kernel.kptr_restrict=0, to get names"
            );
        }
        Ok(SlowCollector {
            ring: tracer.take_slow_ring()?,
            symbols,
            settings,
            symbols_of: tracer
                .attached
                .iter()
                .map(|(f, _)| (f.id, f.symbol.clone()))
                .collect(),
            per_function: BTreeMap::new(),
            pending: Vec::new(),
        })
    }

    /// Reads every slow call now in the ring: symbolized and kept up to the per-function
    /// bound, counted past it.
    pub fn drain(&mut self) {
        let (symbols, settings, names) = (&self.symbols, &self.settings, &self.symbols_of);
        let (per_function, pending) = (&mut self.per_function, &mut self.pending);
        self.ring.drain(&mut |e| {
            let (kept, over) = per_function.entry(e.call.func).or_default();
            if *kept >= settings.max_per_function {
                *over += 1;
                return;
            }
            *kept += 1;
            pending.push(SlowCall {
                call: e.call,
                stack: symbols.stack(
                    e.stack(),
                    names.get(&e.call.func).map_or("", String::as_str),
                ),
            });
        });
    }

    /// The slow calls read since the last call, in arrival order.
    pub fn take(&mut self) -> Vec<SlowCall> {
        std::mem::take(&mut self.pending)
    }

    /// Ring items of the wrong size (never expected).
    pub fn malformed(&self) -> u64 {
        self.ring.malformed
    }

    /// Each function's slow calls kept and lost: the ring's losses from the kernel, the
    /// bound's here. Call after the last [`SlowCollector::drain`].
    pub fn counters(&self, tracer: &Tracer) -> anyhow::Result<BTreeMap<u32, SlowCounters>> {
        let kernel = tracer.slow_counters()?;
        let ids = kernel.keys().chain(self.per_function.keys());
        let mut out = BTreeMap::new();
        for &id in ids {
            let (kept, over_limit) = self.per_function.get(&id).copied().unwrap_or_default();
            let ring_full = kernel.get(&id).map_or(0, |k| k.ring_full);
            out.insert(
                id,
                SlowCounters {
                    kept,
                    ring_full,
                    over_limit,
                },
            );
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_events_and_rejects_wrong_sizes() {
        let mut e = SlowEvent::default();
        e.call.func = 3;
        e.call.duration_ns = 5_000_000;
        e.depth = 2;
        e.ips[0] = 0xffffffff81234567;
        e.ips[1] = 0xffffffff81000010;
        // SAFETY: SlowEvent is Pod, SLOW_EVENT_SIZE bytes.
        let bytes =
            unsafe { std::slice::from_raw_parts((&raw const e).cast::<u8>(), SLOW_EVENT_SIZE) }
                .to_vec();
        let got = decode(&bytes).expect("decodes");
        assert_eq!(got, e);
        assert_eq!(got.stack(), &[0xffffffff81234567, 0xffffffff81000010]);
        assert_eq!(decode(&bytes[..SLOW_EVENT_SIZE - 1]), None);
    }
}
