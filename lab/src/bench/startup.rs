//! `cargo xtask bench --startup`: from exec to the first record, damon-trace against bpftrace
//! attaching the same functions with entry and return probes, in one guest boot.
//!
//! The guest makes `--starts` rounds after a warm-up round (not counted: the first exec of
//! each binary pays for cold caches), each running every contender once in an order rotated by
//! one per round, so that none always follows the same other one:
//! - `damon-trace record` of the built-in functions as a user starts it (calibration
//!   included), and with `--no-calibrate`;
//! - bpftrace with a kprobe/kretprobe pair per function and with an fentry/fexit pair per
//!   function, each keeping an entry stamp per thread and printing the first call's duration;
//! - `damon-trace live` as a user starts it, on the guest's console (the terminal: the guest
//!   runs interactive), timed to its first frame that shows a call; the host types `q` once
//!   the screen shows it.
//!
//! A start is timed by the guest's clock (`/proc/uptime`, 10 ms steps) from just before the
//! shell forks the command to the moment its first record reaches the shell through a pipe:
//! damon-trace's `--debug-timing` table, which it writes when the session reads its first
//! record, and bpftrace's `printf` at the first return (`-B line`). `live` draws on the
//! terminal, so its moment is its own `--debug-timing` mark "first frame showing a call" (ms
//! since its `main` began, plus how long before that the process began: 10 ms steps), which
//! it writes when it exits. The idle guest's timers
//! call `lock_timer_base` about 75 times a second, so a tracer waits tens of milliseconds at
//! most for its first call once attached.
//!
//! Results: `startup.md` and `startup.json` in the bench folder; the JSON's
//! `first_record_vs_bpftrace` is damon-trace's median over the faster bpftrace's median, and
//! `first_frame_vs_bpftrace` live's.
use std::{fmt::Write as _, fs, path::Path, time::Duration};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::bpftrace;
use crate::{
    guest::Guest,
    kernel::Kernel,
    util::status,
    vm::{Interactive, KeyStep},
};

/// `--startup` and its count of starts.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct StartupArgs {
    /// Measure start-up instead (nothing else runs): exec to the first record of `damon-trace
    /// record` (as started by default, and with --no-calibrate) and to `live`'s first frame
    /// showing a call, against bpftrace with entry and return probes on the same functions
    /// (kprobes, and fentry/fexit), --starts each, interleaved, in one guest. Writes
    /// startup.{md,json} in the bench folder.
    #[arg(long)]
    pub startup: bool,
    /// Counted starts of each contender with --startup (after one warm-up start each).
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(5..=50))]
    pub starts: u32,
}

/// The contenders, in the first round's order: (label in the results, shell function call).
const CONTENDERS: [(&str, &str); 5] = [
    ("damon-trace", "start_dt damon-trace"),
    (
        "bpftrace kprobe",
        "start_bt 'bpftrace kprobe' /tmp/kprobe.bt",
    ),
    (
        "damon-trace --no-calibrate",
        "start_dt 'damon-trace --no-calibrate' --no-calibrate",
    ),
    (
        "bpftrace fentry",
        "start_bt 'bpftrace fentry' /tmp/fentry.bt",
    ),
    (LIVE, "start_live"),
];

/// `live`'s label: its first frame showing a call, not a first record.
const LIVE: &str = "damon-trace live";

/// The built-in functions damon-trace records without `--func`.
const FUNCTIONS: &str =
    "damon_hot_score damos_va_migrate_dests_add damon_migrate_pages lock_timer_base";

/// The guest script: `/out/starts.txt` gets one line per start, `ROUND<TAB>LABEL<TAB>T0<TAB>T1`
/// (seconds of uptime; T1 `none` when no first record came within the start's timeout).
pub fn guest_script(starts: u32) -> String {
    let rounds: String = (0..=starts as usize)
        .map(|r| {
            let k = CONTENDERS.len();
            (0..k)
                .map(|i| format!("round={r}; {}\n", CONTENDERS[(i + r) % k].1))
                .collect::<String>()
        })
        .collect();
    crate::script::fill(
        include_str!("startup.sh"),
        &[
            ("FUNCTIONS", FUNCTIONS),
            ("LIVE", LIVE),
            ("ROUNDS", &rounds),
        ],
    )
}

/// Each contender's starts (seconds; `None`: no first record), in round order, the warm-up
/// round's first.
type Starts = Vec<(String, Vec<Option<f64>>)>;

/// The counted starts and the warm-up's.
fn parse_starts(text: &str) -> Result<(Starts, Starts)> {
    let (mut by, mut warm): (Starts, Starts) = (Vec::new(), Vec::new());
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        let [round, label, t0, t1] = f[..] else {
            bail!("starts.txt: not ROUND, LABEL, T0, T1: {line:?}");
        };
        let t0: f64 = t0.parse().with_context(|| format!("T0 of {line:?}"))?;
        let took = t1.parse::<f64>().ok().map(|t1| t1 - t0);
        let into = if round == "0" { &mut warm } else { &mut by };
        match into.iter_mut().find(|(l, _)| l == label) {
            Some((_, v)) => v.push(took),
            None => into.push((label.to_owned(), vec![took])),
        }
    }
    Ok((by, warm))
}

/// The smallest and the largest of `v`.
fn bounds(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, 0.0), |(lo, hi), &x| (lo.min(x), hi.max(x)))
}

/// The results of the guest's `starts.txt`: per contender its starts, median, min and max,
/// and damon-trace's (both ways) median over the faster bpftrace's, with the spread of the
/// same ratio per round.
pub fn summarize(text: &str) -> Result<Value> {
    let (by, warm) = parse_starts(text)?;
    let mut tools = serde_json::Map::new();
    let mut medians = Vec::new();
    for (label, starts) in &by {
        let ok: Vec<f64> = starts.iter().flatten().copied().collect();
        let missed = starts.len() - ok.len();
        if ok.is_empty() {
            bail!(
                "{label}: no start reached a first record (its output: no-first-record-* in the guest's /out)"
            );
        }
        let m = super::table::median(&ok).context("a finite start")?;
        let (min, max) = bounds(&ok);
        medians.push((label.as_str(), m));
        tools.insert(
            label.clone(),
            json!({
                "seconds": starts,
                "median_s": m,
                "min_s": min,
                "max_s": max,
                "no_first_record": missed,
                "warm_up_s": warm.iter().find(|(l, _)| l == label).and_then(|(_, v)| v[0]),
            }),
        );
    }
    let get = |l: &str| medians.iter().find(|(n, _)| *n == l).map(|(_, m)| *m);
    let faster = ["bpftrace kprobe", "bpftrace fentry"]
        .into_iter()
        .filter_map(|l| Some((l, get(l)?)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .context("no bpftrace start was measured")?;
    let per_round = |ours: &str| -> Vec<f64> {
        let of = |l: &str| by.iter().find(|(n, _)| n == l).map(|(_, v)| v.clone());
        let (Some(a), Some(b)) = (of(ours), of(faster.0)) else {
            return Vec::new();
        };
        a.iter()
            .zip(&b)
            .filter_map(|(a, b)| Some((*a)? / (*b)?))
            .collect()
    };
    let ratio = |ours: &str| get(ours).map(|m| m / faster.1);
    let spread = |v: Vec<f64>| {
        let (min, max) = bounds(&v);
        json!({ "min": min, "max": max })
    };
    let main = ratio("damon-trace");
    let live = ratio(LIVE);
    Ok(json!({
        "tools": tools,
        "faster_bpftrace": faster.0,
        "first_record_vs_bpftrace": main,
        "first_record_vs_bpftrace_per_round": spread(per_round("damon-trace")),
        "first_record_no_calibrate_vs_bpftrace": ratio("damon-trace --no-calibrate"),
        "first_record_no_calibrate_vs_bpftrace_per_round":
            spread(per_round("damon-trace --no-calibrate")),
        "first_frame_vs_bpftrace": live,
        "first_frame_vs_bpftrace_per_round": spread(per_round(LIVE)),
        "goal": 1.0,
        "met": main.is_some_and(|r| r <= 1.0) && live.is_none_or(|r| r <= 1.0),
    }))
}

/// The markdown table of [`summarize`]'s result.
pub fn markdown(v: &Value, kernel: &str, bpftrace: &str, starts: u32) -> String {
    let mut md = format!(
        "## Start-up: exec to the first record (live: its first frame showing a call)\n\nOne boot of {kernel} (QEMU TCG: ratios \
         matter, absolute times do not), {starts} starts each after a warm-up, interleaved; \
         {bpftrace}.\n\n| contender | median (s) | min | max | no first record | warm-up \
         start (first of the boot) |\n|---|---:|---:|---:|---:|---:|\n"
    );
    if let Some(tools) = v["tools"].as_object() {
        for (label, t) in tools {
            let s = |k: &str| t[k].as_f64().unwrap_or(f64::NAN);
            let _ = writeln!(
                md,
                "| {label} | {:.2} | {:.2} | {:.2} | {} | {:.2} |",
                s("median_s"),
                s("min_s"),
                s("max_s"),
                t["no_first_record"],
                s("warm_up_s"),
            );
        }
    }
    let r = |k: &str| v[k].as_f64().map_or("–".into(), |x| format!("{x:.2}"));
    let span = |k: &str| {
        format!(
            "{:.2}–{:.2}",
            v[k]["min"].as_f64().unwrap_or(f64::NAN),
            v[k]["max"].as_f64().unwrap_or(f64::NAN)
        )
    };
    let _ = writeln!(
        md,
        "\ndamon-trace / {} (the faster bpftrace), medians: **{}** as started by default \
         (per round {}), {} with `--no-calibrate` (per round {}); `live`'s first frame \
         showing a call: **{}** (per round {}); goal ≤ 1.0: {}.",
        v["faster_bpftrace"].as_str().unwrap_or("bpftrace"),
        r("first_record_vs_bpftrace"),
        span("first_record_vs_bpftrace_per_round"),
        r("first_record_no_calibrate_vs_bpftrace"),
        span("first_record_no_calibrate_vs_bpftrace_per_round"),
        r("first_frame_vs_bpftrace"),
        span("first_frame_vs_bpftrace_per_round"),
        if v["met"] == true { "met" } else { "not met" },
    );
    md
}

/// How long a key step waits for live's screen (the rounds before it included).
const LIVE_WAIT: Duration = Duration::from_secs(300);

/// True when a panel of live's screen counts a call: a number other than 0 left of `calls`.
fn shows_a_call(screen: &str) -> bool {
    screen.lines().any(|line| {
        let words: Vec<&str> = line.split_whitespace().collect();
        words
            .windows(2)
            .any(|w| w[1] == "calls" && w[0].bytes().any(|b| (b'1'..=b'9').contains(&b)))
    })
}

/// Boots `kernel` with bpftrace, runs the starts and writes `startup.{md,json}` into
/// `target/bench`; true when the goal is met.
pub fn run(kernel: &Kernel, binary: &Path, starts: u32) -> Result<bool> {
    let out = &crate::util::target_dir().join("bench");
    fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let suite = kernel
        .userland_suite()
        .context("--startup needs a Debian kernel (7.3, 7.2, 6.12 or 6.1) for its bpftrace")?;
    let root = bpftrace::ensure(suite)?;
    let guest_out = out.join("startup-vm");
    status(
        "bench",
        format!(
            "start-up: {starts} starts of {} contenders in one guest",
            CONTENDERS.len()
        ),
    );
    // One `q` per live start (the warm-up's too), once its screen shows a call.
    let quits = (0..=starts)
        .map(|_| KeyStep::when_fresh("a call on live's screen", LIVE_WAIT, shows_a_call, "q"))
        .collect();
    let outcome = Guest::new(kernel.clone(), guest_script(starts))
        .binary(Some(binary.to_path_buf()))
        .trees(vec![root])
        .out_dir(&guest_out)
        .timeout(Duration::from_secs(600 + u64::from(starts) * 300))
        .interactive(Interactive::script(24, 80, quits))
        .run()?;
    if outcome.status != 0 {
        bail!(
            "the guest's start-up script failed with status {} (console above)",
            outcome.status
        );
    }
    let text = fs::read_to_string(guest_out.join("starts.txt")).context("the guest's starts")?;
    let mut v = summarize(&text)?;
    let version = fs::read_to_string(guest_out.join("bpftrace-version.txt"))
        .unwrap_or_default()
        .trim()
        .to_owned();
    let functions = fs::read_to_string(guest_out.join("functions.txt")).unwrap_or_default();
    v["kernel"] = json!(outcome.kernel_release);
    v["bpftrace"] = json!(version);
    v["functions"] = json!(functions.split_whitespace().collect::<Vec<_>>());
    v["starts"] = json!(starts);
    let md = markdown(&v, &outcome.kernel_release, &version, starts);
    fs::write(out.join("startup.json"), serde_json::to_string_pretty(&v)?)?;
    fs::write(out.join("startup.md"), &md)?;
    print!("{md}");
    status(
        "bench",
        format!("start-up results in {}", out.join("startup.json").display()),
    );
    Ok(v["met"] == true)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STARTS: &str = "0\tdamon-trace\t10.00\t19.00\n\
        1\tdamon-trace\t20.00\t26.00\n1\tbpftrace kprobe\t30.00\t33.00\n\
        1\tdamon-trace --no-calibrate\t40.00\t42.00\n1\tbpftrace fentry\t50.00\t54.00\n\
        2\tbpftrace kprobe\t60.00\t64.00\n2\tdamon-trace --no-calibrate\t70.00\t73.00\n\
        2\tbpftrace fentry\t80.00\tnone\n2\tdamon-trace\t90.00\t98.00\n";

    #[test]
    fn warm_up_dropped_and_ratios_against_the_faster_bpftrace() {
        let v = summarize(STARTS).unwrap();
        let t = &v["tools"];
        assert_eq!(t["damon-trace"]["seconds"], json!([6.0, 8.0]));
        assert_eq!(t["damon-trace"]["median_s"], 7.0);
        assert_eq!(t["bpftrace fentry"]["no_first_record"], 1);
        assert_eq!(t["damon-trace"]["warm_up_s"], 9.0);
        assert!(
            t["bpftrace kprobe"]["warm_up_s"].is_null(),
            "no warm-up start"
        );
        // kprobe: median 3.5; fentry: 4 (one start only).
        assert_eq!(v["faster_bpftrace"], "bpftrace kprobe");
        assert_eq!(v["first_record_vs_bpftrace"], 2.0);
        assert_eq!(v["first_record_no_calibrate_vs_bpftrace"], 2.5 / 3.5);
        assert_eq!(
            v["first_record_vs_bpftrace_per_round"],
            json!({"min": 2.0, "max": 2.0})
        );
        assert_eq!(v["met"], false);
        let md = markdown(&v, "7.2.13", "bpftrace v0.23", 2);
        assert!(
            md.contains("| damon-trace | 7.00 | 6.00 | 8.00 | 0 | 9.00 |"),
            "{md}"
        );
        assert!(md.contains("**2.00**"), "{md}");
    }

    #[test]
    fn live_is_judged_by_its_first_frame_against_the_same_bpftrace() {
        let with_live = format!("{STARTS}1\t{LIVE}\t100.0\t103.5\n2\t{LIVE}\t200.0\t202.5\n");
        let v = summarize(&with_live).unwrap();
        assert_eq!(v["first_frame_vs_bpftrace"], 3.0 / 3.5);
        assert_eq!(
            v["first_frame_vs_bpftrace_per_round"],
            json!({"min": 2.5 / 4.0, "max": 3.5 / 3.0})
        );
        // record's 2.0 alone fails the goal; without live in the run, live does not count.
        assert_eq!(v["met"], false);
        assert!(summarize(STARTS).unwrap()["first_frame_vs_bpftrace"].is_null());
        assert!(markdown(&v, "7.2", "bpftrace", 2).contains("showing a call: **0.86**"));
    }

    #[test]
    fn a_call_on_lives_screen_is_a_count_other_than_zero_left_of_calls() {
        assert!(shows_a_call(
            " lock_timer_base  kprobe-session  12 calls  p50 1.2µs"
        ));
        assert!(shows_a_call("x\n damon_hot_score 125.8k calls"));
        assert!(!shows_a_call(" lock_timer_base  0 calls\n no calls yet"));
        assert!(!shows_a_call("booting: 3 cpus, 12 callbacks"));
    }

    #[test]
    fn a_contender_without_any_first_record_is_an_error() {
        let e = summarize("1\tdamon-trace\t1.0\tnone\n1\tbpftrace kprobe\t1.0\t2.0\n");
        assert!(e.unwrap_err().to_string().contains("no start reached"));
    }

    #[test]
    fn the_script_rotates_the_order_and_times_every_contender_each_round() {
        let s = guest_script(5);
        for (_, call) in CONTENDERS {
            assert_eq!(s.matches(&format!("; {call}\n")).count(), 6, "{call}");
        }
        assert!(s.contains("round=1; start_bt 'bpftrace kprobe'"), "{s}");
        assert!(
            s.contains("round=2; start_dt 'damon-trace --no-calibrate'"),
            "{s}"
        );
    }
}
