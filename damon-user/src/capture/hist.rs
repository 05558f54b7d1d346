//! The uncompressed layout of a kernel-mode histogram snapshot (chunk kind 6): varints only,
//! buckets stored sparsely (most of the 544 are empty).
//!
//! ```text
//! elapsed_ns   varint
//! functions    varint
//! per function, ascending id:
//!   id calls emitted ring_full stamp_full too_deep orphan_exits in_flight   (counters)
//!   stale_entries skipped_entries skipped_exits         (kind 7 only; skipped: n + 1, 0 = None)
//!   count sum_ns min_ns max_ns width_ns                                     (exact stats)
//!   buckets      varint: the number of buckets (HIST_BUCKETS when written)
//!   nonzero      varint: how many pairs follow
//!   (gap, n)*    gap = bucket index minus the previous pair's index plus one (the first:
//!                the index itself), n > 0 its count
//! then, in kind 9 only (disturbance measured), per function in the same order:
//!   measured     varint: 1, or 0 and nothing more for this function
//!   slept preempted interrupted lost sum_ns                 (the disturbed calls)
//!   buckets nonzero (gap, n)*                                (disturbed calls per bucket)
//! ```
use super::{
    FunctionCounters, HistSnapshot, KernelDisturbed, KernelHist, columns::Cursor,
    columns::put_varint,
};

/// More buckets than a reader accepts in one histogram (the format holds 544 today): bounds
/// what a corrupt chunk can make a reader allocate.
const MAX_BUCKETS: u64 = 1 << 16;

/// Encodes with the skip counters (chunk kind 7) and, when some function's disturbance was
/// measured, the disturbed calls after them (kind 9): returns whether it wrote them.
pub fn encode(s: &HistSnapshot, out: &mut Vec<u8>) -> bool {
    put_varint(out, s.elapsed_ns);
    put_varint(out, s.functions.len() as u64);
    for (&id, (c, h)) in &s.functions {
        for v in [
            u64::from(id),
            c.calls,
            c.emitted,
            c.ring_full,
            c.stamp_full,
            c.too_deep,
            c.orphan_exits,
            c.in_flight,
            c.stale_entries,
            c.skipped_entries.map_or(0, |n| n + 1),
            c.skipped_exits.map_or(0, |n| n + 1),
            h.count,
            h.sum_ns,
            h.min_ns,
            h.max_ns,
            h.width_ns,
            h.buckets.len() as u64,
        ] {
            put_varint(out, v);
        }
        put_sparse(out, &h.buckets);
    }
    let disturbance = s.functions.values().any(|(_, h)| h.disturbed.is_some());
    if disturbance {
        for (_, h) in s.functions.values() {
            let Some(d) = &h.disturbed else {
                put_varint(out, 0);
                continue;
            };
            for v in [1, d.slept, d.preempted, d.interrupted, d.lost, d.sum_ns] {
                put_varint(out, v);
            }
            put_varint(out, d.buckets.len() as u64);
            put_sparse(out, &d.buckets);
        }
    }
    disturbance
}

/// The non-empty buckets: how many, then (gap, count) pairs.
fn put_sparse(out: &mut Vec<u8>, buckets: &[u64]) {
    let nonzero = buckets.iter().filter(|&&n| n > 0).count();
    put_varint(out, nonzero as u64);
    let mut next = 0usize;
    for (i, &n) in buckets.iter().enumerate().filter(|(_, n)| **n > 0) {
        put_varint(out, (i - next) as u64);
        put_varint(out, n);
        next = i + 1;
    }
}

/// Reads what [`put_sparse`] wrote into `len` buckets (after checking `len`).
fn read_sparse(c: &mut Cursor, id: u32, len: u64) -> Result<Vec<u64>, String> {
    if len > MAX_BUCKETS {
        return Err(format!("histogram of function {id} declares {len} buckets"));
    }
    let mut buckets = vec![0u64; len as usize];
    let nonzero = c.varint()?;
    let mut next = 0u64;
    for _ in 0..nonzero {
        let i = next.saturating_add(c.varint()?);
        let n = c.varint()?;
        let slot = buckets
            .get_mut(i as usize)
            .filter(|_| i < len && n > 0)
            .ok_or_else(|| {
                format!("histogram of function {id}: bucket {i} of {len} (count {n})")
            })?;
        *slot = n;
        next = i + 1;
    }
    Ok(buckets)
}

/// Decodes a snapshot; `skips`: the chunk has the skip counters (kinds 7 and 9), not kind 6;
/// `disturbance`: it has the disturbed calls (kind 9).
pub fn decode(bytes: &[u8], skips: bool, disturbance: bool) -> Result<HistSnapshot, String> {
    let mut c = Cursor { bytes, pos: 0 };
    let elapsed_ns = c.varint()?;
    let nfuncs = c.varint()?;
    // Each function takes at least 16 bytes (one per varint above).
    if nfuncs > (bytes.len() / 16) as u64 {
        return Err(format!(
            "{nfuncs} histograms cannot fit in {} bytes",
            bytes.len()
        ));
    }
    let mut s = HistSnapshot {
        elapsed_ns,
        ..Default::default()
    };
    for _ in 0..nfuncs {
        let id = c.u32("function id")?;
        let mut v = [0u64; 13];
        let mut extra = [0u64; 3];
        for (i, x) in v.iter_mut().enumerate() {
            if i == 7 && skips {
                for e in &mut extra {
                    *e = c.varint()?;
                }
            }
            *x = c.varint()?;
        }
        let known = |n: u64| n.checked_sub(1);
        let counters = FunctionCounters {
            stale_entries: extra[0],
            skipped_entries: known(extra[1]),
            skipped_exits: known(extra[2]),
            // Snapshots do not carry it; the summary does.
            filtered: 0,
            calls: v[0],
            emitted: v[1],
            ring_full: v[2],
            stamp_full: v[3],
            too_deep: v[4],
            orphan_exits: v[5],
            in_flight: v[6],
        };
        let buckets = read_sparse(&mut c, id, v[12])?;
        let hist = KernelHist {
            count: v[7],
            sum_ns: v[8],
            min_ns: v[9],
            max_ns: v[10],
            width_ns: v[11],
            buckets,
            disturbed: None,
        };
        if s.functions.insert(id, (counters, hist)).is_some() {
            return Err(format!("function {id} appears twice in a snapshot"));
        }
    }
    if disturbance {
        for (&id, (_, h)) in s.functions.iter_mut() {
            if c.varint()? == 0 {
                continue;
            }
            let mut v = [0u64; 6];
            for x in &mut v {
                *x = c.varint()?;
            }
            h.disturbed = Some(KernelDisturbed {
                slept: v[0],
                preempted: v[1],
                interrupted: v[2],
                lost: v[3],
                sum_ns: v[4],
                buckets: read_sparse(&mut c, id, v[5])?,
            });
        }
    }
    if c.pos != bytes.len() {
        return Err(format!(
            "{} bytes left over after a histogram snapshot",
            bytes.len() - c.pos
        ));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> HistSnapshot {
        let mut buckets = vec![0u64; damon_common::HIST_BUCKETS as usize];
        buckets[0] = 3;
        buckets[7] = 1;
        buckets[511] = 2;
        buckets[543] = 9;
        let mut s = HistSnapshot {
            elapsed_ns: 1_000_000_123,
            ..Default::default()
        };
        s.functions.insert(
            3,
            (
                FunctionCounters {
                    calls: 16,
                    emitted: 15,
                    in_flight: 1,
                    orphan_exits: 2,
                    stale_entries: 3,
                    skipped_entries: Some(0),
                    skipped_exits: Some(7),
                    ..Default::default()
                },
                KernelHist {
                    count: 15,
                    sum_ns: u64::MAX - 1,
                    min_ns: 4,
                    max_ns: u64::MAX,
                    width_ns: 10,
                    buckets,
                    disturbed: None,
                },
            ),
        );
        s.functions
            .insert(0, (FunctionCounters::default(), KernelHist::default()));
        s
    }

    #[test]
    fn round_trip() {
        let s = snapshot();
        let mut b = Vec::new();
        assert!(!encode(&s, &mut b));
        assert_eq!(decode(&b, true, false), Ok(s));
        // Sparse: four non-empty buckets of 544 take a few bytes.
        assert!(b.len() < 80, "{} bytes", b.len());
    }

    /// Kind 6 (before the skip counters) has no such fields: they read as 0 and "not counted",
    /// not as numbers taken from the histogram that follows.
    #[test]
    fn snapshots_without_skip_counters_still_read() {
        let mut s = snapshot();
        let mut b = Vec::new();
        encode(&s, &mut b);
        // Kind 6 is kind 7 without the three varints after `in_flight` of each function: here
        // each is one byte (3, 1, 8 for function 3; 0, 0, 0 for function 0).
        let mut old = Vec::new();
        let mut c = Cursor { bytes: &b, pos: 0 };
        for _ in 0..2 {
            old.extend(
                c.varint()
                    .map(|v| {
                        let mut o = Vec::new();
                        put_varint(&mut o, v);
                        o
                    })
                    .expect("header"),
            );
        }
        for _ in 0..2 {
            let start = c.pos;
            for _ in 0..8 {
                c.varint().expect("id and counters");
            }
            old.extend_from_slice(&b[start..c.pos]);
            for _ in 0..3 {
                c.varint().expect("skip counters");
            }
            let start = c.pos;
            for _ in 0..6 {
                c.varint().expect("stats");
            }
            let nonzero = c.varint().expect("nonzero");
            for _ in 0..2 * nonzero {
                c.varint().expect("pairs");
            }
            old.extend_from_slice(&b[start..c.pos]);
        }
        for (counters, _) in s.functions.values_mut() {
            counters.stale_entries = 0;
            counters.skipped_entries = None;
            counters.skipped_exits = None;
        }
        assert_eq!(decode(&old, false, false), Ok(s));
        assert!(decode(&old, true, false).is_err());
    }

    /// Kind 9: the disturbed calls of the functions that measured them, after the rest.
    #[test]
    fn disturbed_calls_round_trip() {
        let mut s = snapshot();
        let (_, h) = s.functions.get_mut(&3).expect("function 3");
        let mut buckets = vec![0u64; h.buckets.len()];
        buckets[7] = 1;
        buckets[543] = 4;
        h.disturbed = Some(KernelDisturbed {
            slept: 2,
            preempted: 1,
            interrupted: 1,
            lost: 1,
            sum_ns: 123_456_789,
            buckets,
        });
        let mut b = Vec::new();
        assert!(encode(&s, &mut b));
        assert_eq!(decode(&b, true, true), Ok(s.clone()));
        // Read as kind 7, the section is left over: an error, never numbers read as others.
        assert!(decode(&b, true, false).unwrap_err().contains("left over"));
        for cut in 0..b.len() {
            assert!(decode(&b[..cut], true, true).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn corrupt_snapshots_are_errors() {
        let mut b = Vec::new();
        encode(&snapshot(), &mut b);
        for cut in 0..b.len() {
            assert!(decode(&b[..cut], true, false).is_err(), "cut at {cut}");
        }
        let mut extra = b.clone();
        extra.push(0);
        assert!(
            decode(&extra, true, false)
                .unwrap_err()
                .contains("left over")
        );
        // A bucket index past the declared length.
        let mut s = HistSnapshot::default();
        s.functions.insert(
            1,
            (
                FunctionCounters::default(),
                KernelHist {
                    buckets: vec![0, 5],
                    ..Default::default()
                },
            ),
        );
        let mut b = Vec::new();
        encode(&s, &mut b);
        let last = b.len() - 2; // the gap of the only pair
        b[last] = 2;
        assert!(
            decode(&b, true, false)
                .unwrap_err()
                .contains("bucket 2 of 2")
        );
    }
}
