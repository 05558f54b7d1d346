//! Linear latency buckets, the `Range (ns) | Count | Percent` tables of kernel patch mails.
//!
//! Row `i` holds durations `lo + i·width ≤ d < lo + (i+1)·width`; one last row holds
//! everything `≥ hi`. The grid is planned once for all the distributions shown side by side,
//! so that `compare` lines up before and after row by row.
use serde::Serialize;

/// More rows than this, when the user did not ask for a range, and the width grows.
pub const AUTO_MAX_ROWS: u64 = 40;
/// Never print more rows than this, even when asked.
pub const HARD_MAX_ROWS: u64 = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BucketGrid {
    pub width_ns: u64,
    /// Lower edge of the first row.
    pub lo_ns: u64,
    /// Lower edge of the overflow row (`≥ hi_ns`).
    pub hi_ns: u64,
    /// The width was widened from the one asked for to keep the table readable.
    pub widened_from: Option<u64>,
    /// Kernel-mode histograms: from here up the rows are the kernel's log2 buckets (each
    /// twice as wide as the one before), which cannot be split.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log2_from_ns: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BucketRow {
    pub lo_ns: u64,
    /// Exclusive upper edge; `None` for the overflow row.
    pub hi_ns: Option<u64>,
    pub count: u64,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GridError {
    #[error("--bucket-ns must be at least 1")]
    ZeroWidth,
    #[error(
        "--max-ns {max_ns} with --bucket-ns {width_ns} makes {rows} rows; at most {HARD_MAX_ROWS} \
         are printed (raise --bucket-ns or lower --max-ns)"
    )]
    TooManyRows {
        max_ns: u64,
        width_ns: u64,
        rows: u64,
    },
}

fn round_down(v: u64, w: u64) -> u64 {
    v - v % w
}

fn round_up(v: u64, w: u64) -> u64 {
    round_down(v, w).saturating_add(if v.is_multiple_of(w) { 0 } else { w })
}

/// The 1-2-5 sequence of multipliers (1, 2, 5, 10, 20, 50, …).
fn nice_multipliers() -> impl Iterator<Item = u64> {
    (0..19u32).flat_map(|e| [1u64, 2, 5].map(move |m| m * 10u64.pow(e)))
}

impl BucketGrid {
    /// Plans rows of `width` from the lowest minimum of `sorted` distributions up to `max_ns`
    /// (rounded up to a row edge) or, without it, past the highest p99, widening the rows
    /// (×2, ×5, ×10, …) when that would take more than [`AUTO_MAX_ROWS`].
    pub fn plan(
        width: u64,
        max_ns: Option<u64>,
        sorted: &[&[u64]],
    ) -> Result<BucketGrid, GridError> {
        let min = sorted.iter().filter_map(|s| s.first()).min().copied();
        let p99 = sorted
            .iter()
            .filter_map(|s| super::percentile(s, 99.0))
            .max();
        Self::plan_bounds(width, max_ns, min, p99)
    }

    /// [`BucketGrid::plan`] from the lowest minimum and the highest p99 of the distributions
    /// (kernel-mode histograms have these without sorted records).
    pub fn plan_bounds(
        width: u64,
        max_ns: Option<u64>,
        min: Option<u64>,
        p99: Option<u64>,
    ) -> Result<BucketGrid, GridError> {
        if width == 0 {
            return Err(GridError::ZeroWidth);
        }
        let Some(max_ns) = max_ns else {
            let (min, top) = (min.unwrap_or(0), p99.unwrap_or(0));
            for m in nice_multipliers() {
                let w = width.saturating_mul(m);
                let grid = Self::span(w, min, top.saturating_add(1));
                if grid.rows() <= AUTO_MAX_ROWS || w == u64::MAX {
                    return Ok(BucketGrid {
                        widened_from: (m > 1).then_some(width),
                        ..grid
                    });
                }
            }
            return Ok(Self::span(u64::MAX, 0, u64::MAX));
        };
        let grid = Self::span(width, min.unwrap_or(0).min(max_ns), max_ns);
        if grid.rows() > HARD_MAX_ROWS {
            return Err(GridError::TooManyRows {
                max_ns,
                width_ns: width,
                rows: grid.rows(),
            });
        }
        Ok(grid)
    }

    /// Rows of `width` covering `from..to` (at least one row).
    fn span(width: u64, from: u64, to: u64) -> BucketGrid {
        let lo = round_down(from, width);
        let hi = round_up(to, width).max(lo.saturating_add(width));
        BucketGrid {
            width_ns: width,
            lo_ns: lo,
            hi_ns: hi,
            widened_from: None,
            log2_from_ns: None,
        }
    }

    /// Rows before the overflow row.
    pub fn rows(&self) -> u64 {
        (self.hi_ns - self.lo_ns).div_ceil(self.width_ns)
    }

    /// Counts sorted durations into the rows; values below `lo_ns` (possible only with a
    /// grid planned for other data) go into a leading `< lo` row, present only when needed.
    pub fn count(&self, sorted: &[u64]) -> Vec<BucketRow> {
        let mut rows = Vec::with_capacity(self.rows() as usize + 2);
        let below = sorted.partition_point(|&d| d < self.lo_ns);
        if below > 0 {
            rows.push(BucketRow {
                lo_ns: 0,
                hi_ns: Some(self.lo_ns),
                count: below as u64,
            });
        }
        let mut start = below;
        let mut lo = self.lo_ns;
        while lo < self.hi_ns {
            let hi = lo.saturating_add(self.width_ns).min(self.hi_ns);
            let end = start + sorted[start..].partition_point(|&d| d < hi);
            rows.push(BucketRow {
                lo_ns: lo,
                hi_ns: Some(hi),
                count: (end - start) as u64,
            });
            start = end;
            lo = hi;
        }
        rows.push(BucketRow {
            lo_ns: self.hi_ns,
            hi_ns: None,
            count: (sorted.len() - start) as u64,
        });
        rows
    }
}

impl BucketRow {
    /// `20-39` (inclusive, as patch mails write it) or `>= 400`.
    pub fn label(&self) -> String {
        match self.hi_ns {
            Some(hi) => format!("{}-{}", self.lo_ns, hi.saturating_sub(1)),
            None => format!(">= {}", self.lo_ns),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_are_half_open() {
        let g = BucketGrid::plan(20, Some(60), &[&[0, 19, 20, 39, 40, 59, 60, 61]]).expect("grid");
        assert_eq!((g.lo_ns, g.hi_ns, g.rows()), (0, 60, 3));
        let rows = g.count(&[0, 19, 20, 39, 40, 59, 60, 61]);
        let counts: Vec<_> = rows.iter().map(|r| r.count).collect();
        assert_eq!(counts, vec![2, 2, 2, 2]);
        let labels: Vec<_> = rows.iter().map(BucketRow::label).collect();
        assert_eq!(labels, vec!["0-19", "20-39", "40-59", ">= 60"]);
    }

    #[test]
    fn auto_range_covers_p99_and_widens() {
        // p99 of 1..=100 is 99: rows up to 100 cover it.
        let v: Vec<u64> = (1..=100).collect();
        let g = BucketGrid::plan(10, None, &[&v]).expect("grid");
        assert_eq!((g.lo_ns, g.hi_ns, g.widened_from), (0, 100, None));
        // 20 ns rows over 0..40 µs would be 2000 rows: widened to 1000 ns (×50).
        let wide: Vec<u64> = (0..40_000).step_by(7).collect();
        let g = BucketGrid::plan(20, None, &[&wide]).expect("grid");
        assert!(g.rows() <= AUTO_MAX_ROWS, "{g:?}");
        assert_eq!((g.width_ns, g.widened_from), (1000, Some(20)));
    }

    #[test]
    fn shared_grid_and_values_below_it() {
        let g = BucketGrid::plan(100, Some(300), &[&[150, 250], &[120]]).expect("grid");
        assert_eq!(g.lo_ns, 100);
        let rows = g.count(&[5, 150]);
        assert_eq!(rows[0].hi_ns, Some(100));
        assert_eq!(rows[0].count, 1);
        assert_eq!(rows.iter().map(|r| r.count).sum::<u64>(), 2);
    }

    #[test]
    fn limits() {
        assert_eq!(BucketGrid::plan(0, None, &[]), Err(GridError::ZeroWidth));
        assert!(matches!(
            BucketGrid::plan(1, Some(1_000_000), &[&[0]]),
            Err(GridError::TooManyRows { .. })
        ));
        let g = BucketGrid::plan(20, None, &[]).expect("empty data");
        assert_eq!(g.count(&[]).iter().map(|r| r.count).sum::<u64>(), 0);
        // At the top of the range the last row is cut short and u64::MAX overflows.
        let g = BucketGrid::plan(7, Some(u64::MAX), &[&[u64::MAX - 3]]).expect("top");
        let rows = g.count(&[u64::MAX - 3, u64::MAX]);
        assert_eq!(rows.last().map(|r| r.count), Some(1));
        assert_eq!(rows.iter().map(|r| r.count).sum::<u64>(), 2);
    }
}
