//! Latency over time with bounded memory (pure): call counts per (time column, latency slot).
//!
//! A column holds the calls that *entered* in `[start, start + width)`, as counts per slot of a
//! log-linear latency grid (HdrHistogram's layout, coarser than the screen's histogram): every
//! value below [`EXACT_BELOW`] has its own slot, and every power-of-two range above is split
//! into 64 slots, so a slot is at most 1/64 (1.6 %) of its values wide. Columns keep only their
//! non-empty slots, so memory grows with the number of columns and distinct slots, never with
//! the number of calls.
//!
//! Two ways to stay bounded when time runs past the last column ([`Overflow`]):
//! - `Scroll` (the live screen): the oldest column goes; the screen shows the newest ones.
//! - `Coarsen` (a report over a whole capture, read once in order): neighbouring columns are
//!   merged in pairs and the width doubles, so the whole capture always fits.
//!
//! Display rows ([`log_edges`], [`linear_edges`]) are sums of slots; a slot counts in the row
//! holding its lowest value, so a cell's count is exact wherever row edges fall on slot edges
//! (always for [`log_edges`]).
use std::collections::VecDeque;

const SUB_BITS: u32 = 6;
const SUB_SLOTS: u64 = 1 << SUB_BITS;
/// Values below this have a slot each.
pub const EXACT_BELOW: u64 = 2 * SUB_SLOTS;

/// The slot holding value `v`.
pub fn slot_of(v: u64) -> u16 {
    if v < EXACT_BELOW {
        return v as u16;
    }
    let msb = 63 - v.leading_zeros();
    let shift = msb - SUB_BITS;
    (EXACT_BELOW + u64::from(shift - 1) * SUB_SLOTS + ((v >> shift) - SUB_SLOTS)) as u16
}

/// The lowest and highest value (both inclusive) a slot holds.
pub fn slot_range(slot: u16) -> (u64, u64) {
    let slot = u64::from(slot);
    if slot < EXACT_BELOW {
        return (slot, slot);
    }
    let j = slot - EXACT_BELOW;
    let shift = j / SUB_SLOTS + 1;
    let lo = (j % SUB_SLOTS + SUB_SLOTS) << shift;
    (lo, lo.saturating_add((1u64 << shift) - 1))
}

/// The calls of one time column: counts per slot, and the aggregation intervals that ended in
/// it. The newest column counts into a dense array (one add is one increment: records arrive
/// nearly in time order, so almost every call lands there); a column keeps only its non-empty
/// slots, sorted, once a newer one starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Column {
    /// Counts indexed by slot, while this is the newest column.
    dense: Vec<u32>,
    /// (slot, count) of the non-empty slots, by slot, once sealed.
    sparse: Vec<(u16, u32)>,
    sealed: bool,
    pub calls: u64,
    /// Aggregation-interval boundaries (`damon:damon_aggregated`) in this column.
    pub marks: u32,
}

impl Column {
    fn add(&mut self, slot: u16, n: u32) {
        self.calls += u64::from(n);
        if !self.sealed {
            let i = usize::from(slot);
            if i >= self.dense.len() {
                self.dense.resize(i + 1, 0);
            }
            self.dense[i] = self.dense[i].saturating_add(n);
            return;
        }
        match self.sparse.binary_search_by_key(&slot, |&(s, _)| s) {
            Ok(i) => self.sparse[i].1 = self.sparse[i].1.saturating_add(n),
            Err(i) => self.sparse.insert(i, (slot, n)),
        }
    }

    /// Keeps only the non-empty slots (a newer column has started).
    fn seal(&mut self) {
        if !self.sealed {
            self.sparse = dense_slots(&self.dense).collect();
            self.dense = Vec::new();
            self.sealed = true;
        }
    }

    fn merge(&mut self, other: Column) {
        for (slot, n) in other.slots() {
            self.add(slot, n);
        }
        self.marks += other.marks;
    }

    /// Non-empty slots with their counts, lowest first.
    pub fn slots(&self) -> impl Iterator<Item = (u16, u32)> + '_ {
        dense_slots(&self.dense).chain(self.sparse.iter().copied())
    }

    /// Nearest-rank percentiles (ascending `ps` in (0, 100]) as the highest value of the slot
    /// the rank falls in: exact below [`EXACT_BELOW`], within 1.6 % above.
    pub fn percentiles(&self, ps: &[f64]) -> Option<Vec<u64>> {
        if self.calls == 0 {
            return None;
        }
        let mut out = Vec::with_capacity(ps.len());
        let (mut seen, mut slots, mut current) = (0u64, self.slots(), 0u16);
        for &p in ps {
            let rank = super::nearest_rank(p, self.calls);
            while seen < rank {
                let Some((slot, n)) = slots.next() else {
                    break;
                };
                seen += u64::from(n);
                current = slot;
            }
            out.push(slot_range(current).1);
        }
        Some(out)
    }

    /// Counts per row for rows `[edges[k], edges[k+1])`, and the calls below the first edge
    /// and at or above the last.
    pub fn rows(&self, edges: &[u64]) -> RowCounts {
        let rows = edges.len().saturating_sub(1);
        let mut out = RowCounts {
            counts: vec![0; rows],
            below: 0,
            above: 0,
        };
        for (slot, n) in self.slots() {
            let lo = slot_range(slot).0;
            let k = edges.partition_point(|&e| e <= lo);
            match k {
                0 => out.below += u64::from(n),
                k if k > rows => out.above += u64::from(n),
                k => out.counts[k - 1] += u64::from(n),
            }
        }
        out
    }

    /// The lowest slot's lowest value and the highest slot's highest value.
    fn extent(&self) -> Option<(u64, u64)> {
        let mut slots = self.slots();
        let first = slots.next()?;
        let last = slots.last().unwrap_or(first);
        Some((slot_range(first.0).0, slot_range(last.0).1))
    }
}

fn dense_slots(dense: &[u32]) -> impl Iterator<Item = (u16, u32)> + '_ {
    dense
        .iter()
        .enumerate()
        .filter(|&(_, &n)| n > 0)
        .map(|(i, &n)| (i as u16, n))
}

/// One column cut into display rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowCounts {
    pub counts: Vec<u64>,
    pub below: u64,
    pub above: u64,
}

/// What happens when time runs past the last column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// Drop the oldest column (calls that enter before the first kept column are counted in
    /// [`Heatmap::off_left`]).
    Scroll,
    /// Merge neighbouring columns in pairs, doubling their width.
    Coarsen,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heatmap {
    /// Time of column 0's start (ns, the records' clock).
    origin_ns: u64,
    width_ns: u64,
    /// Index (from the origin) of `columns[0]`.
    first: u64,
    columns: VecDeque<Column>,
    max_columns: usize,
    overflow: Overflow,
    /// Calls older than the oldest kept column (`Scroll` only).
    pub off_left: u64,
}

impl Heatmap {
    /// Columns of `width_ns` from `origin_ns`; at most `max_columns` (at least 2) are kept.
    pub fn new(origin_ns: u64, width_ns: u64, max_columns: usize, overflow: Overflow) -> Heatmap {
        Heatmap {
            origin_ns,
            width_ns: width_ns.max(1),
            first: 0,
            columns: VecDeque::new(),
            max_columns: max_columns.max(2),
            overflow,
            off_left: 0,
        }
    }

    pub fn width_ns(&self) -> u64 {
        self.width_ns
    }

    /// Calls in the kept columns.
    pub fn calls(&self) -> u64 {
        self.columns.iter().map(|c| c.calls).sum()
    }

    /// A call that entered at `entry_ns` and took `duration`.
    pub fn add(&mut self, entry_ns: u64, duration: u64) {
        self.add_n(entry_ns, duration, 1);
    }

    /// `n` calls that entered at `entry_ns`, each taking `duration`.
    pub fn add_n(&mut self, entry_ns: u64, duration: u64, n: u32) {
        // Nearly every call enters during the newest column: no division for those.
        let newest = self.end_ns().checked_sub(self.width_ns);
        if let (Some(start), false) = (newest, self.columns.is_empty())
            && entry_ns >= start
            && entry_ns - start < self.width_ns
            && let Some(c) = self.columns.back_mut()
        {
            return c.add(slot_of(duration), n);
        }
        match self.column_mut(entry_ns) {
            Some(c) => c.add(slot_of(duration), n),
            None => self.off_left += u64::from(n),
        }
    }

    /// An aggregation interval ended at `t_ns`.
    pub fn mark(&mut self, t_ns: u64) {
        if let Some(c) = self.column_mut(t_ns) {
            c.marks += 1;
        }
    }

    /// Makes sure the column holding `t_ns` exists (the screen scrolls on with time even when
    /// no call comes).
    pub fn advance_to(&mut self, t_ns: u64) {
        let _ = self.column_mut(t_ns);
    }

    /// Start time (ns) of the column after the last kept one: where the map ends.
    pub fn end_ns(&self) -> u64 {
        self.start_of(self.first + self.columns.len() as u64)
    }

    fn start_of(&self, index: u64) -> u64 {
        self.origin_ns
            .saturating_add(index.saturating_mul(self.width_ns))
    }

    /// Kept columns with their start times, oldest first.
    pub fn columns(&self) -> impl DoubleEndedIterator<Item = (u64, &Column)> + '_ {
        self.columns
            .iter()
            .enumerate()
            .map(|(i, c)| (self.start_of(self.first + i as u64), c))
    }

    /// The lowest and highest slot value of the calls in the last `n` kept columns.
    pub fn range(&self, n: usize) -> Option<(u64, u64)> {
        let skip = self.columns.len().saturating_sub(n);
        self.columns
            .iter()
            .skip(skip)
            .filter_map(Column::extent)
            .reduce(|(a, b), (c, d)| (a.min(c), b.max(d)))
    }

    fn column_mut(&mut self, t_ns: u64) -> Option<&mut Column> {
        let mut index = t_ns.saturating_sub(self.origin_ns) / self.width_ns;
        if self.columns.is_empty() {
            self.first = match self.overflow {
                Overflow::Scroll => index,
                Overflow::Coarsen => 0,
            };
        }
        if index < self.first {
            return None;
        }
        while index - self.first >= self.max_columns as u64 {
            match self.overflow {
                Overflow::Scroll => {
                    // Jump straight to the new window when it lies past everything kept.
                    let keep_from = index + 1 - self.max_columns as u64;
                    let drop = (keep_from - self.first).min(self.columns.len() as u64);
                    self.columns.drain(..drop as usize);
                    self.first = keep_from;
                }
                Overflow::Coarsen => {
                    self.coarsen();
                    index = t_ns.saturating_sub(self.origin_ns) / self.width_ns;
                }
            }
        }
        let at = (index - self.first) as usize;
        if at >= self.columns.len() {
            if let Some(last) = self.columns.back_mut() {
                last.seal();
            }
            self.columns.resize_with(at + 1, Column::default);
        }
        self.columns.get_mut(at)
    }

    /// Doubles the column width, merging columns `2k` and `2k+1` (`first` is 0 when coarsening).
    fn coarsen(&mut self) {
        let old = std::mem::take(&mut self.columns);
        let mut merged = VecDeque::with_capacity(old.len().div_ceil(2));
        let mut pairs = old.into_iter();
        while let Some(mut a) = pairs.next() {
            if let Some(b) = pairs.next() {
                a.merge(b);
            }
            merged.push_back(a);
        }
        self.columns = merged;
        self.width_ns = self.width_ns.saturating_mul(2);
    }
}

/// Row edges from `lo` to past `hi` in steps of an octave split into `per_octave` equal parts
/// (64, 32, …, 1), the finest that gives at most `max_rows` rows; when even one octave per row
/// is too many, rows of 2, 3, … octaves. Edges fall on slot edges, so counts per row are exact.
/// `edges.len() - 1` rows.
pub fn log_edges(lo: u64, hi: u64, max_rows: usize) -> Vec<u64> {
    let max_rows = max_rows.max(1);
    let mut per_octave = SUB_SLOTS;
    loop {
        let edges = log_edges_with(lo, hi, per_octave);
        if edges.len() - 1 <= max_rows {
            return edges;
        }
        if per_octave == 1 {
            break;
        }
        per_octave /= 2;
    }
    let (first, last) = (
        super::histogram::octave(lo.max(1)),
        super::histogram::octave(hi.max(1)),
    );
    let octaves = last - first + 1;
    let per_row = octaves.div_ceil(max_rows as u32);
    let mut edges: Vec<u64> = (0..=octaves.div_ceil(per_row))
        .map(|j| 1u64.checked_shl(first + j * per_row).unwrap_or(u64::MAX))
        .collect();
    if lo == 0 {
        edges[0] = 0;
    }
    edges
}

fn log_edges_with(lo: u64, hi: u64, per_octave: u64) -> Vec<u64> {
    // The edge at or below `lo`: its octave's start plus whole steps (steps below 1 ns merge).
    let step_of = |v: u64| {
        let octave = 1u64 << super::histogram::octave(v.max(1));
        (octave / per_octave).max(1)
    };
    let start = {
        let octave = 1u64 << super::histogram::octave(lo.max(1));
        let step = step_of(lo);
        if lo == 0 {
            0
        } else {
            octave + (lo - octave) / step * step
        }
    };
    let mut edges = vec![start];
    let mut e = start;
    while e <= hi {
        e = e.saturating_add(step_of(e.max(1)));
        edges.push(e);
        if e == u64::MAX {
            break;
        }
    }
    edges
}

/// Row edges of one 1-2-5 width (at least `min_width`) from the row holding `lo` to past `hi`,
/// the narrowest that gives at most `max_rows` rows.
pub fn linear_edges(lo: u64, hi: u64, max_rows: usize, min_width: u64) -> Vec<u64> {
    let max_rows = max_rows.max(1) as u64;
    let min_width = min_width.max(1);
    let mut width = min_width;
    let nice = (0..=19u32).flat_map(|e| [1u64, 2, 5].map(|m| m.saturating_mul(10u64.pow(e))));
    for w in nice.filter(|&w| w >= min_width) {
        width = w;
        if (hi / w).saturating_sub(lo / w) < max_rows {
            break;
        }
    }
    let start = lo / width * width;
    let rows = (hi / width - lo / width + 1).min(max_rows);
    (0..=rows).map(|i| start + i * width).collect()
}

#[cfg(test)]
mod tests;
