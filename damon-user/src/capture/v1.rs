//! Reading version-1 captures (uncompressed sections), which stay readable forever.
//!
//! ```text
//! section* : kind u32 LE | crc32 of payload u32 LE | payload length u64 LE | payload
//! ```
//! Kinds as in version 2; record sections hold n × 40-byte rows, fields little endian in
//! `CallRecord` order.
use damon_common::CallRecord;

/// Size of a version-1 record row (the 40-byte `CallRecord` of that time, without arguments).
const CALL_RECORD_SIZE: usize = 40;

use super::{
    chunk::Torn,
    error::CaptureError,
    format::{Assembler, HEADER_LEN, KIND_META, KIND_RECORDS, KIND_SUMMARY},
};

const SECTION_HEADER_LEN: usize = 16;

fn decode_row(b: &[u8]) -> CallRecord {
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
        ..CallRecord::default()
    }
}

/// Walks the sections after the file header into `asm`; returns the torn tail, if any.
pub fn walk(bytes: &[u8], asm: &mut Assembler) -> Result<Option<Torn>, CaptureError> {
    let mut pos = HEADER_LEN;
    let mut index = 0;
    while pos < bytes.len() {
        let left = (bytes.len() - pos) as u64;
        let torn = |need: u64| Torn {
            chunk: index,
            offset: pos as u64,
            need,
            have: left,
        };
        let Some(head) = bytes.get(pos..pos + SECTION_HEADER_LEN) else {
            return Ok(Some(torn(SECTION_HEADER_LEN as u64)));
        };
        let kind = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        let mut len_bytes = [0u8; 8];
        len_bytes.copy_from_slice(&head[8..16]);
        let len = u64::from_le_bytes(len_bytes);
        let start = pos + SECTION_HEADER_LEN;
        let Some(end) = usize::try_from(len)
            .ok()
            .and_then(|l| start.checked_add(l))
            .filter(|&e| e <= bytes.len())
        else {
            return Ok(Some(torn(len.saturating_add(SECTION_HEADER_LEN as u64))));
        };
        let payload = &bytes[start..end];
        if crc32fast::hash(payload) != crc {
            return Err(CaptureError::Checksum {
                chunk: index,
                offset: pos as u64,
            });
        }
        match kind {
            KIND_META => asm.meta(index, payload)?,
            KIND_RECORDS => {
                if !payload.len().is_multiple_of(CALL_RECORD_SIZE) {
                    return Err(CaptureError::Malformed {
                        chunk: index,
                        what: format!(
                            "record section of {} bytes is not a multiple of {CALL_RECORD_SIZE}",
                            payload.len()
                        ),
                    });
                }
                asm.records(index)?
                    .extend(payload.chunks_exact(CALL_RECORD_SIZE).map(decode_row));
            }
            KIND_SUMMARY => asm.summary(index, payload)?,
            _ => {} // a later version's section: skip
        }
        pos = end;
        index += 1;
    }
    Ok(None)
}

/// Encodes a record as a version-1 row (tests build version-1 files with it).
#[cfg(test)]
pub fn encode_row(r: &CallRecord, out: &mut Vec<u8>) {
    out.extend_from_slice(&r.entry_ns.to_le_bytes());
    out.extend_from_slice(&r.duration_ns.to_le_bytes());
    out.extend_from_slice(&r.value.to_le_bytes());
    for v in [r.pid, r.tid, r.cpu, r.func] {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// A version-1 file from parts (tests only: the writer writes version 2).
#[cfg(test)]
pub fn build(meta: &[u8], records: &[CallRecord], summary: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(super::format::MAGIC);
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    let mut section = |kind: u32, payload: &[u8]| {
        out.extend_from_slice(&kind.to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
        out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        out.extend_from_slice(payload);
    };
    section(KIND_META, meta);
    let mut rows = Vec::new();
    for r in records {
        encode_row(r, &mut rows);
    }
    section(KIND_RECORDS, &rows);
    if let Some(s) = summary {
        section(KIND_SUMMARY, s);
    }
    out
}
