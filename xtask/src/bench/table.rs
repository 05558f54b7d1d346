//! The pure part of `cargo xtask bench`: per-round results in, medians, added cost, ratios and
//! the Markdown table out.
use std::fmt::Write as _;

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

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
}

impl Config {
    pub const ALL: [Config; 6] = [
        Config::Untraced,
        Config::Bpftrace,
        Config::StreamFentry,
        Config::StreamKprobe,
        Config::KernelFentry,
        Config::StreamFentryReader,
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
        }
    }

    /// The target for our added cost as a fraction of bpftrace's.
    pub fn target_vs_bpftrace(self) -> Option<f64> {
        match self {
            Config::StreamFentry | Config::StreamKprobe => Some(0.7),
            Config::KernelFentry => Some(0.4),
            Config::Untraced | Config::Bpftrace | Config::StreamFentryReader => None,
        }
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
    /// `added_ns` over bpftrace's `added_ns`.
    pub vs_bpftrace: Option<f64>,
    pub target_vs_bpftrace: Option<f64>,
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
            "target_vs_bpftrace": self.target_vs_bpftrace,
            "target_met": self.target_met,
            "traced_min": self.traced_min,
            "all_traced": self.all_traced,
        })
    }
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
        let all_traced = c == Config::Untraced || rs.iter().all(|r| r.traced >= Some(calls));
        out.push(Row {
            config: c,
            description: c.describe(),
            median_ns: median(&ns).context("no finite time")?,
            ns_per_call: ns,
            added_ns: median(&added).context("no round with an untraced run")?,
            ratio_untraced: median(&ratio).context("no round with an untraced run")?,
            vs_bpftrace: None,
            target_vs_bpftrace: c.target_vs_bpftrace(),
            target_met: None,
            traced_min,
            all_traced,
        });
    }
    let bpf = out
        .iter()
        .find(|r| r.config == Config::Bpftrace)
        .map(|r| r.added_ns);
    for r in &mut out {
        if let Some(b) = bpf
            && b > 0.0
            && r.config != Config::Untraced
        {
            r.vs_bpftrace = Some(r.added_ns / b);
        }
        r.target_met = match (r.vs_bpftrace, r.target_vs_bpftrace) {
            (Some(v), Some(t)) => Some(v <= t && r.all_traced),
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

/// The Markdown table of the overhead rows.
pub fn markdown(rows: &[Row]) -> String {
    let mut s = String::new();
    s.push_str(
        "| configuration | ns/call (median) | added ns/call | × untraced | added / bpftrace's | target | calls traced (min) |\n\
         |---|---:|---:|---:|---:|---|---:|\n",
    );
    for r in rows {
        let target = match (r.target_vs_bpftrace, r.target_met) {
            (Some(t), Some(true)) => format!("≤ {t} ✓"),
            (Some(t), Some(false)) => format!("≤ {t} ✗"),
            (Some(t), None) => format!("≤ {t} ?"),
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
            fmt_opt(r.vs_bpftrace, 2),
            target,
            traced
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(round: u32, config: Config, ns: f64, traced: Option<u64>) -> Run {
        Run {
            round,
            config,
            ns_per_call: ns,
            traced,
        }
    }

    #[test]
    fn medians_pair_each_round_with_its_own_untraced_run() {
        let mut runs = Vec::new();
        for (round, base) in [(1, 100.0), (2, 110.0), (3, 90.0)] {
            runs.push(run(round, Config::Untraced, base, None));
            runs.push(run(round, Config::Bpftrace, base + 200.0, Some(1000)));
            runs.push(run(round, Config::StreamFentry, base + 100.0, Some(1000)));
            runs.push(run(round, Config::KernelFentry, base + 100.0, Some(1000)));
        }
        let rows = rows(&runs, 1000).unwrap();
        let get = |c| rows.iter().find(|r| r.config == c).unwrap();
        assert_eq!(get(Config::Untraced).median_ns, 100.0);
        assert_eq!(get(Config::Untraced).added_ns, 0.0);
        assert_eq!(get(Config::Bpftrace).added_ns, 200.0);
        assert_eq!(get(Config::Bpftrace).vs_bpftrace, Some(1.0));
        let s = get(Config::StreamFentry);
        assert_eq!(s.added_ns, 100.0);
        assert_eq!(s.vs_bpftrace, Some(0.5));
        assert_eq!(s.target_met, Some(true));
        assert!((s.ratio_untraced - 2.0).abs() < 1e-9);
        // 0.5 > 0.4: kernel mode misses its target.
        assert_eq!(get(Config::KernelFentry).target_met, Some(false));
        assert!(!rows.iter().any(|r| r.config == Config::StreamKprobe));
        let md = markdown(&rows);
        assert!(md.contains("| damon-trace --mode stream --attach fentry (reader paused) | 200.0 | 100.0 | 2.00 | 0.50 | ≤ 0.7 ✓ | 1000 |"), "{md}");
        assert!(md.contains("≤ 0.4 ✗"), "{md}");
    }

    #[test]
    fn a_tracer_that_missed_calls_cannot_meet_its_target() {
        let runs = [
            run(1, Config::Untraced, 100.0, None),
            run(1, Config::Bpftrace, 300.0, Some(1000)),
            run(1, Config::StreamFentry, 101.0, Some(3)),
        ];
        let rows = rows(&runs, 1000).unwrap();
        let s = &rows[2];
        assert!(!s.all_traced);
        assert_eq!(s.target_met, Some(false));
        assert!(markdown(&rows).contains("3 (short!)"));
        assert!(super::rows(&runs[1..], 1000).is_err());
    }

    #[test]
    fn bpftrace_histograms_and_loop_lines_parse() {
        let bt = "Attaching 3 probes...\nready\n\n\n@ns: \n[100, 110)          12 |@@@@          |\n[110, 120)        1000 |@@@@@@@@@@@@@@@@|\n[5120, ...)          3 |               |\n";
        assert_eq!(bpftrace_hist_total(bt), Some(1015));
        assert_eq!(bpftrace_hist_total("Attaching 3 probes...\n"), None);
        let (calls, ns) =
            parse_loop("noise\n{\"calls\":1000,\"elapsed_ns\":5000,\"ns_per_call\":5.0}\n")
                .unwrap();
        assert_eq!((calls, ns), (1000, 5.0));
        assert!(parse_loop("nothing").is_err());
        assert_eq!(median(&[3.0, 1.0, 2.0, 10.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }
}
