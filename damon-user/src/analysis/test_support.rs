//! Captures and options the tests of the analysis and of the commands built on it share
//! (report, compare, export, heatmaps).
use std::collections::BTreeMap;

use damon_common::{CallRecord, disturb};

use super::ReportOptions;
use crate::capture::{
    AttachState, Capture, DisturbanceStatus, FunctionCounters, FunctionStatus, HistSnapshot, Meta,
    Summary,
};

/// 20 ns rows, nothing filtered: the options of the report and compare tests.
pub fn opts() -> ReportOptions {
    ReportOptions {
        bucket_ns: 20,
        ..Default::default()
    }
}

/// The first warning that contains `part` (the test fails without one).
pub fn warning<'a>(warnings: &'a [String], part: &str) -> &'a str {
    warnings
        .iter()
        .find(|w| w.contains(part))
        .unwrap_or_else(|| panic!("no warning with `{part}` in {warnings:?}"))
}

pub fn capture(summary: bool) -> Capture {
    let functions = vec![
        FunctionStatus {
            name: "damon_hot_score".into(),
            id: 0,
            attach: AttachState::Traced(crate::trace::Attach::Fentry),
            detail: None,
        },
        FunctionStatus {
            name: "damon_migrate_pages".into(),
            id: 2,
            attach: AttachState::Missing,
            detail: Some("not in /proc/kallsyms".into()),
        },
    ];
    let records = (1..=10)
        .map(|i| CallRecord {
            entry_ns: i,
            duration_ns: i * 10,
            value: 10 + i as i64,
            pid: 100 + (i % 2) as u32,
            tid: 1,
            cpu: (i % 3) as u32,
            func: 0,
            arg0: (i % 5) as i64,
            arg1: i as i64,
            ..CallRecord::default()
        })
        .collect();
    let mut counters = BTreeMap::new();
    counters.insert(
        0,
        FunctionCounters {
            calls: 13,
            emitted: 10,
            ring_full: 2,
            in_flight: 1,
            orphan_exits: 4,
            ..Default::default()
        },
    );
    stream_capture(functions, records, summary.then_some((1, counters)))
}

/// A stream capture of these functions and records by damon-trace 0.1.0 (4 KiB ring), with
/// the summary of a recorder that finished after `duration_ns` with these counters (`None`:
/// it was killed).
pub fn stream_capture(
    functions: Vec<FunctionStatus>,
    records: Vec<CallRecord>,
    end: Option<(u64, BTreeMap<u32, FunctionCounters>)>,
) -> Capture {
    Capture {
        meta: Meta {
            tool_version: "0.1.0".into(),
            kernel: Default::default(),
            hostname: String::new(),
            start_unix_ns: 0,
            start_monotonic_ns: 0,
            command_line: vec![],
            mode: crate::capture::Mode::Stream,
            ring_size: 4096,
            functions,
            damon: None,
            cpu_model: String::new(),
            calibration: None,
            intervals: None,
            args: Vec::new(),
            filter: Default::default(),
            disturbance: None,
            clock: Default::default(),
            slow: None,
        },
        records,
        summary: end.map(|(duration_ns, counters)| Summary::new(duration_ns, "duration", counters)),
        marks: Vec::new(),
        hist_snapshots: Vec::new(),
        slow_calls: Vec::new(),
    }
}

/// One fentry function (id 0) with 20 calls: the 8 clean ones take 100..=800 ns, the 12
/// disturbed ones 1000..=12000 ns (4 slept, 3 preempted, 4 interrupted only, 1 lost), on two
/// CPUs; the capture measured disturbance.
pub fn disturbed_capture() -> Capture {
    let reasons: [(usize, [u16; 4]); 4] = [
        (4, [1, 0, disturb::UNKNOWN, disturb::UNKNOWN]),
        (3, [0, 2, disturb::UNKNOWN, disturb::UNKNOWN]),
        (4, [0, 0, 1, 0]),
        (1, disturb::LOST),
    ];
    let mut records: Vec<CallRecord> = (1..=8)
        .map(|i| CallRecord {
            duration_ns: i * 100,
            cpu: (i % 2) as u32,
            ..CallRecord::default()
        })
        .collect();
    let disturbed = reasons
        .iter()
        .flat_map(|&(n, d)| std::iter::repeat_n(d, n))
        .enumerate();
    for (i, d) in disturbed {
        let mut r = CallRecord {
            duration_ns: (i as u64 + 1) * 1000,
            cpu: (i % 2) as u32,
            ..CallRecord::default()
        };
        r.set_disturbance(d);
        records.push(r);
    }
    let functions = vec![FunctionStatus {
        name: "lock_timer_base".into(),
        id: 0,
        attach: AttachState::Traced(crate::trace::Attach::Fentry),
        detail: None,
    }];
    let mut c = stream_capture(functions, records, None);
    c.meta.disturbance = Some(DisturbanceStatus {
        measured: true,
        why_not: None,
        hardirq_sources: vec!["kstat.irqs_sum".into()],
        breakdown: false,
        irq_time_missing: None,
        irq_clock: None,
    });
    c
}

/// A kernel-mode capture of the same calls as `stream` (every function bucketed at `width_ns`
/// as the programs do, disturbed calls counted per reason and bucket), measured: what a
/// `--mode kernel --disturbance` session of those calls writes.
pub fn as_kernel(stream: &Capture, width_ns: u64) -> Capture {
    use damon_common::disturb::DisturbedStats;

    use super::disturbance::Class;
    use crate::{capture::KernelDisturbed, stats::kernel_hist::from_durations};
    let mut c = stream.clone();
    c.meta.mode = crate::capture::Mode::Kernel;
    c.records.clear();
    let mut summary = Summary::new(1_000_000_000, "duration", Default::default());
    for f in &stream.meta.functions {
        let calls = stream.records.iter().filter(|r| r.func == f.id);
        let all: Vec<u64> = calls.clone().map(|r| r.duration_ns).collect();
        let mut h = from_durations(&all, width_ns);
        // Counted as the programs count them (`DisturbedStats::add`).
        let mut st = DisturbedStats::default();
        let mut disturbed = Vec::new();
        for r in calls.filter(|r| r.class() != Class::Clean) {
            st.add(r.class(), r.duration_ns);
            disturbed.push(r.duration_ns);
        }
        h.disturbed = Some(KernelDisturbed {
            slept: st.slept,
            preempted: st.preempted,
            interrupted: st.interrupted,
            lost: st.lost,
            sum_ns: st.sum_ns,
            buckets: from_durations(&disturbed, width_ns).buckets,
        });
        let counters = FunctionCounters {
            calls: h.count,
            emitted: h.count,
            ..Default::default()
        };
        summary.counters.insert(f.id, counters);
        summary.kernel_hist.insert(f.id, h);
    }
    c.summary = Some(summary);
    c
}

/// A kernel-mode capture of `damon_hot_score` (id 0) with these durations bucketed at 10 ns;
/// finished (summary with histograms) or killed (one snapshot only).
pub fn test_capture(durations: &[u64], finished: bool) -> Capture {
    use crate::stats::kernel_hist::from_durations;
    let mut c = capture(true);
    c.records.clear();
    c.meta.mode = crate::capture::Mode::Kernel;
    c.meta.functions.retain(|f| f.id == 0);
    c.meta.functions[0].attach = AttachState::Traced(crate::trace::Attach::Fentry);
    let h = from_durations(durations, 10);
    let counters = FunctionCounters {
        calls: h.count + 2,
        emitted: h.count,
        stamp_full: 1,
        in_flight: 1,
        ..Default::default()
    };
    let mut snap = HistSnapshot {
        elapsed_ns: 3_000_000_000,
        ..Default::default()
    };
    snap.functions.insert(0, (counters, h.clone()));
    c.hist_snapshots.push(snap);
    let s = c.summary.as_mut().expect("summary");
    s.counters.clear();
    if finished {
        s.counters.insert(0, counters);
        s.kernel_hist.insert(0, h);
    } else {
        c.summary = None;
    }
    c
}

/// `damon_hot_score` (id 0) with the time breakdown and three slow calls kept (threshold
/// 1000 ns). Ten calls, numbers chosen so that every on-CPU time is 100 ns:
/// - six of 100 ns, all on the CPU;
/// - two of 1000 ns that were 900 ns off the CPU (slow: kept);
/// - one of 300 ns with 200 ns of interrupts;
/// - one of 5000 ns whose breakdown is unknown (slow: kept).
///
/// Known calls: wall 2900 ns in all, 1800 off the CPU, 200 in interrupts, 900 on it. One more
/// slow call was lost to a full ring (`ring_full` 1). Arguments `nr_accesses` (arg0) and `age`
/// (arg1) are recorded; the value is the hotness score.
pub fn breakdown_capture() -> Capture {
    use damon_common::breakdown::UNKNOWN_NS;

    use crate::capture::{ArgStatus, SlowCall, SlowCounters, SlowSettings};
    let call = |i: u64, duration_ns: u64, off: u32, irq: u32| CallRecord {
        entry_ns: i * 10_000,
        duration_ns,
        off_cpu_ns: off,
        irq_ns: irq,
        value: 40 + i as i64,
        pid: 100,
        tid: 100 + i as u32,
        cpu: (i % 2) as u32,
        func: 0,
        arg0: i as i64,
        arg1: 2 * i as i64,
        ..CallRecord::default()
    };
    let mut records: Vec<CallRecord> = (0..6).map(|i| call(i, 100, 0, 0)).collect();
    records.push(call(6, 1000, 900, 0));
    records.push(call(7, 1000, 900, 0));
    records.push(call(8, 300, 0, 200));
    records.push(call(9, 5000, UNKNOWN_NS, UNKNOWN_NS));
    let stack = |leaf: &str| vec![format!("{leaf}+0x10"), "kdamond_fn+0x2a0".to_owned()];
    let slow_calls = vec![
        SlowCall {
            call: records[6],
            stack: stack("schedule"),
        },
        SlowCall {
            call: records[9],
            stack: stack("damon_pa_check_accesses"),
        },
        SlowCall {
            call: records[7],
            stack: stack("msleep"),
        },
    ];
    let functions = vec![FunctionStatus {
        name: "damon_hot_score".into(),
        id: 0,
        attach: AttachState::Traced(crate::trace::Attach::Fentry),
        detail: None,
    }];
    let counters = BTreeMap::from([(
        0,
        FunctionCounters {
            calls: 10,
            emitted: 10,
            ..Default::default()
        },
    )]);
    let mut c = stream_capture(functions, records, Some((1_000_000, counters)));
    c.meta.disturbance = Some(DisturbanceStatus {
        measured: true,
        why_not: None,
        hardirq_sources: vec!["kstat.irqs_sum".into()],
        breakdown: true,
        irq_time_missing: None,
        irq_clock: None,
    });
    c.meta.args = vec![ArgStatus {
        function: "damon_hot_score".into(),
        recorded: vec!["nr_accesses".into(), "age".into()],
        missing: Vec::new(),
        detail: None,
    }];
    c.meta.slow = Some(SlowSettings {
        threshold_ns: 1000,
        stack_depth: 32,
        max_per_function: 100,
    });
    c.slow_calls = slow_calls;
    c.summary.as_mut().expect("summary").slow = BTreeMap::from([(
        0,
        SlowCounters {
            kept: 3,
            ring_full: 1,
            over_limit: 0,
        },
    )]);
    c
}

/// [`breakdown_capture`] whose two sleeping calls slept `extra_ns` longer (wall and off-CPU
/// time grow, on-CPU time stays 100 ns).
pub fn longer_sleeps(extra_ns: u64) -> Capture {
    let mut c = breakdown_capture();
    for r in c.records.iter_mut().filter(|r| r.off_cpu_ns == 900) {
        r.duration_ns += extra_ns;
        r.off_cpu_ns += extra_ns as u32;
    }
    for s in c.slow_calls.iter_mut().filter(|s| s.call.off_cpu_ns == 900) {
        s.call.duration_ns += extra_ns;
        s.call.off_cpu_ns += extra_ns as u32;
    }
    c
}
