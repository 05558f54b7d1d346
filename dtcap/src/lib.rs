//! Captures read by the tests themselves, not by `damon-trace`: the file layout of
//! docs/capture-format.md (version 1: raw chunks; version 2: zstd chunks behind a CRC'd header,
//! record columns of LEB128 varints), so that what a test checks in a capture does not come
//! through the reader or the exporter under test. Also: a capture with its metadata rewritten
//! (what another damon-trace could have written, or a `--mode both` capture reported as the
//! kernel-mode capture of the same calls), and the kernel-address rule that no capture may
//! break. Used by damon-user's binary-level tests and xtask's guest tests; it shares no code
//! with damon-trace on purpose.
use std::path::Path;

/// One call record, all columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub func: u32,
    pub cpu: u32,
    pub pid: u32,
    pub tid: u32,
    pub entry_ns: u64,
    pub duration_ns: u64,
    pub value: i64,
    pub arg0: i64,
    pub arg1: i64,
    /// `[slept, preempted, hardirqs, softirqs]` (kind 8 chunks; 0 in the others), 0xFFFF where
    /// not known.
    pub disturbance: [u64; 4],
    /// `[off_cpu_ns, irq_ns]` (kind 10 chunks; 0 in the others), 0xFFFF_FFFF where not known,
    /// 0xFFFF_FFFE saturated.
    pub breakdown: [u64; 2],
}

/// A slow call (`record --slow`, kind 11 chunks): its record and its kernel stack's names,
/// innermost first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slow {
    /// Its record, with its time breakdown (`breakdown`).
    pub record: Record,
    pub stack: Vec<String>,
}

/// A version-2 capture, undone: its chunks in file order, the metadata and summary JSON, the
/// call records (interval markers, kind 4, are left out), the slow calls (kind 11).
pub struct Capture {
    pub chunks: Vec<(u32, Vec<u8>)>,
    pub meta: serde_json::Value,
    pub summary: Option<serde_json::Value>,
    pub records: Vec<Record>,
    pub slow: Vec<Slow>,
}

impl Capture {
    /// The id of a traced function, from the metadata.
    pub fn id(&self, name: &str) -> u32 {
        self.meta["functions"]
            .as_array()
            .expect("meta.functions")
            .iter()
            .find(|f| f["name"] == name)
            .and_then(|f| f["id"].as_u64())
            .unwrap_or_else(|| panic!("{name} not in meta.functions: {}", self.meta)) as u32
    }

    /// The records of one function, in file order.
    pub fn of(&self, name: &str) -> Vec<Record> {
        let id = self.id(name);
        self.records
            .iter()
            .filter(|r| r.func == id)
            .copied()
            .collect()
    }
}

const HEADER: usize = 16;

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"))
}

/// The file header and chunks of a capture, undone: (format version, [(kind, payload)]);
/// version 2's chunks are each checked against their CRC and decompressed.
pub fn chunks(bytes: &[u8]) -> (u32, Vec<(u32, Vec<u8>)>) {
    assert_eq!(&bytes[..8], b"DMNTRCAP", "not a capture");
    let version = u32_at(bytes, 8);
    let mut out = Vec::new();
    let mut pos = HEADER;
    while pos < bytes.len() {
        let kind = u32_at(bytes, pos);
        let start = pos + 16;
        match version {
            1 => {
                let len = u64::from_le_bytes(bytes[pos + 8..start].try_into().expect("8 bytes"));
                pos = start + len as usize;
                out.push((kind, bytes[start..pos].to_vec()));
            }
            2 => {
                let (raw_len, stored_len) = (u32_at(bytes, pos + 4), u32_at(bytes, pos + 8));
                let stored = &bytes[start..start + stored_len as usize];
                let mut crc = crc32fast::Hasher::new();
                crc.update(&bytes[pos..pos + 12]);
                crc.update(stored);
                let want = u32_at(bytes, pos + 12);
                assert_eq!(crc.finalize(), want, "chunk at {pos}: CRC");
                let mut raw = vec![0u8; raw_len as usize];
                let n = ruzstd::decoding::FrameDecoder::new()
                    .decode_all(stored, &mut raw)
                    .unwrap_or_else(|e| panic!("chunk at {pos}: zstd: {e}"));
                assert_eq!(n, raw.len(), "chunk at {pos}: length");
                out.push((kind, raw));
                pos = start + stored.len();
            }
            v => panic!("capture format version {v}"),
        }
    }
    (version, out)
}

/// The metadata JSON of a capture file (its first chunk).
pub fn meta_json(bytes: &[u8]) -> serde_json::Value {
    let (_, chunks) = chunks(bytes);
    assert_eq!(chunks.first().map(|c| c.0), Some(1), "metadata first");
    serde_json::from_slice(&chunks[0].1).expect("metadata JSON")
}

struct Varints<'a>(&'a [u8]);

impl Varints<'_> {
    fn next(&mut self) -> u64 {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self.0.split_first().expect("varint past the chunk's end");
            self.0 = rest;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return v;
            }
        }
        panic!("varint longer than 64 bits");
    }

    fn signed(&mut self) -> i64 {
        let v = self.next();
        ((v >> 1) as i64) ^ -((v & 1) as i64)
    }

    fn column(&mut self, n: usize) -> Vec<u64> {
        (0..n).map(|_| self.next()).collect()
    }
}

/// The records of one record chunk: kind 2, kind 5 with the two argument columns, kind 8
/// with those and the four disturbance columns, or kind 10 with those and the two breakdown
/// columns.
fn records(raw: &[u8], kind: u32) -> Vec<Record> {
    let with_args = kind != 2;
    let mut c = Varints(raw);
    let n = c.next() as usize;
    let (func, cpu, pid, tid) = (c.column(n), c.column(n), c.column(n), c.column(n));
    let mut entry = Vec::with_capacity(n);
    let mut prev = 0u64;
    for _ in 0..n {
        prev = prev.wrapping_add(c.signed() as u64);
        entry.push(prev);
    }
    let duration = c.column(n);
    let value: Vec<i64> = (0..n).map(|_| c.signed()).collect();
    let (arg0, arg1): (Vec<i64>, Vec<i64>) = if with_args {
        (
            (0..n).map(|_| c.signed()).collect(),
            (0..n).map(|_| c.signed()).collect(),
        )
    } else {
        (vec![0; n], vec![0; n])
    };
    let dist: Vec<Vec<u64>> = if kind == 8 || kind == 10 {
        (0..4).map(|_| c.column(n)).collect()
    } else {
        vec![vec![0; n]; 4]
    };
    let times: Vec<Vec<u64>> = if kind == 10 {
        (0..2).map(|_| c.column(n)).collect()
    } else {
        vec![vec![0; n]; 2]
    };
    assert!(c.0.is_empty(), "{} bytes after the columns", c.0.len());
    (0..n)
        .map(|i| Record {
            func: func[i] as u32,
            cpu: cpu[i] as u32,
            pid: pid[i] as u32,
            tid: tid[i] as u32,
            entry_ns: entry[i],
            duration_ns: duration[i],
            value: value[i],
            arg0: arg0[i],
            arg1: arg1[i],
            disturbance: [dist[0][i], dist[1][i], dist[2][i], dist[3][i]],
            breakdown: [times[0][i], times[1][i]],
        })
        .collect()
}

/// The slow calls of one kind-11 chunk (docs/capture-format.md): per call 72 bytes of record,
/// fields little-endian in order (entry, duration, value, arg0, arg1 as 8 bytes; pid, tid,
/// cpu, func as 4; slept, preempted, hardirqs, softirqs as 2; off-CPU and IRQ time as 4), a
/// u16 frame count, each frame a u16 length and its bytes.
fn slow_calls(raw: &[u8]) -> Vec<Slow> {
    fn take<'a>(raw: &mut &'a [u8], n: usize) -> &'a [u8] {
        let (head, tail) = raw.split_at(n);
        *raw = tail;
        head
    }
    let le = |b: &[u8]| b.iter().rev().fold(0u64, |acc, &x| acc << 8 | u64::from(x));
    let mut out = Vec::new();
    let mut raw = raw;
    while !raw.is_empty() {
        let mut f = [0u64; 15];
        for (i, v) in f.iter_mut().enumerate() {
            let width = match i {
                0..=4 => 8,
                5..=8 => 4,
                9..=12 => 2,
                _ => 4,
            };
            *v = le(take(&mut raw, width));
        }
        let record = Record {
            entry_ns: f[0],
            duration_ns: f[1],
            value: f[2] as i64,
            arg0: f[3] as i64,
            arg1: f[4] as i64,
            pid: f[5] as u32,
            tid: f[6] as u32,
            cpu: f[7] as u32,
            func: f[8] as u32,
            disturbance: [f[9], f[10], f[11], f[12]],
            breakdown: [f[13], f[14]],
        };
        let n = le(take(&mut raw, 2)) as usize;
        let stack = (0..n)
            .map(|_| {
                let len = le(take(&mut raw, 2)) as usize;
                String::from_utf8(take(&mut raw, len).to_vec()).expect("a frame is UTF-8")
            })
            .collect();
        out.push(Slow { record, stack });
    }
    out
}

/// Reads a version-2 capture file.
pub fn read(path: &Path) -> Capture {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let meta = meta_json(&bytes);
    let (version, chunks) = chunks(&bytes);
    assert_eq!(version, 2, "capture format version");
    let mut summary = None;
    let mut recs = Vec::new();
    let mut slow = Vec::new();
    for (kind, raw) in &chunks {
        match kind {
            2 | 5 | 8 | 10 => recs.extend(records(raw, *kind)),
            11 => slow.extend(slow_calls(raw)),
            3 => summary = Some(serde_json::from_slice(raw).expect("summary JSON")),
            _ => {}
        }
    }
    Capture {
        chunks,
        meta,
        summary,
        records: recs,
        slow,
    }
}

/// One version-2 chunk framed as the format frames it (zstd, CRC over header and payload).
pub fn encode_chunk(kind: u32, raw: &[u8]) -> Vec<u8> {
    let stored =
        ruzstd::encoding::compress_to_vec(raw, ruzstd::encoding::CompressionLevel::Fastest);
    let mut out = Vec::new();
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&(raw.len() as u32).to_le_bytes());
    out.extend_from_slice(&(stored.len() as u32).to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&out);
    crc.update(&stored);
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(&stored);
    out
}

/// A version-2 capture with its metadata changed by `edit` and every other chunk as it was,
/// with valid checksums: what another damon-trace could have written.
pub fn rewrite_meta(v2: &[u8], edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let (version, chunks) = chunks(v2);
    assert_eq!(version, 2, "rewrite a version-2 capture");
    let mut out = v2[..HEADER].to_vec();
    let mut edit = Some(edit);
    for (kind, raw) in chunks {
        match (kind, edit.take()) {
            (1, Some(edit)) => {
                let mut meta: serde_json::Value = serde_json::from_slice(&raw).expect("meta");
                edit(&mut meta);
                let raw = serde_json::to_vec(&meta).expect("json");
                out.extend(encode_chunk(kind, &raw));
            }
            (_, e) => {
                edit = e;
                out.extend(encode_chunk(kind, &raw));
            }
        }
    }
    out
}

/// Writes `from` to `to` with the metadata's `mode` set to `mode`, every other chunk as it was.
pub fn write_with_mode(from: &Path, to: &Path, mode: &str) {
    let bytes = std::fs::read(from).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    let out = rewrite_meta(&bytes, |meta| meta["mode"] = mode.into());
    std::fs::write(to, out).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
}

/// The smallest kernel address on x86-64 with 5-level paging (LA57), which the TCG guests
/// run: their `lock_timer_base` returns pointers like 0xff2f_…; with 4-level paging and on
/// arm64 kernel space starts higher, at `0xffff_8000_0000_0000`.
const KERNEL_SPACE: u64 = 0xff00_0000_0000_0000;
/// Above this are small negative numbers (errno values as u64), not addresses.
const NEGATIVE_SMALL: u64 = 0xffff_ffff_ffff_0000;

/// A value in the kernel's part of the address space that is not a small negative number.
pub fn kernel_address(v: u64) -> bool {
    (KERNEL_SPACE..NEGATIVE_SMALL).contains(&v)
}

/// Kernel-address-looking values anywhere in a JSON value: numbers in the kernel's part of
/// the address space, and strings holding 16 hex digits that start with ff (`0xffff…` splits
/// into "0" and the digits: 'x' is not a hex digit).
pub fn addresses(v: &serde_json::Value, path: &str, found: &mut Vec<String>) {
    match v {
        serde_json::Value::Number(n) if n.as_u64().is_some_and(kernel_address) => {
            found.push(format!("{path} = {n}"));
        }
        serde_json::Value::String(s) => {
            let lower = s.to_ascii_lowercase();
            if lower
                .split(|c: char| !c.is_ascii_hexdigit())
                .any(|w| w.len() == 16 && w.starts_with("ff"))
            {
                found.push(format!("{path} = {s:?}"));
            }
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                addresses(x, &format!("{path}[{i}]"), found);
            }
        }
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                addresses(x, &format!("{path}.{k}"), found);
            }
        }
        _ => {}
    }
}

/// Everything in a capture that looks like a kernel address: in its metadata and summary
/// (JSON), and in every record's value and arguments; and the value of every record of a
/// function whose return value is a pointer or void (lock_timer_base,
/// damos_va_migrate_dests_add), which must be 0.
pub fn kernel_addresses(c: &Capture) -> Vec<String> {
    let mut found = Vec::new();
    addresses(&c.meta, "meta", &mut found);
    if let Some(s) = &c.summary {
        addresses(s, "summary", &mut found);
    }
    let zero: Vec<u32> = c.meta["functions"]
        .as_array()
        .expect("meta.functions")
        .iter()
        .filter(|f| {
            matches!(
                f["name"].as_str(),
                Some("lock_timer_base" | "damos_va_migrate_dests_add")
            )
        })
        .filter_map(|f| f["id"].as_u64().map(|id| id as u32))
        .collect();
    for s in &c.slow {
        let frames = serde_json::Value::from(s.stack.clone());
        addresses(
            &frames,
            &format!("slow call stack {:?}", s.record),
            &mut found,
        );
    }
    let slow_records = c.slow.iter().map(|s| &s.record);
    for r in c.records.iter().chain(slow_records) {
        for (what, v) in [("value", r.value), ("arg0", r.arg0), ("arg1", r.arg1)] {
            if kernel_address(v as u64) {
                found.push(format!("record {what} = {v:#x}: {r:?}"));
            }
        }
        if zero.contains(&r.func) && r.value != 0 {
            found.push(format!(
                "record of a pointer/void function keeps a value: {r:?}"
            ));
        }
    }
    found
}

/// Nearest-rank percentile of sorted data: the smallest value with at least `milli_pct`
/// thousandths of a percent of the data at or below it (50 000 = p50, 99 900 = p99.9).
pub fn nearest_rank(sorted: &[u64], milli_pct: u64) -> u64 {
    let n = sorted.len() as u64;
    assert!(n > 0, "percentile of nothing");
    let rank = (milli_pct * n).div_ceil(100_000).clamp(1, n);
    sorted[rank as usize - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> Vec<u8> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../damon-user/tests/data/values-7.2.dtcap"
        );
        std::fs::read(path).expect("fixture")
    }

    #[test]
    fn rewriting_the_metadata_keeps_every_other_chunk() {
        let bytes = fixture();
        let (version, before) = chunks(&bytes);
        assert_eq!(version, 2);
        let out = rewrite_meta(&bytes, |m| m["mode"] = "kernel".into());
        let (_, after) = chunks(&out);
        assert_eq!(meta_json(&out)["mode"], "kernel");
        assert_eq!(before.len(), after.len());
        assert_eq!(before[1..], after[1..], "chunks after the metadata");
    }

    #[test]
    #[should_panic(expected = "CRC")]
    fn a_flipped_byte_fails_its_chunk_crc() {
        let mut bytes = fixture();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        chunks(&bytes);
    }

    #[test]
    fn records_carry_their_arguments() {
        let dir = std::env::temp_dir().join(format!("dtcap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("c.dtcap");
        std::fs::write(&path, fixture()).expect("write");
        let c = read(&path);
        assert!(!c.records.is_empty());
        assert!(
            c.records.iter().any(|r| r.arg0 != 0),
            "values-7.2 records arguments"
        );
        assert!(
            kernel_addresses(&c).is_empty(),
            "{:?}",
            kernel_addresses(&c)
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A kind-11 payload written by hand, field by field, reads back; a frame holding a kernel
    /// address is caught by the address rule.
    #[test]
    fn kind_11_slow_calls_read_and_their_frames_are_scanned() {
        let mut raw = Vec::new();
        for v in [10u64, 2_000_000, (-4i64) as u64, 5, 6] {
            raw.extend(v.to_le_bytes());
        }
        for v in [7u32, 8, 1, 3] {
            raw.extend(v.to_le_bytes());
        }
        for v in [1u16, 0, 2, 0xFFFF] {
            raw.extend(v.to_le_bytes());
        }
        for v in [1_500_000u32, 40] {
            raw.extend(v.to_le_bytes());
        }
        raw.extend(2u16.to_le_bytes());
        for frame in ["ksys_read+0x6b", "0xffffffff81234567"] {
            raw.extend((frame.len() as u16).to_le_bytes());
            raw.extend(frame.as_bytes());
        }
        let s = slow_calls(&raw);
        assert_eq!(s.len(), 1);
        let r = s[0].record;
        assert_eq!(
            (r.entry_ns, r.duration_ns, r.value, r.arg1),
            (10, 2_000_000, -4, 6)
        );
        assert_eq!((r.pid, r.tid, r.cpu, r.func), (7, 8, 1, 3));
        assert_eq!(r.disturbance, [1, 0, 2, 0xFFFF]);
        assert_eq!(s[0].record.breakdown, [1_500_000, 40]);
        assert_eq!(s[0].stack, ["ksys_read+0x6b", "0xffffffff81234567"]);
        let c = Capture {
            chunks: Vec::new(),
            meta: serde_json::json!({"functions": []}),
            summary: None,
            records: Vec::new(),
            slow: s,
        };
        assert_eq!(kernel_addresses(&c).len(), 1, "{:?}", kernel_addresses(&c));
    }

    #[test]
    fn kind_8_records_carry_the_disturbance_columns() {
        // Two records, each column hand-written: func, cpu, pid, tid, entry (zigzag deltas),
        // duration, value (zigzag), arg0, arg1 (zigzag), slept, preempted, hardirqs, softirqs.
        let mut raw = vec![2u8];
        for col in [
            [3, 3],
            [0, 1],
            [7, 7],
            [8, 9],
            [20, 2],
            [100, 120],
            [0, 0],
            [0, 0],
            [2, 2],
        ] {
            raw.extend(col);
        }
        // softirqs 0xFFFF as a varint: 0xFF 0xFF 0x03.
        raw.extend([1, 0, 0, 2, 0, 0, 0, 0xFF, 0xFF, 0x03]);
        let r = records(&raw, 8);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].entry_ns, r[1].entry_ns), (10, 11));
        assert_eq!(r[0].arg1, 1);
        assert_eq!(r[0].disturbance, [1, 0, 0, 0]);
        assert_eq!(r[1].disturbance, [0, 2, 0, 0xFFFF]);
        assert_eq!(r[1].breakdown, [0, 0]);
        // Kind 10: the same and off_cpu_ns, irq_ns.
        raw.extend([0x80, 0x01, 0, 5, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]);
        let r = records(&raw, 10);
        assert_eq!(r[1].disturbance, [0, 2, 0, 0xFFFF]);
        assert_eq!(r[0].breakdown, [128, 5]);
        assert_eq!(r[1].breakdown, [0, 0xFFFF_FFFF]);
    }
}
