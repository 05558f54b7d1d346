//! Soak: `damon-trace record` for minutes under the migrate-hot scenario in a guest, while the
//! guest samples the recorder's memory (VmRSS and its parts) and open file descriptors. The
//! checks — memory flat after warm-up, no fd growth, every call accounted for — are shared by
//! the 1-minute CI test (`lab/tests/vm_soak.rs`) and `cargo xtask soak` (10 minutes by
//! default, outside CI), which also writes the curve under `target/soak/`.
use std::{fmt::Write as _, fs, path::Path, time::Duration};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use crate::{
    guest::Guest,
    kernel::Kernel,
    script,
    util::{self, status},
};

/// The four built-in functions, in `FunctionId` order.
pub const FUNCTIONS: [&str; 4] = [
    "damon_hot_score",
    "damos_va_migrate_dests_add",
    "damon_migrate_pages",
    "lock_timer_base",
];

/// Slack on top of the warm-up peak: the allocator may keep freed chunks and touch new pages
/// (a quarter), plus one MiB for page-granular noise. A leak of one record's worth per call
/// (tens of bytes at hundreds of calls a second) exceeds it within minutes; the CI minute
/// catches a leak of a few KiB/s.
pub const RSS_GROWTH_FACTOR: f64 = 1.25;
pub const RSS_SLACK_KIB: u64 = 1024;
/// The same rule on RssAnon (the heap, where a leak would show; VmRSS is mostly the binary's
/// text and the ring buffer's shared pages, mapped whole from the start) with a tighter
/// slack: a quarter of MiB.
pub const ANON_SLACK_KIB: u64 = 256;
/// And the heap after warm-up is at most 16 MiB whatever the warm-up held: 6.5 MiB with
/// `--no-calibrate`, 7.7 MiB with the calibration (record on 7.2 under migrate-hot). A start
/// that keeps what it read (kallsyms, the vmlinux BTF and its parses, the eBPF object: 74 MiB
/// on 7.2 before they were dropped) fails here.
pub const STEADY_ANON_MAX_KIB: u64 = 16 * 1024;
/// The heap's growth after warm-up, fitted by least squares over the samples, may be at most
/// this many bytes per call traced (at the run's call rate), or [`MIN_SLOPE_KIB_S`],
/// whichever is larger. A leak of 64 bytes a record is twice this; the heap's real growth
/// comes in steps of tens of KiB as buffers reach the busiest second's size (56 KiB over
/// 10 minutes on 7.2, see docs/guarantees.md), well under 1 KiB/s.
pub const LEAK_BYTES_PER_CALL: f64 = 32.0;
pub const MIN_SLOPE_KIB_S: f64 = 1.0;

/// The guest script: scenario in the background, `record`, a sample of the recorder at
/// `t0 + k·every_s` (t0: the first sample, by the guest's `/proc/uptime`) into
/// /out/samples.txt, then the capture's JSON report. The recording lasts `seconds`, or longer
/// where the calibration beside it ends after the first quarter: three quarters of `seconds`
/// after it, so that a slower machine still gets as much steady state to judge. The sampler
/// stops the recorder (SIGINT) a second after its last sample.
pub fn guest_script(seconds: u64, every_s: u64) -> String {
    let last = seconds.saturating_sub(1);
    let steady = seconds * 3 / 4;
    // A backstop only: the sampler ends the recording.
    let most = seconds * 3;
    let body = script::fill(
        include_str!("soak/sampler.sh"),
        &[
            ("MOST", &most.to_string()),
            ("LAST", &last.to_string()),
            ("STEADY", &steady.to_string()),
            ("EVERY_S", &every_s.to_string()),
        ],
    );
    format!("set -e\n{}", script::with_scenario(most + 60, "", &body))
}

/// One look at the recorder: time since the first sample, memory in KiB, open fds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub t_s: f64,
    pub rss_kib: u64,
    pub anon_kib: u64,
    pub file_kib: u64,
    pub shmem_kib: u64,
    pub fds: u64,
}

/// Parses the guest's `uptime rss anon file shmem fds` lines; times become relative.
pub fn parse_samples(text: &str) -> Result<Vec<Sample>> {
    let mut out: Vec<Sample> = Vec::new();
    let mut t0 = None;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 6 {
            bail!("sample line `{line}` does not have 6 fields");
        }
        let t: f64 = f[0].parse().with_context(|| format!("time in `{line}`"))?;
        let n = |i: usize| -> Result<u64> {
            f[i].parse()
                .with_context(|| format!("field {i} of `{line}`"))
        };
        let t0 = *t0.get_or_insert(t);
        out.push(Sample {
            t_s: t - t0,
            rss_kib: n(1)?,
            anon_kib: n(2)?,
            file_kib: n(3)?,
            shmem_kib: n(4)?,
            fds: n(5)?,
        });
    }
    Ok(out)
}

/// The capture's accounting, summed over the four functions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub calls: u64,
    pub records: u64,
    pub dropped: u64,
    pub in_flight: u64,
}

/// The warm-up: the first quarter of the run (at least two samples), and the calibration
/// beside the session if it ran longer. The level bounds come from its samples after the
/// calibration, or from the first steady sample if the calibration filled it.
struct Warmup {
    until_s: f64,
    samples: usize,
    max_rss: u64,
    max_anon: u64,
}

impl Warmup {
    fn new(samples: &[Sample], calibrated_s: Option<f64>) -> Warmup {
        let last_t = samples.last().map_or(0.0, |s| s.t_s);
        let calibrating = |s: &Sample| calibrated_s.is_some_and(|c| s.t_s <= c);
        let until_s = f64::max(last_t / 4.0, calibrated_s.unwrap_or(0.0));
        let n = samples
            .iter()
            .enumerate()
            .take_while(|(i, s)| *i < 2 || s.t_s <= until_s)
            .count();
        let mut basis: Vec<&Sample> = samples[..n].iter().filter(|s| !calibrating(s)).collect();
        if basis.is_empty() {
            basis.extend(samples.get(n));
        }
        Warmup {
            until_s,
            samples: n,
            max_rss: basis.iter().map(|s| s.rss_kib).max().unwrap_or(0),
            max_anon: basis.iter().map(|s| s.anon_kib).max().unwrap_or(0),
        }
    }
}

/// What a soak showed, and whether it passed.
#[derive(Debug, Clone)]
pub struct Analysis {
    pub samples: Vec<Sample>,
    /// Samples up to this time are warm-up: the first quarter of the run (at least 2) or the
    /// calibration beside the session, whichever ends later.
    pub warmup_s: f64,
    /// When the calibration beside the session had ended, if it said so.
    pub calibrated_s: Option<f64>,
    /// How many of `samples` are warm-up; the rest are what the level bounds and the slope
    /// fit judge ([`Analysis::after_warmup`]).
    pub warmup_samples: usize,
    pub early_max_rss_kib: u64,
    /// `early_max × 1.25 + 1 MiB`: no sample after warm-up may exceed it.
    pub rss_bound_kib: u64,
    /// `early_max(RssAnon) × 1.25 + 256 KiB`, likewise.
    pub anon_bound_kib: u64,
    /// RssAnon's least-squares slope over the samples after warm-up, KiB/s (`None` with
    /// fewer than three such samples).
    pub anon_slope_kib_s: Option<f64>,
    /// What that slope may be: [`LEAK_BYTES_PER_CALL`] × calls/s, at least
    /// [`MIN_SLOPE_KIB_S`].
    pub slope_bound_kib_s: f64,
    pub totals: Totals,
    pub duration_s: f64,
    /// Each check that failed, in words.
    pub failures: Vec<String>,
}

/// The recorder's report: complete, every function present with `calls == records + dropped +
/// in flight` and every record the kernel wrote in the capture; the sums over functions.
fn report_totals(report: &Value, failures: &mut Vec<String>) -> Totals {
    let mut totals = Totals::default();
    if report["meta"]["complete"] != true {
        failures.push("the capture is incomplete (no summary)".to_owned());
    }
    for name in FUNCTIONS {
        let Some(f) = report["functions"]
            .as_array()
            .and_then(|a| a.iter().find(|f| f["name"] == name))
        else {
            failures.push(format!("{name} is not in the report"));
            continue;
        };
        let n = |k: &str| f[k].as_u64().unwrap_or(0);
        let (calls, records, dropped, in_flight) =
            (n("calls"), n("count"), n("dropped"), n("in_flight"));
        if calls != records + dropped + in_flight {
            failures.push(format!(
                "{name}: calls {calls} != records {records} + dropped {dropped} + in flight \
                 {in_flight}"
            ));
        }
        if let Some(emitted) = f["emitted"].as_u64()
            && emitted != records
        {
            failures.push(format!(
                "{name}: the kernel wrote {emitted} records into the ring but the capture \
                 holds {records}"
            ));
        }
        totals.calls += calls;
        totals.records += records;
        totals.dropped += dropped;
        totals.in_flight += in_flight;
    }
    totals
}

impl Analysis {
    /// `calibrated_s`: when the probe floor's calibration beside the session had ended (the
    /// first sample after it is the first that can be steady), `None` if it never said so.
    pub fn new(samples: Vec<Sample>, report: &Value, calibrated_s: Option<f64>) -> Analysis {
        let mut failures = Vec::new();
        let warm = Warmup::new(&samples, calibrated_s);
        let late = &samples[warm.samples..];
        let bound = (warm.max_rss as f64 * RSS_GROWTH_FACTOR) as u64 + RSS_SLACK_KIB;
        let anon_bound = ((warm.max_anon as f64 * RSS_GROWTH_FACTOR) as u64 + ANON_SLACK_KIB)
            .min(STEADY_ANON_MAX_KIB);
        if samples.len() < 5 {
            failures.push(format!(
                "only {} samples of the recorder (expected one every few seconds)",
                samples.len()
            ));
        }
        if let Some(s) = late.iter().find(|s| s.rss_kib > bound) {
            failures.push(format!(
                "RSS grew: {} KiB at {:.0} s > bound {bound} KiB (warm-up peak {} KiB × \
                 {RSS_GROWTH_FACTOR} + {RSS_SLACK_KIB} KiB)",
                s.rss_kib, s.t_s, warm.max_rss
            ));
        }
        if let Some(s) = late.iter().find(|s| s.anon_kib > anon_bound) {
            failures.push(format!(
                "RssAnon grew: {} KiB at {:.0} s > bound {anon_bound} KiB (warm-up peak {} \
                 KiB × {RSS_GROWTH_FACTOR} + {ANON_SLACK_KIB} KiB, at most \
                 {STEADY_ANON_MAX_KIB} KiB)",
                s.anon_kib, s.t_s, warm.max_anon
            ));
        }
        // Judged from the first steady sample: before it the session opens its last fds and
        // the calibration holds its own tracer's (37 to 78 on 7.2, back after).
        if let Some(first) = late.first()
            && let Some(s) = late.iter().find(|s| s.fds > first.fds)
        {
            failures.push(format!(
                "open fds grew from {} to {} at {:.0} s",
                first.fds, s.fds, s.t_s
            ));
        }
        let totals = report_totals(report, &mut failures);
        if totals.calls == 0 {
            failures.push("no call was traced".to_owned());
        }
        let duration_s = report["meta"]["duration_ns"].as_u64().unwrap_or(0) as f64 / 1e9;
        let calls_per_s = totals.calls as f64 / duration_s.max(1e-9);
        let slope_bound_kib_s = (LEAK_BYTES_PER_CALL * calls_per_s / 1024.0).max(MIN_SLOPE_KIB_S);
        let late: Vec<(f64, f64)> = late.iter().map(|s| (s.t_s, s.anon_kib as f64)).collect();
        let anon_slope_kib_s = least_squares_slope(&late);
        match anon_slope_kib_s {
            Some(slope) if slope > slope_bound_kib_s => failures.push(format!(
                "RssAnon grows {slope:.2} KiB/s after warm-up (least squares over {} samples) \
                 > bound {slope_bound_kib_s:.2} KiB/s ({LEAK_BYTES_PER_CALL} bytes a call at \
                 {calls_per_s:.0} calls/s): a leak of about {:.0} bytes a call",
                late.len(),
                slope * 1024.0 / calls_per_s.max(1e-9)
            )),
            Some(_) => {}
            None => failures.push(format!(
                "only {} samples after warm-up: too few to fit the heap's slope",
                late.len()
            )),
        }
        Analysis {
            warmup_samples: warm.samples,
            samples,
            warmup_s: warm.until_s,
            calibrated_s,
            early_max_rss_kib: warm.max_rss,
            rss_bound_kib: bound,
            anon_bound_kib: anon_bound,
            anon_slope_kib_s,
            slope_bound_kib_s,
            totals,
            duration_s,
            failures,
        }
    }

    /// The samples after warm-up: those the level bounds and the slope fit judge.
    pub fn after_warmup(&self) -> &[Sample] {
        &self.samples[self.warmup_samples..]
    }

    fn range(&self, f: impl Fn(&Sample) -> u64) -> (u64, u64) {
        let v: Vec<u64> = self.samples.iter().map(f).collect();
        (
            v.iter().copied().min().unwrap_or(0),
            v.iter().copied().max().unwrap_or(0),
        )
    }

    /// One paragraph: the RSS and fd ranges and the accounting.
    pub fn summary(&self) -> String {
        let (rss_min, rss_max) = self.range(|s| s.rss_kib);
        let (anon_min, anon_max) = self.range(|s| s.anon_kib);
        let (fd_min, fd_max) = self.range(|s| s.fds);
        let t = self.totals;
        let first = self.samples.first().map_or(0, |s| s.rss_kib);
        let last = self.samples.last().map_or(0, |s| s.rss_kib);
        format!(
            "{} samples over {:.0} s: VmRSS {rss_min}..{rss_max} KiB (first {first}, last \
             {last}; bound after {:.0} s warm-up{} {} KiB), RssAnon {anon_min}..{anon_max} KiB \
             (bound {} KiB; slope after warm-up {} KiB/s, bound {:.2}), open fds {fd_min}..{fd_max}; {} calls = {} records + {} dropped + {} in flight \
             ({:.0} calls/s) — {}",
            self.samples.len(),
            self.duration_s,
            self.warmup_s,
            self.calibrated_s
                .map_or_else(String::new, |c| format!(" (calibration ended by {c:.0} s)")),
            self.rss_bound_kib,
            self.anon_bound_kib,
            self.anon_slope_kib_s
                .map_or_else(|| "unknown".to_owned(), |s| format!("{s:.2}")),
            self.slope_bound_kib_s,
            t.calls,
            t.records,
            t.dropped,
            t.in_flight,
            t.calls as f64 / self.duration_s.max(1e-9),
            if self.failures.is_empty() {
                "PASS".to_owned()
            } else {
                format!("FAIL: {}", self.failures.join("; "))
            }
        )
    }

    pub fn to_json(&self, kernel_release: &str) -> Value {
        json!({
            "kernel_release": kernel_release,
            "duration_s": self.duration_s,
            "warmup_s": self.warmup_s,
            "calibrated_s": self.calibrated_s,
            "early_max_rss_kib": self.early_max_rss_kib,
            "rss_bound_kib": self.rss_bound_kib,
            "anon_bound_kib": self.anon_bound_kib,
            "anon_slope_kib_s": self.anon_slope_kib_s,
            "slope_bound_kib_s": self.slope_bound_kib_s,
            "totals": {
                "calls": self.totals.calls,
                "records": self.totals.records,
                "dropped": self.totals.dropped,
                "in_flight": self.totals.in_flight,
            },
            "passed": self.failures.is_empty(),
            "failures": self.failures,
            "samples": self.samples.iter().map(|s| json!({
                "t_s": s.t_s,
                "rss_kib": s.rss_kib,
                "anon_kib": s.anon_kib,
                "file_kib": s.file_kib,
                "shmem_kib": s.shmem_kib,
                "fds": s.fds,
            })).collect::<Vec<_>>(),
        })
    }

    pub fn to_markdown(&self, kernel_release: &str) -> String {
        let mut out = format!(
            "# damon-trace soak on {kernel_release}\n\n{}\n\n",
            self.summary()
        );
        out.push_str("| t (s) | VmRSS (KiB) | RssAnon | RssFile | RssShmem | fds |\n");
        out.push_str("|--:|--:|--:|--:|--:|--:|\n");
        for s in &self.samples {
            let _ = writeln!(
                out,
                "| {:.0} | {} | {} | {} | {} | {} |",
                s.t_s, s.rss_kib, s.anon_kib, s.file_kib, s.shmem_kib, s.fds
            );
        }
        out
    }
}

/// Boots the guest, runs the soak script, and reads back samples and report.
pub fn run_in_guest(
    kernel: Kernel,
    seconds: u64,
    every_s: u64,
    out_dir: &Path,
) -> Result<(Analysis, String)> {
    let outcome = Guest::new(kernel, guest_script(seconds, every_s))
        .out_dir(out_dir)
        .timeout(Duration::from_secs(seconds * 3 + 240))
        .quiet()
        .run()?;
    if outcome.status != 0 {
        bail!(
            "the soak script failed with status {}; console tail:\n{}",
            outcome.status,
            tail(&outcome.console, 40)
        );
    }
    let read = |name: &str| {
        fs::read_to_string(out_dir.join(name)).with_context(|| format!("reading /out/{name}"))
    };
    let samples = parse_samples(&read("samples.txt")?)?;
    let report: Value = serde_json::from_str(&read("report.json")?).context("report.json")?;
    let calibrated_s = match fs::read_to_string(out_dir.join("calibrated.txt")) {
        Ok(t) => Some(t.trim().parse().context("calibrated.txt")?),
        Err(_) => None,
    };
    Ok((
        Analysis::new(samples, &report, calibrated_s),
        outcome.outcome.kernel_release.clone(),
    ))
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `cargo xtask soak`: the long soak; the curve goes to `target/soak/`.
pub fn run(kernel: Kernel, minutes: u64) -> Result<bool> {
    let seconds = minutes * 60;
    let every_s = if minutes <= 2 { 3 } else { 5 };
    let dir = util::target_dir().join("soak");
    let out_dir = dir.join("out");
    status(
        "soak",
        format!("recording {minutes} min under migrate-hot, sampling every {every_s} s"),
    );
    let (analysis, release) = run_in_guest(kernel, seconds, every_s, &out_dir)?;
    let stem = format!("soak-{release}-{minutes}m");
    fs::create_dir_all(&dir)?;
    let md = dir.join(format!("{stem}.md"));
    let js = dir.join(format!("{stem}.json"));
    fs::write(&md, analysis.to_markdown(&release))?;
    fs::write(
        &js,
        serde_json::to_string_pretty(&analysis.to_json(&release))? + "\n",
    )?;
    println!("{}", analysis.summary());
    println!("curve: {} and {}", md.display(), js.display());
    Ok(analysis.failures.is_empty())
}

/// The least-squares slope of `y` on `t` (`None` with fewer than three points or no spread
/// in `t`).
fn least_squares_slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 3 {
        return None;
    }
    let n = points.len() as f64;
    let mt = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let stt: f64 = points.iter().map(|p| (p.0 - mt).powi(2)).sum();
    let sty: f64 = points.iter().map(|p| (p.0 - mt) * (p.1 - my)).sum();
    (stt > 0.0).then(|| sty / stt)
}

#[cfg(test)]
mod tests;
