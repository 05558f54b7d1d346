//! What the renderers of every command share (pure): number and range formatting, and the
//! markup layer ([`markup`]) a table or a Markdown document is written through once, each
//! format supplying only its syntax.
pub mod markdown;
pub mod markup;

use crate::stats::buckets::BucketGrid;

/// A value, or `-` when there is none.
pub fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// `count` as a percentage of `total` with two decimals; `-` when there is no total.
pub fn percent(count: u64, total: u64) -> String {
    if total == 0 {
        "-".to_owned()
    } else {
        format!("{:.2}%", count as f64 * 100.0 / total as f64)
    }
}

/// A value range `lo..hi`, or the one value when both ends are the same.
pub fn range_label(lo: i64, hi: i64) -> String {
    if lo == hi {
        format!("{lo}")
    } else {
        format!("{lo}..{hi}")
    }
}

/// The note of a grid: widened rows, and where the kernel's log2 buckets take over.
pub fn note_for(grid: &BucketGrid, unit: &str) -> Option<String> {
    // Rows as wide as the kernel's whole linear range: the log2 buckets are all there is.
    let linear_rows = grid.log2_from_ns.is_none_or(|from| grid.width_ns < from);
    let widened = grid.widened_from.filter(|_| linear_rows).map(|asked| {
        format!(
            "rows are {} {unit} wide: {asked} {unit} rows up to the p99 would take more than 40 lines \
             (choose with --bucket-ns and --max-ns)",
            grid.width_ns
        )
    });
    let log2 = grid.log2_from_ns.map(|from| {
        format!(
            "from {from} {unit} up the rows are the kernel's log2 buckets, each twice as wide as \
             the one before (kernel mode; --hist-width widens the linear range)"
        )
    });
    match (widened, log2) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    }
}
