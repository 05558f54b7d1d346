//! Interactive guest consoles: the command runs with the serial console as its controlling
//! terminal, and its input comes either from the user's terminal (raw mode, for `cargo xtask
//! demo`) or from a script of keys fired by time or by what the screen shows (for tests).
use std::{
    fmt,
    io::{self, Read as _, Write as _},
    process::ChildStdin,
    sync::{Arc, mpsc::Sender},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use super::{
    console::{Event, MarkerFilter},
    hostterm::{self, RawMode},
    screen::Screen,
};

/// How an interactive guest command gets its terminal.
#[derive(Debug, Clone)]
pub struct Interactive {
    /// Terminal size set in the guest with `stty rows R cols C`.
    pub rows: u16,
    pub cols: u16,
    /// `TERM` for the command (the guest has no terminfo; apps use it to pick features).
    pub term: String,
    pub input: Input,
}

/// Where the guest command's keyboard input comes from.
#[derive(Debug, Clone)]
pub enum Input {
    /// This process's stdin, in raw mode when it is a terminal; the console is passed through
    /// to stdout untouched. Ctrl-A x stops the guest.
    Terminal,
    /// Keys written at scripted moments; nothing is echoed live (the screen at each step is).
    Script(Vec<KeyStep>),
}

/// Keys to type once `when` holds. Steps run in order; each one's clock starts when the
/// previous step fired (the first one's when the command started).
#[derive(Debug, Clone)]
pub struct KeyStep {
    pub when: Trigger,
    pub keys: Vec<u8>,
}

/// When a [`KeyStep`] fires.
#[derive(Clone)]
pub enum Trigger {
    /// After this delay.
    After(Duration),
    /// As soon as `test` accepts the rendered screen text; the run fails if that takes longer
    /// than `timeout`. `what` names the condition in that error.
    Screen {
        what: String,
        test: Arc<dyn Fn(&str) -> bool + Send + Sync>,
        timeout: Duration,
    },
}

impl fmt::Debug for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::After(d) => write!(f, "After({d:?})"),
            Self::Screen { what, timeout, .. } => write!(f, "Screen({what:?}, {timeout:?})"),
        }
    }
}

impl KeyStep {
    pub fn after(delay: Duration, keys: impl Into<Vec<u8>>) -> Self {
        Self {
            when: Trigger::After(delay),
            keys: keys.into(),
        }
    }

    /// Fires when the screen contains `text`.
    pub fn when_shown(text: &str, timeout: Duration, keys: impl Into<Vec<u8>>) -> Self {
        let needle = text.to_owned();
        Self::when(
            format!("`{text}`"),
            timeout,
            move |s| s.contains(&needle),
            keys,
        )
    }

    /// Fires when `test` accepts the screen text.
    pub fn when(
        what: impl Into<String>,
        timeout: Duration,
        test: impl Fn(&str) -> bool + Send + Sync + 'static,
        keys: impl Into<Vec<u8>>,
    ) -> Self {
        Self {
            when: Trigger::Screen {
                what: what.into(),
                test: Arc::new(test),
                timeout,
            },
            keys: keys.into(),
        }
    }
}

impl Interactive {
    /// A scripted console of the given size with `TERM=xterm-256color`.
    pub fn script(rows: u16, cols: u16, steps: Vec<KeyStep>) -> Self {
        Self {
            rows,
            cols,
            term: "xterm-256color".to_owned(),
            input: Input::Script(steps),
        }
    }

    /// The user's terminal: its size (24x80 when stdout is not a terminal) and its `TERM`
    /// (xterm-256color when unset or `dumb`), each overridable.
    pub fn terminal(rows: Option<u16>, cols: Option<u16>, term: Option<String>) -> Self {
        let (host_rows, host_cols) = hostterm::size().unwrap_or((24, 80));
        let term = term.or_else(|| std::env::var("TERM").ok());
        Self {
            rows: rows.unwrap_or(host_rows),
            cols: cols.unwrap_or(host_cols),
            term: term
                .filter(|t| !t.is_empty() && t != "dumb")
                .unwrap_or_else(|| "xterm-256color".to_owned()),
            input: Input::Terminal,
        }
    }
}

/// What an interactive run's terminal showed.
#[derive(Debug, Clone, Default)]
pub struct TerminalLog {
    pub rows: u16,
    pub cols: u16,
    /// Every byte the guest console sent after the command started, escapes included.
    pub raw: Vec<u8>,
    /// The screen at each scripted step, as it fired.
    pub steps: Vec<StepLog>,
}

impl TerminalLog {
    /// The screen's text as it was left at the end.
    pub fn screen(&self) -> String {
        self.terminal().text()
    }

    /// The terminal as it was left at the end: text, and the modes the command left on
    /// (a full-screen app that quit cleanly leaves the alternate screen and shows the cursor).
    pub fn terminal(&self) -> Screen {
        let mut s = Screen::new(self.rows, self.cols);
        s.feed(&self.raw);
        s
    }
}

#[derive(Debug, Clone)]
pub struct StepLog {
    /// Since the command started.
    pub at: Duration,
    pub screen: String,
}

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
}

impl<'a> Session<'a> {
    pub fn new(spec: &'a Interactive, stdin: ChildStdin, nonce: &str, echo: bool) -> Self {
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
                } => {
                    if !test(&screen) && waited >= *timeout {
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
                    test(&screen) && self.last_output.elapsed() >= SETTLE
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
        while let Ok(n) = stdin.read(&mut buf) {
            if n == 0 {
                break;
            }
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
