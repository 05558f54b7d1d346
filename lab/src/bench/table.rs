//! The pure part of `cargo xtask bench`: per-round results in, medians, added cost, ratios with
//! their intervals and verdicts ([`super::stats`]) and the Markdown table out.
use std::fmt::Write as _;

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::stats::{self, RatioInterval, Verdict};

/// One traced (or untraced) way of running the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Config {
    Untraced,
    Bpftrace,
    /// Stream mode with the reader stopped (SIGSTOP) while the loop runs, the ring sized to
    /// hold every record: the kernel side's cost, which is what the loop's CPU pays on a
    /// machine where the reader runs on another one.
    StreamFentry,
    StreamKprobe,
    KernelFentry,
    /// Stream mode with the reader draining as usual. In the guest both vCPUs are emulated by
    /// one host thread, so the reader's work lands on the loop's time too.
    StreamFentryReader,
    /// The floor of fentry timing: an fentry/fexit pair that only reads the clock, once each
    /// (`damon-trace bench-floor --attach fentry`).
    FloorFentry,
    /// The floor of kprobe timing: a kprobe/kretprobe pair that only reads the clock, once each
    /// (`damon-trace bench-floor --attach kprobe`; an empty pair until December 2026).
    FloorKprobe,
    /// The fentry floor plus the per-task stamp any exact timing keeps: the entry time in a
    /// hash map keyed by tid, a lookup on each side (`bench-floor --attach fentry-stamp`).
    FloorFentryStamp,
    /// The kprobe floor plus the same per-task stamp (`bench-floor --attach kprobe-stamp`).
    FloorKprobeStamp,
    /// The kprobe stamp floor plus one 72-byte ring record per call, reserved and submitted
    /// without a wake-up (`bench-floor --attach kprobe-stamp-ring`): the least an exact
    /// stream tracer under kprobe does.
    FloorKprobeStampRing,
    /// The floor of session timing: one kprobe session program keeping the entry time in the
    /// call's cookie and reading the clock again at return (`bench-floor --attach session`):
    /// exact with no map.
    FloorSession,
    /// The session floor plus the 72-byte ring record per call (`bench-floor --attach
    /// session-ring`): the least an exact stream tracer on kprobe sessions does.
    FloorSessionRing,
    /// The session floor on the BPF trampoline: one fsession program (`bench-floor --attach
    /// fsession`, Linux 7.x).
    FloorFsession,
    /// Stream mode on kprobe sessions (reader paused, as `StreamFentry`): what `--attach auto`
    /// uses on a preemptible kernel that has them.
    StreamKsession,
    /// Kernel mode on kprobe sessions.
    KernelKsession,
    /// Stream mode on fsessions (reader paused).
    StreamFsession,
    /// Kernel mode on fsessions.
    KernelFsession,
    /// `StreamKsession` built without the probes' log calls (damon-ebpf's `probe-log` off).
    StreamKsessionNoLog,
    /// `StreamFentry`, `StreamKsession` and `StreamFsession` with `--disturbance`: the
    /// disturbance counters' cost is the difference.
    StreamFentryDist,
    StreamKsessionDist,
    StreamFsessionDist,
    /// `KernelFentry`, `KernelKsession` and `KernelFsession` with `--disturbance`: the
    /// snapshots, and the disturbed calls counted per bucket beside the histogram.
    KernelFentryDist,
    KernelKsessionDist,
    KernelFsessionDist,
    /// `StreamFentry` with `--slow 1h`: slow calls on, none slow (what the check costs).
    StreamFentrySlow,
    /// `StreamFentryReader` with every call slow (`--slow 0.001us`, `--slow-max 1`): each
    /// call's kernel stack taken and written into the slow calls' ring, which the reader
    /// drains (paused, the ring would be full after about 760 calls and the rest would only
    /// be counted).
    StreamFentrySlowall,
}

impl Config {
    pub const ALL: [Config; 27] = [
        Config::Untraced,
        Config::Bpftrace,
        Config::StreamFentry,
        Config::StreamKprobe,
        Config::KernelFentry,
        Config::StreamFentryReader,
        Config::FloorFentry,
        Config::FloorKprobe,
        Config::FloorFentryStamp,
        Config::FloorKprobeStamp,
        Config::FloorKprobeStampRing,
        Config::FloorSession,
        Config::FloorSessionRing,
        Config::FloorFsession,
        Config::StreamKsession,
        Config::KernelKsession,
        Config::StreamFsession,
        Config::KernelFsession,
        Config::StreamKsessionNoLog,
        Config::StreamFentryDist,
        Config::StreamKsessionDist,
        Config::StreamFsessionDist,
        Config::KernelFentryDist,
        Config::KernelKsessionDist,
        Config::KernelFsessionDist,
        Config::StreamFentrySlow,
        Config::StreamFentrySlowall,
    ];

    /// The name used in the guest's file names and the table.
    pub fn name(self) -> &'static str {
        match self {
            Config::Untraced => "untraced",
            Config::Bpftrace => "bpftrace",
            Config::StreamFentry => "stream-fentry",
            Config::StreamKprobe => "stream-kprobe",
            Config::KernelFentry => "kernel-fentry",
            Config::StreamFentryReader => "stream-fentry-reader",
            Config::FloorFentry => "floor-fentry",
            Config::FloorKprobe => "floor-kprobe",
            Config::FloorFentryStamp => "floor-fentry-stamp",
            Config::FloorKprobeStamp => "floor-kprobe-stamp",
            Config::FloorKprobeStampRing => "floor-kprobe-stamp-ring",
            Config::FloorSession => "floor-session",
            Config::FloorSessionRing => "floor-session-ring",
            Config::FloorFsession => "floor-fsession",
            Config::StreamKsession => "stream-ksession",
            Config::KernelKsession => "kernel-ksession",
            Config::StreamFsession => "stream-fsession",
            Config::KernelFsession => "kernel-fsession",
            Config::StreamKsessionNoLog => "stream-ksession-nolog",
            Config::StreamFentryDist => "stream-fentry-dist",
            Config::StreamKsessionDist => "stream-ksession-dist",
            Config::StreamFsessionDist => "stream-fsession-dist",
            Config::KernelFentryDist => "kernel-fentry-dist",
            Config::KernelKsessionDist => "kernel-ksession-dist",
            Config::KernelFsessionDist => "kernel-fsession-dist",
            Config::StreamFentrySlow => "stream-fentry-slow",
            Config::StreamFentrySlowall => "stream-fentry-slowall",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Config::Untraced => "untraced",
            Config::Bpftrace => "bpftrace fentry/fexit + lhist",
            Config::StreamFentry => "damon-trace --mode stream --attach fentry (reader paused)",
            Config::StreamKprobe => "damon-trace --mode stream --attach kprobe (reader paused)",
            Config::KernelFentry => "damon-trace --mode kernel --attach fentry",
            Config::StreamFentryReader => {
                "damon-trace --mode stream --attach fentry (reader draining on the same host thread)"
            }
            Config::FloorFentry => "floor: fentry/fexit pair reading the clock once each",
            Config::FloorKprobe => "floor: kprobe/kretprobe pair reading the clock once each",
            Config::FloorFentryStamp => {
                "floor: fentry/fexit pair reading the clock, with a per-task stamp in a hash map"
            }
            Config::FloorKprobeStamp => {
                "floor: kprobe/kretprobe pair reading the clock, with a per-task stamp in a hash map"
            }
            Config::FloorKprobeStampRing => {
                "floor: kprobe/kretprobe pair with the per-task stamp and a 72-byte ring record per call"
            }
            Config::FloorSession => {
                "floor: kprobe session reading the clock at entry (kept in the cookie) and return"
            }
            Config::FloorSessionRing => {
                "floor: kprobe session with the cookie stamp and a 72-byte ring record per call"
            }
            Config::FloorFsession => {
                "floor: fsession (trampoline) reading the clock at entry (kept in the cookie) and return"
            }
            Config::StreamKsession => {
                "damon-trace --mode stream --attach kprobe-session (reader paused)"
            }
            Config::KernelKsession => "damon-trace --mode kernel --attach kprobe-session",
            Config::StreamFsession => "damon-trace --mode stream --attach fsession (reader paused)",
            Config::KernelFsession => "damon-trace --mode kernel --attach fsession",
            Config::StreamKsessionNoLog => {
                "damon-trace --mode stream --attach kprobe-session, built without the probe log calls (reader paused)"
            }
            Config::StreamFentryDist => {
                "damon-trace --mode stream --attach fentry --disturbance (reader paused)"
            }
            Config::StreamKsessionDist => {
                "damon-trace --mode stream --attach kprobe-session --disturbance (reader paused)"
            }
            Config::StreamFsessionDist => {
                "damon-trace --mode stream --attach fsession --disturbance (reader paused)"
            }
            Config::KernelFentryDist => "damon-trace --mode kernel --attach fentry --disturbance",
            Config::KernelKsessionDist => {
                "damon-trace --mode kernel --attach kprobe-session --disturbance"
            }
            Config::KernelFsessionDist => {
                "damon-trace --mode kernel --attach fsession --disturbance"
            }
            Config::StreamFentrySlow => {
                "damon-trace --mode stream --attach fentry --slow 1h, no call slow (reader paused)"
            }
            Config::StreamFentrySlowall => {
                "damon-trace --mode stream --attach fentry --slow 0.001us, every call slow (reader draining)"
            }
        }
    }

    /// The target for our added cost as a fraction of bpftrace's.
    pub fn target_vs_bpftrace(self) -> Option<f64> {
        match self {
            Config::StreamFentry | Config::StreamKsession | Config::StreamFsession => Some(0.7),
            Config::StreamKprobe => Some(1.0),
            Config::KernelFentry | Config::KernelKsession | Config::KernelFsession => Some(0.4),
            Config::Untraced
            | Config::Bpftrace
            | Config::StreamFentryReader
            | Config::FloorFentry
            | Config::FloorKprobe
            | Config::FloorFentryStamp
            | Config::FloorKprobeStamp
            | Config::FloorKprobeStampRing
            | Config::FloorSession
            | Config::FloorSessionRing
            | Config::FloorFsession
            | Config::StreamKsessionNoLog
            | Config::StreamFentryDist
            | Config::StreamKsessionDist
            | Config::StreamFsessionDist
            | Config::KernelFentryDist
            | Config::KernelKsessionDist
            | Config::KernelFsessionDist
            | Config::StreamFentrySlow
            | Config::StreamFentrySlowall => None,
        }
    }

    /// Whether the configuration's tracer counts the calls it timed (the floor programs count
    /// nothing; their attach is checked by `bench-floor`'s own `attached` line).
    pub fn counts_calls(self) -> bool {
        !matches!(
            self,
            Config::Untraced
                | Config::FloorFentry
                | Config::FloorKprobe
                | Config::FloorFentryStamp
                | Config::FloorKprobeStamp
                | Config::FloorKprobeStampRing
                | Config::FloorSession
                | Config::FloorSessionRing
                | Config::FloorFsession
        )
    }

    pub fn from_name(name: &str) -> Option<Config> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// One run of the loop under one configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Run {
    pub round: u32,
    pub config: Config,
    pub ns_per_call: f64,
    /// Calls the tracer counted (None untraced).
    pub traced: Option<u64>,
}

/// One row of the result table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub config: Config,
    pub description: &'static str,
    pub ns_per_call: Vec<f64>,
    pub median_ns: f64,
    /// Median over rounds of (this run − the same round's untraced run).
    pub added_ns: f64,
    /// Median over rounds of (this run / the same round's untraced run).
    pub ratio_untraced: f64,
    /// Mean added cost over bpftrace's mean added cost (the same rounds).
    pub vs_bpftrace: Option<f64>,
    /// Its 95 % interval (Fieller's, rounds as the unit; see [`super::stats`]).
    pub interval: Option<RatioInterval>,
    pub target_vs_bpftrace: Option<f64>,
    /// The interval's verdict on the target; "not met" too when a round's tracer missed calls.
    pub verdict: Option<Verdict>,
    /// `verdict` as met (true), not met (false) or unresolved (None).
    pub target_met: Option<bool>,
    /// Fewest calls the tracer counted in any round.
    pub traced_min: Option<u64>,
    /// Every round's tracer counted at least the loop's calls.
    pub all_traced: bool,
}

impl Run {
    pub fn to_json(&self) -> Value {
        json!({
            "round": self.round,
            "config": self.config.name(),
            "ns_per_call": self.ns_per_call,
            "traced": self.traced,
        })
    }
}

impl Row {
    pub fn to_json(&self) -> Value {
        json!({
            "config": self.config.name(),
            "description": self.description,
            "ns_per_call": self.ns_per_call,
            "median_ns": self.median_ns,
            "added_ns": self.added_ns,
            "ratio_untraced": self.ratio_untraced,
            "vs_bpftrace": self.vs_bpftrace,
            "vs_bpftrace_ci95": self.interval.map(|i| json!({
                "lo": finite_or_null(i.lo),
                "hi": finite_or_null(i.hi),
                "rounds": i.rounds,
                "method": "Fieller, paired rounds, t with n-1 df",
            })),
            "target_vs_bpftrace": self.target_vs_bpftrace,
            "verdict": self.verdict.map(Verdict::as_str),
            "rounds_to_resolve": match (self.verdict, self.interval, self.target_vs_bpftrace) {
                (Some(Verdict::Unresolved), Some(i), Some(t)) => stats::rounds_to_resolve(&i, t),
                _ => None,
            },
            "target_met": self.target_met,
            "traced_min": self.traced_min,
            "all_traced": self.all_traced,
        })
    }
}

/// JSON has no infinity: an unbounded end is null.
fn finite_or_null(v: f64) -> Value {
    if v.is_finite() { json!(v) } else { Value::Null }
}

pub fn median(v: &[f64]) -> Option<f64> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

/// The table from every run; `calls` is what each loop made (a tracer must count at least
/// that many, or its attach failed somewhere and its time means nothing).
pub fn rows(runs: &[Run], calls: u64) -> Result<Vec<Row>> {
    let of = |c: Config| -> Vec<&Run> { runs.iter().filter(|r| r.config == c).collect() };
    let untraced = of(Config::Untraced);
    if untraced.is_empty() {
        bail!("no untraced runs");
    }
    let base = |round: u32| {
        untraced
            .iter()
            .find(|r| r.round == round)
            .map(|r| r.ns_per_call)
    };
    let mut out: Vec<Row> = Vec::new();
    for c in Config::ALL {
        let rs = of(c);
        if rs.is_empty() {
            continue;
        }
        let ns: Vec<f64> = rs.iter().map(|r| r.ns_per_call).collect();
        let added: Vec<f64> = rs
            .iter()
            .filter_map(|r| base(r.round).map(|b| r.ns_per_call - b))
            .collect();
        let ratio: Vec<f64> = rs
            .iter()
            .filter_map(|r| base(r.round).map(|b| r.ns_per_call / b))
            .collect();
        let traced_min = rs.iter().filter_map(|r| r.traced).min();
        let all_traced = !c.counts_calls() || rs.iter().all(|r| r.traced >= Some(calls));
        out.push(Row {
            config: c,
            description: c.describe(),
            median_ns: median(&ns).context("no finite time")?,
            ns_per_call: ns,
            added_ns: median(&added).context("no round with an untraced run")?,
            ratio_untraced: median(&ratio).context("no round with an untraced run")?,
            vs_bpftrace: None,
            interval: None,
            target_vs_bpftrace: c.target_vs_bpftrace(),
            verdict: None,
            target_met: None,
            traced_min,
            all_traced,
        });
    }
    // Per round: (this configuration's added cost, bpftrace's), both against the round's
    // untraced run.
    let added_in = |c: Config, round: u32| {
        let run = runs.iter().find(|r| r.config == c && r.round == round)?;
        Some(run.ns_per_call - base(round)?)
    };
    for r in &mut out {
        if r.config == Config::Untraced {
            continue;
        }
        let (a, b): (Vec<f64>, Vec<f64>) = runs
            .iter()
            .filter(|run| run.config == r.config)
            .filter_map(|run| {
                Some((
                    added_in(r.config, run.round)?,
                    added_in(Config::Bpftrace, run.round)?,
                ))
            })
            .unzip();
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        if !b.is_empty() && mean(&b) > 0.0 {
            r.vs_bpftrace = Some(mean(&a) / mean(&b));
        }
        r.interval = stats::ratio_interval(&a, &b);
        r.verdict = match (r.target_vs_bpftrace, r.all_traced) {
            (None, _) => None,
            (Some(_), false) => Some(Verdict::NotMet),
            (Some(t), true) => Some(
                r.interval
                    .map_or(Verdict::Unresolved, |i| stats::verdict(&i, t)),
            ),
        };
        r.target_met = match r.verdict {
            Some(Verdict::Met) => Some(true),
            Some(Verdict::NotMet) => Some(false),
            _ => None,
        };
    }
    Ok(out)
}

/// The sum of the counts of bpftrace's printed histogram (`[lo, hi)  count |@@@|` lines).
pub fn bpftrace_hist_total(text: &str) -> Option<u64> {
    let mut total = None;
    for line in text.lines() {
        let line = line.trim();
        if !(line.starts_with('[') || line.starts_with('(')) {
            continue;
        }
        let Some(close) = line.find([')', ']']) else {
            continue;
        };
        let rest = &line[close + 1..];
        let count = rest.split_whitespace().next()?.parse::<u64>().ok()?;
        *total.get_or_insert(0) += count;
    }
    total
}

/// `{"calls":N,"elapsed_ns":T,"ns_per_call":X}` from `damon-trace bench-loop`.
pub fn parse_loop(text: &str) -> Result<(u64, f64)> {
    let line = text
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .with_context(|| format!("no JSON line in bench-loop output `{}`", text.trim()))?;
    let v: serde_json::Value = serde_json::from_str(line).context("bench-loop output")?;
    let calls = v["calls"].as_u64().context("bench-loop: no calls")?;
    let ns = v["ns_per_call"]
        .as_f64()
        .context("bench-loop: no ns_per_call")?;
    Ok((calls, ns))
}

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{v:.digits$}"))
}

/// A ratio with its interval: `0.52 [0.47, 0.58]`.
fn ratio_cell(r: &Row) -> String {
    let end = |v: f64| {
        if v.is_finite() {
            format!("{v:.2}")
        } else {
            "∞".to_owned()
        }
    };
    match (r.vs_bpftrace, r.interval) {
        (Some(v), Some(i)) => format!("{v:.2} [{}, {}]", end(i.lo), end(i.hi)),
        (v, _) => fmt_opt(v, 2),
    }
}

/// The Markdown table of the overhead rows, times in `unit` (`ns`, or `insn` under the
/// instruction clock: instructions per call).
pub fn markdown(rows: &[Row], unit: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| configuration | {unit}/call (median) | added {unit}/call (median) | × untraced | added / bpftrace's [95 % interval] | target | calls traced (min) |\n\
         |---|---:|---:|---:|---:|---|---:|",
    );
    for r in rows {
        let target = match (r.target_vs_bpftrace, r.verdict) {
            (Some(t), Some(Verdict::Met)) => format!("≤ {t} ✓ met"),
            (Some(t), Some(Verdict::NotMet)) => format!("≤ {t} ✗ not met"),
            (Some(t), _) => {
                let more = r
                    .interval
                    .and_then(|i| stats::rounds_to_resolve(&i, t))
                    .map(|n| format!(" (≈ {n} rounds)"))
                    .unwrap_or_default();
                format!("≤ {t} ? {}{more}", Verdict::Unresolved.as_str())
            }
            _ => String::new(),
        };
        let traced = match (r.traced_min, r.all_traced) {
            (Some(n), true) => n.to_string(),
            (Some(n), false) => format!("{n} (short!)"),
            (None, _) => "–".to_owned(),
        };
        let _ = writeln!(
            s,
            "| {} | {:.1} | {} | {:.2} | {} | {} | {} |",
            r.description,
            r.median_ns,
            if r.config == Config::Untraced {
                "–".to_owned()
            } else {
                format!("{:.1}", r.added_ns)
            },
            r.ratio_untraced,
            ratio_cell(r),
            target,
            traced
        );
    }
    s
}

#[cfg(test)]
mod tests;
