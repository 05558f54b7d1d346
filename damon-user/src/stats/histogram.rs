//! A latency histogram with bounded memory: exact to the nanosecond below 2048 ns, and within
//! 1/1024 (0.1 %) of the value above, up to `u64::MAX`.
//!
//! The live screen cannot keep every record of a long session, so it keeps counts per slot.
//! Slots are log-linear (HdrHistogram's layout): values below 2048 each have their own slot;
//! above, every power-of-two range `[2^k, 2^(k+1))` is split into 1024 equal slots. Display bins
//! (linear buckets of any width, log2 octaves) are then sums of slots.

/// Sub-slots per octave above the exact range, as a power of two.
const SUB_BITS: u32 = 10;
const SUB_SLOTS: u64 = 1 << SUB_BITS;
/// Values below this have a slot each.
pub const EXACT_BELOW: u64 = 2 * SUB_SLOTS;

/// The slot holding value `v`.
pub fn slot_of(v: u64) -> usize {
    if v < EXACT_BELOW {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let shift = msb - SUB_BITS;
    (EXACT_BELOW + u64::from(shift - 1) * SUB_SLOTS + ((v >> shift) - SUB_SLOTS)) as usize
}

/// The lowest and highest value (both inclusive) a slot holds.
pub fn slot_range(slot: usize) -> (u64, u64) {
    let slot = slot as u64;
    if slot < EXACT_BELOW {
        return (slot, slot);
    }
    let j = slot - EXACT_BELOW;
    let shift = j / SUB_SLOTS + 1;
    let lo = (j % SUB_SLOTS + SUB_SLOTS) << shift;
    (lo, lo + ((1u64 << shift) - 1))
}

/// Counts per slot; grows to the highest slot used.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LatencyHistogram {
    counts: Vec<u64>,
    total: u64,
}

/// One display bin: calls with `lo <= duration < hi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bin {
    pub lo: u64,
    pub hi: u64,
    pub count: u64,
}

/// A histogram cut into display bins, with what fell outside them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bins {
    pub bins: Vec<Bin>,
    pub below: u64,
    pub above: u64,
}

impl Bins {
    pub fn max_count(&self) -> u64 {
        self.bins.iter().map(|b| b.count).max().unwrap_or(0)
    }
}

impl LatencyHistogram {
    #[cfg(test)]
    pub fn record(&mut self, v: u64) {
        self.add_to_slot(slot_of(v), 1);
    }

    pub fn add_to_slot(&mut self, slot: usize, n: u64) {
        if slot >= self.counts.len() {
            self.counts.resize(slot + 1, 0);
        }
        self.counts[slot] += n;
        self.total += n;
    }

    /// Removes counts added earlier (a slice leaving a sliding window); never goes below zero.
    pub fn remove_from_slot(&mut self, slot: usize, n: u64) {
        if let Some(c) = self.counts.get_mut(slot) {
            let n = n.min(*c);
            *c -= n;
            self.total -= n;
        }
    }

    #[cfg(test)]
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Non-empty slots with their counts, lowest first.
    pub fn slots(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c > 0)
            .map(|(i, &c)| (i, c))
    }

    /// Nearest-rank percentiles (each `p` in (0, 100], ascending), as the highest value of the
    /// slot the rank falls in: exact below [`EXACT_BELOW`], an upper bound within 0.1 % above.
    pub fn percentiles(&self, ps: &[f64]) -> Option<Vec<u64>> {
        if self.total == 0 {
            return None;
        }
        let mut out = Vec::with_capacity(ps.len());
        let mut seen = 0u64;
        let mut slots = self.slots();
        let mut current = None;
        for &p in ps {
            // Integer ranks: in floating point p99.9 of 10 000 calls picks the 9991st.
            let rank = super::nearest_rank(p, self.total);
            while seen < rank {
                let (slot, count) = slots.next()?;
                seen += count;
                current = Some(slot);
            }
            out.push(slot_range(current?).1);
        }
        Some(out)
    }

    /// Linear bins `[start + i*width, start + (i+1)*width)` for `i < n`. A slot goes to the bin
    /// holding its lowest value, so edges are exact wherever slots are no wider than 1 ns
    /// (below 2048 ns) or divide `width` (e.g. 20 ns buckets are exact below 8192 ns).
    pub fn linear(&self, start: u64, width: u64, n: usize) -> Bins {
        let width = width.max(1);
        let mut bins: Vec<Bin> = (0..n as u64)
            .map(|i| Bin {
                lo: start.saturating_add(i.saturating_mul(width)),
                hi: start.saturating_add((i + 1).saturating_mul(width)),
                count: 0,
            })
            .collect();
        let (mut below, mut above) = (0, 0);
        for (slot, count) in self.slots() {
            let lo = slot_range(slot).0;
            if lo < start {
                below += count;
                continue;
            }
            match bins.get_mut(((lo - start) / width) as usize) {
                Some(bin) => bin.count += count,
                None => above += count,
            }
        }
        Bins { bins, below, above }
    }

    /// Power-of-two bins `[2^k, 2^(k+1))` for `k` in `from..=to`; 0 counts with the lowest bin.
    /// Slots never straddle a power of two, so these edges are always exact.
    pub fn log2(&self, from: u32, to: u32) -> Bins {
        let to = to.clamp(from, 63);
        let mut bins: Vec<Bin> = (from..=to)
            .map(|k| Bin {
                lo: 1u64 << k,
                hi: if k == 63 { u64::MAX } else { 1u64 << (k + 1) },
                count: 0,
            })
            .collect();
        if let Some(first) = bins.first_mut()
            && from == 0
        {
            first.lo = 0;
        }
        let (mut below, mut above) = (0, 0);
        for (slot, count) in self.slots() {
            let k = octave(slot_range(slot).0);
            if k < from {
                below += count;
            } else if k > to {
                above += count;
            } else {
                bins[(k - from) as usize].count += count;
            }
        }
        Bins { bins, below, above }
    }
}

/// `floor(log2(v))`, with 0 in octave 0.
pub fn octave(v: u64) -> u32 {
    63 - v.max(1).leading_zeros()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_cover_every_value_once_in_order() {
        // Consecutive slots tile the number line with no gap or overlap.
        let mut next = 0u64;
        for slot in 0..(EXACT_BELOW as usize + 20 * SUB_SLOTS as usize) {
            let (lo, hi) = slot_range(slot);
            assert_eq!(lo, next, "slot {slot}");
            assert!(hi >= lo);
            assert_eq!(slot_of(lo), slot);
            assert_eq!(slot_of(hi), slot);
            next = hi + 1;
        }
        let last = slot_of(u64::MAX);
        assert_eq!(slot_range(last).1, u64::MAX);
        assert_eq!(slot_range(last).0, u64::MAX - ((1 << 53) - 1));
    }

    #[test]
    fn slot_edges_at_the_exact_limit() {
        assert_eq!(slot_range(slot_of(2047)), (2047, 2047));
        assert_eq!(slot_range(slot_of(2048)), (2048, 2049));
        assert_eq!(slot_of(2049), slot_of(2048));
        assert_eq!(slot_range(slot_of(4095)), (4094, 4095));
        assert_eq!(slot_range(slot_of(4096)), (4096, 4099));
        // Relative width stays within 1/1024.
        for v in [5_000u64, 123_456, 98_765_432, 1 << 40] {
            let (lo, hi) = slot_range(slot_of(v));
            assert!(lo <= v && v <= hi);
            assert!((hi - lo + 1) as f64 / lo as f64 <= 1.0 / 1024.0, "{v}");
        }
    }

    fn hist(values: &[u64]) -> LatencyHistogram {
        let mut h = LatencyHistogram::default();
        for &v in values {
            h.record(v);
        }
        h
    }

    #[test]
    fn linear_bucket_edges_are_half_open() {
        let h = hist(&[639, 640, 659, 660, 679, 680, 700]);
        let b = h.linear(640, 20, 2);
        assert_eq!(b.below, 1);
        assert_eq!(
            b.bins,
            vec![
                Bin {
                    lo: 640,
                    hi: 660,
                    count: 2
                },
                Bin {
                    lo: 660,
                    hi: 680,
                    count: 2
                },
            ]
        );
        assert_eq!(b.above, 2, "680 and 700 are past the last bin");
    }

    #[test]
    fn linear_edges_stay_exact_where_slots_divide_the_width() {
        // Between 4096 and 8192 slots are 4 ns wide: 20 ns edges still fall on slot edges.
        let h = hist(&[5019, 5020, 5039, 5040]);
        let b = h.linear(5000, 20, 3);
        let counts: Vec<u64> = b.bins.iter().map(|b| b.count).collect();
        assert_eq!(counts, vec![1, 2, 1]);
        assert_eq!((b.below, b.above), (0, 0));
    }

    #[test]
    fn log2_bins_split_at_powers_of_two() {
        let h = hist(&[0, 1, 1023, 1024, 2047, 2048, 1 << 20]);
        let b = h.log2(10, 11);
        assert_eq!(b.bins[0].lo, 1024);
        assert_eq!(b.bins[0].hi, 2048);
        assert_eq!(b.bins[0].count, 2, "1024 and 2047");
        assert_eq!(b.bins[1].count, 1, "2048");
        assert_eq!((b.below, b.above), (3, 1));
        let from_zero = h.log2(0, 0);
        assert_eq!((from_zero.bins[0].lo, from_zero.bins[0].count), (0, 2));
        assert_eq!(octave(0), 0);
        assert_eq!(octave(1), 0);
        assert_eq!(octave(1024), 10);
        assert_eq!(octave(u64::MAX), 63);
        assert_eq!(h.log2(63, 63).bins[0].hi, u64::MAX);
    }

    #[test]
    fn percentiles_are_nearest_rank_and_exact_below_the_limit() {
        let values: Vec<u64> = (1..=100).map(|i| i * 10).collect();
        let h = hist(&values);
        assert_eq!(
            h.percentiles(&[1.0, 50.0, 99.0, 99.9, 100.0]),
            Some(vec![10, 500, 990, 1000, 1000])
        );
        assert_eq!(LatencyHistogram::default().percentiles(&[50.0]), None);
        // p99.9 of 1000 exact values is the 999th; a float rank (0.999 * 1000 = 999.000…1,
        // rounded up) gives the 1000th.
        let many: Vec<u64> = (1..=1000).collect();
        assert_eq!(hist(&many).percentiles(&[99.9]), Some(vec![999]));
        let big = hist(&[1_000_000]);
        let p = big.percentiles(&[50.0]).expect("one value")[0];
        assert!(
            (1_000_000..=1_001_000).contains(&p),
            "upper bound within 0.1 %: {p}"
        );
    }

    #[test]
    fn removal_undoes_addition() {
        let mut h = hist(&[5, 5, 9000]);
        h.remove_from_slot(slot_of(5), 1);
        h.remove_from_slot(slot_of(9000), 5);
        h.remove_from_slot(1_000_000, 1);
        assert_eq!(h.total(), 1);
        assert_eq!(h.slots().collect::<Vec<_>>(), vec![(5, 1)]);
    }
}
