//! `--format csv`: one line per call, in capture order; `--format csv-intervals`: one line
//! per DAMON aggregation interval and DAMON function.
use std::io::Write;

use super::{Exporter, keeps};
use crate::{
    analysis::ReportOptions,
    capture::{Capture, DisturbanceStatus},
};

pub struct Calls(pub ReportOptions);

impl Exporter for Calls {
    fn export(&self, c: &Capture, out: &mut dyn Write) -> anyhow::Result<()> {
        if c.is_kernel_mode() {
            return Err(crate::error::UsageError(
                "--format csv writes one line per call, and this capture was recorded with \
                 --mode kernel (histograms, no per-call records): use --format csv-buckets, \
                 json or openmetrics"
                    .to_owned(),
            )
            .into());
        }
        // Captures that measured disturbance get its four columns (empty where not known).
        let measured = DisturbanceStatus::measured(&c.meta);
        let mut extra = if measured {
            ",slept,preempted,hardirqs,softirqs".to_owned()
        } else {
            String::new()
        };
        // And those with the time breakdown its two columns (empty where not known).
        let breakdown = DisturbanceStatus::breakdown(&c.meta);
        if breakdown {
            let unit = c.meta.clock.unit();
            extra.push_str(&format!(",off_cpu_{unit},irq_{unit}"));
        }
        // The duration's column names its unit: `duration_insn` under the instruction clock.
        writeln!(
            out,
            "function,cpu,pid,tid,entry_ns,duration_{},value{extra}",
            c.meta.clock.unit()
        )?;
        let names: std::collections::BTreeMap<u32, String> = c
            .meta
            .functions
            .iter()
            .map(|f| (f.id, f.name.clone()))
            .collect();
        for r in c.records.iter().filter(|r| keeps(c, &self.0, r)) {
            let name = names
                .get(&r.func)
                .map_or_else(|| format!("func{}", r.func), Clone::clone);
            write!(
                out,
                "{name},{},{},{},{},{},{}",
                r.cpu, r.pid, r.tid, r.entry_ns, r.duration_ns, r.value
            )?;
            if measured {
                for v in super::json::known(r) {
                    write!(out, ",{}", v.map_or(String::new(), |v| v.to_string()))?;
                }
            }
            if breakdown {
                for v in [r.off_cpu_ns, r.irq_ns].map(super::json::known_ns) {
                    write!(out, ",{}", v.map_or(String::new(), |v| v.to_string()))?;
                }
            }
            writeln!(out)?;
        }
        Ok(())
    }
}

/// Per-interval cost of the DAMON functions: `function,interval,calls,ns`, intervals numbered
/// from 1 in time order (kdamond after kdamond), as `report` counts them.
pub struct Intervals(pub ReportOptions);

impl Exporter for Intervals {
    fn export(&self, c: &Capture, out: &mut dyn Write) -> anyhow::Result<()> {
        if c.is_kernel_mode() || c.meta.intervals.is_none() {
            return Err(crate::error::UsageError(
                "--format csv-intervals needs per-call records and the aggregation-interval \
                 boundaries, and this capture lacks them (recorded with --mode kernel, or by a \
                 version that did not hook damon:damon_aggregated): record again in stream \
                 mode with DAMON running"
                    .to_owned(),
            )
            .into());
        }
        // The time column names its basis: `on_cpu_ns` under `--time on-cpu`.
        let basis = match self.0.time {
            crate::analysis::TimeBasis::Wall => "",
            crate::analysis::TimeBasis::OnCpu => "on_cpu_",
        };
        writeln!(out, "function,interval,calls,{basis}ns")?;
        for (name, p) in crate::analysis::damon::per_interval_of(c) {
            if !self.0.functions.is_empty() && !self.0.functions.contains(&name) {
                continue;
            }
            let rows = p.per_interval_calls.iter().zip(&p.per_interval_totals);
            for (i, (calls, ns)) in rows.enumerate() {
                writeln!(out, "{name},{},{calls},{ns}", i + 1)?;
            }
        }
        Ok(())
    }
}
