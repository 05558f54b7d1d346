//! Version-2 chunk framing: each chunk is a zstd frame behind a 16-byte header whose CRC
//! covers the header's other fields and the compressed bytes.
//!
//! ```text
//! kind u32 LE | raw_len u32 LE | stored_len u32 LE | crc32 u32 LE | stored_len bytes (zstd)
//! ```
//! The CRC covers the first 12 header bytes too, so a flipped length is a checksum error
//! rather than a misleading "truncated" or a decompression failure.
use super::error::CaptureError;

pub const CHUNK_HEADER_LEN: usize = 16;
/// Decompressed size limit of one chunk. The writer stays far below it (16 Ki records of at
/// most 82 column bytes, disturbance counts included, ≈ 1.3 MiB); it bounds what a corrupt
/// header can make a reader allocate.
pub const MAX_RAW_LEN: u32 = 16 << 20;

/// Compresses `raw` into a complete chunk (header and payload), ready for one `write_all`.
pub fn encode(kind: u32, raw: &[u8]) -> Result<Vec<u8>, String> {
    let raw_len = u32::try_from(raw.len())
        .ok()
        .filter(|&l| l <= MAX_RAW_LEN)
        .ok_or_else(|| format!("chunk of {} bytes exceeds the format's limit", raw.len()))?;
    let stored =
        ruzstd::encoding::compress_to_vec(raw, ruzstd::encoding::CompressionLevel::Fastest);
    let stored_len = u32::try_from(stored.len())
        .map_err(|_| format!("compressed chunk of {} bytes is too large", stored.len()))?;
    let mut out = Vec::with_capacity(CHUNK_HEADER_LEN + stored.len());
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&raw_len.to_le_bytes());
    out.extend_from_slice(&stored_len.to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&out);
    crc.update(&stored);
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(&stored);
    Ok(out)
}

/// One chunk read back: its kind and decompressed bytes.
pub struct Chunk {
    pub kind: u32,
    pub raw: Vec<u8>,
}

/// Where a file ends inside a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Torn {
    pub chunk: usize,
    pub offset: u64,
    pub need: u64,
    pub have: u64,
}

impl Torn {
    pub fn into_error(self) -> CaptureError {
        CaptureError::Truncated {
            chunk: self.chunk,
            offset: self.offset,
            need: self.need,
            have: self.have,
        }
    }
}

/// The result of reading one chunk at a position.
pub enum Step {
    Chunk { chunk: Chunk, next: usize },
    Torn(Torn),
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[i..i + 4]);
    u32::from_le_bytes(w)
}

/// The kind and stored (compressed) length a chunk header declares; the CRC is checked when
/// the chunk is [`read`].
pub fn peek(head: &[u8; CHUNK_HEADER_LEN]) -> (u32, usize) {
    (u32_at(head, 0), u32_at(head, 8) as usize)
}

/// Reads chunk number `index` starting at byte `pos` (< `bytes.len()`).
pub fn read(bytes: &[u8], pos: usize, index: usize) -> Result<Step, CaptureError> {
    let left = bytes.len().saturating_sub(pos);
    let torn = |need: usize| Torn {
        chunk: index,
        offset: pos as u64,
        need: need as u64,
        have: left as u64,
    };
    let Some(head) = bytes.get(pos..pos + CHUNK_HEADER_LEN) else {
        return Ok(Step::Torn(torn(CHUNK_HEADER_LEN)));
    };
    let (kind, stored_len) = peek(head.try_into().unwrap_or(&[0; CHUNK_HEADER_LEN]));
    let raw_len = u32_at(head, 4);
    let want = u32_at(head, 12);
    let need = CHUNK_HEADER_LEN + stored_len;
    let Some(stored) = bytes.get(pos + CHUNK_HEADER_LEN..pos + need) else {
        return Ok(Step::Torn(torn(need)));
    };
    let mut crc = crc32fast::Hasher::new();
    crc.update(&head[..12]);
    crc.update(stored);
    if crc.finalize() != want {
        return Err(CaptureError::Checksum {
            chunk: index,
            offset: pos as u64,
        });
    }
    let malformed = |what: String| CaptureError::Malformed { chunk: index, what };
    if raw_len > MAX_RAW_LEN {
        return Err(malformed(format!(
            "declares {raw_len} decompressed bytes, more than the format allows"
        )));
    }
    let raw = decompress(stored, raw_len as usize).map_err(malformed)?;
    Ok(Step::Chunk {
        chunk: Chunk { kind, raw },
        next: pos + need,
    })
}

fn decompress(stored: &[u8], raw_len: usize) -> Result<Vec<u8>, String> {
    // One spare byte: a frame that decodes to more than it declared fills it, and is caught.
    let mut raw = vec![0u8; raw_len + 1];
    let mut decoder = ruzstd::decoding::FrameDecoder::new();
    // The encoder declares its matcher's window whatever the content size; cap it at what a
    // chunk may hold so a corrupt frame header cannot ask for the default 128 MiB.
    decoder.set_max_window_size(u64::from(MAX_RAW_LEN));
    let n = decoder
        .decode_all(stored, &mut raw)
        .map_err(|e| format!("zstd payload does not decompress: {e}"))?;
    if n != raw_len {
        return Err(format!(
            "payload decompresses to {}{n} bytes, the header says {raw_len}",
            if n > raw_len { "more than " } else { "" }
        ));
    }
    raw.truncate(n);
    Ok(raw)
}
