//! A reader that stops early (`damon-trace export … | head -c 100`) is a normal end: every
//! command that writes to stdout exits 0 with nothing on stderr, in every format, whether the
//! pipe closes before the first write or after 100 bytes.
mod common;

use std::{
    io::Read as _,
    process::{Command, Stdio},
};

use common::{BIN, data};

/// Every command and format that writes a document to stdout, over a real capture.
fn cases() -> Vec<Vec<String>> {
    let cap = data("migrate-hot-7.2.dtcap").display().to_string();
    let other = data("ab-after-7.2.dtcap").display().to_string();
    let mut cases = Vec::new();
    for f in ["json", "csv", "csv-buckets", "openmetrics"] {
        cases.push(vec![
            "export".into(),
            cap.clone(),
            "--format".into(),
            f.into(),
        ]);
    }
    for f in ["table", "json", "csv", "markdown"] {
        cases.push(vec![
            "report".into(),
            cap.clone(),
            "--format".into(),
            f.into(),
        ]);
    }
    for f in ["table", "json", "markdown"] {
        let (a, b) = (cap.clone(), other.clone());
        cases.push(vec!["compare".into(), a, b, "--format".into(), f.into()]);
    }
    cases.push(vec!["completions".into(), "bash".into()]);
    cases.push(vec!["man".into()]);
    cases
}

/// Runs `args` with stdout a pipe; `read` bytes are read before the read end is closed (0:
/// closed before the command starts, so its first write fails).
fn run_closing_early(args: &[String], read: usize) -> (Option<i32>, String) {
    let (mut reader, writer) = std::io::pipe().expect("pipe");
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped());
    if read == 0 {
        drop(reader);
        let out = cmd.output().expect("spawn");
        return (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into(),
        );
    }
    let child = cmd.spawn().expect("spawn");
    // The parent's copy of the write end went into `cmd`; drop it so EOF can come.
    drop(cmd);
    let mut head = vec![0u8; read];
    reader.read_exact(&mut head).expect("the first bytes");
    drop(reader);
    let out = child.wait_with_output().expect("wait");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn a_closed_stdout_is_a_normal_end() {
    let mut failures = Vec::new();
    for args in cases() {
        for read in [0, 100] {
            let (status, stderr) = run_closing_early(&args, read);
            if status != Some(0) || !stderr.is_empty() {
                failures.push(format!(
                    "{} (pipe closed after {read} bytes): exit {status:?}, stderr {stderr:?}",
                    args.join(" ")
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
