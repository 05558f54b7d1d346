//! A small VT100/xterm screen model: enough of the escape language that ratatui (crossterm),
//! busybox `top` and `vi` speak to turn a raw console stream back into the text a person would
//! see, and to know which terminal modes a guest application left switched on.
//!
//! It is deliberately approximate: colours and attributes are dropped, every character is one
//! cell wide, and unknown sequences are skipped whole so that they cannot leak into the text.
use std::collections::BTreeSet;

/// DEC private modes that change how the host terminal behaves after the guest app is gone:
/// the alternate screens, mouse reporting, bracketed paste and application cursor keys.
const STICKY_MODES: &[u16] = &[1049, 1047, 47, 1000, 1002, 1003, 1005, 1006, 1015, 2004, 1];

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Ground,
    Escape,
    /// `ESC (`, `ESC )`, `ESC #` …: one more byte names a charset or a test; skipped.
    EscapeArg,
    Csi,
    /// OSC, DCS and friends: skipped up to BEL or `ESC \`.
    String,
    StringEscape,
}

/// The visible screen of a terminal fed with [`Screen::feed`].
pub struct Screen {
    rows: usize,
    cols: usize,
    grid: Vec<Vec<char>>,
    /// The main screen's content while the alternate screen is shown.
    saved_main: Option<Vec<Vec<char>>>,
    row: usize,
    col: usize,
    /// The cursor sits past the last column; the next printable character wraps first.
    wrap_pending: bool,
    saved_cursor: (usize, usize),
    /// Scrolling region, inclusive rows.
    top: usize,
    bottom: usize,
    /// DEC private modes switched on (`CSI ? n h`).
    modes: BTreeSet<u16>,
    cursor_hidden: bool,
    /// Replies to the application's queries, for whoever plays the keyboard.
    answers: Vec<u8>,
    state: State,
    csi: Vec<u8>,
    utf8: Vec<u8>,
}

impl Screen {
    pub fn new(rows: u16, cols: u16) -> Self {
        let (rows, cols) = (usize::from(rows.max(1)), usize::from(cols.max(1)));
        Self {
            rows,
            cols,
            grid: vec![vec![' '; cols]; rows],
            saved_main: None,
            row: 0,
            col: 0,
            wrap_pending: false,
            saved_cursor: (0, 0),
            top: 0,
            bottom: rows - 1,
            modes: BTreeSet::new(),
            cursor_hidden: false,
            answers: Vec::new(),
            state: State::Ground,
            csi: Vec::new(),
            utf8: Vec::new(),
        }
    }

    /// The screen's text: one line per row, trailing blanks removed.
    pub fn text(&self) -> String {
        let lines: Vec<String> = self
            .grid
            .iter()
            .map(|r| r.iter().collect::<String>().trim_end().to_owned())
            .collect();
        lines.join("\n")
    }

    /// True while the alternate screen (full-screen apps) is shown.
    pub fn alternate_screen(&self) -> bool {
        self.saved_main.is_some()
    }

    /// True when the application hid the cursor and did not show it again.
    pub fn cursor_hidden(&self) -> bool {
        self.cursor_hidden
    }

    /// Bytes that switch off what the application left on (alternate screen, hidden cursor,
    /// mouse reporting, colours) and end on a fresh line; empty when it cleaned up after itself.
    pub fn restore_sequence(&self) -> Vec<u8> {
        let mut out = String::new();
        for m in STICKY_MODES.iter().filter(|m| self.modes.contains(m)) {
            out.push_str(&format!("\x1b[?{m}l"));
        }
        if self.cursor_hidden() {
            out.push_str("\x1b[?25h");
        }
        if !out.is_empty() {
            out.push_str("\x1b[0m");
        }
        if self.col > 0 || self.wrap_pending {
            out.push_str("\r\n");
        }
        out.into_bytes()
    }

    /// Takes a new size, as a terminal window does: content is kept from the top left, the
    /// cursor stays inside, the scrolling region is reset.
    pub fn resize(&mut self, rows: u16, cols: u16) {
        let (rows, cols) = (usize::from(rows.max(1)), usize::from(cols.max(1)));
        for grid in std::iter::once(&mut self.grid).chain(self.saved_main.as_mut()) {
            grid.resize(rows, vec![' '; cols]);
            grid.iter_mut().for_each(|line| line.resize(cols, ' '));
        }
        (self.rows, self.cols, self.top, self.bottom) = (rows, cols, 0, rows - 1);
        (self.row, self.col) = (self.row.min(rows - 1), self.col.min(cols - 1));
    }

    /// What a real terminal would have typed back in answer to the queries fed so far
    /// (cursor position, device attributes); taken once.
    pub fn take_answers(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.answers)
    }

    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.byte(b);
        }
    }

    fn byte(&mut self, b: u8) {
        match self.state {
            State::Ground => self.ground(b),
            State::Escape => self.escape(b),
            State::EscapeArg => self.state = State::Ground,
            State::Csi => {
                if (0x40..=0x7e).contains(&b) {
                    self.state = State::Ground;
                    let params = std::mem::take(&mut self.csi);
                    self.csi_dispatch(&params, b);
                } else if b == 0x1b {
                    self.state = State::Escape;
                } else {
                    self.csi.push(b);
                }
            }
            State::String => match b {
                0x07 => self.state = State::Ground,
                0x1b => self.state = State::StringEscape,
                _ => {}
            },
            State::StringEscape => {
                self.state = if b == b'\\' {
                    State::Ground
                } else {
                    State::String
                }
            }
        }
    }

    fn ground(&mut self, b: u8) {
        if !self.utf8.is_empty() || b >= 0x80 {
            self.utf8.push(b);
            match std::str::from_utf8(&self.utf8) {
                Ok(s) => {
                    let ch = s.chars().next().unwrap_or(' ');
                    self.utf8.clear();
                    self.print(ch);
                }
                // Incomplete sequence: wait for more bytes (at most 4).
                Err(e) if e.error_len().is_none() && self.utf8.len() < 4 => {}
                Err(_) => {
                    self.utf8.clear();
                    self.print('\u{fffd}');
                }
            }
            return;
        }
        match b {
            0x1b => self.state = State::Escape,
            b'\r' => self.carriage_return(),
            b'\n' | 0x0b | 0x0c => self.line_feed(),
            0x08 => {
                self.col = self.col.saturating_sub(1);
                self.wrap_pending = false;
            }
            b'\t' => self.col = ((self.col / 8 + 1) * 8).min(self.cols - 1),
            0x20..=0x7e => self.print(char::from(b)),
            _ => {}
        }
    }

    fn escape(&mut self, b: u8) {
        self.state = State::Ground;
        match b {
            b'[' => self.state = State::Csi,
            b']' | b'P' | b'_' | b'^' | b'X' => self.state = State::String,
            b'(' | b')' | b'*' | b'+' | b'#' | b'%' => self.state = State::EscapeArg,
            b'7' => self.saved_cursor = (self.row, self.col),
            b'8' => (self.row, self.col) = self.saved_cursor,
            b'D' => self.line_feed(),
            b'E' => {
                self.carriage_return();
                self.line_feed();
            }
            b'M' => self.reverse_index(),
            b'c' => *self = Self::new(self.rows as u16, self.cols as u16),
            _ => {}
        }
    }

    fn csi_dispatch(&mut self, params: &[u8], fin: u8) {
        let prefix = params.first().copied().filter(|b| b"?>=<".contains(b));
        let text = String::from_utf8_lossy(params);
        let nums: Vec<usize> = text
            .trim_start_matches(['?', '>', '=', '<'])
            .split(';')
            .map(|p| p.split(':').next().unwrap_or("").parse().unwrap_or(0))
            .collect();
        let n = |i: usize| nums.get(i).copied().filter(|&v| v > 0).unwrap_or(1);
        let (rows, cols) = (self.rows, self.cols);
        self.wrap_pending = false;
        match (prefix, fin) {
            (Some(b'?'), b'h') => nums.iter().for_each(|&m| self.set_mode(m, true)),
            (Some(b'?'), b'l') => nums.iter().for_each(|&m| self.set_mode(m, false)),
            // Queries a terminal answers (crossterm asks where the cursor is before drawing):
            // cursor position, status "OK", a VT100 with advanced video, xterm's secondary DA.
            (None, b'n') if nums[0] == 6 => {
                let answer = format!("\x1b[{};{}R", self.row + 1, self.col + 1);
                self.answers.extend_from_slice(answer.as_bytes());
            }
            (None, b'n') if nums[0] == 5 => self.answers.extend_from_slice(b"\x1b[0n"),
            (None, b'c') if nums[0] == 0 => self.answers.extend_from_slice(b"\x1b[?1;2c"),
            (Some(b'>'), b'c') if nums[0] == 0 => self.answers.extend_from_slice(b"\x1b[>0;0;0c"),
            (Some(_), _) => {}
            (None, b'H' | b'f') => {
                self.row = (n(0) - 1).min(rows - 1);
                self.col = (n(1) - 1).min(cols - 1);
            }
            (None, b'A') => self.row = self.row.saturating_sub(n(0)),
            (None, b'B' | b'e') => self.row = (self.row + n(0)).min(rows - 1),
            (None, b'C' | b'a') => self.col = (self.col + n(0)).min(cols - 1),
            (None, b'D') => self.col = self.col.saturating_sub(n(0)),
            (None, b'E') => (self.row, self.col) = ((self.row + n(0)).min(rows - 1), 0),
            (None, b'F') => (self.row, self.col) = (self.row.saturating_sub(n(0)), 0),
            (None, b'G' | b'`') => self.col = (n(0) - 1).min(cols - 1),
            (None, b'd') => self.row = (n(0) - 1).min(rows - 1),
            (None, b'J') => self.erase_display(nums.first().copied().unwrap_or(0)),
            (None, b'K') => self.erase_line(nums.first().copied().unwrap_or(0)),
            (None, b'X') => self.blank(self.row, self.col, (self.col + n(0)).min(cols)),
            (None, b'P') => {
                let line = &mut self.grid[self.row];
                let k = n(0).min(cols - self.col);
                line.drain(self.col..self.col + k);
                line.extend(std::iter::repeat_n(' ', k));
            }
            (None, b'@') => {
                let line = &mut self.grid[self.row];
                let k = n(0).min(cols - self.col);
                line.truncate(cols - k);
                line.splice(self.col..self.col, std::iter::repeat_n(' ', k));
            }
            (None, b'L') if (self.top..=self.bottom).contains(&self.row) => {
                (0..n(0)).for_each(|_| self.scroll_down_from(self.row));
            }
            (None, b'M') if (self.top..=self.bottom).contains(&self.row) => {
                (0..n(0)).for_each(|_| self.scroll_up_from(self.row));
            }
            (None, b'S') => (0..n(0)).for_each(|_| self.scroll_up_from(self.top)),
            (None, b'T') => (0..n(0)).for_each(|_| self.scroll_down_from(self.top)),
            (None, b'r') => {
                let top = n(0) - 1;
                let bottom = nums.get(1).copied().filter(|&v| v > 0).unwrap_or(rows) - 1;
                if top < bottom && bottom < rows {
                    (self.top, self.bottom) = (top, bottom);
                    (self.row, self.col) = (0, 0);
                }
            }
            (None, b's') => self.saved_cursor = (self.row, self.col),
            (None, b'u') => (self.row, self.col) = self.saved_cursor,
            _ => {}
        }
    }

    fn set_mode(&mut self, mode: usize, on: bool) {
        let Ok(mode) = u16::try_from(mode) else {
            return;
        };
        if mode == 25 {
            self.cursor_hidden = !on;
            return;
        }
        if matches!(mode, 47 | 1047 | 1049) && on != self.alternate_screen() {
            if on {
                if mode == 1049 {
                    self.saved_cursor = (self.row, self.col);
                }
                let blank = vec![vec![' '; self.cols]; self.rows];
                self.saved_main = Some(std::mem::replace(&mut self.grid, blank));
            } else if let Some(main) = self.saved_main.take() {
                self.grid = main;
                if mode == 1049 {
                    (self.row, self.col) = self.saved_cursor;
                }
            }
        }
        if on {
            self.modes.insert(mode);
        } else {
            self.modes.remove(&mode);
        }
    }

    fn print(&mut self, ch: char) {
        if self.wrap_pending {
            self.carriage_return();
            self.line_feed();
        }
        self.grid[self.row][self.col] = ch;
        if self.col + 1 == self.cols {
            self.wrap_pending = true;
        } else {
            self.col += 1;
        }
    }

    fn carriage_return(&mut self) {
        self.col = 0;
        self.wrap_pending = false;
    }

    fn line_feed(&mut self) {
        self.wrap_pending = false;
        if self.row == self.bottom {
            self.scroll_up_from(self.top);
        } else if self.row + 1 < self.rows {
            self.row += 1;
        }
    }

    fn reverse_index(&mut self) {
        if self.row == self.top {
            self.scroll_down_from(self.top);
        } else {
            self.row = self.row.saturating_sub(1);
        }
    }

    /// Removes row `from` and inserts a blank row at the bottom of the scrolling region.
    fn scroll_up_from(&mut self, from: usize) {
        self.grid.remove(from);
        self.grid.insert(self.bottom, vec![' '; self.cols]);
    }

    /// Removes the region's bottom row and inserts a blank row at `at`.
    fn scroll_down_from(&mut self, at: usize) {
        self.grid.remove(self.bottom);
        self.grid.insert(at, vec![' '; self.cols]);
    }

    fn blank(&mut self, row: usize, from: usize, to: usize) {
        self.grid[row][from..to].fill(' ');
    }

    fn erase_line(&mut self, how: usize) {
        let (row, col, cols) = (self.row, self.col, self.cols);
        match how {
            0 => self.blank(row, col, cols),
            1 => self.blank(row, 0, col + 1),
            _ => self.blank(row, 0, cols),
        }
    }

    fn erase_display(&mut self, how: usize) {
        let (row, cols) = (self.row, self.cols);
        match how {
            0 => {
                self.erase_line(0);
                (row + 1..self.rows).for_each(|r| self.blank(r, 0, cols));
            }
            1 => {
                self.erase_line(1);
                (0..row).for_each(|r| self.blank(r, 0, cols));
            }
            _ => (0..self.rows).for_each(|r| self.blank(r, 0, cols)),
        }
    }
}

/// `raw` without escape sequences and control characters other than newlines and tabs: a
/// quick, order-preserving view of a console stream (full-screen apps come out jumbled; use
/// [`Screen`] for them).
pub fn strip_ansi(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    text.split('\n')
        .map(super::console::strip_controls)
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
