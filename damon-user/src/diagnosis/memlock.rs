//! RLIMIT_MEMLOCK, which kernels before 5.11 charge BPF maps to.
use super::{Check, Level, check};

/// `(major, minor)` of a release string such as `5.10.0-21-amd64`.
fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Bytes our maps lock with the default ring size (ring, stamp hash, per-CPU counters) plus
/// room for the programs: what RLIMIT_MEMLOCK must allow on kernels that charge it.
fn memlock_needed() -> u64 {
    let cpus = std::thread::available_parallelism().map_or(64, |n| n.get() as u64);
    let stamp = 8 + std::mem::size_of::<damon_common::StampStack>() as u64 + 64;
    u64::from(damon_common::DEFAULT_RING_BYTES)
        + u64::from(damon_common::MAX_IN_FLIGHT) * stamp
        + cpus * u64::from(damon_common::MAX_FUNCS * damon_common::NR_COUNTERS) * 8
        + (1 << 20)
}

/// Kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK (later ones to the memory cgroup):
/// a low limit there makes map creation fail with EPERM.
pub(super) fn memlock_check(release: &str) -> Option<Check> {
    let old = kernel_version(release).is_some_and(|v| v < (5, 11));
    if !old {
        return None;
    }
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) } != 0 {
        return None;
    }
    let need = memlock_needed();
    let cur = lim.rlim_cur;
    Some(if cur == libc::RLIM_INFINITY || cur >= need {
        check(
            "memlock",
            Level::Ok,
            format!(
                "RLIMIT_MEMLOCK allows the {} KiB the maps lock on this kernel (< 5.11)",
                need >> 10
            ),
            None,
        )
    } else {
        check(
            "memlock",
            Level::Fail,
            format!(
                "RLIMIT_MEMLOCK is {} KiB; this kernel (< 5.11) charges BPF maps to it and they need about {} KiB",
                cur >> 10,
                need >> 10
            ),
            Some("raise it: `ulimit -l unlimited` (or LimitMEMLOCK=infinity in a systemd unit)"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_versions_and_the_memlock_cutoff() {
        assert_eq!(kernel_version("5.10.0-21-amd64"), Some((5, 10)));
        assert_eq!(kernel_version("7.2.0-rc3"), Some((7, 2)));
        assert_eq!(kernel_version("garbage"), None);
        assert!(
            memlock_check("6.12.1").is_none(),
            "5.11+ charges the memory cgroup"
        );
        assert!(memlock_check("5.10.0").is_some());
        assert!(memlock_needed() > u64::from(damon_common::DEFAULT_RING_BYTES));
    }
}
