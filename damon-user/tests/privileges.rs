//! Privileges and what captures reveal.
//!
//! Unprivileged runs use `setpriv` (util-linux), which needs root to change users and
//! capability sets; CI runs as root. Under another user these tests say so and do nothing on a
//! developer's machine, and fail when `CI` is set.
//! Tracing itself cannot be tried on this host (its kernel forbids it), so what is checked is
//! everything before the kernel: the missing capabilities are named, exactly.
mod common;

use std::process::Command;

use common::{BIN, Run, assert_error, assert_no_panic, data, run_cmd};
use dtcap::{addresses, kernel_address, meta_json};

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Whether these checks can run: as root, yes. Under another user they are skipped with a
/// message on a developer's machine, but fail under CI (`CI` set, as `.ci/run` runs), where
/// a skip would be a guarantee silently left unchecked.
fn can_drop_privileges(what: &str) -> bool {
    if is_root() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but this test runs as uid {}: setpriv needs root to {what}; run the tests as root",
        // SAFETY: getuid has no preconditions.
        unsafe { libc::getuid() }
    );
    eprintln!("skipped: setpriv needs root to {what} (not under CI)");
    false
}

/// As uid/gid 65534 (nobody) with every capability gone from every set.
const NOBODY: &[&str] = &[
    "--reuid=65534",
    "--regid=65534",
    "--clear-groups",
    "--inh-caps=-all",
    "--bounding-set=-all",
];

/// Root without CAP_BPF and CAP_SYS_ADMIN (which stands in for it): CAP_PERFMON stays.
const ROOT_WITHOUT_BPF: &[&str] = &[
    "--inh-caps=-bpf,-sys_admin",
    "--bounding-set=-bpf,-sys_admin",
];

fn setpriv(opts: &[&str], program: &str, args: &[&str]) -> Run {
    let mut cmd = Command::new("setpriv");
    cmd.args(opts).arg(program).args(args);
    run_cmd(cmd)
}

/// The effective capabilities a process started under `opts` holds.
fn cap_eff(opts: &[&str]) -> u64 {
    let r = setpriv(opts, "cat", &["/proc/self/status"]);
    assert_eq!(r.status, Some(0), "setpriv: {}", r.stderr);
    let line = r.stdout_line("CapEff", |l| l.starts_with("CapEff:"));
    u64::from_str_radix(line.trim_start_matches("CapEff:").trim(), 16).expect("hex")
}

fn has(caps: u64, cap: u32) -> bool {
    caps & (1 << cap) != 0
}

/// A directory anyone can write, so that output-path checks pass for nobody too.
fn public_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .expect("chmod");
    dir
}

/// `record`, `live` and `serve` refuse with one line naming the missing capabilities and
/// the remedy (exit 1); `doctor` says the same in its table and verdict.
fn check_commands(opts: &[&str], missing: &[&str], present: &[&str]) {
    let dir = public_dir();
    let out = dir.path().join("c.dtcap").display().to_string();
    let tracing: [&[&str]; 3] = [
        &["record", "-o", &out, "--duration", "1s"],
        &["live"],
        &["serve", "--listen", "127.0.0.1:0", "--duration", "1s"],
    ];
    for args in tracing {
        let label = format!("{opts:?} {args:?}");
        let r = setpriv(opts, BIN, args);
        let line = assert_error(&label, &r, 1);
        for cap in missing {
            assert!(line.contains(cap), "{label}: {line}");
        }
        for cap in present {
            assert!(!line.contains(cap), "{label}: names {cap}, held: {line}");
        }
        assert!(
            line.contains("run as root") && line.contains("setcap"),
            "{label}: remedy: {line}"
        );
    }
    assert!(!dir.path().join("c.dtcap").exists(), "nothing written");

    let r = setpriv(opts, BIN, &["doctor"]);
    assert_no_panic("doctor", &r);
    assert_eq!(r.status, Some(1), "doctor: {}", r.stderr);
    let want = format!("missing {} (", missing.join(" and "));
    let privileges = r.stdout_line("privileges", |l| l.contains("privileges"));
    assert!(
        privileges.contains("FAIL") && privileges.contains(&want),
        "{privileges}"
    );
    let verdict = r.stdout_line("verdict", |l| l.starts_with("verdict:"));
    assert!(
        verdict.contains(&want) && verdict.contains("setcap"),
        "{verdict}"
    );
    for cap in present {
        assert!(!verdict.contains(cap), "{verdict}");
    }
    assert!(
        !r.stdout.contains("( kdamonds)"),
        "an unreadable count is said, not left blank:\n{}",
        r.stdout
    );
    let r = setpriv(opts, BIN, &["doctor", "--json"]);
    assert_eq!(r.status, Some(1), "doctor --json: {}", r.stderr);
    let d: serde_json::Value = serde_json::from_str(&r.stdout).expect("doctor JSON");
    assert_eq!(d["can_trace"], false);
    assert!(d["verdict"].as_str().expect("verdict").contains(&want));
}

#[test]
fn nobody_is_told_both_capabilities() {
    if !can_drop_privileges("drop to nobody") {
        return;
    }
    let caps = cap_eff(NOBODY);
    assert_eq!(caps, 0, "nobody holds no capabilities");
    check_commands(NOBODY, &["CAP_BPF", "CAP_PERFMON"], &[]);
}

#[test]
fn root_without_cap_bpf_is_told_cap_bpf_only() {
    if !can_drop_privileges("drop capabilities") {
        return;
    }
    let caps = cap_eff(ROOT_WITHOUT_BPF);
    assert!(
        !has(caps, CAP_BPF) && !has(caps, CAP_SYS_ADMIN),
        "dropped: {caps:x}"
    );
    assert!(
        has(caps, CAP_PERFMON),
        "this test needs a root that holds CAP_PERFMON ({caps:x})"
    );
    check_commands(ROOT_WITHOUT_BPF, &["CAP_BPF"], &["CAP_PERFMON"]);
}

/// Input is checked before privileges: nobody asked to overwrite a file gets the input
/// error (2), not the privilege error.
#[test]
fn input_errors_come_before_privileges() {
    if !can_drop_privileges("drop to nobody") {
        return;
    }
    let dir = public_dir();
    let existing = dir.path().join("existing.dtcap");
    std::fs::write(&existing, b"x").expect("write");
    let e = existing.display().to_string();
    for args in [
        vec!["record", "-o", &e],
        vec!["live", "--record", &e],
        vec!["record", "-o", "/tmp/x.dtcap", "--functions", "nope"],
    ] {
        let r = setpriv(NOBODY, BIN, &args);
        let line = assert_error(&format!("{args:?}"), &r, 2);
        assert!(!line.contains("CAP_"), "{line}");
    }
}

#[test]
fn address_detector_detects() {
    let mut found = Vec::new();
    let meta = serde_json::json!({
        "a": "base at 0xffffffff81234567",
        "b": [18446744071562067968u64],
        "c": [0xff2f_1234_5678_9abc_u64],
        "d": "timer base 0xff2f123456789abc",
        "fine": ["ffff", -1, 4096, "0xffff", "damon_hot_score+0x1c"],
    });
    addresses(&meta, "meta", &mut found);
    assert_eq!(found.len(), 4, "{found:?}");
}

/// No capture stores a raw kernel address: not in its metadata (DAMON's sysfs snapshot,
/// attach details, calibration), not in the records' `value` (lock_timer_base returns a
/// pointer: its value must be 0; damos_va_migrate_dests_add returns void).
#[test]
fn captures_hold_no_kernel_addresses() {
    for name in [
        "ab-after-7.2.dtcap",
        "ab-before-6.12.dtcap",
        "migrate-hot-7.2.dtcap",
        "migrate-hot-7.2.v2.dtcap",
    ] {
        let path = data(name);
        let meta = meta_json(&std::fs::read(&path).expect("fixture"));
        let mut found = Vec::new();
        addresses(&meta, "meta", &mut found);
        assert!(
            found.is_empty(),
            "{name}: kernel addresses in metadata: {found:?}"
        );

        let r = common::run(&["export", path.to_str().expect("utf-8"), "--format", "csv"]);
        assert_eq!(r.status, Some(0), "{name}: {}", r.stderr);
        let mut rows = 0;
        for line in r.stdout.lines().skip(1) {
            let cols: Vec<&str> = line.split(',').collect();
            let value: i64 = cols[6].parse().expect("value");
            assert!(!kernel_address(value as u64), "{name}: {line}");
            if matches!(cols[0], "lock_timer_base" | "damos_va_migrate_dests_add") {
                assert_eq!(value, 0, "{name}: a pointer or void kept: {line}");
            }
            rows += 1;
        }
        assert!(rows > 100, "{name}: {rows} records");
    }
}
