//! The diagnosis as `doctor` prints it: a table of checks and functions with the verdict, or
//! one JSON object.
use std::fmt::Write as _;

use super::{Check, Diagnosis, Leftovers, Level};
use crate::probe::facts::kernel::SymbolPresence;

/// The text report: each check with its remedy, each function's attach results, the verdict.
pub fn render_text(d: &Diagnosis) -> String {
    let mut out = format!("damon-trace doctor — kernel {}\n", d.kernel_release);
    write_checks(&mut out, &d.checks);
    let _ = writeln!(out, "functions:");
    for f in &d.functions {
        let sym = match &f.kallsyms {
            SymbolPresence::Present => "yes".to_owned(),
            SymbolPresence::Absent => "no".to_owned(),
            SymbolPresence::ClonesOnly(c) => format!("inlined ({})", c.join(",")),
        };
        let ftrace = f.ftrace.map_or("?", |b| if b { "yes" } else { "no" });
        let _ = writeln!(
            out,
            "  {:<27} kallsyms {sym}  btf {}  ftrace {ftrace}",
            f.name,
            if f.btf { "yes" } else { "no" }
        );
        let _ = writeln!(out, "  {:<27} fentry/fexit: {}", "", f.fentry);
        let _ = writeln!(out, "  {:<27} kprobe/kretprobe: {}", "", f.kprobe);
    }
    let _ = writeln!(out, "verdict: {}", d.verdict);
    out
}

/// `doctor --leftovers` as text: its one check, as the full report shows it.
pub fn render_leftovers_text(l: &Leftovers) -> String {
    let mut out = format!(
        "damon-trace doctor --leftovers — kernel {}\n",
        l.kernel_release
    );
    write_checks(&mut out, &l.checks);
    out
}

/// Each check on a line (`ok`, `warn` or `FAIL`, its name, what it found), its remedy below.
fn write_checks(out: &mut String, checks: &[Check]) {
    for c in checks {
        let tag = match c.level {
            Level::Ok => "ok  ",
            Level::Warn => "warn",
            Level::Fail => "FAIL",
        };
        let _ = writeln!(out, "  {tag}  {:<11} {}", c.name, c.found);
        if let Some(r) = &c.remedy {
            let _ = writeln!(out, "        {:<11} → {r}", "");
        }
    }
}

/// The JSON report (pretty-printed, with a final newline).
pub fn render_json<T: serde::Serialize>(d: &T) -> serde_json::Result<String> {
    crate::output::json_document(d)
}
