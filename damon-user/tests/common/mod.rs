//! Running the real `damon-trace` binary with a deadline, and reading captures' metadata
//! without the crate (it has no library target).
#![allow(dead_code)] // each test file uses its own part

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

pub const BIN: &str = env!("CARGO_BIN_EXE_damon-trace");

/// Longest any bad-input case may take: they must fail fast, and a hang (a FIFO opened for
/// reading, a forgotten prompt) fails the test instead of stalling it.
pub const DEADLINE: Duration = Duration::from_secs(30);

pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

pub struct Run {
    /// `None`: killed by a signal.
    pub status: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The first line of standard output that `wanted` accepts; panics naming `what` and
    /// showing the output when there is none.
    pub fn stdout_line(&self, what: &str, wanted: impl Fn(&str) -> bool) -> &str {
        self.stdout
            .lines()
            .find(|l| wanted(l))
            .unwrap_or_else(|| panic!("no {what} line in:\n{}", self.stdout))
    }
}

/// Runs `cmd` (stdin from /dev/null, RUST_BACKTRACE=1 so that a panic would show its
/// backtrace) and kills it if it outlives [`DEADLINE`].
pub fn run_cmd(mut cmd: Command) -> Run {
    let what = format!("{cmd:?}");
    cmd.env("RUST_BACKTRACE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {what}: {e}"));
    let out_t = drain(child.stdout.take().expect("stdout"));
    let err_t = drain(child.stderr.take().expect("stderr"));
    let started = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} still ran after {DEADLINE:?} (it must not hang)");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        status: status.code(),
        stdout: out_t.join().expect("stdout reader"),
        stderr: err_t.join().expect("stderr reader"),
    }
}

/// Reads a pipe to its end on a thread (so a child filling one pipe cannot block).
fn drain(mut r: impl std::io::Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = r.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    })
}

pub fn run<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Run {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    run_cmd(cmd)
}

/// The one-line error contract: exit `status`, exactly one non-empty stderr line, starting
/// `damon-trace: error:`, no panic or backtrace anywhere. Returns that line.
pub fn error_line(label: &str, r: &Run, status: i32) -> Result<String, String> {
    no_panic(label, r)?;
    if r.status != Some(status) {
        return Err(format!(
            "{label}: exit status {:?}, expected {status}; stderr: {}",
            r.status, r.stderr
        ));
    }
    let lines: Vec<&str> = r.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    match lines[..] {
        [line] if line.starts_with("damon-trace: error: ") => Ok(line.to_owned()),
        _ => Err(format!(
            "{label}: stderr must be one error line:\n{}",
            r.stderr
        )),
    }
}

pub fn assert_error(label: &str, r: &Run, status: i32) -> String {
    error_line(label, r, status).unwrap_or_else(|e| panic!("{e}"))
}

fn no_panic(label: &str, r: &Run) -> Result<(), String> {
    for text in [&r.stdout, &r.stderr] {
        for bad in ["panicked", "RUST_BACKTRACE", "stack backtrace"] {
            if text.contains(bad) {
                return Err(format!("{label}: output contains `{bad}`:\n{text}"));
            }
        }
    }
    Ok(())
}

pub fn assert_no_panic(label: &str, r: &Run) {
    no_panic(label, r).unwrap_or_else(|e| panic!("{e}"));
}
