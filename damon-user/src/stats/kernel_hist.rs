//! Statistics of a kernel-mode histogram (`--mode kernel`): count, mean, min and max are exact
//! (the kernel keeps them per CPU); percentiles are known only to their bucket, and say so.
//!
//! A percentile is given as the range of values its nearest rank can be: the bucket the rank
//! falls in, narrowed by the exact min and max. `value_ns` is the top of that range (the same
//! convention as the live view's histograms: an upper bound), `lo_ns` its bottom; the error
//! bound is `value_ns - lo_ns`, less than the bucket's width.
use damon_common::{HIST_LINEAR_BUCKETS, hist_bucket, hist_bucket_bounds};
use serde::Serialize;

use super::{
    buckets::{BucketGrid, BucketRow, GridError},
    nearest_rank,
};
use crate::capture::KernelHist;

/// A percentile known to a bucket: the true value is in `lo_ns..=value_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BucketPercentile {
    pub value_ns: u64,
    pub lo_ns: u64,
}

impl BucketPercentile {
    /// How far below `value_ns` the true value can be.
    pub fn bound_ns(&self) -> u64 {
        self.value_ns - self.lo_ns
    }

    /// `120-129`, or `130` when the range is one value.
    pub fn label(&self) -> String {
        if self.lo_ns == self.value_ns {
            self.value_ns.to_string()
        } else {
            format!("{}-{}", self.lo_ns, self.value_ns)
        }
    }
}

/// The latency summary of a kernel-mode histogram.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct KernelLatency {
    /// Calls in the buckets (the percentiles' population).
    pub count: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub max_ns: u64,
    pub p50: BucketPercentile,
    pub p90: BucketPercentile,
    pub p95: BucketPercentile,
    pub p99: BucketPercentile,
    pub p999: BucketPercentile,
    /// Linear bucket width, ns (the resolution below [`linear_range_ns`]).
    pub width_ns: u64,
}

impl KernelLatency {
    /// The same numbers as stream statistics (percentiles at their bucket tops).
    pub fn stats(&self) -> super::LatencyStats {
        super::LatencyStats {
            min_ns: self.min_ns,
            mean_ns: self.mean_ns,
            p50_ns: self.p50.value_ns,
            p90_ns: self.p90.value_ns,
            p95_ns: self.p95.value_ns,
            p99_ns: self.p99.value_ns,
            p999_ns: self.p999.value_ns,
            max_ns: self.max_ns,
        }
    }

    /// The largest error bound of the five percentiles.
    pub fn bound_ns(&self) -> u64 {
        [self.p50, self.p90, self.p95, self.p99, self.p999]
            .iter()
            .map(BucketPercentile::bound_ns)
            .max()
            .unwrap_or(0)
    }
}

/// Where the linear buckets end (log2 buckets above): `512 · width`.
pub fn linear_range_ns(width_ns: u64) -> u64 {
    hist_bucket_bounds(HIST_LINEAR_BUCKETS, width_ns).0
}

/// Nearest-rank percentiles of a histogram (each `p` in (0, 100], ascending), `None` when it
/// is empty. Ranks count the buckets (which the kernel updates together with the exact stats,
/// so at the end of a session their sum is `count`).
pub fn percentiles(h: &KernelHist, ps: &[f64]) -> Option<Vec<BucketPercentile>> {
    let total: u64 = h.buckets.iter().sum();
    if total == 0 {
        return None;
    }
    let mut out = Vec::with_capacity(ps.len());
    let mut seen = 0u64;
    let mut b = 0usize;
    for &p in ps {
        let rank = nearest_rank(p, total);
        while seen + h.buckets[b] < rank {
            seen += h.buckets[b];
            b += 1;
        }
        let (lo, hi) = hist_bucket_bounds(b as u32, h.width_ns);
        let top = hi.saturating_sub(1);
        // The exact min and max narrow the bucket (when the kernel's stats are consistent).
        let (lo, top) = if h.count > 0 && h.min_ns <= h.max_ns {
            (lo.max(h.min_ns).min(top), top.min(h.max_ns).max(lo))
        } else {
            (lo, top)
        };
        out.push(BucketPercentile {
            value_ns: top,
            lo_ns: lo.min(top),
        });
    }
    Some(out)
}

/// Exact count/mean/min/max and bucket-resolution percentiles; `None` without calls.
pub fn latency(h: &KernelHist) -> Option<KernelLatency> {
    let p = percentiles(h, &[50.0, 90.0, 95.0, 99.0, 99.9])?;
    let count = if h.count > 0 {
        h.count
    } else {
        h.buckets.iter().sum()
    };
    Some(KernelLatency {
        count,
        min_ns: h.min_ns,
        mean_ns: h.sum_ns as f64 / count as f64,
        max_ns: h.max_ns,
        p50: p[0],
        p90: p[1],
        p95: p[2],
        p99: p[3],
        p999: p[4],
        width_ns: h.width_ns,
    })
}

/// Buckets `b - a` of two cumulative histograms of one function (a period between two
/// snapshots), never below zero. Count and sum are differences; min and max cannot be known
/// for a period and are taken from the buckets' edges.
pub fn delta(later: &KernelHist, earlier: Option<&KernelHist>) -> KernelHist {
    let mut buckets = later.buckets.clone();
    if let Some(e) = earlier {
        for (b, &n) in buckets.iter_mut().zip(&e.buckets) {
            *b = b.saturating_sub(n);
        }
    }
    let first = buckets.iter().position(|&n| n > 0);
    let last = buckets.iter().rposition(|&n| n > 0);
    let (min_ns, max_ns) = match (first, last) {
        (Some(f), Some(l)) => (
            hist_bucket_bounds(f as u32, later.width_ns).0,
            hist_bucket_bounds(l as u32, later.width_ns)
                .1
                .saturating_sub(1),
        ),
        _ => (0, 0),
    };
    KernelHist {
        count: later.count - earlier.map_or(0, |e| e.count.min(later.count)),
        sum_ns: later.sum_ns - earlier.map_or(0, |e| e.sum_ns.min(later.sum_ns)),
        min_ns,
        max_ns,
        width_ns: later.width_ns,
        buckets,
        disturbed: later
            .disturbed
            .as_ref()
            .map(|d| d.since(earlier.and_then(|e| e.disturbed.as_ref()))),
    }
}

/// Plans the range table's rows for kernel histograms: like [`BucketGrid::plan`] from their
/// min and p99, with the width rounded up to a multiple of the kernel's bucket width so every
/// row is a whole number of buckets.
pub fn plan_grid(
    width: u64,
    max_ns: Option<u64>,
    hists: &[&KernelHist],
) -> Result<BucketGrid, GridError> {
    if width == 0 {
        return Err(GridError::ZeroWidth);
    }
    let kw = hists.iter().map(|h| h.width_ns.max(1)).max().unwrap_or(1);
    let aligned = width.div_ceil(kw).saturating_mul(kw);
    let min = hists.iter().filter(|h| h.count > 0).map(|h| h.min_ns).min();
    let p99 = hists
        .iter()
        .filter_map(|h| percentiles(h, &[99.0]))
        .map(|p| p[0].value_ns)
        .max();
    let mut grid = BucketGrid::plan_bounds(aligned, max_ns, min, p99)?;
    if aligned != width && grid.widened_from.is_none() {
        grid.widened_from = Some(width);
    }
    let linear_end = linear_range_ns(kw);
    grid.log2_from_ns = (grid.hi_ns > linear_end).then_some(linear_end);
    Ok(grid)
}

/// Counts a kernel histogram into the grid's rows. Rows inside the linear buckets are the
/// grid's; where the grid reaches past them, each log2 bucket is a row of its own (its
/// calls cannot be split); the last row holds everything from there up.
pub fn count_rows(grid: &BucketGrid, h: &KernelHist) -> Vec<BucketRow> {
    let linear_end = linear_range_ns(h.width_ns);
    // A grid starting inside a log2 bucket starts at that bucket instead.
    let start = if grid.lo_ns >= linear_end {
        hist_bucket_bounds(hist_bucket(grid.lo_ns, h.width_ns), h.width_ns).0
    } else {
        grid.lo_ns
    };
    let mut rows = Vec::new();
    let mut lo = start;
    while lo < grid.hi_ns.min(linear_end) {
        let hi = lo
            .saturating_add(grid.width_ns)
            .min(grid.hi_ns)
            .min(linear_end);
        rows.push(BucketRow {
            lo_ns: lo,
            hi_ns: Some(hi),
            count: 0,
        });
        lo = hi;
    }
    // Past the linear range: whole log2 buckets up to the grid's end.
    while lo < grid.hi_ns {
        let (blo, bhi) = hist_bucket_bounds(hist_bucket(lo, h.width_ns), h.width_ns);
        if bhi == u64::MAX || blo < lo {
            break;
        }
        rows.push(BucketRow {
            lo_ns: blo,
            hi_ns: Some(bhi),
            count: 0,
        });
        lo = bhi;
    }
    let mut below = 0u64;
    let mut overflow = 0u64;
    for (b, &n) in h.buckets.iter().enumerate().filter(|(_, n)| **n > 0) {
        let (blo, _) = hist_bucket_bounds(b as u32, h.width_ns);
        if blo < start {
            below += n;
            continue;
        }
        let i = rows.partition_point(|r| r.lo_ns <= blo);
        match i.checked_sub(1).map(|i| &mut rows[i]) {
            Some(r) if r.hi_ns.is_some_and(|hi| blo < hi) => r.count += n,
            _ => overflow += n,
        }
    }
    rows.push(BucketRow {
        lo_ns: lo,
        hi_ns: None,
        count: overflow,
    });
    if below > 0 {
        rows.insert(
            0,
            BucketRow {
                lo_ns: 0,
                hi_ns: Some(start),
                count: below,
            },
        );
    }
    rows
}

/// Buckets durations the way the kernel does (for checks against a stream capture, and to put
/// a stream capture on a kernel capture's grid).
pub fn from_durations(durations: &[u64], width_ns: u64) -> KernelHist {
    let mut h = KernelHist {
        width_ns,
        buckets: vec![0; damon_common::HIST_BUCKETS as usize],
        min_ns: u64::MAX,
        ..Default::default()
    };
    for &d in durations {
        h.buckets[hist_bucket(d, width_ns) as usize] += 1;
        h.count += 1;
        h.sum_ns = h.sum_ns.wrapping_add(d);
        h.min_ns = h.min_ns.min(d);
        h.max_ns = h.max_ns.max(d);
    }
    if h.count == 0 {
        h.min_ns = 0;
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::percentile;

    fn sorted(mut v: Vec<u64>) -> Vec<u64> {
        v.sort_unstable();
        v
    }

    /// The exact percentile of the durations always lies in the range given from their
    /// buckets, and the range is never wider than the bucket.
    #[test]
    fn percentiles_bracket_the_exact_ones() {
        let mut x = 12345u64;
        for (n, w) in [(1usize, 10u64), (7, 10), (1000, 10), (5000, 20), (333, 1)] {
            let v = sorted(
                (0..n)
                    .map(|_| {
                        x = x
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        // Mostly small, some in the log2 buckets.
                        let r = x >> 33;
                        if r.is_multiple_of(10) {
                            r % 200_000
                        } else {
                            r % 3000
                        }
                    })
                    .collect(),
            );
            let h = from_durations(&v, w);
            let ps = [1.0, 50.0, 90.0, 99.0, 99.9, 100.0];
            let got = percentiles(&h, &ps).expect("non-empty");
            for (p, b) in ps.iter().zip(got) {
                let exact = percentile(&v, *p).expect("non-empty");
                assert!(
                    b.lo_ns <= exact && exact <= b.value_ns,
                    "n={n} w={w} p={p}: {exact} not in {b:?}"
                );
                let (lo, hi) = hist_bucket_bounds(hist_bucket(exact, w), w);
                assert!(
                    b.lo_ns >= lo && b.value_ns < hi,
                    "{b:?} outside [{lo},{hi})"
                );
            }
            let lat = latency(&h).expect("latency");
            assert_eq!(
                (lat.min_ns, lat.max_ns, lat.count),
                (v[0], v[n - 1], n as u64)
            );
            assert_eq!(
                percentiles(&h, &[100.0]).expect("p100")[0].value_ns,
                v[n - 1]
            );
        }
        assert_eq!(percentiles(&KernelHist::default(), &[50.0]), None);
        assert_eq!(latency(&from_durations(&[], 10)), None);
    }

    #[test]
    fn one_value_is_exact() {
        let h = from_durations(&[137, 137, 137], 10);
        let lat = latency(&h).expect("latency");
        assert_eq!(
            lat.p50,
            BucketPercentile {
                value_ns: 137,
                lo_ns: 137
            }
        );
        assert_eq!(lat.bound_ns(), 0);
        assert_eq!(lat.p50.label(), "137");
        let h = from_durations(&[100, 105, 109, 300], 10);
        let p = percentiles(&h, &[50.0]).expect("p50")[0];
        assert_eq!((p.label(), p.bound_ns()), ("100-109".to_owned(), 9));
    }

    /// Rows from the kernel's buckets equal rows counted from the durations themselves, for a
    /// grid inside the linear range; past it, log2 buckets are rows of their own.
    #[test]
    fn range_rows_match_rows_from_records() {
        let v = sorted((0..4000u64).map(|i| (i * 7919) % 1700 + 40).collect());
        let h = from_durations(&v, 10);
        let grid = plan_grid(20, None, &[&h]).expect("grid");
        assert_eq!(grid.width_ns % 10, 0);
        let direct = grid.count(&v);
        assert_eq!(count_rows(&grid, &h), direct);
        // A width that is not a multiple of the kernel's is rounded up, and says so.
        let g = plan_grid(15, Some(200), &[&h]).expect("grid");
        assert_eq!((g.width_ns, g.widened_from), (20, Some(15)));
        assert_eq!(count_rows(&g, &h), g.count(&v));
        // Grid past the linear range (5120 ns at width 10).
        let v = sorted(vec![10, 5000, 5200, 9000, 12_000, 50_000]);
        let h = from_durations(&v, 10);
        let g = BucketGrid::plan_bounds(1000, Some(20_000), Some(10), None).expect("grid");
        let rows = count_rows(&g, &h);
        let total: u64 = rows.iter().map(|r| r.count).sum();
        assert_eq!(total, 6);
        let labels: Vec<String> = rows.iter().map(BucketRow::label).collect();
        assert_eq!(
            labels,
            [
                "0-999",
                "1000-1999",
                "2000-2999",
                "3000-3999",
                "4000-4999",
                "5000-5119",
                "5120-10239",
                "10240-20479",
                ">= 20480"
            ]
        );
        let counts: Vec<u64> = rows.iter().map(|r| r.count).collect();
        assert_eq!(counts, [1, 0, 0, 0, 0, 1, 2, 1, 1]);
    }

    #[test]
    fn deltas_of_cumulative_snapshots() {
        let a = from_durations(&[10, 20, 30], 10);
        let b = from_durations(&[10, 20, 30, 55, 57], 10);
        let d = delta(&b, Some(&a));
        assert_eq!((d.count, d.sum_ns), (2, 112));
        assert_eq!((d.min_ns, d.max_ns), (50, 59));
        assert_eq!(d.buckets.iter().sum::<u64>(), 2);
        assert_eq!(delta(&b, None).buckets, b.buckets);
    }
}
