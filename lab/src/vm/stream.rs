//! The console stream's smallest pieces, shared by the console loop ([`super::console`]), the
//! interactive session ([`super::session`]) and the screen ([`super::screen`]): what the loop
//! waits for, the filter that hides the harness's marker lines, and the control-character
//! stripper.
use crate::initramfs;

/// What the console loop waits for.
pub enum Event {
    Output(Vec<u8>),
    /// QEMU closed its stdout: it exited.
    Closed,
    /// The user asked to stop the guest (Ctrl-A x).
    Detach,
}

/// Passes a raw console stream through unchanged except for the harness's marker lines (and
/// everything after the exit marker: the kernel's power-down noise). A marker starts with
/// `DAMON_VM_` and ends with this run's nonce; bytes that could begin one are held back until
/// their line is complete or they stop matching.
pub struct MarkerFilter {
    id: Vec<u8>,
    held: Vec<u8>,
    done: bool,
}

const MARKER_START: &[u8] = b"DAMON_VM_";

impl MarkerFilter {
    pub fn new(nonce: &str) -> Self {
        Self {
            id: format!(" id={nonce}").into_bytes(),
            held: Vec::new(),
            done: false,
        }
    }

    pub fn pass(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes.len());
        for &b in bytes {
            if self.done {
                break;
            }
            self.held.push(b);
            if self.held.starts_with(MARKER_START) {
                if b == b'\n' {
                    let line = std::mem::take(&mut self.held);
                    let body = line.trim_ascii_end();
                    if body.ends_with(&self.id) {
                        self.done = body.starts_with(initramfs::exit_marker_prefix().as_bytes());
                    } else {
                        out.extend_from_slice(&line);
                    }
                }
            } else if !MARKER_START.starts_with(&self.held) {
                // Not (or no longer) a marker: release all but a tail that might start one.
                let keep = (1..self.held.len())
                    .find(|&i| MARKER_START.starts_with(&self.held[i..]))
                    .unwrap_or(self.held.len());
                out.extend(self.held.drain(..keep));
            }
        }
        out
    }
}

/// Drops terminal escape sequences and control characters: firmware and the kernel send
/// resets (`ESC c`) and `\r` that would garble the user's terminal and the returned text.
pub fn strip_controls(s: &str) -> String {
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
    fn marker_lines_are_filtered_out_of_the_passthrough_wherever_they_start() {
        let mut f = MarkerFilter::new("n1");
        let mut shown = Vec::new();
        // Split at awkward places: inside the marker word and inside the nonce.
        for piece in [
            &b"boot\r\nDAMON_VM_READY id=n1\r\n\x1b[2JDD"[..],
            b"AMON_VM",
            b"_X not ours\r\nframe DAMON_V",
            b"M_OUT_BYTES=10 id=n",
            b"1\r\nDAMON_VM_EXIT=0 id=n1\r\nreboot: Power down\r\n",
        ] {
            shown.extend(f.pass(piece));
        }
        assert_eq!(
            String::from_utf8(shown).unwrap(),
            "boot\r\n\x1b[2JDDAMON_VM_X not ours\r\nframe "
        );
    }
}
