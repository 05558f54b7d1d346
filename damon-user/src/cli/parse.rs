//! Values of options that clap cannot parse by itself: durations, sizes, replay speeds.
use std::time::Duration;

/// A replay speed factor: 0 (as fast as possible) or a positive finite number.
pub fn parse_speed(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('x')
        .parse()
        .map_err(|_| format!("`{s}` is not a speed (examples: 1, 10, 0.5, 0)"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!(
            "speed `{s}` must be 0 (as fast as possible) or positive"
        ));
    }
    Ok(v)
}

/// The accepted forms of a duration, named by every duration error.
const DURATION_FORMS: &str = "a number with a unit (us, ms, s, m, h), units combined (1m30s), \
     decimals (1.5m), or a bare number of seconds";

/// Parses a duration: `500ms`, `30s`, `1.5m`, `1m30s`, `1h`, `250us`, or a bare number of
/// seconds (`90`). Positive and at most a week.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let text = s.trim();
    let bad = |why: &str| format!("`{s}` is not a duration: {why} (use {DURATION_FORMS})");
    if text.is_empty() {
        return Err(bad("it is empty"));
    }
    if text.starts_with('-') {
        return Err(format!("duration `{s}` must be positive"));
    }
    let mut secs = 0.0f64;
    let mut rest = text;
    let mut parts = 0;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let (num, after) = rest.split_at(num_end);
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_end);
        let value: f64 = num
            .parse()
            .map_err(|_| bad(&format!("`{num}` is not a number")))?;
        let scale = match unit.trim() {
            "" if parts == 0 && next.is_empty() => 1.0,
            "" => return Err(bad(&format!("`{num}` has no unit"))),
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            other => return Err(bad(&format!("unknown unit `{other}`"))),
        };
        secs += value * scale;
        parts += 1;
        rest = next;
    }
    if !secs.is_finite() || secs <= 0.0 || secs > 7.0 * 86400.0 {
        return Err(format!(
            "duration `{s}` must be positive and at most a week (168h)"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A duration in whole seconds (`--window 10`, `--window 2m`), from `min` to `max` seconds.
pub fn parse_whole_seconds(s: &str, min: u32, max: u32) -> Result<u32, String> {
    let d = parse_duration(s)?;
    if d.subsec_nanos() != 0 {
        return Err(format!("`{s}` must be a whole number of seconds"));
    }
    match u32::try_from(d.as_secs()) {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(format!("`{s}` must be from {min} s to {max} s")),
    }
}

/// The largest `--ring-size`: a sanity limit. 1 GiB of kernel memory is far more than any
/// overload needs; a mistyped size should not ask the kernel for more.
pub const MAX_RING_BYTES: u32 = 1 << 30;

/// A size in bytes: a bare number, or a number with a binary unit (`512K`, `8M`, `8MiB`,
/// `1G`; 1K = 1024). Decimal units (`8MB`) are refused rather than guessed.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let text = s.trim();
    let forms = "bytes (65536), or a whole number with K, M or G (binary: 512K, 8M, 8MiB, 1G)";
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (num, unit) = text.split_at(split);
    let shift = match unit.trim() {
        "" => 0,
        "k" | "K" | "KiB" => 10,
        "m" | "M" | "MiB" => 20,
        "g" | "G" | "GiB" => 30,
        other => {
            return Err(format!(
                "`{s}` is not a size: unknown unit `{other}` (use {forms})"
            ));
        }
    };
    let value: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size (use {forms})"))?;
    value
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("size `{s}` is too large"))
}

/// Ring buffer sizes (`--ring-size 8M`) must be a power of two and a multiple of the page
/// size.
pub fn parse_ring_size(s: &str) -> Result<u32, String> {
    let v = parse_size(s)?;
    if v < 4096 || !v.is_power_of_two() {
        return Err(format!(
            "ring size `{s}` ({v} bytes) must be a power of two and at least 4096 (4K); \
             e.g. 64K, 8M"
        ));
    }
    if v > u64::from(MAX_RING_BYTES) {
        return Err(format!(
            "ring size `{s}` is larger than the 1 GiB ({MAX_RING_BYTES} bytes) damon-trace \
             allows"
        ));
    }
    Ok(v as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("nan").is_err());
        assert!(parse_duration("1e9h").is_err());
        assert!(parse_duration("3 fortnights").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("   ").is_err());
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h2m3s"), Ok(Duration::from_secs(3723)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("168h"), Ok(Duration::from_secs(7 * 86400)));
        assert!(parse_duration("169h").is_err(), "over a week");
        assert!(
            parse_duration("1m30").is_err(),
            "a number without unit after a part"
        );
        assert!(parse_duration("1..5s").is_err());
        assert!(
            parse_duration("99999999999999999999999999h").is_err(),
            "overflow"
        );
        let err = parse_duration("3 fortnights").unwrap_err();
        assert!(
            err.contains("`fortnights`") && err.contains("1m30s"),
            "{err}"
        );
        assert!(parse_duration("").unwrap_err().contains("empty"));
    }

    #[test]
    fn whole_seconds() {
        assert_eq!(parse_whole_seconds("10", 1, 3600), Ok(10));
        assert_eq!(parse_whole_seconds("2m", 1, 3600), Ok(120));
        assert!(parse_whole_seconds("1.5s", 1, 3600).is_err());
        assert!(parse_whole_seconds("2h", 1, 3600).is_err());
        assert!(parse_whole_seconds("0", 1, 3600).is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("512K"), Ok(512 << 10));
        assert_eq!(parse_size("8M"), Ok(8 << 20));
        assert_eq!(parse_size("8MiB"), Ok(8 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size(" 64k "), Ok(64 << 10));
        assert!(parse_size("").is_err());
        assert!(parse_size("M").is_err());
        assert!(parse_size("1.5M").is_err());
        let err = parse_size("8MB").unwrap_err();
        assert!(err.contains("`MB`") && err.contains("8MiB"), "{err}");
        assert!(
            parse_size("99999999999G")
                .unwrap_err()
                .contains("too large")
        );
        assert!(parse_size("99999999999999999999").is_err());
    }

    #[test]
    fn ring_sizes() {
        assert_eq!(parse_ring_size("4096"), Ok(4096));
        assert!(parse_ring_size("4095").is_err());
        assert!(parse_ring_size("6144").is_err());
        assert!(parse_ring_size("2048").is_err());
        assert!(parse_ring_size("big").is_err());
        assert!(parse_ring_size("-4096").is_err());
        assert_eq!(parse_ring_size("1073741824"), Ok(1 << 30));
        assert!(parse_ring_size("2147483648").is_err());
        assert!(parse_ring_size("99999999999999999999").is_err());
        assert_eq!(parse_ring_size("8M"), Ok(8 << 20));
        assert_eq!(parse_ring_size("512K"), Ok(512 << 10));
        assert_eq!(parse_ring_size("4K"), Ok(4096));
        assert!(parse_ring_size("2K").is_err(), "below a page");
        assert!(parse_ring_size("3M").unwrap_err().contains("power of two"));
        assert!(parse_ring_size("2G").is_err(), "over the 1 GiB limit");
    }

    #[test]
    fn speeds() {
        assert_eq!(parse_speed("10"), Ok(10.0));
        assert_eq!(parse_speed("2.5x"), Ok(2.5));
        assert_eq!(parse_speed("0"), Ok(0.0));
        assert!(parse_speed("-1").is_err());
        assert!(parse_speed("inf").is_err());
        assert!(parse_speed("fast").is_err());
    }
}
