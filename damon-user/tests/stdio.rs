//! `-` means stdin or stdout wherever a path is taken: a capture read from stdin gives the
//! same report, comparison and export as the file; binary output (`--plot -`, `record -o -`)
//! goes to stdout only when stdout is not a terminal; one stdin cannot feed two captures.
mod common;

use std::{
    fs::File,
    process::{Command, Stdio},
};

use common::{BIN, Run, assert_error, data, run, run_cmd};

/// Runs `args` with `file` on stdin.
fn run_stdin(args: &[&str], file: &str) -> Run {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    let input = File::open(data(file)).expect("fixture");
    // run_cmd sets stdin to /dev/null; give the fixture instead.
    let what = format!("{cmd:?} < {file}");
    let out = cmd
        .stdin(Stdio::from(input))
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    Run {
        status: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
    }
}

fn ok(label: &str, r: &Run) -> String {
    assert_eq!(r.status, Some(0), "{label}: {}", r.stderr);
    r.stdout.clone()
}

const A: &str = "ab-before-6.12.dtcap";
const B: &str = "ab-after-7.2.dtcap";

#[test]
fn report_and_export_read_a_capture_from_stdin() {
    let file = data(B).display().to_string();
    let cases = [
        ("report", ["table", "json", "csv", "markdown"]),
        ("export", ["json", "csv", "csv-buckets", "openmetrics"]),
    ];
    for (command, formats) in cases {
        for format in formats {
            let direct = ok(command, &run(&[command, &file, "--format", format]));
            let piped = ok(command, &run_stdin(&[command, "-", "--format", format], B));
            assert_eq!(piped, direct, "{command} - --format {format}");
        }
    }
}

#[test]
fn compare_takes_one_side_from_stdin() {
    let (a, b) = (data(A).display().to_string(), data(B).display().to_string());
    let direct = ok(
        "compare A B",
        &run(&["compare", &a, &b, "--format", "json"]),
    );
    let piped = ok(
        "compare - B",
        &run_stdin(&["compare", "-", &b, "--format", "json"], A),
    );
    // The same comparison; only the name of the before side differs.
    assert_eq!(piped, direct.replace(&a, "-"));
    let r = run_stdin(&["compare", "-", "-"], A);
    let line = assert_error("compare - -", &r, 2);
    assert!(
        line.contains("only one capture can come from stdin"),
        "{line}"
    );
}

#[test]
fn an_empty_stdin_is_named_as_such() {
    // run() gives /dev/null as stdin: no capture there.
    let line = assert_error("report - < /dev/null", &run(&["report", "-"]), 2);
    assert!(line.contains("stdin") && line.contains("empty"), "{line}");
}

#[test]
fn compare_plot_dash_writes_the_svg_alone_to_stdout() {
    let (a, b) = (data(A).display().to_string(), data(B).display().to_string());
    let r = run(&["compare", &a, &b, "--plot", "-"]);
    let svg = ok("compare --plot -", &r);
    assert!(
        svg.starts_with("<svg") || svg.starts_with("<?xml"),
        "{svg:.200}"
    );
    assert!(svg.trim_end().ends_with("</svg>"), "only the SVG on stdout");
    assert!(!std::path::Path::new("-").exists(), "no file named `-`");
}

/// A pseudo-terminal's slave side, opened by name (the master stays open meanwhile).
struct Terminal {
    _master: File,
    slave: File,
}

fn terminal() -> Terminal {
    use std::os::fd::FromRawFd as _;
    // SAFETY: posix_openpt returns a new descriptor or -1; grantpt/unlockpt take it.
    let master = unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY) };
    assert!(
        master >= 0,
        "posix_openpt: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `master` is a fresh descriptor owned by nothing else.
    let master_file = unsafe { File::from_raw_fd(master) };
    let mut name = [0 as libc::c_char; 128];
    // SAFETY: `master` is an open pty master; `name` is a writable buffer of the length given.
    let rc = unsafe {
        libc::grantpt(master)
            | libc::unlockpt(master)
            | libc::ptsname_r(master, name.as_mut_ptr(), name.len())
    };
    assert_eq!(rc, 0, "pty setup: {}", std::io::Error::last_os_error());
    // SAFETY: ptsname_r wrote a NUL-terminated path into `name`.
    let path = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) };
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path.to_str().expect("utf-8 pty name"))
        .expect("open the pty slave");
    Terminal {
        _master: master_file,
        slave,
    }
}

/// Runs `args` with stdout on a terminal.
fn run_stdout_on_terminal(args: &[&str]) -> Run {
    let tty = terminal();
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    let what = format!("{cmd:?} > tty");
    let out = cmd
        .stdin(Stdio::null())
        .stdout(tty.slave)
        .stderr(Stdio::piped())
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    Run {
        status: out.status.code(),
        stdout: String::new(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
    }
}

#[test]
fn binary_output_to_a_terminal_is_refused() {
    let (a, b) = (data(A).display().to_string(), data(B).display().to_string());
    let cases: [(&str, Vec<&str>); 2] = [
        ("compare --plot -", vec!["compare", &a, &b, "--plot", "-"]),
        // Checked before privileges, so this holds on an unprivileged host too.
        ("record -o -", vec!["record", "-o", "-", "--duration", "1s"]),
    ];
    for (label, args) in cases {
        let line = assert_error(label, &run_stdout_on_terminal(&args), 2);
        assert!(line.contains("stdout is a terminal"), "{label}: {line}");
    }
}

#[test]
fn two_documents_cannot_share_stdout() {
    let cases: [(&str, &[&str], &str); 2] = [
        (
            "record -o - --format json",
            &["record", "-o", "-", "--format", "json"],
            "both write to stdout",
        ),
        ("live --record -", &["live", "--record", "-"], "--record -"),
    ];
    for (label, args, says) in cases {
        let mut cmd = Command::new(BIN);
        cmd.args(args);
        let line = assert_error(label, &run_cmd(cmd), 2);
        assert!(line.contains(says), "{label}: {line}");
    }
}
