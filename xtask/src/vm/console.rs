//! The guest's serial console: streamed live, cleaned of terminal control sequences, and
//! scanned for the marker lines /init prints.
use std::{
    io::{BufRead as _, BufReader, Read},
    process::ChildStdout,
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use crate::initramfs;

/// What the console told us.
pub struct Console {
    pub text: String,
    pub exit: Option<i32>,
    pub out_bytes: Option<u64>,
    pub boot: Duration,
}

/// Streams the console until QEMU closes it or the timeout passes.
pub fn watch(
    stdout: ChildStdout,
    echo: bool,
    nonce: &str,
    start: Instant,
    timeout: Duration,
) -> Result<Console> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = Vec::new();
        while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
            let text = strip_controls(&String::from_utf8_lossy(&line));
            if tx.send(text).is_err() {
                break;
            }
            line.clear();
        }
    });
    let deadline = start + timeout;
    let id = format!(" id={nonce}");
    let ready = initramfs::ready_marker(nonce);
    let mut c = Console {
        text: String::new(),
        exit: None,
        out_bytes: None,
        boot: Duration::ZERO,
    };
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let marker = line.strip_suffix(&id);
                if line.ends_with(&ready) {
                    c.boot = start.elapsed();
                } else if let Some(v) =
                    marker.and_then(|m| m.strip_prefix(initramfs::exit_marker_prefix()))
                {
                    c.exit = Some(
                        v.trim()
                            .parse()
                            .with_context(|| format!("bad exit marker `{line}`"))?,
                    );
                } else if let Some(v) =
                    marker.and_then(|m| m.strip_prefix(initramfs::out_marker_prefix()))
                {
                    c.out_bytes = Some(
                        v.trim()
                            .parse()
                            .with_context(|| format!("bad out marker `{line}`"))?,
                    );
                } else if c.exit.is_some() && line.contains("reboot: Power down") {
                    // The kernel's own goodbye after `poweroff -f`: noise.
                } else {
                    if echo {
                        println!("{line}");
                    }
                    c.text.push_str(&line);
                    c.text.push('\n');
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(c),
            Err(mpsc::RecvTimeoutError::Timeout) => bail!(
                "the guest did not finish within {} s (boot alone takes ~5 s under TCG); raise \
                 --timeout if the command is slow\n--- console tail ---\n{}",
                timeout.as_secs(),
                tail(&c.text, 25)
            ),
        }
    }
}

/// Drops terminal escape sequences and control characters: firmware and the kernel send
/// resets (`ESC c`) and `\r` that would garble the user's terminal and the returned text.
fn strip_controls(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(ch) = chars.next() {
        match ch {
            '\u{1b}' => {
                if chars.next_if_eq(&'[').is_some() {
                    // CSI: parameters up to a final byte in '@'..='~'.
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                } else {
                    chars.next();
                }
            }
            '\t' => out.push(ch),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

pub fn read_all(mut r: impl Read) -> String {
    let mut s = String::new();
    let _ = r.read_to_string(&mut s);
    s
}

pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_carriage_returns_are_stripped() {
        assert_eq!(
            strip_controls("\u{1b}c\u{1b}[?7l\u{1b}[2JDAMON x\r\n"),
            "DAMON x"
        );
        assert_eq!(strip_controls("a\tb"), "a\tb");
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        assert_eq!(tail("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail("", 3), "");
    }
}
