//! The guest console as a person would see it: the `vt100` crate's terminal emulator (cursor
//! moves, scrolling regions, SGR, the alternate screen, wide and ambiguous-width characters as
//! `unicode-width` counts them, which is how ratatui lays them out), wrapped with what a test
//! harness needs on top: the answers a real terminal types back to the application's queries,
//! and which terminal modes the application left switched on.
//!
//! It replaced a hand-written model that took every character as one cell wide; a wide
//! character (`表`) shifted the rest of its row one column left of where a terminal draws it.
use vt100::{Callbacks, MouseProtocolEncoding, MouseProtocolMode, Parser};

/// Replies to the application's queries, collected while the parser runs: `vt100` parses the
/// queries but leaves answering to its user.
#[derive(Default)]
struct Answers {
    bytes: Vec<u8>,
    /// `CSI ? 1047 h` / `CSI ? 1015 h`: modes `vt100` does not track but a terminal keeps on.
    untracked_modes: Vec<u16>,
}

impl Callbacks for Answers {
    fn unhandled_csi(
        &mut self,
        screen: &mut vt100::Screen,
        i1: Option<u8>,
        _i2: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        let first = params.first().and_then(|p| p.first()).copied().unwrap_or(0);
        match (i1, c) {
            // Queries a terminal answers (crossterm asks where the cursor is before drawing):
            // cursor position, status "OK", a VT100 with advanced video, xterm's secondary DA.
            (None, 'n') if first == 6 => {
                let (row, col) = screen.cursor_position();
                let answer = format!("\x1b[{};{}R", row + 1, col + 1);
                self.bytes.extend_from_slice(answer.as_bytes());
            }
            (None, 'n') if first == 5 => self.bytes.extend_from_slice(b"\x1b[0n"),
            (None, 'c') if first == 0 => self.bytes.extend_from_slice(b"\x1b[?1;2c"),
            (Some(b'>'), 'c') if first == 0 => self.bytes.extend_from_slice(b"\x1b[>0;0;0c"),
            (Some(b'?'), 'h' | 'l') => {
                for &m in params.iter().filter_map(|p| p.first()) {
                    self.untracked_modes.retain(|&k| k != m);
                    if c == 'h' && matches!(m, 1047 | 1015) {
                        self.untracked_modes.push(m);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The visible screen of a terminal fed with [`Screen::feed`].
pub struct Screen {
    parser: Parser<Answers>,
}

impl Screen {
    pub fn new(rows: u16, cols: u16) -> Self {
        Self {
            parser: Parser::new_with_callbacks(nonzero(rows), nonzero(cols), 0, Answers::default()),
        }
    }

    /// The screen's text: one line per row, trailing blanks removed.
    pub fn text(&self) -> String {
        let screen = self.parser.screen();
        let cols = screen.size().1.get();
        let lines: Vec<String> = screen
            .rows(0, cols)
            .map(|r| r.trim_end().to_owned())
            .collect();
        lines.join("\n")
    }

    /// True while the alternate screen (full-screen apps) is shown.
    pub fn alternate_screen(&self) -> bool {
        self.parser.screen().alternate_screen()
    }

    /// True when the application hid the cursor and did not show it again.
    pub fn cursor_hidden(&self) -> bool {
        self.parser.screen().hide_cursor()
    }

    /// Bytes that switch off what the application left on (alternate screen, hidden cursor,
    /// mouse reporting, bracketed paste, application cursor keys, colours) and end on a fresh
    /// line; empty when it cleaned up after itself.
    pub fn restore_sequence(&self) -> Vec<u8> {
        let screen = self.parser.screen();
        let mut modes: Vec<u16> = Vec::new();
        if screen.alternate_screen() {
            modes.push(1049);
        }
        modes.extend(&self.parser.callbacks().untracked_modes);
        modes.extend(match screen.mouse_protocol_mode() {
            MouseProtocolMode::None => None,
            MouseProtocolMode::Press => Some(9),
            MouseProtocolMode::PressRelease => Some(1000),
            MouseProtocolMode::ButtonMotion => Some(1002),
            MouseProtocolMode::AnyMotion => Some(1003),
        });
        modes.extend(match screen.mouse_protocol_encoding() {
            MouseProtocolEncoding::Default => None,
            MouseProtocolEncoding::Utf8 => Some(1005),
            MouseProtocolEncoding::Sgr => Some(1006),
        });
        if screen.bracketed_paste() {
            modes.push(2004);
        }
        if screen.application_cursor() {
            modes.push(1);
        }
        let mut out: String = modes.iter().map(|m| format!("\x1b[?{m}l")).collect();
        if screen.hide_cursor() {
            out.push_str("\x1b[?25h");
        }
        if !out.is_empty() {
            out.push_str("\x1b[0m");
        }
        if screen.cursor_position().1 > 0 {
            out.push_str("\r\n");
        }
        out.into_bytes()
    }

    /// Takes a new size, as a terminal window does: the cursor's row stays in view (rows above
    /// it go first when the window gets shorter), the cursor stays inside.
    pub fn resize(&mut self, rows: u16, cols: u16) {
        self.parser.set_size(nonzero(rows), nonzero(cols));
    }

    /// What a real terminal would have typed back in answer to the queries fed so far
    /// (cursor position, device attributes); taken once.
    pub fn take_answers(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.parser.callbacks_mut().bytes)
    }

    pub fn feed(&mut self, bytes: &[u8]) {
        self.parser.process(bytes);
    }
}

fn nonzero(n: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(n).unwrap_or(std::num::NonZeroU16::MIN)
}

/// `raw` without escape sequences and control characters other than newlines and tabs: a
/// quick, order-preserving view of a console stream (full-screen apps come out jumbled; use
/// [`Screen`] for them).
pub fn strip_ansi(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    text.split('\n')
        .map(super::stream::strip_controls)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text a `rows`×`cols` terminal shows after receiving `raw`.
pub fn render(raw: &[u8], rows: u16, cols: u16) -> String {
    let mut s = Screen::new(rows, cols);
    s.feed(raw);
    s.text()
}

#[cfg(test)]
mod tests;
