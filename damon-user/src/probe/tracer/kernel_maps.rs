//! Reading the kernel-mode maps: each function's histogram and statistics, and its disturbed
//! calls, summed over CPUs.
use anyhow::Context as _;
use aya::{Ebpf, maps::PerCpuArray};
use damon_common::{
    HIST_BUCKETS, HistStats, MAP_HIST, MAP_HIST_STATS,
    disturb::{DisturbedStats, MAP_DISTURBED_HIST, MAP_DISTURBED_STATS},
};

use crate::capture::KernelDisturbed;

/// Function `id`'s in-kernel histogram, each bucket read once: its statistics summed over
/// CPUs, each CPU's count being the sum of that CPU's buckets (the kernel keeps sum, min and
/// max per call but no count), and the bucket counts summed over CPUs.
pub(super) fn histogram(bpf: &Ebpf, id: u32) -> anyhow::Result<(HistStats, Vec<u64>)> {
    let stats: PerCpuArray<_, HistStats> = PerCpuArray::try_from(
        bpf.map(MAP_HIST_STATS)
            .context("histogram statistics map missing")?,
    )?;
    let mut per_cpu: Vec<HistStats> = stats.get(&id, 0)?.iter().copied().collect();
    let buckets = buckets(bpf, MAP_HIST, id, |cpu, n| {
        if let Some(s) = per_cpu.get_mut(cpu) {
            s.count += n;
        }
    })?;
    Ok((sum_stats(per_cpu.iter()), buckets))
}

/// Function `id`'s disturbed calls (kernel mode with disturbance measured), summed over CPUs.
///
/// The programs count a disturbed call here before they add it to the histogram, and
/// [`histogram`] is read first: so every disturbed call in the histogram read is in these
/// counts, and the clean calls (the difference) are never overstated. A call that ends
/// between the two reads can be counted here and not in the histogram (mid-session only: the
/// last read is made after the probes are detached).
pub(super) fn disturbed(bpf: &Ebpf, id: u32) -> anyhow::Result<KernelDisturbed> {
    let stats: PerCpuArray<_, DisturbedStats> = PerCpuArray::try_from(
        bpf.map(MAP_DISTURBED_STATS)
            .context("disturbed-calls map missing")?,
    )?;
    let mut d = KernelDisturbed {
        buckets: buckets(bpf, MAP_DISTURBED_HIST, id, |_, _| {})?,
        ..KernelDisturbed::default()
    };
    for s in stats.get(&id, 0)?.iter() {
        d.slept += s.slept;
        d.preempted += s.preempted;
        d.interrupted += s.interrupted;
        d.lost += s.lost;
        d.sum_ns += s.sum_ns;
    }
    Ok(d)
}

/// Function `id`'s `HIST_BUCKETS` per-CPU bucket counts in map `name`, summed over CPUs;
/// `per_cpu(cpu, n)` sees each CPU's count of each bucket.
fn buckets(
    bpf: &Ebpf,
    name: &str,
    id: u32,
    mut per_cpu: impl FnMut(usize, u64),
) -> anyhow::Result<Vec<u64>> {
    let hist: PerCpuArray<_, u64> = PerCpuArray::try_from(
        bpf.map(name)
            .with_context(|| format!("map {name} missing"))?,
    )?;
    let mut buckets = Vec::with_capacity(HIST_BUCKETS as usize);
    for b in 0..HIST_BUCKETS {
        let counts = hist.get(&(id * HIST_BUCKETS + b), 0)?;
        for (cpu, &n) in counts.iter().enumerate() {
            per_cpu(cpu, n);
        }
        buckets.push(counts.iter().sum());
    }
    Ok(buckets)
}

/// Per-CPU [`HistStats`] summed: counts and sums added, min over CPUs that saw a call, max.
pub fn sum_stats<'a>(per_cpu: impl Iterator<Item = &'a HistStats>) -> HistStats {
    let mut total = HistStats::default();
    for s in per_cpu {
        if s.count == 0 {
            continue;
        }
        total.min_ns = if total.count == 0 {
            s.min_ns
        } else {
            total.min_ns.min(s.min_ns)
        };
        total.count += s.count;
        total.sum_ns += s.sum_ns;
        total.max_ns = total.max_ns.max(s.max_ns);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(count: u64, sum_ns: u64, min_ns: u64, max_ns: u64) -> HistStats {
        HistStats {
            count,
            sum_ns,
            min_ns,
            max_ns,
        }
    }

    #[test]
    fn sums_over_cpus() {
        let per_cpu = [
            stats(2, 30, 10, 20),
            stats(3, 300, 50, 150),
            stats(1, 5, 5, 5),
        ];
        assert_eq!(sum_stats(per_cpu.iter()), stats(6, 335, 5, 150));
    }

    #[test]
    fn cpus_without_calls_do_not_count() {
        // An idle CPU's minimum is 0 (never written) and must not become the minimum.
        let per_cpu = [stats(0, 0, 0, 0), stats(2, 70, 30, 40), stats(0, 0, 0, 0)];
        assert_eq!(sum_stats(per_cpu.iter()), stats(2, 70, 30, 40));
        let idle = [stats(0, 0, 0, 0), stats(0, 0, 0, 0)];
        assert_eq!(sum_stats(idle.iter()), HistStats::default());
        assert_eq!(sum_stats([].iter()), HistStats::default());
    }
}
