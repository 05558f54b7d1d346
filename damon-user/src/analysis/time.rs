//! Which time the statistics are over (`--time wall|on-cpu`), decided in one place: under
//! `on-cpu` every record's duration becomes its on-CPU time (wall time minus the time off the
//! CPU and in interrupts, `damon_common::breakdown`) before any view sees it, so percentiles,
//! range tables, per-interval cost, heatmaps and compare's tests all follow. Records whose
//! breakdown is unknown are set aside: counted ([`set_aside`]), never timed.
use std::borrow::Cow;

use damon_common::CallRecord;
use serde::Serialize;

use super::ReportOptions;
use crate::{
    capture::{Capture, DisturbanceStatus, Meta},
    error::UsageError,
};

/// The time a duration is (`--time`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimeBasis {
    /// From entry to return, whatever happened in between.
    #[default]
    Wall,
    /// Wall time minus the time off the CPU and in interrupts: the function's own work.
    OnCpu,
}

impl TimeBasis {
    /// The unit as headings show it: `ns`, or `ns on-CPU`.
    pub fn label(self, unit: &str) -> String {
        match self {
            TimeBasis::Wall => unit.to_owned(),
            TimeBasis::OnCpu => format!("{unit} on-CPU"),
        }
    }
}

/// Why `meta`'s capture cannot be looked at on-CPU, with the remedy; `None`: it can.
pub fn not_available(meta: &Meta) -> Option<String> {
    if meta.mode == crate::capture::Mode::Kernel {
        return Some(
            "the capture was recorded in kernel mode, whose histograms hold wall times only; \
             record it again in stream mode (the default) with --disturbance"
                .to_owned(),
        );
    }
    if DisturbanceStatus::breakdown(meta) {
        return None;
    }
    let why = match &meta.disturbance {
        Some(d) if !d.measured => format!(
            "it did not measure disturbance ({})",
            d.why_not.as_deref().unwrap_or("no reason recorded")
        ),
        Some(_) => "it was recorded by a damon-trace without the time breakdown".to_owned(),
        None => "it was recorded without --disturbance".to_owned(),
    };
    Some(format!(
        "--time on-cpu needs each call's time off the CPU and in interrupts, and this capture \
         has none: {why}; record it again with `record --disturbance` (stream mode) on this \
         version of damon-trace, or use --time wall"
    ))
}

/// The record as timed on-CPU: its duration is its on-CPU time and its breakdown is all
/// on-CPU (so doing it twice changes nothing). A record whose breakdown is unknown keeps it
/// unknown, so [`ReportOptions::keeps_record`] leaves it out, and gets a duration of 0: the
/// sums that take every call (time per DAMON interval) count it as a call without time
/// rather than add its wall time to on-CPU times.
pub fn on_cpu(r: &CallRecord) -> CallRecord {
    match r.breakdown() {
        Some(b) => CallRecord {
            duration_ns: b.on_cpu_ns,
            off_cpu_ns: 0,
            irq_ns: 0,
            ..*r
        },
        None => CallRecord {
            duration_ns: 0,
            ..*r
        },
    }
}

/// Whether a record has a duration under `time` (its breakdown is known, under on-CPU).
pub fn timed_record(time: TimeBasis, r: &CallRecord) -> bool {
    time == TimeBasis::Wall || r.breakdown().is_some()
}

/// The capture as the statistics see it under `opts.time`: itself under wall time; under
/// on-CPU a copy whose records are timed on-CPU ([`on_cpu`]), or an error naming the cause and
/// the remedy when the capture has no breakdown. `file` names the capture in the error.
pub fn timed<'c>(
    capture: &'c Capture,
    opts: &ReportOptions,
    file: Option<&str>,
) -> Result<Cow<'c, Capture>, UsageError> {
    if opts.time == TimeBasis::Wall {
        return Ok(Cow::Borrowed(capture));
    }
    if let Some(why) = not_available(&capture.meta) {
        return Err(UsageError(match file {
            Some(f) => format!("{f}: {why}"),
            None => why,
        }));
    }
    let mut c = capture.clone();
    for r in &mut c.records {
        *r = on_cpu(r);
    }
    for s in &mut c.slow_calls {
        s.call = on_cpu(&s.call);
    }
    Ok(Cow::Owned(c))
}

/// Of a function's records that `--cpu`/`--pid` select: how many have no duration under
/// `opts.time` (their breakdown is unknown), so are left out of every statistic. `None` under
/// wall time.
pub fn set_aside(capture: &Capture, func: u32, opts: &ReportOptions) -> Option<u64> {
    (opts.time == TimeBasis::OnCpu).then(|| {
        capture
            .records
            .iter()
            .filter(|r| r.func == func && opts.keeps(r.cpu, r.pid))
            .filter(|r| !timed_record(opts.time, r))
            .count() as u64
    })
}

/// What the on-CPU figures mean in this capture, for the notes of every format: where the
/// interrupt time is when the kernel did not account for it. `None` under wall time.
pub fn note(meta: &Meta, time: TimeBasis) -> Option<String> {
    if time == TimeBasis::Wall {
        return None;
    }
    let base = "times are on-CPU: each call's wall time minus its time off the CPU and in \
                interrupts; calls whose breakdown is unknown are set aside (counted per \
                function; in the time per DAMON interval they count as calls without time)";
    Some(
        match meta
            .disturbance
            .as_ref()
            .and_then(|d| d.irq_time_missing.as_deref())
        {
            Some(why) => format!(
                "{base}; interrupt time was not measured ({why}), so the on-CPU times include \
                 the interrupts that ran during the calls"
            ),
            None => base.to_owned(),
        },
    )
}

#[cfg(test)]
mod tests {
    use damon_common::breakdown::UNKNOWN_NS;

    use super::*;

    #[test]
    fn a_record_timed_on_cpu_twice_is_timed_once_and_an_unknown_one_has_no_time() {
        let r = CallRecord {
            duration_ns: 1000,
            off_cpu_ns: 600,
            irq_ns: 150,
            ..CallRecord::default()
        };
        let once = on_cpu(&r);
        assert_eq!(
            (once.duration_ns, once.off_cpu_ns, once.irq_ns),
            (250, 0, 0)
        );
        assert_eq!(on_cpu(&once), once);
        let unknown = CallRecord {
            irq_ns: UNKNOWN_NS,
            ..r
        };
        let t = on_cpu(&unknown);
        assert_eq!((t.duration_ns, t.breakdown()), (0, None));
        assert!(!timed_record(TimeBasis::OnCpu, &t));
        assert!(timed_record(TimeBasis::Wall, &t));
    }
}
