//! Compact number formats for a screen that must fit 80 columns.
use std::time::Duration;

use crate::capture::Clock;

/// A duration in ns with three significant digits and its unit: `661ns`, `1.05µs`, `24.4µs`,
/// `1.68ms`, `2.50s`.
fn ns(v: u64) -> String {
    if v < 1000 {
        return format!("{v}ns");
    }
    three_digits(v, ["µs", "ms", "s"])
}

/// An instruction count, so that it cannot be read as a time: exact below 10 000 (`568 insn`,
/// `9999 insn`), then three digits (`12.3k insn`, `4.57M insn`). The instruction clock's
/// durations are path lengths.
fn insn(v: u64) -> String {
    if v < 10_000 {
        return format!("{v} insn");
    }
    three_digits(v, ["k insn", "M insn", "G insn"])
}

/// `v` ≥ 1000 with three significant digits, in thousands, millions or billions of its unit.
fn three_digits(v: u64, units: [&str; 3]) -> String {
    let (value, step) = match v {
        0..=999_999 => (v as f64 / 1e3, 0),
        1_000_000..=999_999_999 => (v as f64 / 1e6, 1),
        _ => (v as f64 / 1e9, 2),
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
    if text == "1000" && step < 2 {
        return format!("1.00{}", units[step + 1]);
    }
    format!("{text}{}", units[step])
}

/// A duration in the unit of the capture's clock: nanoseconds as `ns`/`µs`/`ms`/`s` with
/// three digits (wall clock), instructions as `insn` (instruction clock).
pub fn duration(clock: Clock, v: u64) -> String {
    match clock {
        Clock::Wall => ns(v),
        Clock::Instructions => insn(v),
    }
}

/// The most characters [`duration`] prints under `clock` (`999.9µs` is 6, `9999 insn` 9,
/// `17.9k insn` 10), so columns of durations line up.
pub fn duration_width(clock: Clock) -> usize {
    match clock {
        Clock::Wall => 7,
        Clock::Instructions => 10,
    }
}

/// A corrected duration (raw minus the probe floor): as [`duration`], with a `-` when below
/// the floor.
pub fn signed_duration(clock: Clock, v: f64) -> String {
    let magnitude = duration(clock, v.abs().round() as u64);
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
    fn instruction_counts_never_read_as_time() {
        let i = Clock::Instructions;
        assert_eq!(duration(i, 568), "568 insn");
        assert_eq!(duration(i, 9_999), "9999 insn");
        assert_eq!(duration(i, 12_345), "12.3k insn");
        assert_eq!(duration(i, 4_567_890), "4.57M insn");
        assert_eq!(duration(i, 999_960), "1.00M insn");
        assert_eq!(duration(i, 45_678_901), "45.7M insn");
        assert_eq!(signed_duration(i, -76.4), "-76 insn");
        assert_eq!(signed_duration(Clock::Wall, -76.4), "-76ns");
        assert_eq!(duration(Clock::Wall, 1051), "1.05µs");
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
