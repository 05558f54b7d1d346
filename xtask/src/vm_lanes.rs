//! The VM stage of `cargo xtask test` in lanes: the guest test files split over a few
//! concurrent `cargo test` processes, one guest per lane at a time.
//!
//! A guest runs QEMU's TCG with `thread=single`: one host thread executes every vCPU, so one
//! guest keeps one host core busy and a 2-core host can run two side by side. Inside a lane the
//! tests still run one at a time (`--test-threads=1`), so no test shares its core with another
//! guest of its own file. The files go to the lanes longest first, each to the lane with the
//! least work so far (LPT scheduling), by what each file took in a measured run; a file not in
//! the table counts as [`UNKNOWN_SECONDS`].
use std::{
    io::{BufRead as _, BufReader, Read},
    process::{Command, Stdio},
    sync::mpsc,
    thread,
};

use anyhow::{Context as _, Result, bail};

use crate::counts::{Counts, parse_result_line};

/// Seconds each VM test file took in one fresh-clone `.ci/run` on this 2-core host in two lanes,
/// nothing else running (2026-12-06, 5808fb8, 1509 s in all; guests booted at the PVH entry).
/// Only the balance of the lanes depends on these numbers.
const MEASURED_SECONDS: &[(&str, u32)] = &[
    ("vm", 226),
    ("vm_ab", 85),
    ("vm_adhoc", 32),
    ("vm_calibrate", 85),
    ("vm_cleanup", 207),
    ("vm_clock", 74),
    ("vm_disturb", 204),
    ("vm_drops", 17),
    ("vm_exact", 314),
    ("vm_func", 55),
    ("vm_install", 23),
    ("vm_intervals", 75),
    ("vm_kernels", 23),
    ("vm_kmode", 109),
    ("vm_overload", 31),
    ("vm_probe_log", 35),
    ("vm_prometheus", 64),
    ("vm_scenarios", 162),
    ("vm_seeds", 71),
    ("vm_session", 19),
    ("vm_shell", 20),
    // Not from that run: 69 s for its three tests in the fresh-clone run of ae53e36
    // (2026-12-07, 1477 s in all).
    ("vm_slow", 69),
    ("vm_soak", 75),
    ("vm_stamps", 85),
    ("vm_systemd", 206),
    ("vm_values", 227),
];

/// What a file missing from [`MEASURED_SECONDS`] is assumed to take.
pub const UNKNOWN_SECONDS: u32 = 120;

/// The most lanes: each guest needs a core, and host work (initramfs, cargo) needs some too.
pub const MAX_LANES: usize = 4;

/// The lanes for a host with `cores` cores, unless `DAMON_TRACE_VM_LANES` says otherwise.
pub fn lane_count(cores: usize, env: Option<&str>) -> Result<usize> {
    match env {
        Some(v) => match v.trim().parse::<usize>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => bail!("DAMON_TRACE_VM_LANES={v:?}: expected a whole number of lanes, 1 or more"),
        },
        None => Ok(cores.clamp(1, MAX_LANES)),
    }
}

/// The measured (or assumed) seconds of a test file.
pub fn seconds_of(target: &str) -> u32 {
    MEASURED_SECONDS
        .iter()
        .find(|(t, _)| *t == target)
        .map_or(UNKNOWN_SECONDS, |(_, s)| *s)
}

/// One lane: its test files and their expected seconds in all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lane {
    pub targets: Vec<String>,
    pub seconds: u32,
}

/// Splits `targets` over at most `lanes` lanes, longest first to the least loaded lane; no
/// lane is empty. Ties go to the lower-numbered lane, so the plan is deterministic.
pub fn plan(targets: &[String], lanes: usize, seconds: impl Fn(&str) -> u32) -> Vec<Lane> {
    let n = lanes.clamp(1, targets.len().max(1));
    let mut out = vec![Lane::default(); n];
    let mut sorted: Vec<(&String, u32)> = targets.iter().map(|t| (t, seconds(t))).collect();
    sorted.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    for (target, s) in sorted {
        let lane = out
            .iter_mut()
            .min_by_key(|l| l.seconds)
            .expect("at least one lane");
        lane.targets.push(target.clone());
        lane.seconds += s;
    }
    out.retain(|l| !l.targets.is_empty());
    out
}

/// What one lane's `cargo test` ended with.
struct LaneEnd {
    lane: usize,
    counts: Counts,
    status: std::io::Result<std::process::ExitStatus>,
}

/// Runs every lane's `cargo test` at once (each from `command(lane targets)`), echoing every
/// line prefixed by its lane, and sums the results. Every lane runs to its end, so one failure
/// hides no other; the error names the failed lanes and their files.
pub fn run(lanes: &[Lane], command: impl Fn(&[String]) -> Result<Command>) -> Result<Counts> {
    println!(
        "VM tests in {} lane(s), one guest per lane at a time:",
        lanes.len()
    );
    for (i, l) in lanes.iter().enumerate() {
        println!(
            "  lane {}: about {} min: {}",
            i + 1,
            l.seconds.div_ceil(60),
            l.targets.join(" ")
        );
    }
    let (tx, rx) = mpsc::channel::<LaneEnd>();
    let mut handles = Vec::new();
    for (i, l) in lanes.iter().enumerate() {
        let mut cmd = command(&l.targets)?;
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting cargo test for VM lane {}", i + 1))?;
        let prefix = format!("[lane {}] ", i + 1);
        let stderr = child.stderr.take().context("cargo test stderr")?;
        let err_prefix = prefix.clone();
        handles.push(thread::spawn(move || {
            echo(stderr, &err_prefix, |_| {});
        }));
        let stdout = child.stdout.take().context("cargo test stdout")?;
        let tx = tx.clone();
        handles.push(thread::spawn(move || {
            let mut counts = Counts::default();
            echo(stdout, &prefix, |line| {
                if let Some(c) = parse_result_line(line) {
                    counts.add(c);
                }
            });
            let status = child.wait();
            let _ = tx.send(LaneEnd {
                lane: i,
                counts,
                status,
            });
        }));
    }
    drop(tx);
    let mut total = Counts::default();
    let mut failed = Vec::new();
    for end in rx {
        total.add(end.counts);
        let l = &lanes[end.lane];
        match end.status {
            Ok(st) if st.success() => println!(
                "[lane {}] done: {} passed, {} failed",
                end.lane + 1,
                end.counts.passed,
                end.counts.failed
            ),
            Ok(st) => failed.push(format!(
                "lane {} ({st}; {} failed; files {})",
                end.lane + 1,
                end.counts.failed,
                l.targets.join(" ")
            )),
            Err(e) => failed.push(format!("lane {} (not waited for: {e})", end.lane + 1)),
        }
    }
    for h in handles {
        let _ = h.join();
    }
    if !failed.is_empty() {
        bail!(
            "VM tests failed in {}; {} passed, {} failed in all",
            failed.join(", "),
            total.passed,
            total.failed
        );
    }
    Ok(total)
}

/// Echoes every line of `from` with `prefix`, handing each to `each`.
fn echo(from: impl Read, prefix: &str, mut each: impl FnMut(&str)) {
    for line in BufReader::new(from).lines() {
        let Ok(line) = line else { break };
        println!("{prefix}{line}");
        each(&line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn longest_first_to_the_least_loaded_lane() {
        let t = names(&["a", "b", "c", "d", "e"]);
        let secs = |n: &str| match n {
            "a" => 100,
            "b" => 60,
            "c" => 50,
            "d" => 40,
            _ => 10,
        };
        let p = plan(&t, 2, secs);
        assert_eq!(p[0].targets, names(&["a", "d"]));
        assert_eq!(p[1].targets, names(&["b", "c", "e"]));
        assert_eq!((p[0].seconds, p[1].seconds), (140, 120));
        // Every file once, in some lane.
        let mut all: Vec<String> = p.iter().flat_map(|l| l.targets.clone()).collect();
        all.sort();
        assert_eq!(all, t);
    }

    #[test]
    fn no_more_lanes_than_files_and_one_lane_keeps_everything() {
        let t = names(&["x", "y"]);
        assert_eq!(plan(&t, 4, |_| 1).len(), 2);
        let one = plan(&t, 1, |_| 1);
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].targets.len(), 2);
        assert!(plan(&[], 2, |_| 1).is_empty());
    }

    /// Two real child processes: results are summed over lanes, and a failing lane is named
    /// with its files while the other lane still runs to its end.
    #[test]
    fn lanes_run_at_once_and_a_failure_names_its_lane() {
        let lanes = vec![
            Lane {
                targets: names(&["ok"]),
                seconds: 1,
            },
            Lane {
                targets: names(&["bad"]),
                seconds: 1,
            },
        ];
        let script = |files: &[String]| {
            let mut c = Command::new("sh");
            let body = if files[0] == "ok" {
                "sleep 0.3; echo 'test result: ok. 3 passed; 0 failed; 0 ignored'; echo done > /dev/stderr"
            } else {
                "echo 'test result: FAILED. 1 passed; 2 failed; 0 ignored'; exit 101"
            };
            c.args(["-c", body]);
            Ok(c)
        };
        let err = run(&lanes, script).unwrap_err().to_string();
        assert!(err.contains("lane 2"), "{err}");
        assert!(err.contains("files bad"), "{err}");
        assert!(!err.contains("lane 1"), "{err}");
        assert!(err.contains("4 passed, 2 failed in all"), "{err}");
        let good = vec![lanes[0].clone(), lanes[0].clone()];
        let counts = run(&good, script).expect("two good lanes");
        assert_eq!((counts.passed, counts.failed), (6, 0));
    }

    #[test]
    fn lanes_follow_the_cores_or_the_environment() {
        assert_eq!(lane_count(2, None).unwrap(), 2);
        assert_eq!(lane_count(1, None).unwrap(), 1);
        assert_eq!(lane_count(64, None).unwrap(), MAX_LANES);
        assert_eq!(lane_count(2, Some("1")).unwrap(), 1);
        assert!(lane_count(2, Some("0")).is_err());
        assert!(lane_count(2, Some("two")).is_err());
    }

    #[test]
    fn every_vm_test_file_has_a_measured_time_and_ignored_guest_tests() {
        // A new file should get its measured seconds here once it has run in CI; until
        // then it is balanced as UNKNOWN_SECONDS. This keeps the table from going stale.
        let dir = damon_lab::util::workspace_root().join("lab/tests");
        for entry in std::fs::read_dir(dir).expect("lab/tests") {
            let path = entry.expect("entry").path();
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            if stem.starts_with("vm") && path.extension().is_some_and(|e| e == "rs") {
                assert!(
                    MEASURED_SECONDS.iter().any(|(t, _)| *t == stem),
                    "{stem} has no entry in MEASURED_SECONDS"
                );
                // The lanes run `--ignored` tests only; the host stage, the others. A guest
                // test without the attribute would boot guests among the host tests.
                let text = std::fs::read_to_string(&path).expect("test file");
                let lines: Vec<&str> = text.lines().collect();
                for (i, pair) in lines.windows(2).enumerate() {
                    if pair[0].trim() == "#[test]" && pair[1].trim_start().starts_with("fn vm_") {
                        panic!("{stem}:{}: a guest test without #[ignore]", i + 2);
                    }
                }
            }
        }
    }
}
