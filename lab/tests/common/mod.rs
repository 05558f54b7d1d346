//! Helpers shared by the VM test files (`lab/tests/vm*.rs`): booting a guest, reading what
//! it wrote under /out and checking the report's invariants.
#![allow(dead_code)] // each test file uses a subset
pub mod breakdown;
pub mod floor;
pub mod kernel_mode;

use std::{fs, time::Duration};

use damon_lab::{
    guest::{Guest, GuestRun},
    kernel::Kernel,
    script::STOP_SCENARIO,
    vm::{Interactive, KeyStep},
};

/// `cargo xtask dist`'s packages of the suite's static binary (`$DAMON_TRACE_BIN`, else a
/// fresh `build-static`), made in `target/<folder>` (one folder per test file: test files run
/// in parallel under `cargo test`).
pub fn packages(folder: &str) -> xtask::dist::Artifacts {
    let bin = match std::env::var_os("DAMON_TRACE_BIN").filter(|v| !v.is_empty()) {
        Some(b) => std::path::PathBuf::from(b),
        None => {
            let tc = damon_lab::bootstrap::ensure().expect("toolchain (cargo xtask bootstrap)");
            damon_lab::build::build_static(&tc).expect("cargo xtask build-static")
        }
    };
    let out = damon_lab::util::target_dir().join(folder);
    xtask::dist::package(&bin, &out).expect("packaging (cargo xtask dist's steps)")
}

/// A guest of `kernel` running `cmd` within `timeout`, its /out in a fresh temp dir, the
/// kernel booted at its PVH entry (1.6 s sooner a boot; see `damon_lab::kernel::pvh`).
pub fn guest(kernel: Kernel, cmd: impl Into<String>, timeout: Duration) -> Guest {
    Guest::new(kernel, cmd)
        .temp_out()
        .timeout(timeout)
        .direct_boot(true)
}

/// Boots `guest`; whatever the command's exit status, it is the outcome's.
pub fn boot(guest: Guest) -> GuestRun {
    guest.run().expect("the guest runs")
}

/// Boots `guest` and asserts that its command exited 0 (showing the console and, when a
/// scenario ran in the background, its `scenario.err`).
pub fn boot_ok(guest: Guest) -> GuestRun {
    let run = boot(guest);
    assert_eq!(
        run.status,
        0,
        "console:\n{}\nscenario:\n{}",
        run.console,
        run.read("scenario.err")
    );
    run
}

/// Runs `cmd` as root in a guest of `kernel` and asserts it exited 0 ([`boot_ok`]); the
/// guest's /out is the returned run's `dir()`.
pub fn run_script(kernel: Kernel, cmd: impl Into<String>, timeout: Duration) -> GuestRun {
    boot_ok(guest(kernel, cmd, timeout))
}

/// `cmd` on 7.2 with the serial console as an 80x24 terminal within `timeout`, typing `q`
/// once the screen passes `test` (`what` it waits for, at most `within`); whatever the exit
/// status, it is the outcome's (see [`first_screen`]).
pub fn run_live(
    cmd: impl Into<String>,
    timeout: Duration,
    (what, within): (&str, Duration),
    test: impl Fn(&str) -> bool + Send + Sync + 'static,
) -> GuestRun {
    let quit = KeyStep::when(what, within, test, "q");
    boot(
        guest(Kernel::DEBIAN_7_2, cmd, timeout).interactive(Interactive::script(
            24,
            80,
            vec![quit],
        )),
    )
}

/// Guest script of a `live` test: `start` (the scenario's start fragment, see
/// `damon_lab::script`), `damon-trace live --record /out/live.dtcap LIVE_ARGS`, the scenario
/// stopped, the capture's JSON report into /out/live.json, `after`; exits with live's status.
pub fn live_script(start: &str, live_args: &str, after: &str) -> String {
    format!(
        "{start}damon-trace live{live_args} --record /out/live.dtcap
rc=$?
{STOP_SCENARIO}
damon-trace report /out/live.dtcap --format json > /out/live.json
{after}exit $rc"
    )
}

/// The screen the first key step of a [`run_live`] saw; panics, with the last screen, when the
/// program ended before it showed `what`.
pub fn first_screen<'a>(run: &'a GuestRun, what: &str) -> &'a str {
    let log = run.terminal.as_ref().expect("terminal log");
    let Some(shown) = log.steps.first().map(|s| &s.screen) else {
        panic!(
            "live ended (status {}) before {what}; last screen:\n{}",
            run.status,
            log.screen()
        );
    };
    shown
}

/// What `--attach auto` (the default) picks for `function` in `mode` (stream, kernel, both)
/// on a Debian kernel: a kprobe session on the 7.x kernels, which run `preempt=lazy`
/// (trampoline runs are skipped while a task is preempted inside them), except for
/// damon_hot_score when records carry its arguments (kprobe: no room in the cookie);
/// fentry/fexit on 6.x, which run `voluntary` and have no fsession.
pub fn auto_attach(kernel: &Kernel, function: &str, mode: &str) -> &'static str {
    match kernel.profile() {
        Some(p) if p.preemption.preemptible() => {
            if function == "damon_hot_score" && mode != "kernel" {
                "kprobe"
            } else {
                "kprobe-session"
            }
        }
        _ => "fentry",
    }
}

/// The four built-in functions, in `FunctionId` order.
pub const FOUR: [&str; 4] = [
    "damon_hot_score",
    "damos_va_migrate_dests_add",
    "damon_migrate_pages",
    "lock_timer_base",
];

/// Reads a text file the guest wrote under /out.
pub fn read(dir: &std::path::Path, name: &str) -> String {
    fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Reads a JSON file the guest wrote under /out.
pub fn json(dir: &std::path::Path, name: &str) -> serde_json::Value {
    let text = fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"))
}

/// `damon-trace report --format json` of a capture, run on the host with the suite's static
/// binary (reports need no kernel).
pub fn host_report(capture: &std::path::Path) -> serde_json::Value {
    let bin = damon_lab::vm::guest_binary(&damon_lab::vm::VmOptions::new(Kernel::DEBIAN_7_2, ""))
        .expect("damon-trace");
    let out = std::process::Command::new(&bin)
        .args(["report", "--format", "json"])
        .arg(capture)
        .output()
        .expect("run damon-trace report on the host");
    assert!(
        out.status.success(),
        "report {}: {}",
        capture.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("report JSON")
}

pub fn function<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    damon_lab::parse::function(report, name).unwrap_or_else(|e| panic!("{e:#}"))
}

/// The element of the array `list` whose `key` is `value` (see [`damon_lab::parse::entry`]).
pub fn entry<'a>(list: &'a serde_json::Value, key: &str, value: &str) -> &'a serde_json::Value {
    damon_lab::parse::entry(list, key, value).unwrap_or_else(|e| panic!("{e:#}"))
}

/// An array of u64s.
pub fn u64s(v: &serde_json::Value) -> Vec<u64> {
    damon_lab::parse::u64s(v).unwrap_or_else(|e| panic!("{e:#}"))
}

/// `v[key]` is a string containing `needle`.
pub fn assert_says(v: &serde_json::Value, key: &str, needle: &str) {
    assert!(
        v[key].as_str().is_some_and(|s| s.contains(needle)),
        "{key} does not say {needle:?}: {v}"
    );
}

/// Guest shell: `uname` N times after the scrape /out/`prev` of `serve` on 127.0.0.1:9464,
/// then scrapes into /out/`file` until its `_count`, `in_flight` and drops of
/// __x64_sys_newuname (which nothing else in the guest calls) add up to N or more above
/// `prev`'s (serve folds what arrived once a second), for at most 30 s.
pub fn uname_then_scrape(prev: &str, file: &str, n: u64) -> String {
    format!(
        "seen() {{ grep -E '^damon_trace_(call_duration_seconds_count|in_flight|dropped_total)[{{]' $1 \
| grep -F 'function=\"__x64_sys_newuname\"' | awk '{{ s += $NF }} END {{ print s + 0 }}'; }}
prev=$(seen /out/{prev})
n=0; while [ $n -lt {n} ]; do uname > /dev/null; n=$((n+1)); done
i=0
until wget -q --header 'Accept: application/openmetrics-text' -O /out/{file} \
http://127.0.0.1:9464/metrics && [ $(seen /out/{file}) -ge $((prev + {n})) ]; do
  i=$((i+1)); [ $i -gt 60 ] && break; sleep 0.5
done
"
    )
}

pub fn u(f: &serde_json::Value, key: &str) -> u64 {
    f[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} not a number in {f}"))
}

/// A traced function with calls: the accounting invariant, and percentiles in order.
pub fn assert_traced(f: &serde_json::Value, attach: &str) {
    let name = &f["name"];
    assert_eq!(f["attach"], attach, "{name}: {f}");
    assert!(u(f, "calls") > 0, "{name} was never called: {f}");
    assert_eq!(
        u(f, "calls"),
        u(f, "count") + u(f, "dropped") + u(f, "in_flight"),
        "{name}: calls != count + dropped + in_flight: {f}"
    );
    let p: Vec<u64> = ["min_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns"]
        .iter()
        .map(|k| u(f, k))
        .collect();
    assert!(
        p.windows(2).all(|w| w[0] <= w[1]),
        "{name}: percentiles out of order {p:?}"
    );
    assert!(p[0] > 0, "{name}: a call cannot take 0 ns");
}

/// The flush period of `record` and `live --record` (their one-second tick), in seconds.
pub const FLUSH_PERIOD_S: f64 = 1.0;
/// The longest median gap between the flushes seen before a SIGKILL: 1.5 flush periods.
/// Measured on the guest's clock in the same run, so a slow or loaded host (whose late ticks
/// stretch a gap or two) does not count, while a build that flushes rarely does: the ~4 s
/// `kill_recorder` watches see 4 or so growths a second apart (median ~1 s); a build flushing
/// every 10th tick sees none (one gap of ~4 s).
pub const MAX_MEDIAN_FLUSH_GAP_S: f64 = 1.5 * FLUSH_PERIOD_S;
/// How far before the last flush seen before a SIGKILL the capture's last data may end: half a
/// flush period. That flush wrote what the recorder drained just before it (milliseconds), up
/// to the last call it saw (lock_timer_base runs many times a second; a kernel-mode snapshot
/// is taken right before it is written); a reader losing that flushed chunk falls a whole
/// flush period (~1 s) short.
pub const READ_BACK_SLACK_S: f64 = 0.5 * FLUSH_PERIOD_S;
/// How long [`capture_helpers`]' `kill_recorder` watches a recorder's capture before it kills
/// the recorder: long enough to see several flushes (4 at one a second, see
/// [`MAX_MEDIAN_FLUSH_GAP_S`]), and a moment unrelated to the recorder's own flushes.
pub const KILL_AFTER_S: u32 = 4;

/// The number left of `calls` on the live screen's panel header of `name`, as printed
/// (`1863`, `12.3k`), if that panel is on the screen.
pub fn calls_shown(screen: &str, name: &str) -> Option<String> {
    screen.lines().find_map(|line| {
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = words.iter().position(|w| *w == name)?;
        let calls = words[at..].iter().position(|w| *w == "calls")? + at;
        Some(words.get(calls.checked_sub(1)?)?.to_string())
    })
}

/// True when the live screen's panel of `name` counts calls (a number other than 0 left of
/// `calls`).
pub fn called(screen: &str, name: &str) -> bool {
    calls_shown(screen, name).is_some_and(|n| n.bytes().any(|b| (b'1'..=b'9').contains(&b)))
}

/// The words of the first line of a text table that starts with `name` and a space.
pub fn row<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
    table
        .lines()
        .find(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' '))
        })
        .unwrap_or_else(|| panic!("no {name} row in:\n{table}"))
        .split_whitespace()
        .collect()
}

/// Guest shell helpers for a recorder started in the background as `$rec`, writing
/// `/out/NAME.dtcap` with its standard error in `/out/NAME.err`:
/// - `attached NAME`: waits until the capture file is not empty (it appears once the probes
///   are attached); if the recorder has died, prints its errors and fails the script.
/// - `getppid_function`: sets `$F` to the kernel function behind getppid(2), its own symbol
///   where the compiler kept it (written to /out/func), or fails with status 3.
pub const RECORDER_HELPERS: &str =
    damon_lab::script::without_header(include_str!("../scripts/common_recorder_helpers.sh"));

/// Guest shell helpers around a recorder writing a capture.
/// - `grown FILE`: until FILE holds a chunk after its header and metadata chunk (the first
///   flushed records, interval marks or kernel-mode snapshot: the recorder is tracing and
///   flushing). Fails the script (status 98) after about two minutes.
/// - `kill_recorder PID NAME`: polls the size of PID's capture `/out/NAME.dtcap` about every
///   0.1 s for [`KILL_AFTER_S`] seconds (run after `grown`, so once records flow), logging
///   when it grows to `/out/NAME.flushes` (see [`KillLog`]), then SIGKILLs PID.
///
/// The clock is the first field of /proc/uptime, CLOCK_BOOTTIME in seconds, which equals the
/// CLOCK_MONOTONIC of the records' `entry_ns` (`bpf_ktime_get_ns`) in a guest that never
/// suspends.
pub fn capture_helpers() -> String {
    damon_lab::script::fill(
        include_str!("../scripts/common_capture_helpers.sh"),
        &[("KILL_AFTER_S", &KILL_AFTER_S.to_string())],
    )
}

/// What `kill_recorder PID NAME` saw of a recorder's capture before it SIGKILLed it, from
/// `/out/NAME.flushes`: times on the guest's clock (s).
pub struct KillLog {
    /// When the polling started (`watch T`).
    pub watch_from: f64,
    /// Each growth seen afterwards (`grew BEFORE SEEN`): written after BEFORE, the clock of the
    /// poll before, and seen at SEEN (a poll's clock read, just before it read the size).
    pub growths: Vec<(f64, f64)>,
    /// The clock read just before the SIGKILL (`killed T`).
    pub killed_at: f64,
}

impl KillLog {
    pub fn read(dir: &std::path::Path, name: &str) -> KillLog {
        let file = format!("{name}.flushes");
        let text = read(dir, &file);
        let num = |w: Option<&str>| -> f64 {
            w.and_then(|w| w.parse().ok())
                .unwrap_or_else(|| panic!("{file}: a line without its numbers:\n{text}"))
        };
        let (mut watch_from, mut killed_at, mut growths) = (None, None, Vec::new());
        for line in text.lines() {
            let mut words = line.split_whitespace();
            match words.next() {
                Some("watch") => watch_from = Some(num(words.next())),
                Some("grew") => growths.push((num(words.next()), num(words.next()))),
                Some("killed") => killed_at = Some(num(words.next())),
                _ => panic!("{file}: unexpected line {line:?} in:\n{text}"),
            }
        }
        let missing = |what: &str| -> f64 {
            panic!("{file}: no `{what}` line (the kill never came?):\n{text}")
        };
        KillLog {
            watch_from: watch_from.unwrap_or_else(|| missing("watch")),
            growths,
            killed_at: killed_at.unwrap_or_else(|| missing("killed")),
        }
    }

    /// The gaps between the moments the capture was seen to grow, from the start of the
    /// polling to the kill; the first and the last are gaps without a flush too, however long
    /// they would have run.
    fn gaps(&self) -> Vec<f64> {
        let mut seen = vec![self.watch_from];
        seen.extend(self.growths.iter().map(|g| g.1));
        seen.push(self.killed_at);
        seen.windows(2).map(|w| w[1] - w[0]).collect()
    }
}

/// A SIGKILLed recorder lost at most about a flush period, judged against the flushes `log`
/// saw in the same run rather than a fixed bound (a late tick on a slow or loaded host is not
/// a fault of the build): (1) the capture grew about once per [`FLUSH_PERIOD_S`] until the kill
/// (median gap at most [`MAX_MEDIAN_FLUSH_GAP_S`]), and (2) it reads back to the last growth
/// seen before the kill: `last_s`, the guest-clock time of the last thing it holds, is at most
/// [`READ_BACK_SLACK_S`] before that growth was written, or after the growth before it was
/// seen (only the last chunk can hold such data). `start_s` (the capture's
/// `start_monotonic_ns`) places the kill [`KILL_AFTER_S`] or more into the recording, which
/// also shows that the two clocks agree.
pub fn assert_sigkill_loss(what: &str, start_s: f64, last_s: f64, log: &KillLog) {
    let killed_at = log.killed_at;
    let lost = killed_at - last_s;
    let mut gaps = log.gaps();
    let seen: Vec<String> = log
        .growths
        .iter()
        .map(|g| format!("+{:.2}", g.1 - log.watch_from))
        .collect();
    let seen = if seen.is_empty() {
        "no growth seen".to_string()
    } else {
        format!("growths seen at [{}] s", seen.join(", "))
    };
    gaps.sort_by(f64::total_cmp);
    // The median, the larger middle one of an even count: over the ~4 s watched, one gap (no
    // growth seen) or two (one growth) always fail.
    let median = gaps[gaps.len() / 2];
    println!(
        "{what}: killed {:.2} s into the recording, after {:.2} s of watching its capture, \
         {seen} (median gap {median:.2} s); the capture reads to {lost:.2} s before the kill, \
         {:.2} s before its last growth seen",
        killed_at - start_s,
        killed_at - log.watch_from,
        log.growths.last().map_or(f64::NAN, |g| g.0 - last_s),
    );
    assert!(
        killed_at - start_s >= f64::from(KILL_AFTER_S) - 0.5,
        "{what}: the kill at {killed_at} s came {:.2} s after the capture's start at {start_s} s, \
         not {KILL_AFTER_S} s or more: are /proc/uptime and CLOCK_MONOTONIC apart?",
        killed_at - start_s
    );
    assert!(
        lost > -0.5,
        "{what}: the capture holds data from {:.2} s after the kill at {killed_at} s",
        -lost
    );
    assert!(
        median <= MAX_MEDIAN_FLUSH_GAP_S,
        "{what}: the capture grew {} times in the {:.2} s watched before the SIGKILL ({seen}), \
         a median gap of {median:.2} s, more than {MAX_MEDIAN_FLUSH_GAP_S} s: the recorder does \
         not flush every {FLUSH_PERIOD_S} s",
        log.growths.len(),
        killed_at - log.watch_from,
    );
    // A passing median leaves at least two growths (three gaps).
    let &(written_after, seen_at) = log.growths.last().expect("a growth before the kill");
    // Data from after the growth before it was seen can only be in the last growth's chunk
    // (each chunk holds what was drained before it was written): proof that chunk was read
    // back, however long a starved guest took between a drain and its write.
    let previous_seen = log.growths.iter().rev().nth(1).map(|g| g.1);
    assert!(
        last_s >= written_after - READ_BACK_SLACK_S || previous_seen.is_some_and(|p| last_s > p),
        "{what}: the capture reads only to {last_s:.3} s, {:.2} s before its last growth seen \
         before the SIGKILL (written between {written_after} and {seen_at} s, killed at \
         {killed_at} s), more than {READ_BACK_SLACK_S} s, and not past the growth before it \
         (seen at {previous_seen:?} s): flushed data is not read back",
        written_after - last_s
    );
}

/// [`assert_sigkill_loss`] for a stream-mode capture exported as JSON: its last record is the
/// latest `entry_ns + duration_ns` (when the call ended and its record was written) among the
/// records of `functions`.
pub fn assert_sigkill_loss_records(
    what: &str,
    export: &serde_json::Value,
    functions: &[&str],
    log: &KillLog,
) {
    let start = u(&export["meta"], "start_monotonic_ns") as f64 / 1e9;
    let records = export["records"].as_array().expect("records");
    let last = records
        .iter()
        .filter(|r| functions.iter().any(|f| r["function"] == *f))
        .map(|r| u(r, "entry_ns") + u(r, "duration_ns"))
        .max()
        .unwrap_or_else(|| panic!("{what}: no record of {functions:?} survived the SIGKILL"));
    assert_sigkill_loss(what, start, last as f64 / 1e9, log);
}

/// A recorder of lock_timer_base that `kill_recorder PID NAME` SIGKILLed, its capture's report
/// in /out/NAME.json and JSON export in /out/NAME-export.json: the report says incomplete and
/// [`assert_sigkill_loss_records`] holds. Returns the report.
pub fn assert_killed_timer_recorder(
    dir: &std::path::Path,
    name: &str,
    what: &str,
) -> serde_json::Value {
    let killed = json(dir, &format!("{name}.json"));
    assert_eq!(killed["meta"]["complete"], false, "{killed}");
    assert_sigkill_loss_records(
        what,
        &json(dir, &format!("{name}-export.json")),
        &["lock_timer_base"],
        &KillLog::read(dir, name),
    );
    killed
}

/// [`assert_sigkill_loss`] for a kernel-mode capture exported as JSON: its last histogram
/// snapshot, at `start_monotonic_ns + elapsed_ns` (`elapsed_ns` counts from a moment just
/// after the start, so this errs towards a larger loss).
pub fn assert_sigkill_loss_snapshots(what: &str, export: &serde_json::Value, log: &KillLog) {
    let start = u(&export["meta"], "start_monotonic_ns") as f64 / 1e9;
    let last = export["snapshots"]
        .as_array()
        .expect("snapshots")
        .iter()
        .map(|s| u(s, "elapsed_ns"))
        .max()
        .unwrap_or_else(|| panic!("{what}: no histogram snapshot survived the SIGKILL"));
    assert_sigkill_loss(what, start, start + last as f64 / 1e9, log);
}

/// Guest shell functions over DAMON's sysfs:
/// - `damon_dump FILE`: every file under /sys/kernel/mm/damon/admin (its path relative to
///   admin/, then each readable one with its value: every setting and state) except the
///   scheme counters under `stats/` and `tried_regions/` (results, not settings), and
///   DAMON_STAT's `enabled` when the kernel has it, sorted, into FILE;
/// - `damon_leave_stopped_kdamond`: configures a stopped kdamond as someone else could have
///   left it, with a value other than the default in each group of settings (intervals, region
///   bounds, a target region, a scheme's access pattern, quotas, weights, watermarks and
///   apply interval), so that a restore that misses any of them shows in the dump.
pub const DAMON_HELPERS: &str =
    damon_lab::script::without_header(include_str!("../scripts/common_damon_helpers.sh"));

/// A `damon_dump` (see [`DAMON_HELPERS`]) taken after `damon_leave_stopped_kdamond` holds its
/// paddr context, quota and stopped state, and the line `also`.
pub fn assert_left_kdamond(dump: &str, also: &str) {
    for line in [
        "kdamonds/0/contexts/0/operations:paddr",
        also,
        "kdamonds/0/contexts/0/schemes/0/quotas/ms:17",
        "kdamonds/0/state:off",
    ] {
        assert!(dump.lines().any(|l| l == line), "{line} not in\n{dump}");
    }
}

/// Two `damon_dump`s (see [`DAMON_HELPERS`]) are equal; the message lists the lines only one
/// of them has.
pub fn assert_same_damon(what: &str, before: &str, after: &str) {
    if before == after {
        return;
    }
    let only = |a: &str, b: &str| -> Vec<String> {
        let b: std::collections::BTreeSet<&str> = b.lines().collect();
        a.lines()
            .filter(|l| !b.contains(l))
            .map(String::from)
            .collect()
    };
    panic!(
        "{what}: DAMON's sysfs differs from before.\nonly before:\n  {}\nonly after:\n  {}",
        only(before, after).join("\n  "),
        only(after, before).join("\n  ")
    );
}

/// Doctor's session self-test (`--json`'s `session_test` for the `session` check, a kprobe
/// session; `fsession_test` for `fsession`) on a kernel that has it: it ran, and the kernel
/// kept every promise the tool relies on, by the counts the self-test's own getppid calls fix:
/// each call's entry run, a return run with its entry's cookie for each entry that stamped
/// one; in the second phase, where the entry writes no cookie, a kprobe session's entry
/// declines its return run (returns 1) and gets none, while an fsession (held to returning 0)
/// gets every return run, each with a zeroed cookie.
pub fn assert_session_holds(doctor: &serde_json::Value, check_name: &str) {
    let check = entry(&doctor["checks"], "name", check_name);
    assert_eq!(check["level"], "ok", "{check}");
    let t = &doctor[format!("{check_name}_test")];
    let calls = u(t, "calls");
    assert!(calls >= 1000, "{t}");
    let skipped = t["skipped"]
        .as_u64()
        .expect("the kernel counts skipped runs");
    assert_eq!(
        u(t, "entries") + u(t, "declined_entries") + skipped,
        2 * calls,
        "every call's entry ran or was counted as skipped: {t}"
    );
    assert_eq!(
        u(t, "returns"),
        u(t, "entries"),
        "a return run per entry: {t}"
    );
    assert_eq!(
        u(t, "zero_cookies"),
        0,
        "each return saw its entry's cookie: {t}"
    );
    let (returns, zero) = if check_name == "fsession" {
        (u(t, "declined_entries"), u(t, "declined_entries"))
    } else {
        (0, 0)
    };
    assert_eq!(
        (
            u(t, "returns_after_decline"),
            u(t, "zero_cookies_after_decline")
        ),
        (returns, zero),
        "return runs after an entry that wrote no cookie, and zero cookies among them: {t}"
    );
}

/// Doctor's `check_name` check on a kernel without that kind of session: said, not a warning,
/// and no self-test ran.
pub fn assert_session_absent(doctor: &serde_json::Value, check_name: &str, why: &str) {
    let check = entry(&doctor["checks"], "name", check_name);
    assert_eq!(check["level"], "ok", "{check}");
    assert_says(check, "found", why);
    assert!(
        doctor.get(format!("{check_name}_test")).is_none(),
        "{doctor}"
    );
}
