//! The development and CI hosts run a kernel that forbids tracing (see DESIGN.md §2): `doctor`
//! must say why and exit non-zero, and `record` must fail fast with the same diagnosis instead
//! of hanging or printing a raw errno. On a host that can trace, these checks say so and skip.
use std::process::Command;

fn damon_trace(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_damon-trace"))
        .args(args)
        .output()
        .expect("run damon-trace")
}

fn doctor() -> (serde_json::Value, i32) {
    let out = damon_trace(&["doctor", "--json"]);
    let json = serde_json::from_slice(&out.stdout).expect("doctor --json prints one JSON object");
    (json, out.status.code().expect("exit code"))
}

#[test]
fn doctor_exit_status_matches_its_verdict() {
    let (d, code) = doctor();
    let can_trace = d["can_trace"].as_bool().expect("can_trace");
    assert_eq!(
        code == 0,
        can_trace,
        "exit {code} but can_trace={can_trace}"
    );
    let verdict = d["verdict"].as_str().expect("verdict");
    assert_eq!(d["functions"].as_array().expect("functions").len(), 4);
    if can_trace {
        eprintln!("skipping the host-restriction checks: this host can trace ({verdict})");
        return;
    }
    assert!(verdict.starts_with("cannot trace"), "{verdict}");
    assert!(
        verdict.contains("Remedy: boot a kernel with lockdown=none"),
        "verdict must name the remedy: {verdict}"
    );
    // Each reason the kernel gives is named, not left as a bare errno.
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
    if !kallsyms.contains(" register_kprobe\n") {
        assert!(verdict.contains("no kprobes"), "{verdict}");
    }
    let fentry_eperm = d["functions"]
        .as_array()
        .expect("functions")
        .iter()
        .any(|f| {
            f["fentry"]
                .as_str()
                .unwrap_or("")
                .contains("Operation not permitted")
        });
    if fentry_eperm {
        assert!(verdict.contains("fentry/fexit"), "{verdict}");
    }
}

#[test]
fn doctor_text_names_every_check() {
    let out = damon_trace(&["doctor"]);
    let text = String::from_utf8_lossy(&out.stdout);
    for word in [
        "privileges",
        "btf",
        "lockdown",
        "kprobes",
        "damon",
        "verdict:",
        "lock_timer_base",
    ] {
        assert!(text.contains(word), "doctor output lacks {word}:\n{text}");
    }
}

#[test]
fn record_fails_fast_with_the_diagnosis() {
    let (d, _) = doctor();
    if d["can_trace"].as_bool() == Some(true) {
        eprintln!("skipping: this host can trace");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("c.dtcap");
    let started = std::time::Instant::now();
    let out = damon_trace(&[
        "record",
        "-o",
        file.to_str().expect("utf-8"),
        "--duration",
        "30s",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        started.elapsed().as_secs() < 20,
        "record must not trace for its duration first"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("verdict: cannot trace"), "{err}");
    assert!(err.contains("cannot be traced"), "{err}");
    assert!(
        !file.exists(),
        "no capture is created when nothing can be traced"
    );
}

#[test]
fn usage_errors_exit_2_with_one_line() {
    for args in [
        &["record", "-o", "/tmp/x", "--functions", "nope"][..],
        &["doctor", "--functions", "lock_timer_base,lock_timer_base"][..],
        &["record", "-o", "/tmp/x", "--duration", "soon"][..],
        &["record", "-o", "/tmp/x", "--ring-size", "1000"][..],
        &["report", "/nonexistent/capture"][..],
        &["report", "/proc/self/status"][..],
    ] {
        let out = damon_trace(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
