//! What the programs need to read a call's disturbance counters (`damon_common::disturb`):
//! `task_struct`'s switch counts (offsets from BTF) and the CPU's interrupt counts, per-CPU
//! variables found through /proc/kallsyms (`kstat`, x86's `irq_stat`, `__per_cpu_offset`) and
//! laid out through BTF (`struct kernel_stat`, `irq_cpustat_t`).
//!
//! The programs copy `kstat.irqs_sum` and `kstat.softirqs[]` in one read when the addresses
//! given here are 8 bytes apart (as in `struct kernel_stat` of 6.1, 6.12 and 7.2), in two
//! otherwise.
//!
//! Per-CPU symbols are offsets into the per-CPU area on kernels up to 6.14 (kallsyms type `A`)
//! and addresses of the boot copy from 6.15 (`D`/`B`); in both, the variable of CPU n is at the
//! symbol plus `__per_cpu_offset[n]`, which is what the programs compute.
use damon_common::{
    OFFSET_UNKNOWN,
    disturb::{
        GLOBAL_DISTURB_ON, GLOBAL_IRQ_STAT_N, GLOBAL_IRQ_STAT_WORDS, GLOBAL_KSTAT_IRQS_SUM,
        GLOBAL_KSTAT_SOFTIRQS, GLOBAL_KSTAT_SOFTIRQS_N, GLOBAL_PER_CPU_OFFSET_SYM,
        GLOBAL_TASK_NIVCSW_OFF, GLOBAL_TASK_NVCSW_OFF, MAX_WORDS,
    },
};

use crate::{capture::DisturbanceStatus, probe::facts::btf::Btf, trace::ModeConfig};

/// The globals the programs read the counters through, and what the capture says of them.
pub(super) struct Counters {
    pub globals: Vec<(&'static str, u32)>,
    pub globals64: Vec<(&'static str, u64)>,
    pub status: DisturbanceStatus,
}

impl Counters {
    /// Appends the globals to the loader's lists; the capture's status remains.
    pub(super) fn into_globals(
        self,
        globals: &mut Vec<(&'static str, u32)>,
        globals64: &mut Vec<(&'static str, u64)>,
    ) -> DisturbanceStatus {
        globals.extend(self.globals);
        globals64.extend(self.globals64);
        self.status
    }
}

/// The counters for a session in `mode`; off, with the reason, unless asked (`--disturbance`)
/// or where a counter is missing. In kernel mode the programs count the disturbed calls per
/// bucket instead of writing them in records.
pub(super) fn counters(mode: ModeConfig, btf: &Result<Btf, String>) -> Counters {
    let found = if !mode.disturbance {
        Err(NOT_ASKED.to_owned())
    } else {
        btf.as_ref().map_err(Clone::clone).and_then(|b| {
            find(b, &|name| {
                crate::probe::facts::folio_node::symbol_address(name, PER_CPU)
            })
        })
    };
    match found {
        Ok(c) => c,
        Err(why) => Counters {
            globals: vec![(GLOBAL_DISTURB_ON, 0)],
            globals64: Vec::new(),
            status: DisturbanceStatus {
                measured: false,
                why_not: Some(why),
                hardirq_sources: Vec::new(),
                breakdown: false,
                irq_time_missing: None,
            },
        },
    }
}

/// Whether `--disturbance` would measure on this kernel, and if not why (`doctor`).
pub fn available() -> DisturbanceStatus {
    let asked = ModeConfig {
        disturbance: true,
        ..ModeConfig::default()
    };
    counters(asked, &Btf::from_sys_fs()).status
}

/// Why a session without `--disturbance` did not measure it.
pub const NOT_ASKED: &str = "not asked for: record with --disturbance to tell clean calls";

/// Kallsyms types of per-CPU and plain data symbols.
const PER_CPU: &[&str] = &["A", "D", "d", "B", "b"];

/// The counters from `btf` and the symbol addresses `sym` gives.
fn find(btf: &Btf, sym: &dyn Fn(&str) -> Result<u64, String>) -> Result<Counters, String> {
    let nvcsw = btf.int_member_offset("task_struct", "nvcsw", 8)?;
    let nivcsw = btf.int_member_offset("task_struct", "nivcsw", 8)?;
    let per_cpu_offset = sym("__per_cpu_offset")?;
    let kstat = sym("kstat")?;
    let irqs_sum = btf.int_member_offset("kernel_stat", "irqs_sum", 8)?;
    let (softirqs, nr_softirqs) = btf.int_array_member("kernel_stat", "softirqs", 4)?;
    if nr_softirqs > MAX_WORDS {
        return Err(format!(
            "kernel_stat.softirqs has {nr_softirqs} counts, more than the {MAX_WORDS} read"
        ));
    }
    let mut sources = vec!["kstat.irqs_sum".to_owned()];
    let mut globals64 = vec![
        (GLOBAL_PER_CPU_OFFSET_SYM, per_cpu_offset),
        (GLOBAL_KSTAT_IRQS_SUM, kstat + u64::from(irqs_sum)),
        (GLOBAL_KSTAT_SOFTIRQS, kstat + u64::from(softirqs)),
    ];
    let mut irq_stat_n = 0;
    // x86's system vectors (local timer, IPIs, NMIs...) are counted in `irq_stat`, not in
    // `kstat.irqs_sum`; another architecture may have no such variable.
    if let Ok(irq_stat) = sym("irq_stat") {
        let (start, n) = btf.typedef_int_run("irq_cpustat_t", 4)?;
        if n > MAX_WORDS {
            return Err(format!(
                "irq_cpustat_t has {n} counts, more than the {MAX_WORDS} read"
            ));
        }
        globals64.push((GLOBAL_IRQ_STAT_WORDS, irq_stat + u64::from(start)));
        irq_stat_n = n;
        sources.push(format!("irq_stat ({n} counts)"));
    }
    Ok(Counters {
        globals: vec![
            (GLOBAL_DISTURB_ON, 1),
            (GLOBAL_TASK_NVCSW_OFF, nvcsw),
            (GLOBAL_TASK_NIVCSW_OFF, nivcsw),
            (GLOBAL_KSTAT_SOFTIRQS_N, nr_softirqs),
            (GLOBAL_IRQ_STAT_N, irq_stat_n),
        ],
        globals64,
        status: DisturbanceStatus {
            measured: true,
            why_not: None,
            hardirq_sources: sources,
            breakdown: false,
            irq_time_missing: None,
        },
    })
}

const _: () = assert!(OFFSET_UNKNOWN > MAX_WORDS);

#[cfg(test)]
mod tests {
    use super::*;

    /// On a host with BTF (every x86-64 kernel the tool supports has it), the layout is found
    /// and the counts fit; symbol addresses are made up here (the host may hide them).
    #[test]
    fn finds_the_counters_in_the_running_kernels_btf() {
        let Ok(btf) = Btf::from_sys_fs() else {
            return;
        };
        let c = find(&btf, &|name| Ok(0x1000 + name.len() as u64)).expect("found");
        assert!(c.status.measured);
        let g: std::collections::HashMap<_, _> = c.globals.iter().copied().collect();
        assert_eq!(g[GLOBAL_DISTURB_ON], 1);
        assert_eq!(g[GLOBAL_TASK_NIVCSW_OFF], g[GLOBAL_TASK_NVCSW_OFF] + 8);
        // NR_SOFTIRQS has been 10 since 2.6.
        assert_eq!(g[GLOBAL_KSTAT_SOFTIRQS_N], 10);
        // `softirqs[]` follows `irqs_sum`: the programs copy both in one read.
        let g64: std::collections::HashMap<_, _> = c.globals64.iter().copied().collect();
        assert_eq!(g64[GLOBAL_KSTAT_SOFTIRQS], g64[GLOBAL_KSTAT_IRQS_SUM] + 8);
        if cfg!(target_arch = "x86_64") {
            assert!(g[GLOBAL_IRQ_STAT_N] >= 4, "{:?}", c.status);
        }
    }

    #[test]
    fn a_missing_symbol_turns_the_counters_off_with_the_reason() {
        let Ok(btf) = Btf::from_sys_fs() else {
            return;
        };
        let err = find(&btf, &|name| Err(format!("no {name} in /proc/kallsyms")))
            .err()
            .expect("off");
        assert!(err.contains("__per_cpu_offset"), "{err}");
        let btf = Ok(btf);
        let unreadable = Err("no BTF at /sys/kernel/btf/vmlinux".to_owned());
        let kernel = ModeConfig {
            mode: crate::trace::Mode::Kernel,
            disturbance: true,
            ..ModeConfig::default()
        };
        // Kernel mode measures too (per bucket); here the BTF is what is missing.
        let off = counters(kernel, &unreadable);
        assert!(!off.status.measured);
        assert!(off.status.why_not.unwrap().contains("BTF"));
        assert_eq!(off.globals, [(GLOBAL_DISTURB_ON, 0)]);
        assert_eq!(
            counters(ModeConfig::default(), &btf)
                .status
                .why_not
                .as_deref(),
            Some(NOT_ASKED)
        );
    }
}
