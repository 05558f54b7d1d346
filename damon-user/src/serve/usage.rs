//! The tool's own cost, for serve's self metrics: CPU seconds (user + system) from
//! `/proc/self/stat` and resident memory from `/proc/self/statm`.
use anyhow::Context as _;

/// What this process has used so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SelfUsage {
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
}

/// User + system CPU ticks from the text of `/proc/<pid>/stat`. The command name (field 2)
/// may hold spaces and parentheses, so fields are counted after its last `)`.
pub fn parse_stat_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Resident pages (the second number) from the text of `/proc/<pid>/statm`.
pub fn parse_statm_resident(statm: &str) -> Option<u64> {
    statm.split_whitespace().nth(1)?.parse().ok()
}

/// This process's usage now.
pub fn read() -> anyhow::Result<SelfUsage> {
    let stat = std::fs::read_to_string("/proc/self/stat").context("reading /proc/self/stat")?;
    let statm = std::fs::read_to_string("/proc/self/statm").context("reading /proc/self/statm")?;
    let ticks = parse_stat_ticks(&stat).context("parsing /proc/self/stat")?;
    let pages = parse_statm_resident(&statm).context("parsing /proc/self/statm")?;
    // SAFETY: sysconf only reads configuration values.
    let (hz, page) = unsafe {
        (
            libc::sysconf(libc::_SC_CLK_TCK),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    Ok(SelfUsage {
        cpu_seconds: ticks as f64 / hz.max(1) as f64,
        resident_bytes: pages * page.max(1) as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_an_awkward_command_name() {
        // A stat line of a process named `a) b (c` (utime 1234, stime 56).
        let line = "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 1000 0 0 0 1234 56 0 0 20 0 1 0 \
                    100 12345678 900 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0";
        assert_eq!(parse_stat_ticks(line), Some(1290));
        assert_eq!(parse_stat_ticks("4242 (x"), None);
        assert_eq!(parse_statm_resident("2000 900 300 10 0 500 0\n"), Some(900));
        assert_eq!(parse_statm_resident("2000"), None);
    }

    /// The real files of this test process: CPU grows with work, memory with a touched buffer.
    #[test]
    fn reads_this_process() {
        let before = read().expect("own usage");
        assert!(before.resident_bytes > 0);
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed().as_millis() < 300 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let big = vec![1u8; 64 << 20];
        std::hint::black_box(&big);
        let after = read().expect("own usage");
        assert!(
            after.cpu_seconds >= before.cpu_seconds + 0.1,
            "{before:?} {after:?}"
        );
        assert!(
            after.resident_bytes >= before.resident_bytes + (32 << 20),
            "{before:?} {after:?}"
        );
    }
}
