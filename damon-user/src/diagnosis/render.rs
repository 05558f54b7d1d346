//! The diagnosis as `doctor` prints it: a table of checks and functions with the verdict, or
//! one JSON object.
use super::{Diagnosis, Level};
use crate::probe::kernel::SymbolPresence;

/// The text report: each check with its remedy, each function's attach results, the verdict.
pub fn render_text(d: &Diagnosis) -> String {
    use std::fmt::Write as _;
    let mut out = format!("damon-trace doctor — kernel {}\n", d.kernel_release);
    for c in &d.checks {
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

/// The JSON report (pretty-printed, with a final newline).
pub fn render_json(d: &Diagnosis) -> serde_json::Result<String> {
    crate::output::json_document(d)
}
