//! The time breakdown of `record --disturbance` (each call's wall time split into time off the
//! CPU, in interrupts and on it; `damon_common::breakdown`) against ground truth the tool does
//! not produce, in `vm_disturb`'s captures: what the disturb-loop worker asked for (1 ms
//! sleeps), read itself around each system call (`CLOCK_THREAD_CPUTIME_ID`, the scheduler's
//! own `sum_exec_runtime` of the task; `getrusage` switch counts), and what the guest's
//! /proc/kallsyms says of IRQ time accounting.
use super::{json, read};

/// A breakdown field that is not known (`breakdown::UNKNOWN_NS`); the one below it is
/// saturated.
const UNKNOWN_NS: u64 = 0xFFFF_FFFF;
const SATURATED_NS: u64 = 0xFFFF_FFFE;
/// The disturbance counts of a session call whose entry snapshot was lost.
const LOST: [u64; 4] = [0xFFFF; 4];

/// One call of the worker: wall, off-CPU and interrupt time, ns (`None`: not known), and the
/// tool's switch counts.
#[derive(Debug, Clone, Copy)]
pub struct Split {
    pub wall: u64,
    pub off: Option<u64>,
    pub irq: Option<u64>,
    pub slept: u64,
    pub preempted: u64,
}

impl Split {
    /// The on-CPU time: wall less the other two (0 if they exceed it, as the tool says).
    pub fn on(&self) -> Option<u64> {
        Some(self.wall.saturating_sub(self.off? + self.irq?))
    }
}

/// The worker's calls (task `tid`) in entry order, each field checked for its unknown value:
/// a breakdown is unknown exactly where the disturbance counts are lost (a session call
/// whose entry snapshot another call took), and never saturated (no call lasts 4 s).
pub fn splits(capture: &dtcap::Capture, tid: u64, ctx: &str) -> Vec<Split> {
    let mut recs: Vec<&dtcap::Record> = capture
        .records
        .iter()
        .filter(|r| u64::from(r.tid) == tid)
        .collect();
    recs.sort_by_key(|r| r.entry_ns);
    recs.iter()
        .map(|r| {
            let lost = r.disturbance == LOST;
            assert_eq!(
                r.breakdown.map(|v| v == UNKNOWN_NS),
                [lost; 2],
                "{ctx}: breakdown unknown exactly where the entry snapshot was lost: {r:?}"
            );
            assert!(
                !r.breakdown.contains(&SATURATED_NS),
                "{ctx}: saturated: {r:?}"
            );
            let known = |v: u64| (v != UNKNOWN_NS).then_some(v);
            Split {
                wall: r.duration_ns,
                off: known(r.breakdown[0]),
                irq: known(r.breakdown[1]),
                slept: r.disturbance[0],
                preempted: r.disturbance[1],
            }
        })
        .collect()
}

/// The workload's own numbers: per call its CPU time (ns) and switches seen, the bytes each
/// call read, what a sleep asked for.
struct Truth {
    cpu_ns: Vec<u64>,
    switches: Vec<[u64; 2]>,
    bytes: u64,
    sleep_ns: Option<u64>,
    tid: u64,
}

fn truth(dir: &std::path::Path, name: &str) -> Truth {
    let w = json(dir, name);
    let field = |k: &str| {
        serde_json::from_value(w[k].clone()).unwrap_or_else(|e| panic!("{name}: {k}: {e}"))
    };
    Truth {
        cpu_ns: field("cpu_ns"),
        switches: field("switches"),
        bytes: w["bytes"].as_u64().expect("bytes"),
        sleep_ns: w["sleep_ns"].as_u64(),
        tid: w["tid"].as_u64().expect("tid"),
    }
}

/// How far the tool's on-CPU time of a call may exceed the task's own CPU time across the
/// system call around it: the task's runtime is charged up to the scheduler's switch-out
/// and from its switch-in (`update_curr`, `set_next_entity`), the clocks are moved at the
/// `sched_switch` tracepoint a little later in `__schedule` for each, and the two reads of
/// the task's clock are apart from the calls' stamps by our own program: a fixed
/// [`SLACK_FIXED_NS`] and [`SLACK_PER_SWITCH_NS`] per switch the task saw.
const SLACK_FIXED_NS: u64 = 100_000;
const SLACK_PER_SWITCH_NS: u64 = 100_000;

/// How far the tool's on-CPU time may fall short of the task's own CPU time: the task's CPU
/// time also covers the system call outside the traced function (entry, `vfs_read`, exit, the
/// clock reads): [`SLACK_FIXED_NS`] and 2 % of the CPU time.
fn short_by_at_most(cpu_ns: u64) -> u64 {
    SLACK_FIXED_NS + cpu_ns / 50
}

fn quantile(mut v: Vec<f64>, q: f64) -> f64 {
    v.sort_unstable_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// Every check of the breakdown in `method`'s capture (see the functions below); returns what
/// it measured, for the log.
pub fn check(dir: &std::path::Path, capture: &dtcap::Capture, method: &str, ctx: &str) -> String {
    let irq = irq_time_statement(dir, capture, method, ctx);
    let sleep = sleeping(dir, capture, method, ctx);
    let hog = preempted(dir, capture, method, ctx);
    format!("breakdown: {sleep}; {hog}; {irq}")
}

/// The capture says whether the breakdown has interrupt time, and that agrees with the
/// kernel: `irq_time_missing` is stated exactly when the guest's /proc/kallsyms has no
/// `cpu_irqtime` (no CONFIG_IRQ_TIME_ACCOUNTING; `irqtime.txt`, written by the script). When
/// stated, no call has interrupt time; when not, the storm's calls on CPU 0 have a larger
/// interrupt share than the calls without it.
fn irq_time_statement(
    dir: &std::path::Path,
    capture: &dtcap::Capture,
    method: &str,
    ctx: &str,
) -> String {
    let d = &capture.meta["disturbance"];
    assert_eq!(
        d["breakdown"], true,
        "{ctx}: the capture has the breakdown: {d}"
    );
    let has_irqtime = read(dir, "irqtime.txt").trim() != "0";
    let missing = d["irq_time_missing"].as_str();
    assert_eq!(
        missing.is_none(),
        has_irqtime,
        "{ctx}: the capture states no interrupt time ({missing:?}) exactly when the kernel has \
         no cpu_irqtime"
    );
    let share = |name: &str| {
        let t = truth(dir, &format!("{method}-{name}.json"));
        let calls = splits(capture, t.tid, ctx);
        let irq: u64 = calls.iter().filter_map(|c| c.irq).sum();
        let wall: u64 = calls.iter().map(|c| c.wall).sum();
        irq as f64 / wall.max(1) as f64
    };
    let (base, storm) = (share("base"), share("storm"));
    match missing {
        Some(why) => {
            assert!(
                why.contains("CONFIG_IRQ_TIME_ACCOUNTING"),
                "{ctx}: the statement names the kernel option: {why}"
            );
            assert_eq!(
                (base, storm),
                (0.0, 0.0),
                "{ctx}: no interrupt time without IRQ time accounting"
            );
            "no IRQ time accounting, stated".to_owned()
        }
        None => {
            assert!(
                storm > base,
                "{ctx}: interrupt share {storm:.4} in the storm, {base:.4} without"
            );
            format!("interrupt share {base:.4} alone, {storm:.4} in the storm")
        }
    }
}

/// Sleeping calls (`hrtimer_nanosleep` of 1 ms sleeps): a call the tool says slept was off
/// the CPU at least the 1 ms asked for less the task's CPU time across the whole system call
/// (its timer starts before the task switches out, and expires no earlier than 1 ms later),
/// and no longer than its wall time; a call never switched out was never off the CPU. So
/// almost all of a sleeping call's wall time is off the CPU: what is left, its on-CPU time, is
/// at most the task's own CPU time across the call plus the slack of [`SLACK_FIXED_NS`]. The
/// sum agrees with the sleeps asked for: it is at least the slept calls' 1 ms each less their
/// CPU time, and at most their wall time.
fn sleeping(dir: &std::path::Path, capture: &dtcap::Capture, method: &str, ctx: &str) -> String {
    let t = truth(dir, &format!("{method}-sleep.json"));
    let asked = t.sleep_ns.expect("sleep_ns");
    let calls = splits(capture, t.tid, ctx);
    assert_eq!(calls.len(), t.cpu_ns.len(), "{ctx}: one record per sleep");
    let (mut off_sum, mut floor, mut wall_sum, mut worst_on) = (0u64, 0u64, 0u64, 0i64);
    for ((c, &cpu), s) in calls.iter().zip(&t.cpu_ns).zip(&t.switches) {
        let (Some(off), Some(on)) = (c.off, c.on()) else {
            continue;
        };
        assert!(
            off <= c.wall,
            "{ctx}: off the CPU longer than the call: {c:?}"
        );
        if c.slept == 0 {
            if c.preempted == 0 {
                assert_eq!(
                    off, 0,
                    "{ctx}: a call never switched out was off the CPU: {c:?}"
                );
            }
            continue;
        }
        assert!(
            off + cpu >= asked,
            "{ctx}: a 1 ms sleep off the CPU only {off} ns, with {cpu} ns of CPU time: {c:?}"
        );
        let slack = SLACK_FIXED_NS + SLACK_PER_SWITCH_NS * (s[0] + s[1]);
        assert!(
            on <= cpu + slack,
            "{ctx}: a sleeping call {on} ns on the CPU, the task's CPU time across it {cpu} ns \
             (+{slack} slack): {c:?}"
        );
        worst_on = worst_on.max(on as i64 - cpu as i64);
        off_sum += off;
        floor += asked.saturating_sub(cpu);
        wall_sum += c.wall;
    }
    assert!(
        off_sum >= floor && off_sum <= wall_sum && floor > 0,
        "{ctx}: the sleeps were off the CPU {off_sum} ns in all, at least {floor} expected, at \
         most their wall time {wall_sum}"
    );
    format!(
        "sleeps {:.4} of their wall time off the CPU ({off_sum} ns, asked {floor}+), on-CPU at \
         most {worst_on} ns over the task's CPU time",
        off_sum as f64 / wall_sum.max(1) as f64
    )
}

/// Calls beside a CPU hog (the long reads of `long-hog`, which the spinner preempts): a
/// preempted call's on-CPU time is the task's own CPU time across the system call, within the
/// slack above and [`short_by_at_most`] below; and per byte read, their median is that of the
/// calls of `long` (the same reads alone) that kept their CPU, within a tolerance taken from
/// those calls' own spread: twice the half-width of their 10–90 % range of ns per byte,
/// relative to their median, and at least 10 % (the host's speed moves between two runs of a
/// workload). The preempted calls' wall time per byte must be outside that band, so the check
/// could fail if the off-CPU time were not taken out.
fn preempted(dir: &std::path::Path, capture: &dtcap::Capture, method: &str, ctx: &str) -> String {
    let hog = truth(dir, &format!("{method}-long-hog.json"));
    let calls = splits(capture, hog.tid, ctx);
    let mut per_byte = Vec::new();
    let mut wall_per_byte = Vec::new();
    let mut excess = Vec::new();
    for ((c, &cpu), s) in calls.iter().zip(&hog.cpu_ns).zip(&hog.switches) {
        let Some(on) = c.on() else { continue };
        if c.preempted == 0 {
            continue;
        }
        let slack = SLACK_FIXED_NS + SLACK_PER_SWITCH_NS * (s[0] + s[1]);
        assert!(
            on <= cpu + slack && on + short_by_at_most(cpu) >= cpu,
            "{ctx}: a preempted call {on} ns on the CPU, the task's CPU time across it {cpu} ns \
             (+{slack}, -{}): {c:?}",
            short_by_at_most(cpu)
        );
        excess.push(on as f64 - cpu as f64);
        per_byte.push(on as f64 / hog.bytes as f64);
        wall_per_byte.push(c.wall as f64 / hog.bytes as f64);
    }
    assert!(
        per_byte.len() >= 5,
        "{ctx}: only {} long calls beside the spinner were preempted",
        per_byte.len()
    );
    let alone = truth(dir, &format!("{method}-long.json"));
    let reference: Vec<f64> = splits(capture, alone.tid, ctx)
        .iter()
        .filter(|c| c.slept == 0 && c.preempted == 0)
        .filter_map(|c| Some(c.on()? as f64 / alone.bytes as f64))
        .collect();
    assert!(
        reference.len() >= 10,
        "{ctx}: {} long calls alone kept the CPU",
        reference.len()
    );
    let m = quantile(reference.clone(), 0.5);
    let spread = (quantile(reference.clone(), 0.9) - quantile(reference, 0.1)) / (2.0 * m);
    let tol = (2.0 * spread).max(0.10);
    let (on, wall) = (
        quantile(per_byte, 0.5) / m,
        quantile(wall_per_byte, 0.5) / m,
    );
    assert!(
        (on - 1.0).abs() <= tol && (wall - 1.0).abs() > tol,
        "{ctx}: preempted calls' median on-CPU time per byte {on:.3} times the calls alone \
         (wall time {wall:.3} times), tolerance ±{tol:.3}"
    );
    format!(
        "preempted calls on the CPU {on:.3} of the calls alone per byte (wall {wall:.3}, ±{tol:.3}), \
         on-CPU minus task CPU time {:.0}..{:.0} ns",
        quantile(excess.clone(), 0.0),
        quantile(excess, 1.0)
    )
}
