//! `--format csv-buckets`: the range table of every function, one line per row.
//!
//! Each row also carries its function's accounting (`calls,records,dropped,in_flight`: the
//! kernel's totals, `calls == records + dropped + in_flight`), so a spreadsheet sees how much
//! the table leaves out. A function that was called but has no record in range (all dropped,
//! or filtered out) gets one row with empty bounds and count 0.
use std::io::Write;

use super::Exporter;
use crate::{
    analysis::ReportOptions,
    capture::Capture,
    error::UsageError,
    stats::buckets::{BucketGrid, BucketRow},
};

pub struct Buckets(pub ReportOptions);

impl Exporter for Buckets {
    fn export(&self, c: &Capture, out: &mut dyn Write) -> anyhow::Result<()> {
        // The bounds name their time basis: `lo_on_cpu_ns` under `--time on-cpu`.
        let basis = match self.0.time {
            crate::analysis::TimeBasis::Wall => "",
            crate::analysis::TimeBasis::OnCpu => "on_cpu_",
        };
        writeln!(
            out,
            "function,lo_{basis}ns,hi_{basis}ns,count,percent,calls,records,dropped,in_flight"
        )?;
        if c.is_kernel_mode() {
            return kernel_rows(c, &self.0, out);
        }
        let selected = crate::analysis::select(c, &self.0);
        for status in &c.meta.functions {
            if !self.0.functions.is_empty() && !self.0.functions.contains(&status.name) {
                continue;
            }
            let records = selected.get(&status.id).map_or(0, |s| s.count);
            let k = crate::analysis::counters(c, status.id, records);
            let accounting = format!("{},{records},{},{}", k.made(), k.dropped(), k.in_flight);
            let Some(sel) = selected.get(&status.id).filter(|s| !s.durations.is_empty()) else {
                if k.made() > 0 {
                    writeln!(out, "{},,,0,0.0000,{accounting}", status.name)?;
                }
                continue;
            };
            let grid = BucketGrid::plan(self.0.bucket_ns, self.0.max_ns, &[&sel.durations])
                .map_err(|e| UsageError(e.to_string()))?;
            let rows = grid.count(&sel.durations);
            write_rows(
                out,
                &status.name,
                &rows,
                sel.durations.len() as u64,
                &accounting,
            )?;
        }
        Ok(())
    }
}

/// A kernel-mode capture's rows, from its final histograms (`records` = calls counted in
/// them); rows past the kernel's linear buckets are whole log2 buckets.
fn kernel_rows(c: &Capture, opts: &ReportOptions, out: &mut dyn Write) -> anyhow::Result<()> {
    use crate::stats::kernel_hist;
    let end = c.final_hists();
    for status in &c.meta.functions {
        if !opts.functions.is_empty() && !opts.functions.contains(&status.name) {
            continue;
        }
        let Some((k, h)) = end.as_ref().and_then(|e| e.functions.get(&status.id)) else {
            continue;
        };
        let accounting = format!("{},{},{},{}", k.made(), k.emitted, k.dropped(), k.in_flight);
        let total: u64 = h.buckets.iter().sum();
        if total == 0 {
            if k.made() > 0 {
                writeln!(out, "{},,,0,0.0000,{accounting}", status.name)?;
            }
            continue;
        }
        let grid = kernel_hist::plan_grid(opts.bucket_ns, opts.max_ns, &[h])
            .map_err(|e| UsageError(e.to_string()))?;
        let rows = kernel_hist::count_rows(&grid, h);
        write_rows(out, &status.name, &rows, total, &accounting)?;
    }
    Ok(())
}

/// One function's range rows, each with its share of `total` and the function's accounting.
fn write_rows(
    out: &mut dyn Write,
    name: &str,
    rows: &[BucketRow],
    total: u64,
    accounting: &str,
) -> anyhow::Result<()> {
    for row in rows {
        // An empty hi_ns is the open-ended last row.
        let hi = row.hi_ns.map(|h| h.to_string()).unwrap_or_default();
        writeln!(
            out,
            "{name},{},{hi},{},{:.4},{accounting}",
            row.lo_ns,
            row.count,
            row.count as f64 * 100.0 / total as f64
        )?;
    }
    Ok(())
}
