//! Comparisons that involve a kernel-mode capture: both sides go onto the kernel's bucket
//! grid (a stream capture's durations are bucketed exactly as the kernel buckets them), so
//! percentiles, tests and range rows compare like with like, at the stated resolution.
//!
//! Each call stands for its bucket's top value (`hi - 1`; the open-ended last bucket, its
//! `lo`) on both sides, so a percentile delta is a whole number of buckets. Min, mean and max
//! stay exact (the kernel keeps them; a stream capture has the records).
use damon_common::{HIST_BUCKETS, hist_bucket_bounds};

use crate::{
    analysis::{ReportOptions, Selected},
    capture::{Capture, FunctionCounters, KernelDisturbed, KernelHist},
    error::UsageError,
    stats::{
        LatencyStats,
        buckets::{BucketGrid, BucketRow},
        kernel_hist::{self, linear_range_ns},
    },
};

/// The grid both sides are put on.
#[derive(Debug, Clone, Copy)]
pub struct Resolution {
    pub width_ns: u64,
    /// The kernel captures' widths differ: the finer one is re-bucketed onto the wider grid.
    pub mixed_widths: bool,
    /// `compare --clean`: a kernel capture's side is its clean calls' histogram.
    pub clean_only: bool,
}

impl Resolution {
    /// `None` when every capture is a stream capture (compared record by record).
    pub fn of(captures: &[&Capture], opts: &ReportOptions) -> Result<Option<Self>, UsageError> {
        if !captures.iter().any(|c| c.is_kernel_mode()) {
            return Ok(None);
        }
        let widths: Vec<u64> = captures
            .iter()
            .filter(|c| c.is_kernel_mode())
            .filter_map(|c| c.final_hists())
            .flat_map(|s| s.functions.into_values().map(|(_, h)| h.width_ns))
            .collect();
        crate::analysis::kernel::check_options(opts)?;
        Ok(Some(Resolution {
            clean_only: opts.clean_only,
            mixed_widths: widths.windows(2).any(|w| w[0] != w[1]),
            width_ns: widths
                .into_iter()
                .max()
                .unwrap_or(damon_common::DEFAULT_HIST_WIDTH_NS),
        }))
    }

    /// What the verdict and the table say about the resolution.
    pub fn describe(&self) -> String {
        format!(
            "at bucket resolution: {} ns buckets below {} ns, log2 above",
            self.width_ns,
            linear_range_ns(self.width_ns)
        )
    }
}

/// A side with more calls than this is compared through a proportional sample of its
/// histogram of this size (a hot function counted in the kernel can have 10⁸ calls; 8 bytes
/// each would not fit): same buckets, same shape, tests as conservative as this many calls.
pub const MAX_EXPANDED: u64 = 4_000_000;

/// Scales bucket counts to sum to `target`, by largest remainder (every count scaled down, the
/// rounding spread so the total is exact).
pub(super) fn proportional(buckets: &[u64], target: u64) -> Vec<u64> {
    let total: u128 = buckets.iter().map(|&n| u128::from(n)).sum();
    if total <= u128::from(target) {
        return buckets.to_vec();
    }
    let scaled: Vec<(u64, u128)> = buckets
        .iter()
        .map(|&n| {
            let x = u128::from(n) * u128::from(target);
            ((x / total) as u64, x % total)
        })
        .collect();
    let mut out: Vec<u64> = scaled.iter().map(|s| s.0).collect();
    let short = target - out.iter().sum::<u64>();
    let mut order: Vec<usize> = (0..scaled.len()).collect();
    order.sort_by(|&a, &b| scaled[b].1.cmp(&scaled[a].1).then(a.cmp(&b)));
    for &i in order.iter().take(short as usize) {
        out[i] += 1;
    }
    out
}

/// One side of a function on the grid: its histogram (exact stats kept), and its calls as
/// bucket values, sorted.
pub struct Side {
    pub hist: KernelHist,
    pub selected: Selected,
    pub counters: FunctionCounters,
}

/// A bucket's stand-in value.
fn value_of(bucket: usize, width_ns: u64) -> u64 {
    let (lo, hi) = hist_bucket_bounds(bucket as u32, width_ns);
    if hi == u64::MAX { lo } else { hi - 1 }
}

/// Re-buckets a histogram of another width onto `width_ns`: each bucket goes where its lower
/// edge falls (exact when the grids nest, as linear buckets of a multiple width do).
pub(super) fn rebucket(h: &KernelHist, width_ns: u64) -> KernelHist {
    if h.width_ns == width_ns {
        return h.clone();
    }
    let onto = |counts: &[u64]| {
        let mut buckets = vec![0; HIST_BUCKETS as usize];
        for (b, &n) in counts.iter().enumerate().filter(|(_, n)| **n > 0) {
            let lo = hist_bucket_bounds(b as u32, h.width_ns).0;
            buckets[damon_common::hist_bucket(lo, width_ns) as usize] += n;
        }
        buckets
    };
    KernelHist {
        buckets: onto(&h.buckets),
        width_ns,
        disturbed: h.disturbed.as_ref().map(|d| KernelDisturbed {
            buckets: onto(&d.buckets),
            ..d.clone()
        }),
        ..h.clone()
    }
}

/// Puts one function of one capture on the grid. `records` is what `analysis::select` kept of
/// a stream capture (empty for a kernel capture). With `--clean` a kernel capture's side is
/// its clean calls' histogram (a stream capture's records are already the clean ones); either
/// way the side keeps its disturbance counts and its clean calls on the grid.
pub fn side(c: &Capture, id: u32, records: Selected, res: Resolution) -> Side {
    let (hist, counters, count, disturbance, clean) = if c.is_kernel_mode() {
        let end = c.final_hists();
        let (k, h) = end
            .and_then(|e| e.functions.get(&id).cloned())
            .unwrap_or_default();
        let h = if h.buckets.is_empty() {
            kernel_hist::from_durations(&[], res.width_ns)
        } else {
            rebucket(&h, res.width_ns)
        };
        let (disturbance, clean) = (h.disturbance().unwrap_or_default(), h.clean());
        let hist = match (&clean, res.clean_only) {
            (Some(clean), true) => clean.clone(),
            _ => h,
        };
        (hist, k, k.emitted, disturbance, clean)
    } else {
        let k = crate::analysis::counters(c, id, records.count);
        let clean = kernel_hist::from_durations(&records.clean_durations, res.width_ns);
        (
            kernel_hist::from_durations(&records.durations, res.width_ns),
            k,
            records.count,
            records.disturbance,
            Some(clean),
        )
    };
    Side {
        selected: Selected {
            count,
            durations: on_grid(&hist, res.width_ns),
            disturbance,
            clean_durations: clean.map_or_else(Vec::new, |h| on_grid(&h, res.width_ns)),
            ..Selected::default()
        },
        hist,
        counters,
    }
}

/// A histogram's calls as their bucket values, sorted (through a proportional sample of at
/// most [`MAX_EXPANDED`] calls).
fn on_grid(hist: &KernelHist, width_ns: u64) -> Vec<u64> {
    let counts = proportional(&hist.buckets, MAX_EXPANDED);
    let mut durations = Vec::with_capacity(counts.iter().sum::<u64>() as usize);
    for (b, &n) in counts.iter().enumerate().filter(|(_, n)| **n > 0) {
        durations.extend(std::iter::repeat_n(value_of(b, width_ns), n as usize));
    }
    durations
}

/// The histograms of a side's runs added up (exact count, sum, min and max kept).
pub fn merge(hists: &[&KernelHist]) -> KernelHist {
    let mut out = KernelHist::default();
    for (i, h) in hists.iter().enumerate() {
        if i == 0 {
            out = (*h).clone();
            continue;
        }
        for (a, b) in out.buckets.iter_mut().zip(&h.buckets) {
            *a += b;
        }
        if h.count > 0 {
            out.min_ns = if out.count > 0 {
                out.min_ns.min(h.min_ns)
            } else {
                h.min_ns
            };
            out.max_ns = out.max_ns.max(h.max_ns);
        }
        out.count += h.count;
        out.sum_ns += h.sum_ns;
        // Pooled disturbance only when every run measured it.
        out.disturbed = out
            .disturbed
            .take()
            .zip(h.disturbed.as_ref())
            .map(|(mut a, b)| {
                a.merge(b);
                a
            });
    }
    out
}

/// Latency stats of calls on the grid (`sorted`, their bucket values) and their histogram:
/// percentiles at bucket resolution, min/mean/max exact.
pub fn stats(sorted: &mut [u64], h: &KernelHist) -> Option<LatencyStats> {
    let mut st = LatencyStats::from_durations(sorted)?;
    if h.count > 0 {
        st.min_ns = h.min_ns;
        st.max_ns = h.max_ns;
        st.mean_ns = h.sum_ns as f64 / h.count as f64;
    }
    Some(st)
}

/// The range table of both sides on one grid aligned to the buckets.
pub fn rows(
    opts: &ReportOptions,
    b: &KernelHist,
    a: &KernelHist,
) -> Result<(BucketGrid, Vec<(BucketRow, BucketRow)>), UsageError> {
    let grid = kernel_hist::plan_grid(opts.bucket_ns, opts.max_ns, &[b, a])
        .map_err(|e| UsageError(e.to_string()))?;
    let rb = kernel_hist::count_rows(&grid, b);
    let ra = kernel_hist::count_rows(&grid, a);
    // Both sides have the same width, so the same rows, except a leading "below" row that
    // only one side may need.
    let (mut rb, mut ra) = (rb, ra);
    let below = |r: &[BucketRow]| r.first().is_some_and(|r| r.lo_ns == 0 && grid.lo_ns > 0);
    if below(&rb) != below(&ra) {
        let pad = |r: &mut Vec<BucketRow>| {
            r.insert(
                0,
                BucketRow {
                    lo_ns: 0,
                    hi_ns: r.first().map(|f| f.lo_ns),
                    count: 0,
                },
            )
        };
        if below(&rb) {
            pad(&mut ra);
        } else {
            pad(&mut rb);
        }
    }
    Ok((grid, rb.into_iter().zip(ra).collect()))
}
