//! `--time`: which of a call's times the statistics are computed on (issue 44). One small
//! module: the type and the one conversion from a record, so that every command's `--time`
//! can share it.
use clap::ValueEnum;
use damon_common::CallRecord;

/// The time a call's statistics use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum TimeBasis {
    /// The call's whole duration, entry to return.
    #[default]
    Wall,
    /// The wall time minus the time the task spent off the CPU and the time the CPU spent in
    /// interrupts during the call (needs `--disturbance`).
    OnCpu,
}

impl TimeBasis {
    /// The time of `r` on this basis; `None` when the record's breakdown is not known (such
    /// calls are set aside, and counted).
    pub fn of(self, r: &CallRecord) -> Option<u64> {
        match self {
            TimeBasis::Wall => Some(r.duration_ns),
            TimeBasis::OnCpu => r.breakdown().map(|b| b.on_cpu_ns),
        }
    }

    /// How screens and tables name it.
    pub fn label(self) -> &'static str {
        match self {
            TimeBasis::Wall => "wall time",
            TimeBasis::OnCpu => "on-CPU time",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use damon_common::breakdown::{SATURATED_NS, UNKNOWN_NS};

    #[test]
    fn on_cpu_is_wall_minus_off_cpu_and_interrupts_and_unknown_is_none() {
        let r = CallRecord {
            duration_ns: 10_000,
            off_cpu_ns: 6_000,
            irq_ns: 1_000,
            ..CallRecord::default()
        };
        assert_eq!(TimeBasis::Wall.of(&r), Some(10_000));
        assert_eq!(TimeBasis::OnCpu.of(&r), Some(3_000));
        for (off, irq) in [(UNKNOWN_NS, 0), (0, UNKNOWN_NS), (SATURATED_NS, 0)] {
            let r = CallRecord {
                off_cpu_ns: off,
                irq_ns: irq,
                ..r
            };
            assert_eq!(TimeBasis::OnCpu.of(&r), None, "{off} {irq}");
            assert_eq!(TimeBasis::Wall.of(&r), Some(10_000));
        }
    }
}
