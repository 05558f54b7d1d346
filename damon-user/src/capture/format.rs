//! On-disk capture format (version 2 written; versions 1 and 2 read). Full description in
//! `docs/capture-format.md`.
//!
//! ```text
//! header : magic "DMNTRCAP" (8 bytes) | version u32 LE | reserved u32 (0)
//! chunk* : see `chunk.rs` (v2: zstd + CRC32 per chunk) or `v1.rs` (v1: raw sections)
//! ```
//! Chunk kinds: 1 = metadata (JSON, first), 2 = call records (`columns.rs`), 3 = summary
//! (JSON, last), 4 = interval markers, 5 = records with arguments, 6 = kernel-mode histogram
//! snapshot (`hist.rs`), 7 = the same with skip counters, 8 = records with arguments and
//! disturbance counts, 9 = a kind-7 snapshot with the disturbed calls, 10 = records with
//! arguments, disturbance counts and the time breakdown, 11 = slow calls with their stacks
//! (`slow.rs`). Records are written in chunks as they arrive — `record` flushes one every
//! second — so a writer killed with SIGKILL leaves every complete chunk readable: a reader
//! accepts a file that ends inside its last chunk when no summary precedes it (exactly what a
//! killed writer leaves) and reports the torn tail. Readers skip chunk kinds they do not know,
//! so later versions can add kinds; an incompatible change bumps the version.
use std::{
    fs::{File, OpenOptions},
    io::{Read, Write},
    os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _},
    path::Path,
};

use damon_common::CallRecord;

pub use super::error::CaptureError;
use super::{
    Capture, HistSnapshot, Meta, SlowCall, Summary, chunk, columns, hist,
    stdio::{STDIN_NAME, check_stdout, is_stdio, read_stdin, stdout_file},
    v1,
};

pub use super::header::{MAGIC, VERSION};
pub(super) const KIND_META: u32 = 1;
pub(super) const KIND_RECORDS: u32 = 2;
pub(super) const KIND_SUMMARY: u32 = 3;
/// Aggregation-interval boundary markers, column layout like [`KIND_RECORDS`]. Readers before
/// this kind skip it, so captures with markers stay readable by older builds.
pub(super) const KIND_MARKS: u32 = 4;
/// Call records with their argument columns (`arg0`, `arg1`): written instead of
/// [`KIND_RECORDS`] for a chunk where some record has a nonzero argument, so captures without
/// arguments stay byte-compatible with older builds.
pub(super) const KIND_RECORDS_ARGS: u32 = 5;
/// Kernel mode: a cumulative snapshot of the in-kernel histograms and counters (`hist.rs`),
/// about one per second. Older readers skip it (they see a capture without records).
pub(super) const KIND_HIST_SNAPSHOT: u32 = 6;
/// [`KIND_HIST_SNAPSHOT`] with the skip counters (stale entries, entry and exit runs the kernel
/// skipped) after each function's counters; written since pairing by invocation. Older readers
/// skip it.
pub(super) const KIND_HIST_SNAPSHOT_SKIPS: u32 = 7;
/// Call records with their argument columns and the four disturbance columns (`slept`,
/// `preempted`, `hardirqs`, `softirqs`): written instead of [`KIND_RECORDS`] or
/// [`KIND_RECORDS_ARGS`] for a chunk where some record has a nonzero disturbance count, so
/// captures without them stay byte-compatible with older builds. Older readers skip it (they
/// see fewer records than the summary counts).
pub(super) const KIND_RECORDS_DISTURBANCE: u32 = 8;
/// [`KIND_HIST_SNAPSHOT_SKIPS`] with each function's disturbed calls after the histograms
/// (`hist.rs`): written instead of it when disturbance is measured in kernel mode. Older
/// readers skip it (they see a kernel capture without snapshots).
pub(super) const KIND_HIST_SNAPSHOT_DISTURBANCE: u32 = 9;
/// [`KIND_RECORDS_DISTURBANCE`] with the time breakdown's two columns (`off_cpu_ns`,
/// `irq_ns`): written instead of it for a chunk where some record has a nonzero breakdown
/// field, so captures without one stay byte-compatible with older builds. Older readers skip
/// it (they see fewer records than the summary counts).
pub(super) const KIND_RECORDS_BREAKDOWN: u32 = 10;
/// Slow calls kept with their kernel stacks (`record --slow`, `slow::encode`), written as they
/// arrive; readers before this kind skip it.
pub(super) const KIND_SLOW_CALLS: u32 = 11;

/// The chunk kind of records stored in `layout`.
fn records_kind(layout: columns::Layout) -> u32 {
    match layout {
        columns::Layout::Plain => KIND_RECORDS,
        columns::Layout::Args => KIND_RECORDS_ARGS,
        columns::Layout::ArgsDisturbance => KIND_RECORDS_DISTURBANCE,
        columns::Layout::Breakdown => KIND_RECORDS_BREAKDOWN,
    }
}

/// The layout of a record chunk of `kind`; `None` for other kinds.
pub(super) fn records_layout(kind: u32) -> Option<columns::Layout> {
    columns::Layout::ALL
        .into_iter()
        .find(|&l| records_kind(l) == kind)
}
pub(super) const HEADER_LEN: usize = 16;
/// Records buffered before a chunk is written whatever the clock says.
const RECORDS_PER_CHUNK: usize = 16 * 1024;
/// Slow calls buffered before a chunk is written without waiting for the flush.
const SLOW_CALLS_PER_CHUNK: usize = 1024;

pub(super) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> CaptureError + '_ {
    move |err| CaptureError::Unreadable {
        path: path.display().to_string(),
        err,
    }
}

/// Writes a capture incrementally.
pub struct CaptureWriter {
    file: File,
    path: String,
    /// A file to sync at the end (not stdout: a pipe cannot be synced).
    sync: bool,
    pending: Vec<CallRecord>,
    pending_marks: Vec<CallRecord>,
    pending_slow: Vec<SlowCall>,
    scratch: Vec<u8>,
    pub records_written: u64,
    pub marks_written: u64,
    /// Call records taken so far, per function id (`record --format json`).
    pub records_by_function: std::collections::BTreeMap<u32, u64>,
}

impl CaptureWriter {
    /// Creates the file (mode 0600; refuses to overwrite unless `force`), or takes stdout for
    /// `-`, and writes the header and metadata.
    pub fn create(path: &Path, force: bool, meta: &Meta) -> Result<CaptureWriter, CaptureError> {
        let file = create_output(path, force)?;
        let mut w = CaptureWriter {
            file,
            sync: !is_stdio(path),
            path: path.display().to_string(),
            pending: Vec::new(),
            pending_marks: Vec::new(),
            pending_slow: Vec::new(),
            scratch: Vec::new(),
            records_written: 0,
            marks_written: 0,
            records_by_function: Default::default(),
        };
        let mut header = Vec::with_capacity(HEADER_LEN);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&VERSION.to_le_bytes());
        header.extend_from_slice(&0u32.to_le_bytes());
        w.write_all(&header)?;
        let json = serde_json::to_vec(meta).map_err(|e| w.error(e.to_string()))?;
        w.write_chunk(KIND_META, &json)?;
        Ok(w)
    }

    fn error(&self, what: String) -> CaptureError {
        CaptureError::Io {
            path: self.path.clone(),
            err: std::io::Error::other(what),
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> Result<(), CaptureError> {
        self.file.write_all(bytes).map_err(|err| CaptureError::Io {
            path: self.path.clone(),
            err,
        })
    }

    /// One `write_all` per chunk, without a userspace buffer: once it returns, the chunk is in
    /// the kernel's page cache and survives the death of this process.
    fn write_chunk(&mut self, kind: u32, raw: &[u8]) -> Result<(), CaptureError> {
        let bytes = chunk::encode(kind, raw).map_err(|e| self.error(e))?;
        self.write_all(&bytes)
    }

    /// Buffers one ring item: a call record, or an interval marker (kept in its own chunks).
    pub fn push(&mut self, r: &CallRecord) -> Result<(), CaptureError> {
        if r.func == damon_common::AGGREGATION_MARK {
            self.pending_marks.push(*r);
        } else {
            self.pending.push(*r);
            *self.records_by_function.entry(r.func).or_default() += 1;
        }
        if self.pending.len() + self.pending_marks.len() >= RECORDS_PER_CHUNK {
            self.flush()?;
        }
        Ok(())
    }

    /// Buffers slow calls (`record --slow`), written with the next flush.
    pub fn push_slow(&mut self, calls: &[SlowCall]) -> Result<(), CaptureError> {
        self.pending_slow.extend_from_slice(calls);
        if self.pending_slow.len() >= SLOW_CALLS_PER_CHUNK {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes a kernel-mode histogram snapshot as a chunk of its own, at once (after the
    /// records buffered so far).
    pub fn push_snapshot(&mut self, snapshot: &HistSnapshot) -> Result<(), CaptureError> {
        self.flush()?;
        let mut raw = std::mem::take(&mut self.scratch);
        raw.clear();
        let kind = if hist::encode(snapshot, &mut raw) {
            KIND_HIST_SNAPSHOT_DISTURBANCE
        } else {
            KIND_HIST_SNAPSHOT_SKIPS
        };
        let result = self.write_chunk(kind, &raw);
        self.scratch = raw;
        result
    }

    /// Writes buffered records as a chunk, so a kill loses at most what arrived since the last
    /// flush (`record` flushes every second).
    pub fn flush(&mut self) -> Result<(), CaptureError> {
        if !self.pending_slow.is_empty() {
            let calls = std::mem::take(&mut self.pending_slow);
            let mut raw = std::mem::take(&mut self.scratch);
            raw.clear();
            super::slow::encode(&calls, &mut raw);
            let result = self.write_chunk(KIND_SLOW_CALLS, &raw);
            self.scratch = raw;
            result?;
        }
        if !self.pending_marks.is_empty() {
            let marks = std::mem::take(&mut self.pending_marks);
            self.write_columns(KIND_MARKS, columns::Layout::Plain, &marks)?;
            self.marks_written += marks.len() as u64;
        }
        if self.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        let layout = columns::Layout::of(&pending);
        self.write_columns(records_kind(layout), layout, &pending)?;
        self.records_written += pending.len() as u64;
        self.pending = pending;
        self.pending.clear();
        Ok(())
    }

    fn write_columns(
        &mut self,
        kind: u32,
        layout: columns::Layout,
        records: &[CallRecord],
    ) -> Result<(), CaptureError> {
        let mut raw = std::mem::take(&mut self.scratch);
        raw.clear();
        columns::encode(records, layout, &mut raw);
        let result = self.write_chunk(kind, &raw);
        self.scratch = raw;
        result
    }

    /// Writes the summary and syncs the file.
    pub fn finish(mut self, summary: &Summary) -> Result<u64, CaptureError> {
        self.flush()?;
        let json = serde_json::to_vec(summary).map_err(|e| self.error(e.to_string()))?;
        self.write_chunk(KIND_SUMMARY, &json)?;
        if self.sync {
            self.file.sync_all().map_err(|err| CaptureError::Io {
                path: self.path.clone(),
                err,
            })?;
        }
        Ok(self.records_written)
    }
}

/// [`create_private`], or stdout for `-` (refused when it is a terminal).
pub fn create_output(path: &Path, force: bool) -> Result<File, CaptureError> {
    if is_stdio(path) {
        return stdout_file();
    }
    create_private(path, force)
}

/// Creates an output file readable by its owner only (mode 0600, also when `force` overwrites an
/// existing file of another mode); refuses an existing file unless `force`.
pub fn create_private(path: &Path, force: bool) -> Result<File, CaptureError> {
    let mut opts = OpenOptions::new();
    opts.write(true).mode(0o600);
    if force {
        opts.create(true).truncate(true);
    } else {
        opts.create_new(true);
    }
    let io = |err: std::io::Error| {
        if err.kind() == std::io::ErrorKind::AlreadyExists {
            exists_error(path)
        } else {
            CaptureError::Io {
                path: path.display().to_string(),
                err,
            }
        }
    };
    let file = opts.open(path).map_err(io)?;
    // `mode` applies only to a file this call creates; an overwritten one keeps its mode.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(io)?;
    Ok(file)
}

fn exists_error(path: &Path) -> CaptureError {
    CaptureError::Exists {
        path: path.display().to_string(),
    }
}

/// Checks, before anything is traced, that [`create_output`] will be able to create `path`
/// (`-`: that stdout is not a terminal):
/// it must not exist (unless `force`, and then be a regular file) and its directory must take
/// a new file. Leaves nothing behind.
pub fn check_output(path: &Path, force: bool) -> Result<(), CaptureError> {
    if is_stdio(path) {
        return check_stdout();
    }
    let out = |why: String| CaptureError::Output {
        path: path.display().to_string(),
        why,
    };
    match std::fs::symlink_metadata(path) {
        Ok(_) if !force => return Err(exists_error(path)),
        Ok(_) => {
            return match std::fs::metadata(path) {
                Ok(m) if m.is_file() => OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map(drop)
                    .map_err(|e| out(e.to_string())),
                Ok(m) => Err(out(format!("it is {}", file_kind(&m.file_type())))),
                Err(e) => Err(out(e.to_string())),
            };
        }
        // Absent, or a path through a non-directory: the parent check below says which.
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) => {}
        Err(e) => return Err(out(e.to_string())),
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match std::fs::metadata(parent) {
        Ok(m) if m.is_dir() => {}
        Ok(m) => {
            return Err(out(format!(
                "{} is {}, not a directory",
                parent.display(),
                file_kind(&m.file_type())
            )));
        }
        Err(e) => return Err(out(format!("{}: {e}", parent.display()))),
    }
    // Permissions, read-only mounts, ACLs, pseudo file systems: only trying tells.
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(file) => {
            drop(file);
            let _ = std::fs::remove_file(path);
            Ok(())
        }
        Err(e) => Err(out(e.to_string())),
    }
}

/// "a directory", "a FIFO", … for messages.
fn file_kind(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        "a regular file"
    }
}

/// Collects chunks into a capture, whatever the version that framed them.
#[derive(Default)]
pub(super) struct Assembler {
    pub(super) meta: Option<Meta>,
    pub(super) records: Vec<CallRecord>,
    pub(super) marks: Vec<CallRecord>,
    pub(super) hist_snapshots: Vec<HistSnapshot>,
    pub(super) slow_calls: Vec<SlowCall>,
    summary: Option<Summary>,
    pub record_chunks: usize,
}

impl Assembler {
    pub fn meta(&mut self, chunk: usize, payload: &[u8]) -> Result<(), CaptureError> {
        if chunk != 0 || self.meta.is_some() {
            return Err(malformed(chunk, "metadata must be the first chunk, once"));
        }
        let meta = serde_json::from_slice(payload)
            .map_err(|e| malformed(chunk, &format!("metadata: {e}")))?;
        self.meta = Some(meta);
        Ok(())
    }

    /// Where a record chunk's records go.
    pub fn records(&mut self, chunk: usize) -> Result<&mut Vec<CallRecord>, CaptureError> {
        self.check_order(chunk, "records")?;
        self.record_chunks += 1;
        Ok(&mut self.records)
    }

    /// Where a marker chunk's markers go.
    pub fn marks(&mut self, chunk: usize) -> Result<&mut Vec<CallRecord>, CaptureError> {
        self.check_order(chunk, "interval markers")?;
        Ok(&mut self.marks)
    }

    pub fn hist_snapshot(
        &mut self,
        chunk: usize,
        payload: &[u8],
        kind: u32,
    ) -> Result<(), CaptureError> {
        self.check_order(chunk, "a histogram snapshot")?;
        let skips = kind != KIND_HIST_SNAPSHOT;
        let disturbance = kind == KIND_HIST_SNAPSHOT_DISTURBANCE;
        let s = hist::decode(payload, skips, disturbance).map_err(|e| malformed(chunk, &e))?;
        self.hist_snapshots.push(s);
        Ok(())
    }

    pub fn summary(&mut self, chunk: usize, payload: &[u8]) -> Result<(), CaptureError> {
        self.check_order(chunk, "the summary")?;
        let summary = serde_json::from_slice(payload)
            .map_err(|e| malformed(chunk, &format!("summary: {e}")))?;
        self.summary = Some(summary);
        Ok(())
    }

    /// Files one version-2 chunk (`index` counted from 0) by its kind; skips kinds a later
    /// version added.
    pub fn chunk(&mut self, index: usize, c: &chunk::Chunk) -> Result<(), CaptureError> {
        match c.kind {
            KIND_META => self.meta(index, &c.raw)?,
            kind if let Some(layout) = records_layout(kind) => {
                let out = self.records(index)?;
                columns::decode(&c.raw, layout, out).map_err(|e| malformed(index, &e))?;
            }
            KIND_MARKS => {
                let out = self.marks(index)?;
                columns::decode(&c.raw, columns::Layout::Plain, out)
                    .map_err(|e| malformed(index, &e))?;
            }
            KIND_HIST_SNAPSHOT | KIND_HIST_SNAPSHOT_SKIPS | KIND_HIST_SNAPSHOT_DISTURBANCE => {
                self.hist_snapshot(index, &c.raw, c.kind)?
            }
            KIND_SUMMARY => self.summary(index, &c.raw)?,
            KIND_SLOW_CALLS => {
                self.check_order(index, "slow calls")?;
                super::slow::decode(&c.raw, &mut self.slow_calls)
                    .map_err(|e| malformed(index, &e))?;
            }
            _ => {} // a later version's chunk: skip
        }
        Ok(())
    }

    fn check_order(&self, chunk: usize, what: &str) -> Result<(), CaptureError> {
        if self.meta.is_none() {
            return Err(CaptureError::NoMeta);
        }
        if self.summary.is_some() {
            return Err(malformed(chunk, &format!("{what} after the summary")));
        }
        Ok(())
    }

    /// The capture, if a torn tail (if any) can be what a killed writer left.
    pub(super) fn finish(
        self,
        torn: Option<chunk::Torn>,
        strict: bool,
    ) -> Result<Capture, CaptureError> {
        if let Some(t) = torn
            && (strict || self.meta.is_none() || self.summary.is_some())
        {
            return Err(t.into_error());
        }
        let mut meta = self.meta.ok_or(CaptureError::NoMeta)?;
        // A calibration measured beside the session ends the capture, not its header.
        if let Some(cal) = self.summary.as_ref().and_then(|s| s.calibration.clone()) {
            meta.calibration = Some(cal);
        }
        Ok(Capture {
            meta,
            records: self.records,
            summary: self.summary,
            marks: self.marks,
            hist_snapshots: self.hist_snapshots,
            slow_calls: self.slow_calls,
        })
    }
}

fn malformed(chunk: usize, what: &str) -> CaptureError {
    CaptureError::Malformed {
        chunk,
        what: what.to_owned(),
    }
}

/// How a capture was stored, and whether its end was torn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadInfo {
    pub version: u32,
    pub file_bytes: u64,
    pub record_chunks: usize,
    /// The file ends inside this chunk (a writer killed mid-write): the chunks before it are
    /// all there is.
    pub torn_chunk: Option<usize>,
}

/// A capture and how it was stored.
pub struct Loaded {
    pub capture: Capture,
    pub info: ReadInfo,
}

/// Reads a whole capture file, accepting a killed writer's torn last chunk (see [`load`]).
pub fn read_file(path: &Path) -> Result<Capture, CaptureError> {
    load_file(path).map(|l| l.capture)
}

/// [`read_file`], with how the file was stored.
///
/// Only regular files are read: a directory, FIFO, device or socket is refused before it is
/// opened (opening a FIFO without a writer would block forever, reading a device might never
/// end).
pub fn load_file(path: &Path) -> Result<Loaded, CaptureError> {
    if is_stdio(path) {
        return load(&read_stdin()?, false).map_err(|err| CaptureError::InFile {
            path: STDIN_NAME.to_owned(),
            err: Box::new(err),
        });
    }
    let kind = std::fs::metadata(path).map_err(io_err(path))?.file_type();
    if !kind.is_file() {
        return Err(CaptureError::NotAFile {
            path: path.display().to_string(),
            what: file_kind(&kind),
        });
    }
    let mut file = File::open(path).map_err(io_err(path))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io_err(path))?;
    load(&bytes, false).map_err(|err| CaptureError::InFile {
        path: path.display().to_string(),
        err: Box::new(err),
    })
}

#[cfg(test)]
/// Parses capture bytes strictly: a file that ends inside a chunk is an error. Never panics.
pub fn parse(bytes: &[u8]) -> Result<Capture, CaptureError> {
    load(bytes, true).map(|l| l.capture)
}

/// Parses capture bytes. Unless `strict`, a file ending inside a chunk after the metadata and
/// before any summary — what `kill -9` leaves — yields the complete chunks. Never panics.
pub fn load(bytes: &[u8], strict: bool) -> Result<Loaded, CaptureError> {
    if bytes.is_empty() {
        return Err(CaptureError::Empty);
    }
    if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC {
        return Err(CaptureError::BadMagic);
    }
    let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    let mut asm = Assembler::default();
    let torn = match version {
        1 => v1::walk(bytes, &mut asm)?,
        2 => walk_v2(bytes, &mut asm)?,
        0 => return Err(CaptureError::VersionZero),
        v => return Err(CaptureError::UnsupportedVersion(v)),
    }
    .or((bytes.len() == HEADER_LEN).then_some(chunk::Torn {
        // A writer killed between its header and its metadata.
        chunk: 0,
        offset: HEADER_LEN as u64,
        need: chunk::CHUNK_HEADER_LEN as u64,
        have: 0,
    }));
    let info = ReadInfo {
        version,
        file_bytes: bytes.len() as u64,
        record_chunks: asm.record_chunks,
        torn_chunk: torn.map(|t| t.chunk),
    };
    Ok(Loaded {
        capture: asm.finish(torn, strict)?,
        info,
    })
}

fn walk_v2(bytes: &[u8], asm: &mut Assembler) -> Result<Option<chunk::Torn>, CaptureError> {
    let mut pos = HEADER_LEN;
    let mut index = 0;
    while pos < bytes.len() {
        let (c, next) = match chunk::read(bytes, pos, index)? {
            chunk::Step::Torn(t) => return Ok(Some(t)),
            chunk::Step::Chunk { chunk, next } => (chunk, next),
        };
        asm.chunk(index, &c)?;
        pos = next;
        index += 1;
    }
    Ok(None)
}
