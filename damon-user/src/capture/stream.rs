//! Reading a capture chunk by chunk, for pictures of captures too large to hold: each decoded
//! batch of records or interval markers goes to a [`Visitor`] and is dropped, so memory stays
//! at one chunk (at most 16 Ki records) whatever the capture's size. Chunks are filed by the
//! same `Assembler` as [`format::load`] (order checks, decoding, torn tails); version-1
//! captures and stdin are read whole and handed over in one batch each.
use std::{
    fs::File,
    io::{BufReader, Read},
    path::{Path, PathBuf},
};

use damon_common::CallRecord;

use super::{
    Capture, Meta, Summary, chunk,
    format::{self, Assembler, CaptureError, HEADER_LEN, MAGIC, io_err},
    stdio::is_stdio,
};

/// What a streaming read hands over.
pub trait Visitor {
    /// The capture's metadata (its first chunk), before any record or marker.
    fn meta(&mut self, _meta: &Meta) {}
    /// A batch of call records, in file order.
    fn records(&mut self, _records: &[CallRecord]) {}
    /// A batch of aggregation-interval markers, in file order.
    fn marks(&mut self, _marks: &[CallRecord]) {}
}

/// A capture's metadata and summary, as a read without its records leaves them.
#[derive(Debug, Clone)]
pub struct Outline {
    pub meta: Meta,
    pub summary: Option<Summary>,
    /// The file ends inside this chunk (a recorder killed while writing it).
    pub torn_chunk: Option<usize>,
}

/// A capture to read, once or several times.
pub enum Source {
    /// A version-2 file: read chunk by chunk.
    File(PathBuf),
    /// Stdin or a version-1 file, read whole.
    Whole(Box<format::Loaded>),
}

impl Source {
    /// A version-2 capture file streams; stdin (`-`), a version-1 file and anything that is
    /// not a readable capture go through [`format::load_file`] (which says what is wrong).
    pub fn open(path: &Path) -> Result<Source, CaptureError> {
        let v2 = !is_stdio(path)
            && std::fs::metadata(path).is_ok_and(|m| m.is_file())
            && File::open(path).is_ok_and(|f| {
                let mut head = [0u8; HEADER_LEN];
                f.take(HEADER_LEN as u64).read_exact(&mut head).is_ok()
                    && &head[..8] == MAGIC
                    && head[8..12] == format::VERSION.to_le_bytes()
            });
        if v2 {
            return Ok(Source::File(path.to_owned()));
        }
        format::load_file(path).map(|l| Source::Whole(Box::new(l)))
    }

    /// Hands the capture to `v`: metadata, markers and, if `records`, the call records (a
    /// pass without them skips the record chunks unread, so it takes no time to speak of but
    /// does not check them).
    pub fn visit(&self, v: &mut dyn Visitor, records: bool) -> Result<Outline, CaptureError> {
        match self {
            Source::Whole(l) => {
                let c = &l.capture;
                v.meta(&c.meta);
                v.marks(&c.marks);
                if records {
                    v.records(&c.records);
                }
                Ok(Outline {
                    meta: c.meta.clone(),
                    summary: c.summary.clone(),
                    torn_chunk: l.info.torn_chunk,
                })
            }
            Source::File(path) => visit_file(path, v, records).map_err(|err| match err {
                CaptureError::Unreadable { .. } => err,
                err => CaptureError::InFile {
                    path: path.display().to_string(),
                    err: Box::new(err),
                },
            }),
        }
    }
}

/// [`Source::visit`] of a version-2 file.
fn visit_file(path: &Path, v: &mut dyn Visitor, records: bool) -> Result<Outline, CaptureError> {
    let mut file = BufReader::new(File::open(path).map_err(io_err(path))?);
    file.seek_relative(HEADER_LEN as i64)
        .map_err(io_err(path))?;
    let mut asm = Assembler::default();
    let (mut pos, mut index, mut torn) = (HEADER_LEN as u64, 0usize, None);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let got = (&mut file)
            .take(chunk::CHUNK_HEADER_LEN as u64)
            .read_to_end(&mut buf)
            .map_err(io_err(path))?;
        if got == 0 {
            break;
        }
        if let Ok(head) = <&[u8; chunk::CHUNK_HEADER_LEN]>::try_from(&buf[..]) {
            let (kind, stored) = chunk::peek(head);
            if !records && format::records_layout(kind).is_some() {
                file.seek_relative(stored as i64).map_err(io_err(path))?;
                pos += (chunk::CHUNK_HEADER_LEN + stored) as u64;
                index += 1;
                continue;
            }
            // `take` reads what is there: a corrupt length cannot make this allocate more.
            (&mut file)
                .take(stored as u64)
                .read_to_end(&mut buf)
                .map_err(io_err(path))?;
        }
        let step = chunk::read(&buf, 0, index).map_err(|e| match e {
            CaptureError::Checksum { chunk, offset } => CaptureError::Checksum {
                chunk,
                offset: offset + pos,
            },
            e => e,
        })?;
        match step {
            chunk::Step::Torn(t) => {
                torn = Some(chunk::Torn {
                    offset: t.offset + pos,
                    ..t
                });
                break;
            }
            chunk::Step::Chunk { chunk, next } => {
                asm.chunk(index, &chunk)?;
                pos += next as u64;
            }
        }
        hand_over(&mut asm, v, index);
        index += 1;
    }
    if index == 0 && torn.is_none() {
        // A writer killed between its header and its metadata (as `format::load` says it).
        torn = Some(chunk::Torn {
            chunk: 0,
            offset: HEADER_LEN as u64,
            need: chunk::CHUNK_HEADER_LEN as u64,
            have: 0,
        });
    }
    let c: Capture = asm.finish(torn, false)?;
    Ok(Outline {
        meta: c.meta,
        summary: c.summary,
        torn_chunk: torn.map(|t| t.chunk),
    })
}

/// Gives `v` what the chunk just filed added, and forgets it.
fn hand_over(asm: &mut Assembler, v: &mut dyn Visitor, index: usize) {
    if index == 0
        && let Some(meta) = &asm.meta
    {
        v.meta(meta);
    }
    if !asm.records.is_empty() {
        v.records(&asm.records);
        asm.records.clear();
    }
    if !asm.marks.is_empty() {
        v.marks(&asm.marks);
        asm.marks.clear();
    }
    asm.hist_snapshots.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Everything a read hands over, kept.
    #[derive(Default)]
    struct Kept {
        meta: Option<Meta>,
        records: Vec<CallRecord>,
        marks: Vec<CallRecord>,
        batches: usize,
    }

    impl Visitor for Kept {
        fn meta(&mut self, meta: &Meta) {
            assert!(self.meta.is_none(), "metadata handed over twice");
            assert!(self.records.is_empty() && self.marks.is_empty());
            self.meta = Some(meta.clone());
        }
        fn records(&mut self, records: &[CallRecord]) {
            self.records.extend_from_slice(records);
            self.batches += 1;
        }
        fn marks(&mut self, marks: &[CallRecord]) {
            self.marks.extend_from_slice(marks);
        }
    }

    fn data(f: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(f)
    }

    fn fixtures() -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = ["", "aa-7.2", "aa-6.12"]
            .iter()
            .flat_map(|d| std::fs::read_dir(data(d)).expect("fixture dir"))
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "dtcap"))
            .collect();
        v.sort();
        assert!(v.len() >= 20, "{v:?}");
        v
    }

    /// Reads `path` both ways; returns what the stream kept and the whole read.
    fn both(path: &Path) -> (Kept, Outline, Capture, Source) {
        let whole = format::read_file(path).expect("read_file");
        let source = Source::open(path).expect("open");
        let mut kept = Kept::default();
        let outline = source.visit(&mut kept, true).expect("visit");
        (kept, outline, whole, source)
    }

    #[test]
    fn streaming_hands_over_what_read_file_reads_in_the_same_order() {
        let mut streamed = 0;
        for path in fixtures() {
            let (kept, outline, whole, source) = both(&path);
            let name = path.display();
            assert!(kept.records == whole.records, "{name}: records differ");
            assert_eq!(kept.marks, whole.marks, "{name}");
            // The metadata as the first chunk has it; the outline's as read_file's (with a
            // calibration measured beside the session).
            assert_eq!(
                kept.meta.as_ref().map(|m| &m.functions),
                Some(&whole.meta.functions)
            );
            assert_eq!(outline.meta, whole.meta, "{name}");
            assert_eq!(outline.summary, whole.summary, "{name}");
            if let Source::File(_) = source {
                streamed += 1;
                // One batch per record chunk, not one for the file.
                let chunks = format::load_file(&path).expect("load").info.record_chunks;
                assert_eq!(kept.batches, chunks, "{name}");
            }
            let mut marks_only = Kept::default();
            source.visit(&mut marks_only, false).expect("marks pass");
            assert!(marks_only.records.is_empty(), "{name}");
            assert_eq!(marks_only.marks, whole.marks, "{name}");
        }
        // Version 1 (migrate-hot-7.2.dtcap) is read whole; the others stream.
        assert!(matches!(
            Source::open(&data("migrate-hot-7.2.dtcap")),
            Ok(Source::Whole(_))
        ));
        assert!(streamed >= 19, "{streamed}");
    }

    #[test]
    fn a_torn_tail_and_a_flipped_byte_read_as_read_file_reads_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bytes = std::fs::read(data("intervals-7.2.dtcap")).expect("fixture");
        // Cut in the summary, mid-file, in the metadata, after the header: whatever read_file
        // says (the complete chunks, or an error), the stream says the same.
        for cut in [bytes.len() - 7, bytes.len() / 2, HEADER_LEN + 5, HEADER_LEN] {
            let path = dir.path().join(format!("cut-{cut}.dtcap"));
            std::fs::write(&path, &bytes[..cut]).expect("write");
            let whole = format::load_file(&path);
            let source = Source::open(&path).expect("open");
            let mut kept = Kept::default();
            match (whole, source.visit(&mut kept, true)) {
                (Ok(w), Ok(o)) => {
                    assert!(kept.records == w.capture.records, "cut {cut}");
                    assert_eq!(o.torn_chunk, w.info.torn_chunk, "cut {cut}");
                    assert!(o.torn_chunk.is_some(), "cut {cut}");
                }
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "cut {cut}"),
                (a, b) => panic!(
                    "cut {cut}: read_file {:?}, stream {:?}",
                    a.is_ok(),
                    b.is_ok()
                ),
            }
        }
        let mut flipped = bytes.clone();
        flipped[HEADER_LEN + 40] ^= 0x40;
        let path = dir.path().join("flipped.dtcap");
        std::fs::write(&path, &flipped).expect("write");
        let a = format::load_file(&path).err().expect("checksum error");
        let b = Source::open(&path)
            .expect("open")
            .visit(&mut Kept::default(), true)
            .expect_err("checksum error");
        assert!(a.to_string().contains("checksum"), "{a}");
        assert_eq!(a.to_string(), b.to_string());
    }
}
