//! Which display bins a histogram gets for the current mode and the room on screen (pure).
use crate::{
    stats::{
        histogram::{Bins, octave},
        window::Distribution,
    },
    tui::{app::Scale, keys},
};

/// The central 99 % of calls: from p0.5 to p99.5.
pub const ZOOM_PERCENTILES: [f64; 2] = [0.5, 99.5];

/// How a histogram is cut for display.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binned {
    pub bins: Bins,
    /// The linear bucket width used (zoom picks its own), `None` for log2.
    pub width_ns: Option<u64>,
}

/// Cuts `dist` into at most `room` bins. Linear buckets start at the bucket holding the
/// minimum (as in the kernel patch tables); zoom fits the central 99 % into the room with a
/// 1-2-5 width; log2 shows the octaves from the minimum to the maximum.
pub fn bin(
    dist: &Distribution<'_>,
    scale: Scale,
    zoom: bool,
    bucket_ns: u64,
    room: usize,
) -> Option<Binned> {
    let room = room.max(1);
    let (min, max) = (dist.min?, dist.max?);
    let (lo, hi) = if zoom {
        let p = dist.percentiles(&ZOOM_PERCENTILES)?;
        (p[0], p[1])
    } else {
        (min, max)
    };
    match scale {
        Scale::Linear => {
            let width = if zoom {
                fitted_width(lo, hi, room)
            } else {
                bucket_ns.max(1)
            };
            let start = lo / width * width;
            let needed = ((hi - start) / width + 1) as usize;
            let n = if zoom { needed.min(room) } else { room };
            Some(Binned {
                bins: dist.latency.linear(start, width, n),
                width_ns: Some(width),
            })
        }
        Scale::Log2 => {
            let from = octave(lo);
            let to = octave(hi).min(from + room as u32 - 1);
            Some(Binned {
                bins: dist.latency.log2(from, to),
                width_ns: None,
            })
        }
    }
}

/// The smallest 1-2-5 width with which `room` buckets starting at a multiple of it cover
/// `lo..=hi`.
fn fitted_width(lo: u64, hi: u64, room: usize) -> u64 {
    let mut width = 1;
    loop {
        let start = lo / width * width;
        if (hi - start) / width < room as u64 {
            return width;
        }
        let next = keys::wider(width);
        if next == width {
            return width;
        }
        width = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::window::FunctionStats;

    fn stats(values: &[u64]) -> FunctionStats {
        let mut s = FunctionStats::new(10, false);
        for &v in values {
            s.record(v, 0);
        }
        s
    }

    #[test]
    fn linear_starts_at_the_minimums_bucket() {
        let s = stats(&[661, 700, 1051, 5000]);
        let b = bin(&s.since_start(), Scale::Linear, false, 20, 10).expect("bins");
        assert_eq!(b.width_ns, Some(20));
        assert_eq!(b.bins.bins.len(), 10);
        assert_eq!((b.bins.bins[0].lo, b.bins.bins[0].count), (660, 1));
        assert_eq!((b.bins.bins[2].lo, b.bins.bins[2].count), (700, 1));
        assert_eq!((b.bins.below, b.bins.above), (0, 2));
    }

    #[test]
    fn zoom_fits_the_central_99_percent() {
        // 1000 calls between 1000 and 1999 ns, and one far outlier on each side.
        let mut v: Vec<u64> = (1000..2000).collect();
        v.extend([10, 50_000_000]);
        let s = stats(&v);
        let b = bin(&s.since_start(), Scale::Linear, true, 20, 40).expect("bins");
        let width = b.width_ns.expect("linear");
        assert_eq!(
            width, 50,
            "the smallest 1-2-5 width fitting ~990 ns into 40 buckets"
        );
        let first = b.bins.bins[0].lo;
        let last = b.bins.bins.last().expect("bins").hi;
        assert!(first <= 1005 && last >= 1994, "{first}..{last}");
        assert!(b.bins.bins.len() <= 40);
        assert!(b.bins.below >= 1 && b.bins.above >= 1, "outliers outside");
        let inside: u64 = b.bins.bins.iter().map(|b| b.count).sum();
        assert!(inside * 100 >= 99 * 1002, "{inside}");
    }

    #[test]
    fn log2_spans_min_to_max_within_the_room() {
        let s = stats(&[600, 1500, 70_000]);
        let b = bin(&s.since_start(), Scale::Log2, false, 20, 30).expect("bins");
        assert_eq!(b.width_ns, None);
        assert_eq!(b.bins.bins.first().map(|b| b.lo), Some(512));
        assert_eq!(b.bins.bins.last().map(|b| b.hi), Some(131_072));
        assert_eq!(b.bins.bins.iter().map(|b| b.count).sum::<u64>(), 3);
        let narrow = bin(&s.since_start(), Scale::Log2, false, 20, 3).expect("bins");
        assert_eq!(narrow.bins.bins.len(), 3);
        assert_eq!(narrow.bins.above, 1);
    }

    #[test]
    fn nothing_to_bin_without_calls() {
        let s = stats(&[]);
        assert_eq!(bin(&s.since_start(), Scale::Linear, false, 20, 10), None);
    }

    #[test]
    fn fitted_widths() {
        assert_eq!(fitted_width(0, 9, 10), 1);
        assert_eq!(fitted_width(0, 10, 10), 2);
        assert_eq!(fitted_width(5, 5, 1), 1);
        assert_eq!(fitted_width(0, u64::MAX, 1), 10_000_000_000);
    }
}
