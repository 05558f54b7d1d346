//! What can go wrong reading or writing a capture, precisely enough to act on.
use super::header::VERSION;

#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// Creating or writing a capture failed.
    #[error("{path}: {err}")]
    Io { path: String, err: std::io::Error },
    #[error("cannot read capture {path}: {err}")]
    Unreadable { path: String, err: std::io::Error },
    /// A directory, FIFO, device or socket given where a capture file was expected.
    #[error("{path} is {what}, not a capture file")]
    NotAFile { path: String, what: &'static str },
    /// An output path that cannot or must not be written (exists, its directory is missing or
    /// read-only); found before anything is traced.
    #[error("cannot write {path}: {why}")]
    Output { path: String, why: String },
    /// An output file exists and overwriting it was not asked for.
    #[error("cannot write {path}: it exists (pass --force to overwrite it)")]
    Exists { path: String },
    /// A capture error, with the file it is in.
    #[error("{path}: {err}")]
    InFile {
        path: String,
        err: Box<CaptureError>,
    },
    #[error("empty file: not a damon-trace capture")]
    Empty,
    #[error("not a damon-trace capture (bad magic)")]
    BadMagic,
    #[error(
        "capture format version {0} is newer than this damon-trace {tool} reads (versions 1 to {VERSION}): \
         read it with the damon-trace that wrote it, or a newer one",
        tool = env!("CARGO_PKG_VERSION")
    )]
    UnsupportedVersion(u32),
    #[error("capture format version 0 does not exist: the file header is corrupt")]
    VersionZero,
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
    /// `-` given as a capture to read while stdin is a terminal.
    #[error(
        "`-` reads a capture from stdin, but stdin is a terminal: pipe or redirect one in \
         (e.g. `damon-trace report - < run.dtcap`)"
    )]
    StdinTerminal,
    /// `-` given for binary output (a capture, an SVG) while stdout is a terminal.
    #[error(
        "`-` writes to stdout, but stdout is a terminal, which cannot show a capture or an \
         SVG: redirect or pipe it (e.g. `-o - > run.dtcap`), or give a file name"
    )]
    StdoutTerminal,
}

impl CaptureError {
    /// Whether the error is about the input file itself (as opposed to writing one).
    pub fn is_input(&self) -> bool {
        match self {
            CaptureError::Io { .. } => false,
            CaptureError::InFile { err, .. } => err.is_input(),
            _ => true,
        }
    }
}
