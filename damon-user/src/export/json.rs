//! `--format json`: the whole capture as one JSON object, streamed record by record so a
//! capture of millions of calls never sits in memory twice.
//!
//! `{"meta", "summary", "accounting", "records"}`: `accounting` has one entry per exported
//! function with the kernel's totals (`calls == records + dropped + in_flight`), so a reader
//! of `records` knows how many calls are not in it and why.
use std::io::Write;

use serde::Serialize;

use super::{Exporter, keeps};
use crate::{capture::Capture, report::ReportOptions};

pub struct Json(pub ReportOptions);

#[derive(Serialize)]
struct Call<'a> {
    function: &'a str,
    cpu: u32,
    pid: u32,
    tid: u32,
    entry_ns: u64,
    duration_ns: u64,
    value: i64,
}

/// One function's accounting: `calls == records + dropped + in_flight`.
#[derive(Serialize)]
struct Accounting<'a> {
    function: &'a str,
    calls: u64,
    /// Records of the function in the capture (before `--cpu`/`--pid`).
    records: u64,
    dropped: u64,
    ring_full: u64,
    stamp_full: u64,
    too_deep: u64,
    in_flight: u64,
    orphan_exits: u64,
}

impl Exporter for Json {
    fn export(&self, c: &Capture, out: &mut dyn Write) -> anyhow::Result<()> {
        out.write_all(b"{\"meta\":")?;
        serde_json::to_writer(&mut *out, &c.meta)?;
        out.write_all(b",\"summary\":")?;
        serde_json::to_writer(&mut *out, &c.summary)?;
        let mut counts = std::collections::BTreeMap::<u32, u64>::new();
        for r in &c.records {
            *counts.entry(r.func).or_default() += 1;
        }
        let accounting: Vec<Accounting> = c
            .meta
            .functions
            .iter()
            .filter(|f| self.0.functions.is_empty() || self.0.functions.contains(&f.name))
            .map(|f| {
                let records = counts.get(&f.id).copied().unwrap_or(0);
                let k = crate::report::counters(c, f.id, records);
                Accounting {
                    function: &f.name,
                    calls: k.calls,
                    records,
                    dropped: k.dropped(),
                    ring_full: k.ring_full,
                    stamp_full: k.stamp_full,
                    too_deep: k.too_deep,
                    in_flight: k.in_flight,
                    orphan_exits: k.orphan_exits,
                }
            })
            .collect();
        out.write_all(b",\"accounting\":")?;
        serde_json::to_writer(&mut *out, &accounting)?;
        out.write_all(b",\"records\":[")?;
        let mut first = true;
        for r in c.records.iter().filter(|r| keeps(c, &self.0, r)) {
            if !first {
                out.write_all(b",")?;
            }
            first = false;
            let name = c
                .meta
                .functions
                .iter()
                .find(|f| f.id == r.func)
                .map_or("", |f| f.name.as_str());
            serde_json::to_writer(
                &mut *out,
                &Call {
                    function: name,
                    cpu: r.cpu,
                    pid: r.pid,
                    tid: r.tid,
                    entry_ns: r.entry_ns,
                    duration_ns: r.duration_ns,
                    value: r.value,
                },
            )?;
        }
        out.write_all(b"]}\n")?;
        Ok(())
    }
}
