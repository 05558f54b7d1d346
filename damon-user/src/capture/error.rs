//! What can go wrong reading or writing a capture, precisely enough to act on.
use super::format::VERSION;

#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// Creating or writing a capture failed.
    #[error("{path}: {err}")]
    Io { path: String, err: std::io::Error },
    #[error("cannot read capture {path}: {err}")]
    Unreadable { path: String, err: std::io::Error },
    #[error("not a damon-trace capture (bad magic)")]
    BadMagic,
    #[error(
        "capture format version {0} is not supported by this damon-trace (it reads versions 1 to {VERSION})"
    )]
    UnsupportedVersion(u32),
    /// The file ends inside chunk `chunk`, at a point where that cannot be a killed writer's
    /// torn last chunk (or the strict reader was asked for).
    #[error(
        "capture truncated in chunk {chunk} at byte {offset}: it needs {need} bytes, {have} are left"
    )]
    Truncated {
        chunk: usize,
        offset: u64,
        need: u64,
        have: u64,
    },
    #[error("checksum mismatch in chunk {chunk} at byte {offset}: the file is corrupt")]
    Checksum { chunk: usize, offset: u64 },
    #[error("chunk {chunk}: {what}")]
    Malformed { chunk: usize, what: String },
    #[error("capture has no metadata chunk")]
    NoMeta,
}

impl CaptureError {
    /// Whether the error is about the input file itself (as opposed to writing one).
    pub fn is_input(&self) -> bool {
        !matches!(self, CaptureError::Io { .. })
    }
}
