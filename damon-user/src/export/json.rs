//! `--format json`: the whole capture as one JSON object, streamed record by record so a
//! capture of millions of calls never sits in memory twice.
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

impl Exporter for Json {
    fn export(&self, c: &Capture, out: &mut dyn Write) -> anyhow::Result<()> {
        out.write_all(b"{\"meta\":")?;
        serde_json::to_writer(&mut *out, &c.meta)?;
        out.write_all(b",\"summary\":")?;
        serde_json::to_writer(&mut *out, &c.summary)?;
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
