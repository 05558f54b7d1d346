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
    breakdown::{
        GLOBAL_BREAKDOWN_ON, GLOBAL_CPU_IRQTIME_TOTAL, GLOBAL_IRQ_CLOCK_ON, GLOBAL_TASK_PID_OFF,
        IRQ_CLOCK_TRACEPOINTS,
    },
    disturb::{
        GLOBAL_DISTURB_ON, GLOBAL_IRQ_STAT_N, GLOBAL_IRQ_STAT_WORDS, GLOBAL_KSTAT_IRQS_SUM,
        GLOBAL_KSTAT_SOFTIRQS, GLOBAL_KSTAT_SOFTIRQS_N, GLOBAL_PER_CPU_OFFSET_SYM,
        GLOBAL_TASK_NIVCSW_OFF, GLOBAL_TASK_NVCSW_OFF, MAX_WORDS,
    },
};

use aya::{
    Ebpf,
    programs::{BtfTracePoint, tp_btf::BtfTracePointLinkId},
};

use crate::{
    capture::DisturbanceStatus,
    probe::{
        facts::btf::Btf,
        loader::{attach::describe_error, programs::CLOCKS_PROGRAM},
    },
    trace::ModeConfig,
};

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
        let sym = |name: &str| crate::probe::facts::folio_node::symbol_address(name, PER_CPU);
        btf.as_ref().map_err(Clone::clone).and_then(|b| {
            let mut c = find(b, &sym)?;
            if mode.mode.streams() {
                breakdown(&mut c, b, &sym);
            }
            Ok(c)
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
                irq_clock: None,
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
            irq_clock: None,
        },
    })
}

/// The time breakdown's globals (`damon_common::breakdown`), for a session whose records carry
/// the disturbance counts: `task_struct.pid`'s offset, and the per-CPU address of
/// `cpu_irqtime.total` when the kernel has IRQ time accounting (else the interrupt clock stands
/// still and the status says why). Without the pid offset there is no breakdown.
fn breakdown(c: &mut Counters, btf: &Btf, sym: &dyn Fn(&str) -> Result<u64, String>) {
    let Ok(pid) = btf.int_member_offset("task_struct", "pid", 4) else {
        return;
    };
    let irq_total = sym("cpu_irqtime").and_then(|base| {
        let total = btf
            .int_member_offset("irqtime", "total", 8)
            .map_err(|e| format!("cpu_irqtime is in /proc/kallsyms, but {e}"))?;
        Ok(base + u64::from(total))
    });
    let irq_total = match irq_total {
        Ok(addr) => addr,
        Err(why) => {
            // Our own clock from the interrupt tracepoints instead, if they attach
            // ([`attach_clocks`]); if they do not, this is why there is no interrupt time.
            c.status.irq_time_missing = Some(irq_time_missing(&why));
            c.globals.push((GLOBAL_IRQ_CLOCK_ON, 1));
            0
        }
    };
    c.globals.push((GLOBAL_BREAKDOWN_ON, 1));
    c.globals.push((GLOBAL_TASK_PID_OFF, pid));
    c.globals64.push((GLOBAL_CPU_IRQTIME_TOTAL, irq_total));
    c.status.breakdown = true;
}

/// The status's words for a kernel without IRQ time accounting (`why`: what was not found).
fn irq_time_missing(why: &str) -> String {
    format!(
        "this kernel does not account interrupt time (CONFIG_IRQ_TIME_ACCOUNTING: {why}): the \
         time calls spent in hard and soft interrupts is counted in their on-CPU time"
    )
}

/// Loads and attaches the `sched_switch` program that keeps the task clocks, when `status`
/// has the breakdown; if it cannot, the breakdown is off (the records' clocks would not
/// move), with a warning that says why. On a kernel without IRQ time accounting it then
/// attaches the interrupt clock's programs ([`attach_irq_clock`]).
pub(super) fn attach_clocks(
    bpf: &mut Ebpf,
    btf: Option<&aya::Btf>,
    status: &mut DisturbanceStatus,
) {
    if !status.breakdown {
        return;
    }
    let attached = btf
        .ok_or_else(|| "no kernel BTF".to_owned())
        .and_then(|btf| attach_tp_btf(bpf, btf, CLOCKS_PROGRAM, "sched_switch").map(|_| ()));
    if let Err(why) = attached {
        status.breakdown = false;
        status.irq_time_missing = None;
        eprintln!(
            "damon-trace: warning: no time breakdown (off-CPU, interrupt, on-CPU time): the \
             sched_switch program ({CLOCKS_PROGRAM}, tp_btf) could not be attached: {why}"
        );
        return;
    }
    if let (Some(btf), Some(missing)) = (btf, status.irq_time_missing.clone()) {
        match attach_irq_clock(bpf, btf) {
            Ok(from) => {
                status.irq_time_missing = None;
                status.irq_clock = Some(from);
            }
            Err(why) => {
                status.irq_time_missing = Some(format!(
                    "{missing}; damon-trace's own interrupt clock: {why}"
                ));
            }
        }
    }
}

/// Loads program `name` against the BTF tracepoint `tracepoint` and attaches it.
fn attach_tp_btf(
    bpf: &mut Ebpf,
    btf: &aya::Btf,
    name: &str,
    tracepoint: &str,
) -> Result<BtfTracePointLinkId, String> {
    let prog: &mut BtfTracePoint = bpf
        .program_mut(name)
        .ok_or("the eBPF object has no such program")?
        .try_into()
        .map_err(|e| format!("{e}"))?;
    prog.load(tracepoint, btf).map_err(|e| describe_error(&e))?;
    prog.attach().map_err(|e| describe_error(&e))
}

/// The interrupt clock (`damon_common::breakdown::IrqClock`) for a kernel that does not
/// account interrupt time: every exit program, then every entry program
/// ([`IRQ_CLOCK_TRACEPOINTS`]'s order). Returns what the clock is made from, in words; if a
/// required one fails, the others are detached (the clock stands still) and the error says
/// which and why.
fn attach_irq_clock(bpf: &mut Ebpf, btf: &aya::Btf) -> Result<String, String> {
    let mut attached: Vec<(&str, &str, BtfTracePointLinkId)> = Vec::new();
    let mut skipped = Vec::new();
    for (name, tracepoint, _, required) in IRQ_CLOCK_TRACEPOINTS {
        // An entry only with its exit: a kind's flag set by an entry is cleared by its exit.
        if let Some(kind) = tracepoint.strip_suffix("_entry") {
            let exit = format!("{kind}_exit");
            if !attached.iter().any(|(_, tp, _)| *tp == exit) {
                continue;
            }
        }
        match attach_tp_btf(bpf, btf, name, tracepoint) {
            Ok(link) => attached.push((name, tracepoint, link)),
            Err(why) if !required => skipped.push(format!("{tracepoint} ({why})")),
            Err(why) => {
                for (name, _, link) in attached {
                    let prog: Option<&mut BtfTracePoint> =
                        bpf.program_mut(name).and_then(|p| p.try_into().ok());
                    if let Some(prog) = prog {
                        let _ = prog.detach(link);
                    }
                }
                return Err(format!(
                    "the {tracepoint} tracepoint could not be attached: {why}"
                ));
            }
        }
    }
    let mut pairs: Vec<&str> = attached
        .iter()
        .filter_map(|(_, tp, _)| tp.strip_suffix("_entry"))
        .collect();
    pairs.sort_unstable();
    let mut words = format!(
        "measured by damon-trace, since the kernel does not account it: the time between the \
         entry and exit tracepoints of {} (handlers only, not the kernel's interrupt entry and \
         exit around them)",
        pairs.join(", ")
    );
    if !skipped.is_empty() {
        words.push_str(&format!("; not available: {}", skipped.join(", ")));
    }
    Ok(words)
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

    /// The breakdown needs `task_struct.pid` (every kernel has it); without `cpu_irqtime` in
    /// kallsyms, or with it but no `struct irqtime` in BTF, it has no interrupt time, and the
    /// status says why, naming the kernel option.
    #[test]
    fn the_breakdown_states_a_kernel_without_irq_time_accounting() {
        let Ok(btf) = Btf::from_sys_fs() else {
            return;
        };
        let made_up = |name: &str| Ok(0x1000 + name.len() as u64);
        let mut c = find(&btf, &made_up).expect("found");
        let no_irqtime = |name: &str| match name {
            "cpu_irqtime" => Err("no cpu_irqtime in /proc/kallsyms".to_owned()),
            _ => made_up(name),
        };
        breakdown(&mut c, &btf, &no_irqtime);
        assert!(c.status.breakdown);
        let why = c.status.irq_time_missing.clone().expect("stated");
        assert!(
            why.contains("CONFIG_IRQ_TIME_ACCOUNTING") && why.contains("no cpu_irqtime"),
            "{why}"
        );
        let g: std::collections::HashMap<_, _> = c.globals.iter().copied().collect();
        assert_eq!(g[GLOBAL_BREAKDOWN_ON], 1);
        // pid_t, after the task's state and stack at least.
        assert!(g[GLOBAL_TASK_PID_OFF] > 0);
        let g64: std::collections::HashMap<_, _> = c.globals64.iter().copied().collect();
        assert_eq!(g64[GLOBAL_CPU_IRQTIME_TOTAL], 0);
        // With the symbol: the BTF decides (the host's kernel may have no `struct irqtime`).
        let mut c = find(&btf, &made_up).expect("found");
        breakdown(&mut c, &btf, &made_up);
        let g64: std::collections::HashMap<_, _> = c.globals64.iter().copied().collect();
        match btf.int_member_offset("irqtime", "total", 8) {
            Ok(off) => {
                assert_eq!(
                    g64[GLOBAL_CPU_IRQTIME_TOTAL],
                    made_up("cpu_irqtime").unwrap() + u64::from(off)
                );
                assert_eq!(c.status.irq_time_missing, None);
            }
            Err(_) => {
                assert_eq!(g64[GLOBAL_CPU_IRQTIME_TOTAL], 0);
                let why = c.status.irq_time_missing.expect("stated");
                assert!(
                    why.contains("cpu_irqtime is in /proc/kallsyms, but"),
                    "{why}"
                );
            }
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
