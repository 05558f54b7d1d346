//! The host side of an interactive guest console: the user's terminal in raw mode (so that every
//! key, Ctrl-C included, reaches the guest application) and the guarantees that it comes back
//! in its old state whatever ends the run — normal exit, error, panic, or a signal.
use std::{
    io::{self, ErrorKind, Write as _},
    os::{
        fd::AsFd,
        unix::net::{UnixListener, UnixStream},
    },
    path::Path,
    sync::{
        Mutex, Once,
        atomic::{AtomicBool, AtomicI32, Ordering},
    },
};

use anyhow::{Context as _, Result};
use rustix::termios::{self, OptionalActions, Termios};

/// Puts the terminal back in a usable state after a guest application was killed mid-screen:
/// normal screen, visible cursor, no mouse reporting, default colours, a fresh line.
pub const EMERGENCY_RESET: &[u8] =
    b"\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?2004l\x1b[?1049l\x1b[?25h\x1b[0m\r\n";

/// Settings saved when raw mode began; the panic hook restores them from here.
static SAVED: Mutex<Option<Termios>> = Mutex::new(None);
/// The last of SIGINT/SIGTERM/SIGHUP/SIGQUIT received while raw mode was on (0: none).
static SIGNALLED: AtomicI32 = AtomicI32::new(0);
const STOP_SIGNALS: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];
/// Set by SIGWINCH while raw mode is on: the user's terminal changed size.
static RESIZED: AtomicBool = AtomicBool::new(false);

/// True when both stdin and stdout are terminals: a person is watching and typing.
pub fn is_interactive() -> bool {
    termios::isatty(io::stdin()) && termios::isatty(io::stdout())
}

/// Rows and columns of the terminal on stdout (or stdin), if there is one.
pub fn size() -> Option<(u16, u16)> {
    let ws = termios::tcgetwinsize(io::stdout())
        .or_else(|_| termios::tcgetwinsize(io::stdin()))
        .ok()?;
    (ws.ws_row > 0 && ws.ws_col > 0).then_some((ws.ws_row, ws.ws_col))
}

/// Raw mode on stdin for as long as it lives. Terminal-generated signals are off in raw mode,
/// so Ctrl-C arrives as byte 0x03 for the guest; signals sent with `kill` are caught and
/// reported through [`pending_signal`] so that the owner can stop the guest and unwind,
/// restoring the terminal on the way.
pub struct RawMode {
    old_actions: Vec<(libc::c_int, libc::sigaction)>,
}

impl RawMode {
    /// Does nothing (and returns None) when stdin is not a terminal.
    pub fn enter() -> Result<Option<Self>> {
        let stdin = io::stdin();
        if !termios::isatty(stdin.as_fd()) {
            return Ok(None);
        }
        let saved = termios::tcgetattr(stdin.as_fd()).context("reading the terminal settings")?;
        let mut raw = saved.clone();
        raw.make_raw();
        install_panic_hook();
        *SAVED.lock().unwrap_or_else(|e| e.into_inner()) = Some(saved);
        SIGNALLED.store(0, Ordering::SeqCst);
        RESIZED.store(false, Ordering::SeqCst);
        let handlers = STOP_SIGNALS
            .iter()
            .map(|&sig| (sig, on_signal as extern "C" fn(libc::c_int)))
            .chain([(libc::SIGWINCH, on_resize as extern "C" fn(libc::c_int))]);
        let old_actions = handlers
            .filter_map(|(sig, handler)| catch(sig, handler).map(|old| (sig, old)))
            .collect();
        let guard = Self { old_actions };
        termios::tcsetattr(stdin.as_fd(), OptionalActions::Now, &raw)
            .context("switching the terminal to raw mode")?;
        Ok(Some(guard))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        restore_termios();
        for (sig, old) in &self.old_actions {
            // SAFETY: `old` is the action sigaction() returned for `sig`; reinstating it is
            // what the process had before raw mode.
            unsafe { libc::sigaction(*sig, old, std::ptr::null_mut()) };
        }
    }
}

/// The signal that asked this process to stop while raw mode was on, if any.
pub fn pending_signal() -> Option<i32> {
    match SIGNALLED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

fn restore_termios() {
    if let Some(saved) = SAVED.lock().unwrap_or_else(|e| e.into_inner()).take() {
        // Drain pending output first (TCSADRAIN) so the app's last frame is not cut short.
        let _ = termios::tcsetattr(io::stdin(), OptionalActions::Drain, &saved);
    }
}

// The handlers only store to an atomic: the one thing a signal handler may safely do here.
extern "C" fn on_signal(sig: libc::c_int) {
    SIGNALLED.store(sig, Ordering::SeqCst);
}

extern "C" fn on_resize(_: libc::c_int) {
    RESIZED.store(true, Ordering::SeqCst);
}

/// Routes `sig` to `handler`; returns the previous action.
fn catch(sig: libc::c_int, handler: extern "C" fn(libc::c_int)) -> Option<libc::sigaction> {
    // SAFETY: sigaction is zero-initialisable plain data; both handlers only store to an
    // atomic, which is async-signal-safe; `old` is written by the kernel before we read it.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler as libc::sighandler_t;
        // Reads in other threads (console, keys) resume instead of failing with EINTR.
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        (libc::sigaction(sig, &action, &mut old) == 0).then_some(old)
    }
}

/// Carries the user's terminal size to the guest when it changes (SIGWINCH), over a Unix socket
/// that QEMU connects to at start and joins to the guest's winsize port.
pub struct WinsizeLink {
    listener: UnixListener,
    stream: Option<UnixStream>,
}

impl WinsizeLink {
    pub fn listen(path: &Path) -> Result<Self> {
        let listener = UnixListener::bind(path)
            .with_context(|| format!("listening on {} for QEMU", path.display()))?;
        // Polled from the console loop, which must never block on it.
        listener
            .set_nonblocking(true)
            .context("making the winsize socket non-blocking")?;
        Ok(Self {
            listener,
            stream: None,
        })
    }

    /// Sends the terminal's size if it changed since the last call, and returns it.
    pub fn poll(&mut self) -> Option<(u16, u16)> {
        if self.stream.is_none() {
            match self.listener.accept() {
                Ok((s, _)) => self.stream = s.set_nonblocking(true).ok().map(|()| s),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(_) => return None,
            }
        }
        let stream = self.stream.as_mut()?;
        if !RESIZED.swap(false, Ordering::SeqCst) {
            return None;
        }
        let (rows, cols) = size()?;
        // A lost line only leaves the old size; the next resize sends a fresh one.
        let _ = stream.write_all(format!("{rows} {cols}\n").as_bytes());
        Some((rows, cols))
    }
}

/// A panic while raw mode is on would print its message as a staircase on an alternate
/// screen and leave the shell unusable: restore first, then let the usual hook print.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if SAVED.lock().map(|s| s.is_some()).unwrap_or(true) {
                let mut out = io::stdout();
                let _ = out.write_all(EMERGENCY_RESET);
                let _ = out.flush();
                restore_termios();
            }
            previous(info);
        }));
    });
}
