//! The real terminal: a guard that always gives it back (on exit, on error, on panic, and on
//! SIGTERM/SIGHUP, which end the event loop) and a key reader.
use std::{
    io::{self, Stdout},
    sync::Once,
    time::Duration,
};

use ratatui::{
    Terminal,
    backend::CrosstermBackend,
    crossterm::{
        cursor, event as term_event, execute,
        terminal::{self, EnterAlternateScreen, LeaveAlternateScreen},
    },
};
use tokio::sync::mpsc;

use crate::tui::app::Event;

/// Owns raw mode and the alternate screen while the live view runs.
pub struct TerminalGuard {
    terminal: Terminal<CrosstermBackend<Stdout>>,
}

/// Leaves raw mode and the alternate screen. Safe to call more than once.
fn restore() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(io::stdout(), LeaveAlternateScreen, cursor::Show);
}

impl TerminalGuard {
    pub fn enter() -> anyhow::Result<TerminalGuard> {
        install_panic_hook();
        terminal::enable_raw_mode()?;
        // From here on, a failure must still give the terminal back.
        let setup = (|| -> io::Result<Terminal<CrosstermBackend<Stdout>>> {
            // Cleared here rather than with `Terminal::clear`, which asks the terminal for the
            // cursor position: a pty or serial line that does not answer would stall us.
            execute!(
                io::stdout(),
                EnterAlternateScreen,
                cursor::Hide,
                terminal::Clear(terminal::ClearType::All)
            )?;
            Terminal::new(CrosstermBackend::new(io::stdout()))
        })();
        match setup {
            Ok(terminal) => Ok(TerminalGuard { terminal }),
            Err(e) => {
                restore();
                Err(e.into())
            }
        }
    }

    pub fn terminal(&mut self) -> &mut Terminal<CrosstermBackend<Stdout>> {
        &mut self.terminal
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// A panic restores the terminal first, so its message lands on a usable screen.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

/// Reads keys on a thread of its own (crossterm's reader blocks) and sends them to the event
/// loop; ends when the loop is gone or the terminal fails.
pub fn spawn_key_reader(tx: mpsc::Sender<Event>) {
    std::thread::spawn(move || {
        while !tx.is_closed() {
            // Poll with a timeout so the thread notices the loop has ended.
            match term_event::poll(Duration::from_millis(200)) {
                Ok(false) => continue,
                Ok(true) => {}
                Err(_) => break,
            }
            let event = match term_event::read() {
                Ok(term_event::Event::Key(key)) => Event::Key(key),
                Ok(term_event::Event::Resize(..)) => Event::Resize,
                Ok(_) => continue,
                Err(_) => break,
            };
            if tx.blocking_send(event).is_err() {
                break;
            }
        }
    });
}
