//! On-disk capture format, version 1.
//!
//! ```text
//! header   : magic "DMNTRCAP" (8 bytes) | version u32 LE | reserved u32 (0)
//! section* : kind u32 LE | crc32 of payload u32 LE | payload length u64 LE | payload
//! ```
//! Section kinds: 1 = metadata (JSON, first), 2 = call records (n × 40 bytes, fields little
//! endian in `CallRecord` order), 3 = summary (JSON, last). Records are written in sections as
//! they arrive, so a capture whose writer was killed keeps every complete section; a missing
//! summary marks such a capture. Readers skip section kinds they do not know, which lets later
//! versions add sections without breaking older readers; an incompatible change bumps the version.
use std::{
    fs::{File, OpenOptions},
    io::{BufWriter, Read, Write},
    os::unix::fs::OpenOptionsExt as _,
    path::Path,
};

use damon_common::{CALL_RECORD_SIZE, CallRecord};

use super::{Capture, Meta, Summary};

pub const MAGIC: &[u8; 8] = b"DMNTRCAP";
pub const VERSION: u32 = 1;
const KIND_META: u32 = 1;
const KIND_RECORDS: u32 = 2;
const KIND_SUMMARY: u32 = 3;
const HEADER_LEN: usize = 16;
const SECTION_HEADER_LEN: usize = 16;
/// Records buffered before a section is written (≈ 640 KiB).
const RECORDS_PER_SECTION: usize = 16 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("{path}: {err}")]
    Io { path: String, err: std::io::Error },
    #[error("cannot read capture {path}: {err}")]
    Unreadable { path: String, err: std::io::Error },
    #[error("not a damon-trace capture (bad magic)")]
    BadMagic,
    #[error(
        "capture format version {0} is not supported by this damon-trace (reads version {VERSION})"
    )]
    UnsupportedVersion(u32),
    #[error("capture truncated in section {0} (the writer was probably killed)")]
    Truncated(usize),
    #[error("checksum mismatch in section {0}: the file is corrupt")]
    Checksum(usize),
    #[error("section {index}: {what}")]
    Malformed { index: usize, what: String },
    #[error("capture has no metadata section")]
    NoMeta,
}

impl CaptureError {
    /// Whether the error is about the input file itself (as opposed to writing one).
    pub fn is_input(&self) -> bool {
        !matches!(self, CaptureError::Io { .. })
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> CaptureError + '_ {
    move |err| CaptureError::Unreadable {
        path: path.display().to_string(),
        err,
    }
}

pub fn encode_record(r: &CallRecord, out: &mut Vec<u8>) {
    out.extend_from_slice(&r.entry_ns.to_le_bytes());
    out.extend_from_slice(&r.duration_ns.to_le_bytes());
    out.extend_from_slice(&r.value.to_le_bytes());
    for v in [r.pid, r.tid, r.cpu, r.func] {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn decode_record(b: &[u8]) -> CallRecord {
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap_or_default());
    CallRecord {
        entry_ns: u64_at(0),
        duration_ns: u64_at(8),
        value: u64_at(16) as i64,
        pid: u32_at(24),
        tid: u32_at(28),
        cpu: u32_at(32),
        func: u32_at(36),
    }
}

/// Writes a capture incrementally.
pub struct CaptureWriter {
    out: BufWriter<File>,
    path: String,
    pending: Vec<u8>,
    pending_records: usize,
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
            out: BufWriter::new(file),
            path: path.display().to_string(),
            pending: Vec::with_capacity(RECORDS_PER_SECTION * CALL_RECORD_SIZE),
            pending_records: 0,
            records_written: 0,
        };
        let mut header = Vec::with_capacity(HEADER_LEN);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&VERSION.to_le_bytes());
        header.extend_from_slice(&0u32.to_le_bytes());
        w.write_raw(&header)?;
        let json = serde_json::to_vec(meta).map_err(|e| CaptureError::Malformed {
            index: 0,
            what: e.to_string(),
        })?;
        w.write_section(KIND_META, &json)?;
        Ok(w)
    }

    fn write_raw(&mut self, bytes: &[u8]) -> Result<(), CaptureError> {
        let path = self.path.clone();
        self.out
            .write_all(bytes)
            .map_err(|err| CaptureError::Io { path, err })
    }

    fn write_section(&mut self, kind: u32, payload: &[u8]) -> Result<(), CaptureError> {
        let mut head = Vec::with_capacity(SECTION_HEADER_LEN);
        head.extend_from_slice(&kind.to_le_bytes());
        head.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
        head.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        self.write_raw(&head)?;
        self.write_raw(payload)
    }

    pub fn push(&mut self, r: &CallRecord) -> Result<(), CaptureError> {
        encode_record(r, &mut self.pending);
        self.pending_records += 1;
        if self.pending_records >= RECORDS_PER_SECTION {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes buffered records as a section and pushes them to the file, so a kill loses at
    /// most what arrived since the last flush.
    pub fn flush(&mut self) -> Result<(), CaptureError> {
        if self.pending_records > 0 {
            let payload = std::mem::take(&mut self.pending);
            self.write_section(KIND_RECORDS, &payload)?;
            self.records_written += self.pending_records as u64;
            self.pending_records = 0;
            self.pending = payload;
            self.pending.clear();
        }
        let path = self.path.clone();
        self.out
            .flush()
            .map_err(|err| CaptureError::Io { path, err })
    }

    /// Writes the summary and syncs the file.
    pub fn finish(mut self, summary: &Summary) -> Result<u64, CaptureError> {
        self.flush()?;
        let json = serde_json::to_vec(summary).map_err(|e| CaptureError::Malformed {
            index: 0,
            what: e.to_string(),
        })?;
        self.write_section(KIND_SUMMARY, &json)?;
        let path = self.path.clone();
        let file = self.out.into_inner().map_err(|e| CaptureError::Io {
            path: path.clone(),
            err: e.into_error(),
        })?;
        file.sync_all()
            .map_err(|err| CaptureError::Io { path, err })?;
        Ok(self.records_written)
    }
}

/// Reads a whole capture file.
pub fn read_file(path: &Path) -> Result<Capture, CaptureError> {
    let mut file = File::open(path).map_err(io_err(path))?;
    if file.metadata().map_err(io_err(path))?.is_dir() {
        return Err(CaptureError::Unreadable {
            path: path.display().to_string(),
            err: std::io::Error::other("is a directory, not a capture file"),
        });
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io_err(path))?;
    parse(&bytes)
}

/// Parses capture bytes. Never panics on any input.
pub fn parse(bytes: &[u8]) -> Result<Capture, CaptureError> {
    if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC {
        return Err(CaptureError::BadMagic);
    }
    let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if version != VERSION {
        return Err(CaptureError::UnsupportedVersion(version));
    }
    let mut meta: Option<Meta> = None;
    let mut summary = None;
    let mut records = Vec::new();
    let mut pos = HEADER_LEN;
    let mut index = 0;
    while pos < bytes.len() {
        let Some(head) = bytes.get(pos..pos + SECTION_HEADER_LEN) else {
            return Err(CaptureError::Truncated(index));
        };
        let kind = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        let mut len_bytes = [0u8; 8];
        len_bytes.copy_from_slice(&head[8..16]);
        let len = u64::from_le_bytes(len_bytes);
        let start = pos + SECTION_HEADER_LEN;
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| start.checked_add(l))
            .filter(|&e| e <= bytes.len())
            .ok_or(CaptureError::Truncated(index))?;
        let payload = &bytes[start..end];
        if crc32fast::hash(payload) != crc {
            return Err(CaptureError::Checksum(index));
        }
        let malformed = |what: String| CaptureError::Malformed { index, what };
        match kind {
            KIND_META => {
                meta = Some(
                    serde_json::from_slice(payload)
                        .map_err(|e| malformed(format!("metadata: {e}")))?,
                )
            }
            KIND_RECORDS => {
                if !payload.len().is_multiple_of(CALL_RECORD_SIZE) {
                    return Err(malformed(format!(
                        "record section of {} bytes is not a multiple of {CALL_RECORD_SIZE}",
                        payload.len()
                    )));
                }
                records.extend(payload.chunks_exact(CALL_RECORD_SIZE).map(decode_record));
            }
            KIND_SUMMARY => {
                summary = Some(
                    serde_json::from_slice(payload)
                        .map_err(|e| malformed(format!("summary: {e}")))?,
                )
            }
            _ => {} // a later version's section: skip
        }
        pos = end;
        index += 1;
    }
    let meta = meta.ok_or(CaptureError::NoMeta)?;
    Ok(Capture {
        meta,
        records,
        summary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::{AttachState, FunctionCounters, FunctionStatus};
    use crate::probe::kernel::KernelIdentity;

    fn meta() -> Meta {
        Meta {
            tool_version: "0.1.0".into(),
            kernel: KernelIdentity {
                release: "7.2.13-amd64".into(),
                version: "#1 SMP".into(),
                boot_id: "b".into(),
            },
            hostname: "guest".into(),
            start_unix_ns: 1,
            start_monotonic_ns: 2,
            command_line: vec!["damon-trace".into(), "record".into()],
            mode: "stream".into(),
            ring_size: 4096,
            functions: vec![FunctionStatus {
                name: "lock_timer_base".into(),
                id: 3,
                attach: AttachState::Kprobe,
                detail: None,
            }],
            damon: None,
        }
    }

    fn rec(i: u64) -> CallRecord {
        CallRecord {
            entry_ns: i,
            duration_ns: 100 + i,
            value: -(i as i64),
            pid: 1,
            tid: 2,
            cpu: 1,
            func: 3,
        }
    }

    fn write(records: u64, finish: bool) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c.dtcap");
        let mut w = CaptureWriter::create(&path, false, &meta()).expect("create");
        for i in 0..records {
            w.push(&rec(i)).expect("push");
        }
        if finish {
            let mut counters = std::collections::BTreeMap::new();
            counters.insert(
                3,
                FunctionCounters {
                    calls: records,
                    emitted: records,
                    ..Default::default()
                },
            );
            let summary = Summary {
                duration_ns: 5,
                end_reason: "duration".into(),
                counters,
                malformed_items: 0,
                damon_end: None,
            };
            w.finish(&summary).expect("finish");
        } else {
            w.flush().expect("flush");
        }
        (dir, path)
    }

    #[test]
    fn round_trip_across_sections() {
        let n = RECORDS_PER_SECTION as u64 * 2 + 7;
        let (_d, path) = write(n, true);
        let c = read_file(&path).expect("read");
        assert_eq!(c.meta, meta());
        assert_eq!(c.records.len() as u64, n);
        assert_eq!(c.records[5], rec(5));
        assert_eq!(c.records[n as usize - 1], rec(n - 1));
        assert_eq!(c.summary.expect("summary").counters[&3].calls, n);
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(
            std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn refuses_to_overwrite_without_force() {
        let (_d, path) = write(1, true);
        let err = CaptureWriter::create(&path, false, &meta())
            .err()
            .expect("must refuse");
        assert!(err.to_string().contains("--force"), "{err}");
        assert!(CaptureWriter::create(&path, true, &meta()).is_ok());
    }

    #[test]
    fn unfinished_capture_keeps_flushed_records() {
        let (_d, path) = write(10, false);
        let c = read_file(&path).expect("read");
        assert_eq!(c.records.len(), 10);
        assert!(c.summary.is_none());
    }

    #[test]
    fn precise_errors_never_panics() {
        let (_d, path) = write(3, true);
        let good = std::fs::read(&path).expect("read");
        assert!(matches!(parse(b""), Err(CaptureError::BadMagic)));
        assert!(matches!(
            parse(b"garbage garbage garbage"),
            Err(CaptureError::BadMagic)
        ));
        let mut v2 = good.clone();
        v2[8] = 2;
        assert!(matches!(
            parse(&v2),
            Err(CaptureError::UnsupportedVersion(2))
        ));
        let mut flipped = good.clone();
        let last = flipped.len() - 3;
        flipped[last] ^= 0xff;
        assert!(matches!(parse(&flipped), Err(CaptureError::Checksum(_))));
        // Every truncation point gives an error or a shorter capture, never a panic.
        for cut in 0..good.len() {
            let _ = parse(&good[..cut]);
        }
        assert!(matches!(
            parse(&good[..good.len() - 1]),
            Err(CaptureError::Truncated(2))
        ));
        // An unknown section kind is skipped.
        let mut extra = good.clone();
        extra.extend_from_slice(&99u32.to_le_bytes());
        extra.extend_from_slice(&crc32fast::hash(b"xy").to_le_bytes());
        extra.extend_from_slice(&2u64.to_le_bytes());
        extra.extend_from_slice(b"xy");
        assert_eq!(parse(&extra).expect("skips").records.len(), 3);
    }
}

#[cfg(test)]
mod golden {
    use super::*;

    /// A real capture recorded by `cargo xtask demo` (Debian 7.2 guest, migrate-hot scenario):
    /// version-1 files must stay readable as the format grows.
    #[test]
    fn reads_a_real_version_1_capture() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/migrate-hot-7.2.dtcap"
        );
        let c = read_file(Path::new(path)).expect("golden capture");
        assert!(c.meta.kernel.release.starts_with("7.2."));
        assert_eq!(c.meta.functions.len(), 4);
        assert_eq!(c.records.len(), 3612);
        let summary = c.summary.expect("complete capture");
        let emitted: u64 = summary.counters.values().map(|k| k.emitted).sum();
        assert_eq!(emitted, c.records.len() as u64);
        assert!(c.records.iter().all(|r| r.duration_ns > 0 && r.func < 4));
    }
}
