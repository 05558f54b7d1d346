//! A running interactive console: the guest's output goes to the log, the screen model and
//! (for people) the user's terminal; keys come from the user's terminal or from the script.
use std::{
    io::{self, Read as _, Write as _},
    process::ChildStdin,
    sync::mpsc::Sender,
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use super::{
    hostterm::{self, RawMode, WinsizeLink},
    interactive::{Input, Interactive, StepLog, TerminalLog, Trigger},
    screen::Screen,
    stream::{Event, MarkerFilter},
};

/// Console silence after which the screen counts as drawn (a frame arrives in one burst, in a
/// few ms; TUIs redraw at most every ~100 ms).
const SETTLE: Duration = Duration::from_millis(40);

/// One interactive run in progress (owned by the console loop).
pub(super) struct Session<'a> {
    spec: &'a Interactive,
    stdin: Option<ChildStdin>,
    screen: Screen,
    log: TerminalLog,
    /// The console minus the harness's marker lines: what the log, the screen and (terminal
    /// mode) the user see.
    filter: MarkerFilter,
    passthrough: bool,
    echo: bool,
    started: Option<Instant>,
    step_since: Instant,
    last_output: Instant,
    raw_mode: Option<RawMode>,
    winsize: Option<WinsizeLink>,
}

impl<'a> Session<'a> {
    pub fn new(
        spec: &'a Interactive,
        stdin: ChildStdin,
        nonce: &str,
        echo: bool,
        winsize: Option<WinsizeLink>,
    ) -> Self {
        let terminal = matches!(spec.input, Input::Terminal);
        Self {
            spec,
            stdin: Some(stdin),
            screen: Screen::new(spec.rows, spec.cols),
            log: TerminalLog {
                rows: spec.rows,
                cols: spec.cols,
                ..TerminalLog::default()
            },
            filter: MarkerFilter::new(nonce),
            passthrough: terminal,
            echo,
            started: None,
            step_since: Instant::now(),
            last_output: Instant::now(),
            raw_mode: None,
            winsize,
        }
    }

    /// Console bytes, in order.
    pub fn output(&mut self, bytes: &[u8]) -> Result<()> {
        let shown = self.filter.pass(bytes);
        self.last_output = Instant::now();
        if self.started.is_some() {
            self.log.raw.extend_from_slice(&shown);
            self.screen.feed(&shown);
            // A script has no terminal to answer the app's queries (crossterm gives up after
            // 2 s without a cursor position): the screen model answers. People's terminals
            // answer for themselves.
            let answers = self.screen.take_answers();
            if !answers.is_empty() && !self.passthrough {
                self.type_keys(&answers)?;
            }
        }
        if self.passthrough {
            let mut out = io::stdout().lock();
            // A closed stdout only loses the echo; the run itself goes on.
            let _ = out.write_all(&shown).and_then(|()| out.flush());
        }
        Ok(())
    }

    fn type_keys(&mut self, keys: &[u8]) -> Result<()> {
        let stdin = self.stdin.as_mut().context("guest console input closed")?;
        stdin
            .write_all(keys)
            .and_then(|()| stdin.flush())
            .context("typing into the guest console (qemu exited?)")
    }

    /// The command started: from here keys flow to the guest.
    pub fn start(&mut self, events: Sender<Event>) -> Result<()> {
        let now = Instant::now();
        self.started = Some(now);
        self.step_since = now;
        if matches!(self.spec.input, Input::Terminal) {
            self.raw_mode = RawMode::enter()?;
            if let Some(stdin) = self.stdin.take() {
                forward_keys(stdin, events);
            }
        }
        self.poll()
    }

    /// Fires the scripted steps that are due; fails on a screen condition that timed out or a
    /// signal that asked us to stop.
    pub fn poll(&mut self) -> Result<()> {
        if let Some(sig) = hostterm::pending_signal() {
            bail!("stopped by signal {sig}; the guest was killed");
        }
        if let Some((rows, cols)) = self.winsize.as_mut().and_then(WinsizeLink::poll) {
            self.screen.resize(rows, cols);
        }
        let (Some(started), Input::Script(steps)) = (self.started, &self.spec.input) else {
            return Ok(());
        };
        while let Some(step) = steps.get(self.log.steps.len()) {
            let waited = self.step_since.elapsed();
            let screen = self.screen.text();
            let due = match &step.when {
                Trigger::After(delay) => waited >= *delay,
                Trigger::Screen {
                    what,
                    test,
                    timeout,
                    fresh,
                } => {
                    let shown = (!fresh || self.last_output > self.step_since) && test(&screen);
                    if !shown && waited >= *timeout {
                        bail!(
                            "scripted key step {} waited {:.1} s for the screen to show {what}; \
                             the {}x{} screen was:\n{screen}",
                            self.log.steps.len() + 1,
                            waited.as_secs_f64(),
                            self.spec.rows,
                            self.spec.cols,
                        );
                    }
                    // Judge whole frames: a redraw arrives in a burst, so wait for a pause.
                    shown && self.last_output.elapsed() >= SETTLE
                }
            };
            if !due {
                break;
            }
            self.type_keys(&step.keys)?;
            let at = started.elapsed();
            if self.echo {
                println!(
                    "--- screen at key step {} ({:.1} s, sending {:?}) ---\n{screen}\n---",
                    self.log.steps.len() + 1,
                    at.as_secs_f64(),
                    String::from_utf8_lossy(&step.keys)
                );
            }
            self.log.steps.push(StepLog { at, screen });
            self.step_since = Instant::now();
        }
        Ok(())
    }

    /// Ends the session: the user's terminal is restored (by drop) and the log handed over.
    pub fn finish(mut self) -> TerminalLog {
        std::mem::take(&mut self.log)
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        if self.raw_mode.is_some() {
            // Undo what the app left on (it may have been killed mid-screen), then cooked mode.
            let mut out = io::stdout();
            let _ = out.write_all(&self.screen.restore_sequence());
            let _ = out.flush();
            self.raw_mode = None;
        }
    }
}

/// Copies this process's stdin into the guest console until either side closes; Ctrl-A x
/// (QEMU's own convention) asks the console loop to stop the guest.
fn forward_keys(mut guest: ChildStdin, events: Sender<Event>) {
    thread::spawn(move || {
        let mut escape = EscapeKey::default();
        let mut buf = [0u8; 1024];
        let mut stdin = io::stdin();
        loop {
            let n = match stdin.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            let (keys, detach) = escape.filter(&buf[..n]);
            if guest.write_all(&keys).and_then(|()| guest.flush()).is_err() {
                break;
            }
            if detach {
                let _ = events.send(Event::Detach);
                break;
            }
        }
    });
}

/// Ctrl-A x stops the guest, Ctrl-A Ctrl-A types one Ctrl-A, Ctrl-A with anything else types
/// both keys.
#[derive(Default)]
struct EscapeKey {
    armed: bool,
}

impl EscapeKey {
    const CTRL_A: u8 = 0x01;

    fn filter(&mut self, input: &[u8]) -> (Vec<u8>, bool) {
        let mut out = Vec::with_capacity(input.len());
        for &b in input {
            if std::mem::take(&mut self.armed) {
                match b {
                    b'x' | b'X' => return (out, true),
                    Self::CTRL_A => out.push(b),
                    _ => out.extend_from_slice(&[Self::CTRL_A, b]),
                }
            } else if b == Self::CTRL_A {
                self.armed = true;
            } else {
                out.push(b);
            }
        }
        (out, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctrl_a_x_detaches_and_other_keys_pass() {
        let mut e = EscapeKey::default();
        assert_eq!(e.filter(b"ab\x03"), (b"ab\x03".to_vec(), false));
        assert_eq!(e.filter(b"\x01"), (Vec::new(), false));
        assert_eq!(e.filter(b"\x01q\x01"), (b"\x01q".to_vec(), false));
        assert_eq!(e.filter(b"z\x01x"), (b"\x01z".to_vec(), true));
    }
}
