//! `--format csv`: one line per call, in capture order.
use std::io::Write;

use super::{Exporter, keeps};
use crate::{capture::Capture, report::ReportOptions};

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
        writeln!(out, "function,cpu,pid,tid,entry_ns,duration_ns,value")?;
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
            writeln!(
                out,
                "{name},{},{},{},{},{},{}",
                r.cpu, r.pid, r.tid, r.entry_ns, r.duration_ns, r.value
            )?;
        }
        Ok(())
    }
}
