//! Where a capture's bytes go, against what the records themselves hold.
//!
//! The floor each column is compared with is an order-0 estimate: a value costs the entropy
//! of its bit length (over the column) plus its bits below the leading one, taken as
//! incompressible; task ids cost the entropy of the (pid, tid) pairs. Entry stamps are taken
//! as per-CPU deltas. It is what an entropy coder with one model per column would reach, not
//! a bound no coder can beat, but timing noise at ns resolution is about that incompressible.
use std::collections::HashMap;

use damon_common::CallRecord;

use super::{Capture, chunk, columns, format::read_file, tests};

/// Shannon entropy of a histogram, bits per item.
fn entropy<K>(counts: &HashMap<K, u64>) -> f64 {
    let n = counts.values().sum::<u64>() as f64;
    counts
        .values()
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum()
}

/// Order-0 floor of a column of unsigned values, bits per value: the entropy of their bit
/// lengths plus the bits under each leading one.
fn log_bucket_bits(values: impl Iterator<Item = u64>) -> f64 {
    let mut lengths: HashMap<u32, u64> = HashMap::new();
    let (mut n, mut below) = (0u64, 0u64);
    for v in values {
        let len = u64::BITS - v.leading_zeros();
        *lengths.entry(len).or_default() += 1;
        below += u64::from(len.saturating_sub(1));
        n += 1;
    }
    if n == 0 {
        return 0.0;
    }
    entropy(&lengths) + below as f64 / n as f64
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Entry stamps as the gap to the previous record of the same CPU (zigzag: records arrive
/// about in exit order, so a few gaps are negative).
fn per_cpu_gaps(records: &[CallRecord]) -> Vec<u64> {
    let mut prev: HashMap<u32, u64> = HashMap::new();
    records
        .iter()
        .map(|r| {
            let before = prev.insert(r.cpu, r.entry_ns).unwrap_or(r.entry_ns);
            zigzag(r.entry_ns.wrapping_sub(before) as i64)
        })
        .collect()
}

/// Per column, the order-0 floor in bytes per record (see the module's doc).
fn floor(records: &[CallRecord]) -> Vec<(&'static str, f64)> {
    let symbols = |f: fn(&CallRecord) -> u64| {
        let mut counts: HashMap<u64, u64> = HashMap::new();
        records
            .iter()
            .for_each(|r| *counts.entry(f(r)).or_default() += 1);
        entropy(&counts) / 8.0
    };
    let bucketed = |f: fn(&CallRecord) -> u64| log_bucket_bits(records.iter().map(f)) / 8.0;
    vec![
        ("func", symbols(|r| u64::from(r.func))),
        ("cpu", symbols(|r| u64::from(r.cpu))),
        (
            "pid+tid",
            symbols(|r| u64::from(r.pid) << 32 | u64::from(r.tid)),
        ),
        (
            "entry",
            log_bucket_bits(per_cpu_gaps(records).into_iter()) / 8.0,
        ),
        ("duration", bucketed(|r| r.duration_ns)),
        ("value", bucketed(|r| zigzag(r.value))),
        (
            "args",
            bucketed(|r| zigzag(r.arg0)) + bucketed(|r| zigzag(r.arg1)),
        ),
    ]
}

/// Bytes per record of the capture as this build's writer stores it (chunks cut per second of
/// the records' exits, as `record` flushes), and the whole file's size.
fn stored_per_record(c: &Capture) -> (f64, u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.dtcap");
    tests::rewrite(c, &path).expect("rewrite");
    let bytes = std::fs::metadata(&path).expect("written").len();
    (bytes as f64 / c.records.len().max(1) as f64, bytes)
}

/// What blanking each field saves in the record chunks (16 Ki records each): the bytes that
/// column costs after compression, among the others.
fn marginal(records: &[CallRecord]) -> Vec<(&'static str, f64)> {
    let stored = |records: &[CallRecord]| -> usize {
        let mut raw = Vec::new();
        records
            .chunks(16 * 1024)
            .map(|c| {
                raw.clear();
                columns::encode(c, columns::Layout::of(c), &mut raw);
                chunk::encode(2, &raw).expect("chunk").len()
            })
            .sum()
    };
    let whole = stored(records) as f64;
    type Blank = (&'static str, fn(&mut CallRecord));
    let blanks: [Blank; 7] = [
        ("func", |r| r.func = 0),
        ("cpu", |r| r.cpu = 0),
        ("pid+tid", |r| (r.pid, r.tid) = (0, 0)),
        ("entry", |r| r.entry_ns = 0),
        ("duration", |r| r.duration_ns = 0),
        ("value", |r| r.value = 0),
        ("args", |r| (r.arg0, r.arg1) = (0, 0)),
    ];
    let n = records.len().max(1) as f64;
    blanks
        .into_iter()
        .map(|(name, blank)| {
            let mut r = records.to_vec();
            r.iter_mut().for_each(blank);
            (name, (whole - stored(&r) as f64) / n)
        })
        .collect()
}

fn line(parts: &[(&str, f64)]) -> String {
    parts
        .iter()
        .map(|(k, v)| format!("{k} {v:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Prints, per capture, bytes per record as stored, each column's marginal cost and its
/// floor: `DENSITY_CAPTURES=a.dtcap:b.dtcap cargo test -p damon-user --bin damon-trace
/// where_the_bytes_go -- --ignored --nocapture` (default: the committed captures with
/// records).
#[test]
#[ignore = "a measurement, not a check"]
fn where_the_bytes_go() {
    let paths: Vec<std::path::PathBuf> = match std::env::var("DENSITY_CAPTURES") {
        Ok(v) => v.split(':').map(Into::into).collect(),
        Err(_) => DENSE.iter().map(|&(name, _)| tests::data(name)).collect(),
    };
    for path in paths {
        let c = read_file(&path).expect("capture");
        let (per_record, bytes) = stored_per_record(&c);
        let floor = floor(&c.records);
        let total: f64 = floor.iter().map(|(_, v)| v).sum();
        println!(
            "{}: {} records, {bytes} bytes, {per_record:.2} B/record stored, floor {total:.2}",
            path.display(),
            c.records.len()
        );
        println!("  stored, per column: {}", line(&marginal(&c.records)));
        println!("  floor, per column:  {}", line(&floor));
        if let Some((rate, dense)) = compressed_in_time(&c, 100_000.0) {
            let (per_record, _) = stored_per_record(&dense);
            let floor: f64 = self::floor(&dense.records).iter().map(|(_, v)| v).sum();
            println!(
                "  projected: its {rate:.0} calls/s squeezed to 100 000 (entry stamps only): \
                 {per_record:.2} B/record stored, floor {floor:.2}; per column: {}",
                line(&marginal(&dense.records))
            );
        }
    }
}

/// A projection, not a capture: the same records with their entry stamps moved closer in
/// time so that they arrive at `rate` calls/s (durations, ids and values unchanged), or `None`
/// when the capture is already that dense. It shows what the entry column alone would save
/// if a function called as these were were called that often.
fn compressed_in_time(c: &Capture, rate: f64) -> Option<(f64, Capture)> {
    let first = c.records.iter().map(|r| r.entry_ns).min()?;
    let last = c.records.iter().map(|r| r.entry_ns).max()?;
    let actual = c.records.len() as f64 / ((last - first) as f64 / 1e9);
    if actual >= rate {
        return None;
    }
    let k = rate / actual;
    let mut dense = c.clone();
    for r in &mut dense.records {
        r.entry_ns = first + ((r.entry_ns - first) as f64 / k) as u64;
    }
    Some((actual, dense))
}

/// Committed captures with records, and how far above its floor each may be stored.
/// lock_timer_base under busybox wget against httpd on loopback is the busiest capture of a
/// DAMON-path function (about 1 300 calls/s, the most any workload reached in the TCG guest;
/// see docs/capture-format.md); getppid-hr is a high-rate one (`__do_sys_getppid`, four
/// tasks of `bench-loop` on two vCPUs, ~270 k calls/s). The slack is 1.75× the order-0 floor:
/// version 2 stores the slow ones about 1.5× their floor (the high-rate one below it: zstd
/// finds the loops' regular gaps), and a writer that lost its deltas or columns would store 3×
/// and more.
const DENSE: [(&str, f64); 4] = [
    ("getppid-hr-7.2.dtcap", 1.75),
    ("lock-timer-7.2.dtcap", 1.75),
    ("migrate-hot-7.2.v2.dtcap", 1.75),
    ("values-7.2.dtcap", 1.75),
];

/// The writer stays within its slack of each committed capture's floor, computed from the
/// capture's own records.
#[test]
fn density_stays_near_the_floor() {
    for (name, slack) in DENSE {
        let c = read_file(&tests::data(name)).expect("capture");
        assert!(c.records.len() > 1000, "{name}: a capture with records");
        let (per_record, _) = stored_per_record(&c);
        let floor: f64 = floor(&c.records).iter().map(|(_, v)| v).sum();
        assert!(
            per_record <= slack * floor,
            "{name}: {per_record:.2} B/record stored, more than {slack} × its floor {floor:.2}"
        );
        // The floor is no artefact of a degenerate model: timing noise alone is bytes.
        assert!(floor > 1.0, "{name}: floor {floor:.2} B/record");
    }
}

/// The format's target, ≤ 3 bytes per record, where calls are dense: the high-rate capture
/// (22 000 records in 81 ms; version 2 stores 2.42 B/record).
#[test]
fn a_high_rate_capture_takes_at_most_three_bytes_per_record() {
    let c = read_file(&tests::data("getppid-hr-7.2.dtcap")).expect("capture");
    assert_eq!(c.records.len(), 22_000);
    let (per_record, _) = stored_per_record(&c);
    assert!(per_record <= 3.0, "{per_record:.2} B/record");
}
