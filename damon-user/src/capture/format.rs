//! On-disk capture format (version 2 written; versions 1 and 2 read). Full description in
//! `docs/capture-format.md`.
//!
//! ```text
//! header : magic "DMNTRCAP" (8 bytes) | version u32 LE | reserved u32 (0)
//! chunk* : see `chunk.rs` (v2: zstd + CRC32 per chunk) or `v1.rs` (v1: raw sections)
//! ```
//! Chunk kinds: 1 = metadata (JSON, first), 2 = call records (`columns.rs`), 3 = summary
//! (JSON, last). Records are written in chunks as they arrive — `record` flushes one every
//! second — so a writer killed with SIGKILL leaves every complete chunk readable: a reader
//! accepts a file that ends inside its last chunk when no summary precedes it (exactly what a
//! killed writer leaves) and reports the torn tail. Readers skip chunk kinds they do not know,
//! so later versions can add kinds; an incompatible change bumps the version.
use std::{
    fs::{File, OpenOptions},
    io::{Read, Write},
    os::unix::fs::OpenOptionsExt as _,
    path::Path,
};

use damon_common::CallRecord;

pub use super::error::CaptureError;
use super::{Capture, Meta, Summary, chunk, columns, v1};

pub const MAGIC: &[u8; 8] = b"DMNTRCAP";
/// The version this build writes (and the newest it reads).
pub const VERSION: u32 = 2;
pub(super) const KIND_META: u32 = 1;
pub(super) const KIND_RECORDS: u32 = 2;
pub(super) const KIND_SUMMARY: u32 = 3;
pub(super) const HEADER_LEN: usize = 16;
/// Records buffered before a chunk is written whatever the clock says.
const RECORDS_PER_CHUNK: usize = 16 * 1024;

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> CaptureError + '_ {
    move |err| CaptureError::Unreadable {
        path: path.display().to_string(),
        err,
    }
}

/// Writes a capture incrementally.
pub struct CaptureWriter {
    file: File,
    path: String,
    pending: Vec<CallRecord>,
    scratch: Vec<u8>,
    pub records_written: u64,
}

impl CaptureWriter {
    /// Creates the file (mode 0600; refuses to overwrite unless `force`) and writes the header
    /// and metadata.
    pub fn create(path: &Path, force: bool, meta: &Meta) -> Result<CaptureWriter, CaptureError> {
        let mut opts = OpenOptions::new();
        opts.write(true).mode(0o600);
        if force {
            opts.create(true).truncate(true);
        } else {
            opts.create_new(true);
        }
        let file = opts.open(path).map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::AlreadyExists {
                " (pass --force to overwrite)"
            } else {
                ""
            };
            CaptureError::Io {
                path: format!("{}{hint}", path.display()),
                err: e,
            }
        })?;
        let mut w = CaptureWriter {
            file,
            path: path.display().to_string(),
            pending: Vec::new(),
            scratch: Vec::new(),
            records_written: 0,
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

    pub fn push(&mut self, r: &CallRecord) -> Result<(), CaptureError> {
        self.pending.push(*r);
        if self.pending.len() >= RECORDS_PER_CHUNK {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes buffered records as a chunk, so a kill loses at most what arrived since the last
    /// flush (`record` flushes every second).
    pub fn flush(&mut self) -> Result<(), CaptureError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut raw = std::mem::take(&mut self.scratch);
        raw.clear();
        columns::encode(&self.pending, &mut raw);
        let result = self.write_chunk(KIND_RECORDS, &raw);
        self.scratch = raw;
        result?;
        self.records_written += self.pending.len() as u64;
        self.pending.clear();
        Ok(())
    }

    /// Writes the summary and syncs the file.
    pub fn finish(mut self, summary: &Summary) -> Result<u64, CaptureError> {
        self.flush()?;
        let json = serde_json::to_vec(summary).map_err(|e| self.error(e.to_string()))?;
        self.write_chunk(KIND_SUMMARY, &json)?;
        self.file.sync_all().map_err(|err| CaptureError::Io {
            path: self.path.clone(),
            err,
        })?;
        Ok(self.records_written)
    }
}

/// Collects chunks into a capture, whatever the version that framed them.
#[derive(Default)]
pub(super) struct Assembler {
    meta: Option<Meta>,
    records: Vec<CallRecord>,
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

    pub fn summary(&mut self, chunk: usize, payload: &[u8]) -> Result<(), CaptureError> {
        self.check_order(chunk, "the summary")?;
        let summary = serde_json::from_slice(payload)
            .map_err(|e| malformed(chunk, &format!("summary: {e}")))?;
        self.summary = Some(summary);
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
    fn finish(self, torn: Option<chunk::Torn>, strict: bool) -> Result<Capture, CaptureError> {
        if let Some(t) = torn
            && (strict || self.meta.is_none() || self.summary.is_some())
        {
            return Err(t.into_error());
        }
        Ok(Capture {
            meta: self.meta.ok_or(CaptureError::NoMeta)?,
            records: self.records,
            summary: self.summary,
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
pub fn load_file(path: &Path) -> Result<Loaded, CaptureError> {
    let mut file = File::open(path).map_err(io_err(path))?;
    if file.metadata().map_err(io_err(path))?.is_dir() {
        return Err(io_err(path)(std::io::Error::other(
            "is a directory, not a capture file",
        )));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io_err(path))?;
    load(&bytes, false)
}

#[cfg(test)]
/// Parses capture bytes strictly: a file that ends inside a chunk is an error. Never panics.
pub fn parse(bytes: &[u8]) -> Result<Capture, CaptureError> {
    load(bytes, true).map(|l| l.capture)
}

/// Parses capture bytes. Unless `strict`, a file ending inside a chunk after the metadata and
/// before any summary — what `kill -9` leaves — yields the complete chunks. Never panics.
pub fn load(bytes: &[u8], strict: bool) -> Result<Loaded, CaptureError> {
    if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC {
        return Err(CaptureError::BadMagic);
    }
    let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    let mut asm = Assembler::default();
    let torn = match version {
        1 => v1::walk(bytes, &mut asm)?,
        2 => walk_v2(bytes, &mut asm)?,
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
        match c.kind {
            KIND_META => asm.meta(index, &c.raw)?,
            KIND_RECORDS => {
                let out = asm.records(index)?;
                columns::decode(&c.raw, out).map_err(|e| malformed(index, &e))?;
            }
            KIND_SUMMARY => asm.summary(index, &c.raw)?,
            _ => {} // a later version's chunk: skip
        }
        pos = next;
        index += 1;
    }
    Ok(None)
}
