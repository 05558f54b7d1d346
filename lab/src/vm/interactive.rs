//! Interactive guest consoles: the command runs with the serial console as its controlling
//! terminal, and its input comes either from the user's terminal (raw mode, for `cargo xtask
//! demo`) or from a script of keys fired by time or by what the screen shows (for tests).
use std::{fmt, sync::Arc, time::Duration};

use super::{hostterm, screen::Screen};

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
        /// Only on output that came after the previous step's keys ([`KeyStep::when_fresh`]).
        fresh: bool,
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
                fresh: false,
            },
            keys: keys.into(),
        }
    }

    /// Like [`KeyStep::when`], judging only screens drawn after the previous step's keys were
    /// typed: steps that wait for the same sight again (a program started once more) do not
    /// all fire on the screen that satisfied the first.
    pub fn when_fresh(
        what: impl Into<String>,
        timeout: Duration,
        test: impl Fn(&str) -> bool + Send + Sync + 'static,
        keys: impl Into<Vec<u8>>,
    ) -> Self {
        let mut step = Self::when(what, timeout, test, keys);
        if let Trigger::Screen { fresh, .. } = &mut step.when {
            *fresh = true;
        }
        step
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
