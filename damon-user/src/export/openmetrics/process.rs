//! The tool's own cost: its CPU time and memory (named as Prometheus client libraries name
//! them) and the probe floor each attach method and trace mode adds to every call.
use std::fmt::Write as _;

use super::{Kind, Text, escape};
use crate::capture::Clock;

/// The probe floor of one attach method and trace mode: the median duration of an empty
/// function, which every latency of that kind includes.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeFloor {
    /// The attach method, as `Attach::as_str` names it.
    pub attach: crate::trace::Attach,
    /// `stream` or `kernel`.
    pub mode: crate::capture::Mode,
    pub seconds: f64,
}

/// What the tool costs; each family is rendered when set (`serve` reads `/proc/self`; an
/// export of a capture has only the calibration's floors).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessMetrics {
    /// User plus system CPU time of the tool: `process_cpu_seconds_total`.
    pub cpu_seconds: Option<f64>,
    /// Resident memory of the tool: `process_resident_memory_bytes`.
    pub resident_memory_bytes: Option<u64>,
    /// `damon_trace_probe_floor_seconds{attach,mode}`, from the calibration.
    pub probe_floors: Vec<ProbeFloor>,
}

impl ProcessMetrics {
    /// The floors of a calibration that measured them (failed ones are left out).
    pub fn floors_from(c: &crate::stats::calibration::Calibration) -> Vec<ProbeFloor> {
        c.floors
            .iter()
            .filter_map(|f| {
                Some(ProbeFloor {
                    attach: f.attach,
                    mode: f.mode,
                    seconds: f.floor.as_ref()?.median_ns / 1e9,
                })
            })
            .collect()
    }
}

const FLOOR_HELP: &str = "What the probe adds to every traced call: the median duration of an \
                          empty function, by attach method and trace mode (from the \
                          calibration).";

pub(super) fn render(t: &mut Text, p: &ProcessMetrics) {
    if let Some(cpu) = p.cpu_seconds {
        t.family(
            "process_cpu_seconds",
            Kind::Counter,
            Some("seconds"),
            "Total user and system CPU time spent in seconds.",
        );
        let _ = writeln!(t.out, "process_cpu_seconds_total {cpu}");
    }
    if let Some(rss) = p.resident_memory_bytes {
        t.family(
            "process_resident_memory_bytes",
            Kind::Gauge,
            Some("bytes"),
            "Resident memory size in bytes.",
        );
        let _ = writeln!(t.out, "process_resident_memory_bytes {rss}");
    }
    if !p.probe_floors.is_empty() {
        let (name, unit, what) = t.timed("damon_trace_probe_floor");
        let help = format!("{FLOOR_HELP} In {what}.");
        t.family(&name, Kind::Gauge, Some(unit), &help);
        for f in &p.probe_floors {
            // Kept in seconds; under the instruction clock each "second" is 1e9 instructions.
            let value = match t.clock {
                Clock::Wall => f.seconds.to_string(),
                Clock::Instructions => format!("{}", (f.seconds * 1e9).round()),
            };
            let _ = writeln!(
                t.out,
                "{name}{{attach=\"{}\",mode=\"{}\"}} {value}",
                escape(f.attach.as_str()),
                escape(f.mode.as_str()),
            );
        }
    }
}
