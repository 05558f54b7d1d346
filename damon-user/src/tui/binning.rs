//! Which display bins a histogram gets for the current mode and the room on screen (pure).
use crate::{
    capture::Clock,
    stats::{
        histogram::{Bins, octave},
        window::Distribution,
    },
    tui::{format, keys},
};

/// The central 99 % of calls: from p0.5 to p99.5.
pub const ZOOM_PERCENTILES: [f64; 2] = [0.5, 99.5];

/// The range the automatic choice looks at: p1 to p99, so a few outliers do not decide it.
pub const AUTO_PERCENTILES: [f64; 2] = [1.0, 99.0];

/// Linear bins are readable while p99 is at most this many times p1; past that the bulk of the
/// calls would sit in a few columns at the left (or most calls beyond the right edge), so the
/// automatic choice is log2.
pub const LINEAR_SPREAD: u64 = 4;

/// At most this share of the calls may fall outside automatic linear bins.
const MAX_OUTSIDE_PERCENT: u64 = 5;

/// How a histogram is cut for display.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binned {
    pub bins: Bins,
    /// The linear bucket width used (zoom picks its own), `None` for log2.
    pub width_ns: Option<u64>,
    /// Chosen from the data (no `l`, `+` or `-` pressed yet) rather than by the user.
    pub auto: bool,
}

impl Binned {
    /// "linear 20ns bins (auto)", "log2 bins": what the panel says about its bins.
    pub fn label(&self, clock: Clock) -> String {
        let kind = match self.width_ns {
            Some(w) => format!("linear {} bins", format::duration(clock, w)),
            None => "log2 bins".to_owned(),
        };
        if self.auto {
            format!("{kind} (auto)")
        } else {
            kind
        }
    }
}

/// A histogram's scale: linear bins of the bucket width, or powers of two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    Log2,
}

/// The scale the data calls for: linear when p1..p99 spans at most [`LINEAR_SPREAD`]×,
/// log2 otherwise; `None` without calls.
pub fn auto_scale(dist: &Distribution<'_>) -> Option<Scale> {
    let p = dist.percentiles(&AUTO_PERCENTILES)?;
    Some(if p[1] <= p[0].max(1).saturating_mul(LINEAR_SPREAD) {
        Scale::Linear
    } else {
        Scale::Log2
    })
}

/// Cuts `dist` with the user's scale (`fixed`), or the one [`auto_scale`] picks from the data.
/// `room` tells how many bins fit for a scale. Automatic linear bins cover p1..p99 with the
/// smallest 1-2-5 width of at least `bucket_ns` that fits, so at most 2 % of the calls fall
/// outside; automatic log2 bins span the minimum to the maximum, as `l` shows them.
pub fn choose(
    dist: &Distribution<'_>,
    fixed: Option<Scale>,
    zoom: bool,
    bucket_ns: u64,
    room: impl Fn(Scale) -> usize,
) -> Option<Binned> {
    if let Some(scale) = fixed {
        return bin(dist, scale, zoom, bucket_ns, room(scale));
    }
    let log2 = || bin(dist, Scale::Log2, zoom, bucket_ns, room(Scale::Log2));
    let binned = match auto_scale(dist)? {
        Scale::Linear if !zoom => {
            let p = dist.percentiles(&AUTO_PERCENTILES)?;
            let room = room(Scale::Linear).max(1);
            let width = fitted_width(p[0], p[1], room, bucket_ns.max(1));
            let binned = linear(dist, p[0], p[1], width, room);
            // Calls kept as coarse buckets (kernel mode) can sit away from their percentiles:
            // linear only when the bins do hold nearly all the calls.
            let outside = binned.bins.below + binned.bins.above;
            if outside.saturating_mul(100) > dist.count.saturating_mul(MAX_OUTSIDE_PERCENT) {
                log2()?
            } else {
                binned
            }
        }
        scale => bin(dist, scale, zoom, bucket_ns, room(scale))?,
    };
    Some(Binned {
        auto: true,
        ..binned
    })
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
            if zoom {
                return Some(linear(dist, lo, hi, fitted_width(lo, hi, room, 1), room));
            }
            let width = bucket_ns.max(1);
            Some(Binned {
                bins: dist.latency.linear(lo / width * width, width, room),
                width_ns: Some(width),
                auto: false,
            })
        }
        Scale::Log2 => {
            let from = octave(lo);
            let to = octave(hi).min(from + room as u32 - 1);
            Some(Binned {
                bins: dist.latency.log2(from, to),
                width_ns: None,
                auto: false,
            })
        }
    }
}

/// Bins of `width` from the one holding `lo` to the one holding `hi`, at most `room` of them.
fn linear(dist: &Distribution<'_>, lo: u64, hi: u64, width: u64, room: usize) -> Binned {
    let start = lo / width * width;
    let needed = ((hi - start) / width + 1) as usize;
    Binned {
        bins: dist.latency.linear(start, width, needed.min(room)),
        width_ns: Some(width),
        auto: false,
    }
}

/// The smallest 1-2-5 width of at least `from` with which `room` buckets starting at a
/// multiple of it cover `lo..=hi`.
fn fitted_width(lo: u64, hi: u64, room: usize, from: u64) -> u64 {
    let mut width = from;
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
    fn auto_is_linear_for_a_narrow_spread_and_covers_p1_to_p99() {
        // 1000 calls between 1000 and 1999 ns (p99/p1 ≈ 2), and one far outlier each side.
        let mut v: Vec<u64> = (1000..2000).collect();
        v.extend([10, 50_000_000]);
        let s = stats(&v);
        let d = s.since_start();
        assert_eq!(auto_scale(&d), Some(Scale::Linear));
        let b = choose(&d, None, false, 20, |_| 40).expect("bins");
        assert_eq!(
            (b.width_ns, b.auto),
            (Some(50), true),
            "20 ns is too narrow"
        );
        assert_eq!(b.label(Clock::Wall), "linear 50ns bins (auto)");
        assert!(b.bins.below + b.bins.above <= 20, "{:?}", b.bins);
        let wide = choose(&d, None, false, 100, |_| 40).expect("bins");
        assert_eq!(wide.width_ns, Some(100), "never narrower than --bucket-ns");
    }

    #[test]
    fn auto_is_log2_for_a_long_tail_and_the_users_scale_wins() {
        let v: Vec<u64> = (0..100).map(|i| 600 + i * i * 100).collect();
        let s = stats(&v);
        let d = s.since_start();
        assert_eq!(auto_scale(&d), Some(Scale::Log2));
        let room = |scale| if scale == Scale::Log2 { 30 } else { 100 };
        let b = choose(&d, None, false, 20, room).expect("bins");
        assert_eq!((b.width_ns, b.auto), (None, true));
        assert_eq!(b.label(Clock::Wall), "log2 bins (auto)");
        assert_eq!((b.bins.below, b.bins.above), (0, 0));
        let fixed = choose(&d, Some(Scale::Linear), false, 20, room).expect("bins");
        assert_eq!((fixed.width_ns, fixed.auto), (Some(20), false));
        assert_eq!(fixed.label(Clock::Wall), "linear 20ns bins");
        assert_eq!(fixed.bins.bins.len(), 100);
    }

    #[test]
    fn nothing_to_bin_without_calls() {
        let s = stats(&[]);
        assert_eq!(bin(&s.since_start(), Scale::Linear, false, 20, 10), None);
    }

    #[test]
    fn fitted_widths() {
        assert_eq!(fitted_width(0, 9, 10, 1), 1);
        assert_eq!(fitted_width(0, 10, 10, 1), 2);
        assert_eq!(fitted_width(5, 5, 1, 1), 1);
        assert_eq!(fitted_width(0, u64::MAX, 1, 1), 10_000_000_000);
        assert_eq!(fitted_width(0, 9, 10, 20), 20, "never narrower than asked");
    }
}
