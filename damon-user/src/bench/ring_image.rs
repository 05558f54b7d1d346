//! A synthetic BPF ring buffer image for `bench-decode`: items laid out as the kernel leaves
//! them for the consumer, drained by the real decoder ([`ring::decode`]).
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use damon_common::{AGGREGATION_MARK, CALL_RECORD_SIZE, CallRecord, FunctionId};

use crate::{probe::tracer::ring, stats::rng::Rng};

/// Header bits of a BPF ring buffer item (kernel/bpf/ringbuf.c, `BPF_RINGBUF_*`).
const BUSY_BIT: u32 = 1 << 31;
const DISCARD_BIT: u32 = 1 << 30;
const HDR_SZ: usize = 8;

/// A ring buffer's data area as the kernel leaves it for the consumer: items of an 8-byte
/// header (`len | flags`, page offset) and the sample, each rounded up to 8 bytes, from
/// position 0 to `producer`.
pub struct RingImage {
    /// 8-byte words, so item headers are aligned for atomic access as in the real mapping.
    words: Vec<u64>,
    pub producer: usize,
}

impl RingImage {
    /// Fills up to `bytes` with `records` (as many as fit), in order.
    pub fn build(bytes: usize, records: &[CallRecord]) -> RingImage {
        let item = item_size(CALL_RECORD_SIZE);
        let n = records.len().min(bytes / item);
        let mut raw = vec![0u8; n * item];
        for (i, r) in records[..n].iter().enumerate() {
            let at = i * item;
            let len = CALL_RECORD_SIZE as u32;
            raw[at..at + 4].copy_from_slice(&len.to_le_bytes());
            // The kernel stores the header's page offset from the ring's start; not read here.
            raw[at + 4..at + 8].copy_from_slice(&((at >> 12) as u32).to_le_bytes());
            raw[at + HDR_SZ..at + HDR_SZ + CALL_RECORD_SIZE].copy_from_slice(record_bytes(r));
        }
        let words = raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect();
        RingImage {
            words,
            producer: n * item,
        }
    }

    pub fn items(&self) -> usize {
        self.producer / item_size(CALL_RECORD_SIZE)
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: u64s are plain bytes; the slice covers exactly the vector's initialised
        // elements and lives as long as the borrow of self.
        unsafe {
            std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.words.len() * 8)
        }
    }

    /// Consumes items from `from` while there are any (as aya's `RingBuf::next` does: an
    /// acquire load of each header, busy items stop the drain, discarded ones are skipped, the
    /// consumer position is published with a release store per item), decoding each with the
    /// real paths' [`ring::decode`], at most `max` records. Returns the next position and how
    /// many items of the wrong size were seen.
    pub fn drain(
        &self,
        from: usize,
        max: usize,
        consumer: &AtomicUsize,
        sink: &mut impl FnMut(CallRecord),
    ) -> (usize, u64) {
        let bytes = self.bytes();
        let mut pos = from;
        let mut taken = 0;
        let mut malformed = 0;
        while pos < self.producer && taken < max {
            // SAFETY: pos is 8-aligned within the words vector, so the u32 is aligned and in
            // bounds; nothing writes the image while it is drained.
            let header = unsafe {
                AtomicU32::from_ptr(self.words.as_ptr().cast::<u8>().add(pos).cast_mut().cast())
            }
            .load(Ordering::Acquire);
            if header & BUSY_BIT != 0 {
                break;
            }
            let len = (header & !(BUSY_BIT | DISCARD_BIT)) as usize;
            let next = pos + item_size(len);
            if header & DISCARD_BIT == 0 {
                match ring::decode(&bytes[pos + HDR_SZ..pos + HDR_SZ + len]) {
                    Some(r) => {
                        sink(r);
                        taken += 1;
                    }
                    None => malformed += 1,
                }
            }
            consumer.store(next, Ordering::Release);
            pos = next;
        }
        (pos, malformed)
    }

    #[cfg(test)]
    fn set_header(&mut self, item: usize, header: u32) {
        let at = item * item_size(CALL_RECORD_SIZE) / 8;
        self.words[at] = (self.words[at] & !0xffff_ffff) | u64::from(header);
    }
}

pub fn item_size(len: usize) -> usize {
    (HDR_SZ + len).div_ceil(8) * 8
}

fn record_bytes(r: &CallRecord) -> &[u8] {
    // SAFETY: CallRecord is repr(C), Pod, with explicit padding (no uninitialised bytes).
    unsafe { std::slice::from_raw_parts((r as *const CallRecord).cast::<u8>(), CALL_RECORD_SIZE) }
}

/// A plausible stream of what the migrate-hot scenario produces: lock_timer_base (about half
/// the calls, 100–300 ns, any process), damon_hot_score (40 %, tens of ns, the kdamond, with
/// its nr_accesses/age args and score value), damos_va_migrate_dests_add (9 %, hundreds of ns,
/// node args), damon_migrate_pages (1 %, tens of µs, pages moved) on two CPUs, with an
/// aggregation-interval marker every 10 000 items. Log-normal durations; seeded.
pub fn synthetic_records(n: usize, seed: u64) -> Vec<CallRecord> {
    let mut rng = Rng::new(seed);
    let mut t = 1_000_000_000u64;
    let kdamond = 211;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        t += 50 + (rng.uniform() * 900.0) as u64;
        let cpu = (rng.next_u64() & 1) as u32;
        let lognormal = |rng: &mut Rng, median: f64, sigma: f64| {
            (median * (sigma * rng.normal()).exp()).max(1.0) as u64
        };
        if i % 10_000 == 9_999 {
            out.push(CallRecord {
                entry_ns: t,
                func: AGGREGATION_MARK,
                pid: kdamond,
                tid: kdamond,
                cpu,
                value: 40,
                ..CallRecord::default()
            });
            continue;
        }
        let u = rng.uniform();
        let (func, duration, value, arg0, arg1, pid) = if u < 0.5 {
            let pid = 1 + (rng.next_u64() % 300) as u32;
            (
                FunctionId::LockTimerBase,
                lognormal(&mut rng, 150.0, 0.5),
                0,
                0,
                0,
                pid,
            )
        } else if u < 0.9 {
            let acc = (rng.next_u64() % 21) as i64;
            let age = (rng.next_u64() % 200) as i64;
            let d = lognormal(&mut rng, 60.0, 0.4);
            (FunctionId::DamonHotScore, d, acc * 5, acc, age, kdamond)
        } else if u < 0.99 {
            let from = (rng.next_u64() & 1) as i64;
            let d = lognormal(&mut rng, 400.0, 0.6);
            (
                FunctionId::DamosVaMigrateDestsAdd,
                d,
                0,
                from,
                1 - from,
                kdamond,
            )
        } else {
            let d = lognormal(&mut rng, 30_000.0, 1.0);
            let pages = (rng.next_u64() % 512) as i64;
            (
                FunctionId::DamonMigratePages,
                d,
                pages,
                (rng.next_u64() & 1) as i64,
                0,
                kdamond,
            )
        };
        out.push(CallRecord {
            entry_ns: t,
            duration_ns: duration,
            value,
            arg0,
            arg1,
            pid,
            tid: pid,
            cpu,
            func: func as u32,
            ..CallRecord::default()
        });
        t += duration;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_image_round_trips_through_the_real_decoder() {
        let records = synthetic_records(2000, 7);
        let image = RingImage::build(1 << 16, &records);
        let item = item_size(CALL_RECORD_SIZE);
        let fit = (1 << 16) / item;
        assert_eq!(image.items(), fit);
        let consumer = AtomicUsize::new(0);
        let mut got = Vec::new();
        let (end, malformed) = image.drain(0, usize::MAX, &consumer, &mut |r| got.push(r));
        assert_eq!((end, malformed), (fit * item, 0));
        assert_eq!(consumer.load(Ordering::Relaxed), end);
        assert_eq!(got, records[..fit]);
        // A partial drain resumes where it stopped.
        let mut first = Vec::new();
        let (mid, _) = image.drain(0, 10, &consumer, &mut |r| first.push(r));
        let (_, _) = image.drain(mid, usize::MAX, &consumer, &mut |r| first.push(r));
        assert_eq!(first, got);
    }

    #[test]
    fn discarded_items_are_skipped_busy_ones_stop_and_odd_sizes_count() {
        let records = synthetic_records(8, 1);
        let item = item_size(CALL_RECORD_SIZE);
        let mut image = RingImage::build(8 * item, &records);
        image.set_header(1, DISCARD_BIT | CALL_RECORD_SIZE as u32);
        // A wrong length that keeps the stride (8 + 1 short of a record rounds up to it).
        image.set_header(3, CALL_RECORD_SIZE as u32 - 1);
        image.set_header(5, BUSY_BIT | CALL_RECORD_SIZE as u32);
        let mut got = Vec::new();
        let (end, malformed) =
            image.drain(0, usize::MAX, &AtomicUsize::new(0), &mut |r| got.push(r));
        assert_eq!(malformed, 1);
        assert_eq!(got, [records[0], records[2], records[4]]);
        assert_eq!(end, 5 * item);
    }

    #[test]
    fn synthetic_stream_is_plausible() {
        let records = synthetic_records(50_000, 3);
        let share = |f: FunctionId| {
            records.iter().filter(|r| r.func == f as u32).count() as f64 / records.len() as f64
        };
        assert!((share(FunctionId::LockTimerBase) - 0.5).abs() < 0.02);
        assert!((share(FunctionId::DamonHotScore) - 0.4).abs() < 0.02);
        assert_eq!(
            records
                .iter()
                .filter(|r| r.func == AGGREGATION_MARK)
                .count(),
            5
        );
        assert!(records.windows(2).all(|w| w[0].entry_ns < w[1].entry_ns));
        assert!(records.iter().all(|r| r.cpu < 2));
    }
}
