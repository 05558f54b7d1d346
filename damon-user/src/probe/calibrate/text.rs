//! A calibration as text: corrected values formatted, floors described, and the table
//! `damon-trace calibrate` prints (the numbers are `stats::calibration`'s).
use std::fmt::Write as _;

use crate::{
    capture::Clock,
    stats::calibration::{Calibration, CalibrationStatus, Floor},
};

/// A corrected value for a table: whole ns when the floor is exact, one decimal otherwise;
/// the sign kept (`-3`).
pub fn format_ns(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// `fentry/stream floor 812 ± 40 ns (80000 calls of 4 empty functions)`, in `unit` (`ns`, or
/// `insn` under the instruction clock).
pub fn describe_floor(f: &Floor, unit: &str) -> String {
    match (&f.floor, &f.error) {
        (Some(d), _) => format!(
            "{}/{} floor {} ± {} {unit} ({} calls of {}{})",
            f.attach,
            f.mode,
            format_ns(d.median_ns),
            format_ns(f.uncertainty_ns.round()),
            d.count,
            match f.functions.len() {
                0 | 1 => "an empty function".to_owned(),
                n => format!("{n} empty functions"),
            },
            if f.untimed > 0 {
                format!(", {} not timed", f.untimed)
            } else {
                String::new()
            }
        ),
        (None, Some(e)) => format!("{}/{} floor not measured: {e}", f.attach, f.mode),
        (None, None) => format!("{}/{} floor not measured", f.attach, f.mode),
    }
}

/// What `damon-trace calibrate` prints: per floor its distribution and the held-out check,
/// in the unit of `clock` (named on its own line first unless it is the wall clock).
pub fn render_text(c: &Calibration, clock: Clock) -> String {
    let mut out = String::new();
    if clock != Clock::Wall {
        let _ = writeln!(out, "clock: {}", clock.describe());
    }
    // Floors that failed say why on their own line; the detail is for when there are none.
    if c.status != CalibrationStatus::Ok && c.floors.is_empty() {
        let _ = writeln!(
            out,
            "no probe floor measured{}",
            c.detail
                .as_ref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        );
    }
    // The widest `attach/mode` label sets the first column (`kprobe-session/kernel`).
    let w = c
        .floors
        .iter()
        .map(|f| f.attach.as_str().len() + 1 + f.mode.as_str().len())
        .fold(14, usize::max);
    header(&mut out, c, w);
    for f in &c.floors {
        floor_lines(&mut out, c, f, clock.unit(), w);
    }
    let _ = writeln!(
        out,
        "{}, timing {} (pooled) with the session's own programs; corrected = raw − median; \
         spread = (p95 − p5)/2 (+ half a bucket in kernel mode); betw.fn = 95 % prediction \
         half-width of a new function's median from the pooled ones'; ± = √(spread² + betw.fn²); \
         the held-out function's corrected median should be within ± of 0",
        clock.unit(),
        c.functions.join(", ")
    );
    out
}

/// The column heads, naming the held-out function.
fn header(out: &mut String, c: &Calibration, w: usize) {
    let _ = writeln!(
        out,
        "{:<w$} {:>7} {:>8} {:>8} {:>8} {:>8} {:>7} {:>7} {:>7} {:>7}  held-out {}",
        "probe floor",
        "calls",
        "p5",
        "median",
        "p95",
        "mean",
        "spread",
        "betw.fn",
        "±",
        "took",
        c.floors
            .iter()
            .find_map(|f| f.held_out.as_ref())
            .map_or("(none)", |h| h.function.as_str())
    );
}

/// One floor's row, its functions' medians and untimed calls; or why it was not measured.
fn floor_lines(out: &mut String, c: &Calibration, f: &Floor, unit: &str, w: usize) {
    let label = format!("{}/{}", f.attach, f.mode);
    let took = format!("{:.1} s", f.took_ns as f64 / 1e9);
    let Some(d) = &f.floor else {
        let _ = writeln!(
            out,
            "{label:<w$} not measured: {}",
            f.error.as_deref().unwrap_or("unknown reason")
        );
        return;
    };
    let held = f.held_out.as_ref().map_or_else(
        || "-".to_owned(),
        |h| {
            format!(
                "{:+.1} ± {} {unit} (raw median {})",
                h.corrected_median_ns,
                format_ns(h.uncertainty_ns.round()),
                format_ns(h.median_ns)
            )
        },
    );
    let _ = writeln!(
        out,
        "{label:<w$} {:>7} {:>8} {:>8} {:>8} {:>8.1} {:>7} {:>7} {:>7} {took:>7}  {held}",
        d.count,
        format_ns(d.p5_ns),
        format_ns(d.median_ns),
        format_ns(d.p95_ns),
        d.mean_ns,
        format_ns(d.spread_ns.round()),
        format_ns(f.between_functions_ns.round()),
        format_ns(f.uncertainty_ns.round()),
    );
    if !f.functions.is_empty() {
        let per: Vec<String> = f
            .functions
            .iter()
            .map(|m| format!("{} {}", m.function, format_ns(m.median_ns)))
            .collect();
        let _ = writeln!(out, "{:<w$} medians: {}", "", per.join(", "));
    }
    if f.untimed > 0 {
        let _ = writeln!(
            out,
            "{label:<w$} warning: {} calls of {} were not timed (dropped or in flight)",
            f.untimed,
            c.functions.join(", ")
        );
    }
}
