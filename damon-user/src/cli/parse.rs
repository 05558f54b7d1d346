//! Values of options that clap cannot parse by itself: durations, ring sizes, replay speeds.
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

/// Parses `1500ms`, `30s`, `2m`, `1h`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.starts_with('-') {
        return Err(format!("duration `{s}` must be positive"));
    }
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (examples: 500ms, 30s, 2m)"))?;
    let secs = match unit {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => {
            return Err(format!(
                "unknown unit `{unit}` in `{s}` (use ms, s, m or h)"
            ));
        }
    };
    if !secs.is_finite() || secs <= 0.0 || secs > 7.0 * 86400.0 {
        return Err(format!(
            "duration `{s}` must be positive and at most a week"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// The largest `--ring-size`: a sanity limit. 1 GiB of kernel memory is far more than any
/// overload needs; a mistyped size should not ask the kernel for more.
pub const MAX_RING_BYTES: u32 = 1 << 30;

/// Ring buffer sizes must be a power of two and a multiple of the page size.
pub fn parse_ring_size(s: &str) -> Result<u32, String> {
    let v: u64 = s.trim().parse().map_err(|_| {
        format!("`{s}` is not a size in bytes (a power of two from 4096 to {MAX_RING_BYTES})")
    })?;
    if v < 4096 || !v.is_power_of_two() {
        return Err(format!(
            "ring size {v} must be a power of two and at least 4096"
        ));
    }
    if v > u64::from(MAX_RING_BYTES) {
        return Err(format!(
            "ring size {v} is larger than the {MAX_RING_BYTES} bytes (1 GiB) damon-trace allows"
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
