//! Compact number formats for a screen that must fit 80 columns.
use std::time::Duration;

/// A duration in ns with three significant digits and its unit: `661ns`, `1.05µs`, `24.4µs`,
/// `1.68ms`, `2.50s`.
pub fn ns(v: u64) -> String {
    if v < 1000 {
        return format!("{v}ns");
    }
    let (value, unit) = match v {
        1_000..=999_999 => (v as f64 / 1e3, "µs"),
        1_000_000..=999_999_999 => (v as f64 / 1e6, "ms"),
        _ => (v as f64 / 1e9, "s"),
    };
    // Rounding can carry into the next unit (999.96µs); say so rather than print "1000µs".
    let digits = |x: f64| {
        if x >= 99.95 {
            0
        } else if x >= 9.995 {
            1
        } else {
            2
        }
    };
    let text = format!("{value:.*}", digits(value));
    if text == "1000" && unit != "s" {
        let next = if unit == "µs" { "ms" } else { "s" };
        return format!("1.00{next}");
    }
    format!("{text}{unit}")
}

/// A corrected duration (raw minus the probe floor): as [`ns`], with a `-` when below the
/// floor.
pub fn signed_ns(v: f64) -> String {
    let magnitude = ns(v.abs().round() as u64);
    if v.round() < 0.0 {
        format!("-{magnitude}")
    } else {
        magnitude
    }
}

/// A count that stays short: `2961`, `123.4k`, `12.35M`.
pub fn count(v: u64) -> String {
    if v < 100_000 {
        v.to_string()
    } else if v < 10_000_000 {
        format!("{:.1}k", v as f64 / 1e3)
    } else if v < 10_000_000_000 {
        format!("{:.2}M", v as f64 / 1e6)
    } else {
        format!("{:.2}G", v as f64 / 1e9)
    }
}

/// Elapsed time as a clock: `0:07`, `12:34`, `1:02:03`.
pub fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_keep_three_digits() {
        assert_eq!(ns(0), "0ns");
        assert_eq!(ns(999), "999ns");
        assert_eq!(ns(1000), "1.00µs");
        assert_eq!(ns(1051), "1.05µs");
        assert_eq!(ns(24_356), "24.4µs");
        assert_eq!(ns(999_499), "999µs");
        assert_eq!(ns(999_960), "1.00ms");
        assert_eq!(ns(1_680_627), "1.68ms");
        assert_eq!(ns(141_071_506), "141ms");
        assert_eq!(ns(2_500_000_000), "2.50s");
        assert_eq!(ns(u64::MAX), "18446744074s");
    }

    #[test]
    fn counts_stay_short() {
        assert_eq!(count(2961), "2961");
        assert_eq!(count(99_999), "99999");
        assert_eq!(count(123_456), "123.5k");
        assert_eq!(count(12_345_678), "12.35M");
        assert_eq!(count(12_345_678_901), "12.35G");
    }

    #[test]
    fn clocks() {
        assert_eq!(clock(Duration::from_millis(7_900)), "0:07");
        assert_eq!(clock(Duration::from_secs(754)), "12:34");
        assert_eq!(clock(Duration::from_secs(3723)), "1:02:03");
    }
}
