//! The guest's serial console: read as it arrives, scanned line by line for the marker lines
//! /init prints, and either echoed as clean text (plain runs) or handed to an interactive
//! [`Session`] (raw passthrough to the user's terminal, or scripted keys).
use std::{
    io::Read,
    process::{ChildStdin, ChildStdout},
    sync::mpsc::{self, Sender},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use super::{
    VmOptions,
    hostterm::WinsizeLink,
    interactive::TerminalLog,
    session::Session,
    stream::{Event, strip_controls},
};
use crate::initramfs;

/// What the console told us.
pub struct Console {
    pub text: String,
    pub exit: Option<i32>,
    pub out_bytes: Option<u64>,
    pub boot: Duration,
    pub terminal: Option<TerminalLog>,
}

/// How often an interactive loop wakes up without console output: scripted delays and caught
/// signals are noticed within this time.
const TICK: Duration = Duration::from_millis(50);

/// Streams the console until QEMU closes it or the timeout passes. `input` is QEMU's stdin
/// (the guest console's keyboard) for interactive runs; `winsize` carries terminal resizes.
pub fn watch(
    stdout: ChildStdout,
    input: Option<ChildStdin>,
    winsize: Option<WinsizeLink>,
    opts: &VmOptions,
    nonce: &str,
    start: Instant,
) -> Result<Console> {
    let (tx, rx) = mpsc::channel();
    spawn_reader(stdout, tx.clone());
    let mut session = match (&opts.interactive, input) {
        (Some(spec), Some(stdin)) => Some(Session::new(spec, stdin, nonce, opts.echo, winsize)),
        _ => None,
    };
    let deadline = start + opts.timeout;
    let mut lines = Lines::new(nonce, opts.echo && session.is_none());
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let wait = if session.is_some() {
            left.min(TICK)
        } else {
            left
        };
        match rx.recv_timeout(wait) {
            Ok(Event::Output(chunk)) => {
                for piece in chunk.split_inclusive(|&b| b == b'\n') {
                    if let Some(s) = &mut session {
                        s.output(piece)?;
                    }
                    if lines.push(piece, start)?
                        && let Some(s) = &mut session
                    {
                        s.start(tx.clone())?;
                    }
                }
            }
            Ok(Event::Detach) => bail!("stopped with Ctrl-A x; the guest was killed"),
            // The reader always sends Closed before it goes; Disconnected cannot happen while
            // we hold `tx`, but means the same.
            Ok(Event::Closed) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                // A last line without its newline still counts.
                if !lines.partial.is_empty() {
                    lines.push(b"\n", start)?;
                }
                break;
            }
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() >= deadline => bail!(
                "the guest did not finish within {} s (boot alone takes ~5 s under TCG); raise \
                 --timeout if the command is slow\n--- console tail ---\n{}",
                opts.timeout.as_secs(),
                tail(&lines.c.text, 25)
            ),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if let Some(s) = &mut session {
            s.poll()?;
        }
    }
    lines.c.terminal = session.map(Session::finish);
    Ok(lines.c)
}

/// Reads QEMU's stdout in whatever pieces arrive: a full-screen app rarely ends a line, and
/// the user must see each frame at once.
fn spawn_reader(mut stdout: ChildStdout, tx: Sender<Event>) {
    thread::spawn(move || {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match stdout.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            if tx.send(Event::Output(buf[..n].to_vec())).is_err() {
                break;
            }
        }
        let _ = tx.send(Event::Closed);
    });
}

/// The console cut into lines, for the markers and the returned text.
struct Lines {
    id: String,
    ready: String,
    echo: bool,
    partial: Vec<u8>,
    started: bool,
    c: Console,
}

impl Lines {
    /// A console reader for the run with this marker nonce.
    fn new(nonce: &str, echo: bool) -> Lines {
        Lines {
            id: format!(" id={nonce}"),
            ready: initramfs::ready_marker(nonce),
            echo,
            partial: Vec::new(),
            started: false,
            c: Console {
                text: String::new(),
                exit: None,
                out_bytes: None,
                boot: Duration::ZERO,
                terminal: None,
            },
        }
    }

    /// Takes bytes up to at most one newline; returns true when they completed the line that
    /// says the command started.
    fn push(&mut self, piece: &[u8], start: Instant) -> Result<bool> {
        self.partial.extend_from_slice(piece);
        if !piece.ends_with(b"\n") {
            return Ok(false);
        }
        let raw = std::mem::take(&mut self.partial);
        let line = strip_controls(&String::from_utf8_lossy(&raw));
        // A marker may follow whatever a full-screen app left on its line: look for it at the
        // end, where /init's nonce must be.
        let marker = |prefix: &str| {
            let body = line.strip_suffix(&self.id)?;
            body.rfind(prefix).map(|i| body[i + prefix.len()..].trim())
        };
        if !self.started && line.ends_with(&self.ready) {
            self.started = true;
            self.c.boot = start.elapsed();
            return Ok(true);
        }
        if let Some(v) = marker(initramfs::exit_marker_prefix()) {
            let v = v
                .parse()
                .with_context(|| format!("bad exit marker `{line}`"))?;
            self.c.exit = Some(v);
        } else if let Some(v) = marker(initramfs::out_marker_prefix()) {
            let v = v
                .parse()
                .with_context(|| format!("bad out marker `{line}`"))?;
            self.c.out_bytes = Some(v);
        } else if self.c.exit.is_some() && line.contains("reboot: Power down") {
            // The kernel's own goodbye after `poweroff -f`: noise.
        } else {
            if self.echo {
                println!("{line}");
            }
            self.c.text.push_str(&line);
            self.c.text.push('\n');
        }
        Ok(false)
    }
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
    fn markers_are_found_behind_what_an_app_left_on_the_line() {
        let mut lines = Lines::new("n1", false);
        let t = Instant::now();
        assert!(lines.push(b"DAMON_VM_READY id=n1\r\n", t).unwrap());
        assert!(
            !lines
                .push(b"\x1b[?1049l$ DAMON_VM_OUT_BYTES=512 ", t)
                .unwrap()
        );
        assert!(!lines.push(b"id=n1\r\n", t).unwrap());
        lines.push(b"DAMON_VM_EXIT=7 id=forged\n", t).unwrap();
        lines.push(b"DAMON_VM_EXIT=3 id=n1\n", t).unwrap();
        assert_eq!((lines.c.out_bytes, lines.c.exit), (Some(512), Some(3)));
        assert_eq!(lines.c.text, "DAMON_VM_EXIT=7 id=forged\n");
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        assert_eq!(tail("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail("", 3), "");
    }
}
