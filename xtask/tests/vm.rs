//! Tests that boot a real Debian kernel in QEMU (TCG). Each is `#[ignore]`d so that a plain
//! `cargo test` stays fast and unprivileged; `cargo xtask test` runs them with
//! `cargo test -p xtask --test vm -- --ignored --test-threads=1`. Name new ones `vm_*` and
//! give each its own `out_dir`.
use std::{fs, time::Duration};

use xtask::{
    kernel::Kernel,
    vm::{self, Interactive, KeyStep, VmOptions},
};

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_boots_and_returns_status_and_out() {
    let out = tempfile::tempdir().expect("temp dir");
    let mut opts = VmOptions::new(
        Kernel::Debian72,
        "damon-trace --version > /out/version.txt; echo guest-says-hi; exit 3",
    );
    opts.out_dir = out.path().join("out");
    opts.timeout = Duration::from_secs(240);
    let outcome = vm::run(&opts).expect("the guest runs");
    assert_eq!(outcome.status, 3, "console:\n{}", outcome.console);
    assert!(
        outcome.kernel_release.starts_with("7.2."),
        "{}",
        outcome.kernel_release
    );
    assert!(
        outcome.console.contains("guest-says-hi"),
        "console:\n{}",
        outcome.console
    );
    let version =
        fs::read_to_string(opts.out_dir.join("version.txt")).expect("/out/version.txt came back");
    assert!(
        version.starts_with("damon-trace"),
        "version.txt: {version:?}"
    );
}

/// The interactive console: the command owns ttyS0 as its controlling terminal with the size
/// and TERM asked for; scripted keys drive a full-screen editor (busybox vi) once its screen
/// shows, and Ctrl-C reaches the guest's foreground program instead of stopping QEMU.
#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_tty_scripted_keys_drive_vi_and_ctrl_c_reaches_the_guest() {
    let out = tempfile::tempdir().expect("temp dir");
    let cmd = "stty size > /out/size.txt; echo \"$TERM\" > /out/term.txt; tty > /out/tty.txt
vi /out/vi.txt
# Ctrl-C signals the whole foreground group: a trapped SIGINT keeps this shell going, and is
# reset to the default in children, so sleep dies of it.
trap : INT
echo sleeping-now
sleep 60
echo \"sleep=$?\" > /out/sleep.txt
exit 4";
    let mut opts = VmOptions::new(Kernel::Debian72, cmd);
    opts.out_dir = out.path().join("out");
    opts.timeout = Duration::from_secs(180);
    let wait = Duration::from_secs(60);
    opts.interactive = Some(Interactive {
        term: "vt220".to_owned(),
        ..Interactive::script(
            20,
            60,
            vec![
                // vi marks the lines past the end of the file with `~`.
                KeyStep::when_shown("~", wait, "ihello from vi\x1b"),
                KeyStep::when_shown("hello from vi", wait, ":wq\r"),
                KeyStep::when_shown("sleeping-now", wait, "\x03"),
            ],
        )
    });
    let outcome = vm::run(&opts).expect("the guest runs");
    let log = outcome
        .terminal
        .as_ref()
        .expect("an interactive run has a terminal log");
    let screens: Vec<&str> = log.steps.iter().map(|s| s.screen.as_str()).collect();
    assert_eq!(
        outcome.status, 4,
        "screens:\n{screens:#?}\nconsole:\n{}",
        outcome.console
    );
    let read = |name: &str| {
        fs::read_to_string(opts.out_dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    assert_eq!(read("size.txt"), "20 60\n");
    assert_eq!(read("term.txt"), "vt220\n");
    assert_eq!(read("tty.txt"), "/dev/ttyS0\n");
    assert_eq!(read("vi.txt"), "hello from vi\n");
    assert_eq!(read("sleep.txt"), "sleep=130\n", "{}", log.screen());
    assert_eq!(log.steps.len(), 3);
    // The screen the second key step saw: the typed text on vi's first line, `~` below.
    let lines: Vec<&str> = log.steps[1].screen.split('\n').collect();
    assert_eq!(lines.len(), 20, "{screens:#?}");
    assert_eq!(lines[0], "hello from vi", "{screens:#?}");
    assert!(lines[1..19].iter().all(|l| *l == "~"), "{screens:#?}");
    // The markers /init prints after the command are not part of the terminal's log.
    let last = log.screen();
    assert!(last.trim_end().ends_with("sleeping-now\n^C"), "{last}");
}

/// Reads a JSON file the guest wrote under /out.
fn json(dir: &std::path::Path, name: &str) -> serde_json::Value {
    let text = fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"))
}

fn function<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["functions"]
        .as_array()
        .expect("functions array")
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("{name} missing from report"))
}

fn u(f: &serde_json::Value, key: &str) -> u64 {
    f[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} not a number in {f}"))
}

/// A traced function with calls: the accounting invariant, and percentiles in order.
fn assert_traced(f: &serde_json::Value, attach: &str) {
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

/// One boot covers the 7.2 checks: fentry on all four functions under the scenario, the same
/// with `--attach kprobe`, and nothing of ours left in the kernel afterwards.
#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_traces_all_four_with_fentry_and_kprobe_and_leaves_nothing() {
    let out = tempfile::tempdir().expect("temp dir");
    let cmd = "set -e
damon-trace doctor --json > /out/doctor.json
damon-trace scenario migrate-hot --duration 180s > /out/scenario.out 2> /out/scenario.err &
scenario=$!
sleep 3
damon-trace record -o /out/fentry.dtcap --duration 15s
damon-trace report /out/fentry.dtcap --format json > /out/fentry.json
damon-trace record -o /out/kprobe.dtcap --duration 15s --attach kprobe
damon-trace report /out/kprobe.dtcap --format json > /out/kprobe.json
damon-trace report /out/kprobe.dtcap
# Ctrl-C ends a recording early and still leaves a complete capture.
damon-trace record -o /out/int.dtcap --duration 120s --functions lock_timer_base &
rec=$!
# The capture file appears once the probes are attached.
while [ ! -s /out/int.dtcap ]; do sleep 0.5; done
sleep 3
kill -INT $rec
wait $rec
damon-trace report /out/int.dtcap --format json > /out/int.json
kill -INT $scenario 2>/dev/null || true
wait $scenario || true
# What the kernel itself lists after we exited: BPF programs (by our names), kprobes, and
# functions with ftrace hooks (fentry trampolines).
damon-trace doctor --json > /out/doctor-after.json || true
cat /sys/kernel/debug/kprobes/list > /out/kprobes-after.txt
cat /sys/kernel/tracing/enabled_functions > /out/ftrace-after.txt";
    let mut opts = VmOptions::new(Kernel::Debian72, cmd);
    opts.out_dir = out.path().join("out");
    opts.timeout = Duration::from_secs(420);
    let outcome = vm::run(&opts).expect("the guest runs");
    assert_eq!(outcome.status, 0, "console:\n{}", outcome.console);
    let dir = &opts.out_dir;

    let doctor = json(dir, "doctor.json");
    assert_eq!(doctor["can_trace"], true, "{doctor}");

    let fentry = json(dir, "fentry.json");
    for name in [
        "damon_hot_score",
        "damos_va_migrate_dests_add",
        "damon_migrate_pages",
        "lock_timer_base",
    ] {
        assert_traced(function(&fentry, name), "fentry");
    }
    // The scheme's scores: DAMOS hotness is 0..=99 (DAMOS_MAX_SCORE).
    let score = &function(&fentry, "damon_hot_score")["value"];
    assert!(score["min"].as_i64().expect("min") >= 0, "{score}");
    assert!(score["max"].as_i64().expect("max") <= 99, "{score}");
    let pages = &function(&fentry, "damon_migrate_pages")["value"];
    assert!(
        pages["max"].as_i64().expect("max") > 0,
        "no page was migrated: {pages}"
    );

    let kprobe = json(dir, "kprobe.json");
    for name in [
        "damon_hot_score",
        "damos_va_migrate_dests_add",
        "damon_migrate_pages",
        "lock_timer_base",
    ] {
        assert_traced(function(&kprobe, name), "kprobe");
    }

    let interrupted = json(dir, "int.json");
    assert_eq!(
        interrupted["meta"]["end_reason"], "interrupted",
        "{interrupted}"
    );
    assert_eq!(interrupted["meta"]["complete"], true);
    assert!(u(&interrupted["meta"], "duration_ns") < 60_000_000_000);
    assert_traced(function(&interrupted, "lock_timer_base"), "fentry");

    let after = json(dir, "doctor-after.json");
    let leftovers: Vec<_> = after["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["name"] == "leftovers")
        .collect();
    assert!(
        leftovers.is_empty(),
        "BPF programs left loaded: {leftovers:?}"
    );
    for file in ["kprobes-after.txt", "ftrace-after.txt"] {
        let text = fs::read_to_string(dir.join(file)).expect(file);
        for name in [
            "damon_hot_score",
            "damos_va_migrate_dests_add",
            "damon_migrate_pages",
            "lock_timer_base",
        ] {
            assert!(
                !text.contains(name),
                "{name} still hooked after exit ({file}):\n{text}"
            );
        }
    }
}

/// 6.12 lacks two of the functions: they are reported missing, the others are traced, and the
/// capture is still written.
#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_6_12_reports_missing_functions_and_traces_the_others() {
    let out = tempfile::tempdir().expect("temp dir");
    let cmd = "set -e
damon-trace scenario migrate-hot --duration 60s > /out/scenario.out 2> /out/scenario.err &
scenario=$!
sleep 3
damon-trace record -o /out/c.dtcap --duration 15s
damon-trace report /out/c.dtcap --format json > /out/report.json
damon-trace report /out/c.dtcap
kill -INT $scenario 2>/dev/null || true
wait $scenario || true";
    let mut opts = VmOptions::new(Kernel::Debian612, cmd);
    opts.out_dir = out.path().join("out");
    opts.timeout = Duration::from_secs(300);
    let outcome = vm::run(&opts).expect("the guest runs");
    assert_eq!(outcome.status, 0, "console:\n{}", outcome.console);
    assert!(
        outcome.kernel_release.starts_with("6.12."),
        "{}",
        outcome.kernel_release
    );
    let report = json(&opts.out_dir, "report.json");
    for name in ["damos_va_migrate_dests_add", "damon_migrate_pages"] {
        let f = function(&report, name);
        assert_eq!(f["attach"], "missing", "{f}");
        assert_eq!(u(f, "calls"), 0, "{f}");
    }
    for name in ["damon_hot_score", "lock_timer_base"] {
        assert_traced(function(&report, name), "fentry");
    }
    assert_eq!(report["meta"]["complete"], true);
}

const FOUR: [&str; 4] = [
    "damon_hot_score",
    "damos_va_migrate_dests_add",
    "damon_migrate_pages",
    "lock_timer_base",
];

/// The number left of `calls` on the live screen's panel header of `name`, as printed
/// (`1863`, `12.3k`), if that panel is on the screen.
fn calls_shown(screen: &str, name: &str) -> Option<String> {
    screen.lines().find_map(|line| {
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = words.iter().position(|w| *w == name)?;
        let calls = words[at..].iter().position(|w| *w == "calls")? + at;
        Some(words[calls - 1].to_owned())
    })
}

/// True when every one of the four panels shows a call count above zero.
fn all_four_called(screen: &str) -> bool {
    FOUR.iter().all(|name| {
        calls_shown(screen, name).is_some_and(|n| n.bytes().any(|b| (b'1'..=b'9').contains(&b)))
    })
}

/// `damon-trace live` on the 80x24 serial console under the scenario: all four panels count
/// calls, `q` quits with status 0 and a restored terminal, the --record capture is complete,
/// and nothing of ours stays hooked in the kernel.
#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_live_shows_all_four_functions_and_quits_cleanly() {
    let out = tempfile::tempdir().expect("temp dir");
    let cmd = "damon-trace scenario migrate-hot --duration 300s > /out/scenario.out 2> /out/scenario.err &
scenario=$!
damon-trace live --record /out/live.dtcap
rc=$?
kill -INT $scenario 2>/dev/null
wait $scenario
damon-trace report /out/live.dtcap --format json > /out/live.json
cat /sys/kernel/debug/kprobes/list > /out/kprobes-after.txt
cat /sys/kernel/tracing/enabled_functions > /out/ftrace-after.txt
exit $rc";
    let mut opts = VmOptions::new(Kernel::Debian72, cmd);
    opts.out_dir = out.path().join("out");
    opts.timeout = Duration::from_secs(300);
    opts.interactive = Some(Interactive::script(
        24,
        80,
        vec![KeyStep::when(
            "all four functions with calls > 0",
            Duration::from_secs(150),
            all_four_called,
            "q",
        )],
    ));
    let outcome = vm::run(&opts).expect("the guest runs");
    let log = outcome.terminal.as_ref().expect("terminal log");
    let Some(shown) = log.steps.first().map(|s| &s.screen) else {
        panic!(
            "live ended (status {}) before all four functions showed calls; last screen:\n{}",
            outcome.status,
            log.screen()
        );
    };
    assert_eq!(
        outcome.status,
        0,
        "live exited non-zero; screen when q was sent:\n{shown}\nlast screen:\n{}",
        log.screen()
    );
    for name in FOUR {
        let calls = calls_shown(shown, name).unwrap_or_default();
        assert!(
            calls != "0" && !calls.is_empty(),
            "{name}: {calls:?}\n{shown}"
        );
    }
    assert!(
        shown.contains(&outcome.kernel_release),
        "status line names the kernel:\n{shown}"
    );
    let end = log.terminal();
    assert!(
        !end.alternate_screen() && !end.cursor_hidden(),
        "live left the terminal in full-screen mode:\n{}",
        end.text()
    );

    let dir = &opts.out_dir;
    let report = json(dir, "live.json");
    assert_eq!(report["meta"]["complete"], true, "{report}");
    for name in FOUR {
        assert_traced(function(&report, name), "fentry");
    }
    for file in ["kprobes-after.txt", "ftrace-after.txt"] {
        let text = fs::read_to_string(dir.join(file)).expect(file);
        for name in FOUR {
            assert!(
                !text.contains(name),
                "{name} still hooked after live quit ({file}):\n{text}"
            );
        }
    }
}
