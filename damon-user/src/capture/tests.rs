//! Capture format: round trips, every corruption, a writer killed with SIGKILL, and golden
//! files of each version.
use damon_common::attach::Attach;
use std::{collections::BTreeMap, path::Path};

use damon_common::CallRecord;

use super::{
    AttachState, Capture, CgroupFilter, FunctionCounters, FunctionStatus, KernelIdentity, Meta,
    Summary, TaskFilter, format::*, v1,
};

pub fn meta() -> Meta {
    Meta {
        tool_version: "0.1.0".into(),
        kernel: KernelIdentity {
            release: "7.2.13-amd64".into(),
            version: "#1 SMP".into(),
            boot_id: "b".into(),
            cmdline: "console=ttyS0 quiet".into(),
        },
        hostname: "guest".into(),
        start_unix_ns: 1,
        start_monotonic_ns: 2,
        command_line: vec!["damon-trace".into(), "record".into()],
        mode: crate::capture::Mode::Stream,
        ring_size: 4096,
        functions: vec![FunctionStatus {
            name: "lock_timer_base".into(),
            id: 3,
            attach: AttachState::Traced(Attach::Kprobe),
            detail: None,
        }],
        damon: None,
        cpu_model: "QEMU TCG CPU".into(),
        calibration: None,
        intervals: None,
        args: Vec::new(),
        filter: Default::default(),
        disturbance: None,
        clock: Default::default(),
        slow: None,
    }
}

fn rec(i: u64) -> CallRecord {
    CallRecord {
        entry_ns: 1_000_000 + i * 7919 % 5000,
        duration_ns: 100 + i % 300,
        value: -(i as i64),
        pid: 1,
        tid: 2 + (i % 3) as u32,
        cpu: (i % 2) as u32,
        func: 3,
        ..CallRecord::default()
    }
}

pub fn summary(records: u64) -> Summary {
    let mut counters = BTreeMap::new();
    counters.insert(3, FunctionCounters::all_recorded(records));
    Summary::new(5, "duration", counters)
}

/// Writes `records` records, flushing every `per_chunk`, finished or not.
fn write(records: u64, per_chunk: u64, finish: bool) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.dtcap");
    let mut w = CaptureWriter::create(&path, false, &meta()).expect("create");
    for i in 0..records {
        w.push(&rec(i)).expect("push");
        if (i + 1) % per_chunk == 0 {
            w.flush().expect("flush");
        }
    }
    if finish {
        w.finish(&summary(records)).expect("finish");
    } else {
        w.flush().expect("flush");
    }
    (dir, path)
}

#[test]
fn round_trip_across_chunks() {
    let n = 16 * 1024 * 2 + 7;
    let (_d, path) = write(n, u64::MAX, true);
    let loaded = load_file(&path).expect("read");
    let c = loaded.capture;
    assert_eq!(loaded.info.version, VERSION);
    assert_eq!(loaded.info.record_chunks, 3);
    assert_eq!(c.meta, meta());
    assert_eq!(c.records.len() as u64, n);
    assert!(
        c.records
            .iter()
            .enumerate()
            .all(|(i, r)| *r == rec(i as u64))
    );
    assert_eq!(c.summary.expect("summary").counters[&3].calls, n);
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn refuses_to_overwrite_without_force() {
    let (_d, path) = write(1, 1, true);
    let err = CaptureWriter::create(&path, false, &meta())
        .err()
        .expect("must refuse");
    assert!(err.to_string().contains("--force"), "{err}");
    assert!(CaptureWriter::create(&path, true, &meta()).is_ok());
}

#[test]
fn unfinished_capture_keeps_flushed_records() {
    let (_d, path) = write(10, 4, false);
    let c = read_file(&path).expect("read");
    assert_eq!(c.records.len(), 10);
    assert!(c.summary.is_none());
}

/// Every cut of a file is what a killed writer could leave: after the metadata and before the
/// summary the complete chunks are kept; the strict parser names the torn chunk.
#[test]
fn every_truncation_keeps_complete_chunks_or_fails_precisely() {
    let (_d, path) = write(30, 10, true);
    let good = std::fs::read(&path).expect("read");
    let full = parse(&good).expect("complete file");
    assert_eq!(full.records.len(), 30);
    for cut in 0..good.len() {
        let bytes = &good[..cut];
        match load(bytes, false) {
            Ok(l) => {
                assert!(l.capture.summary.is_none(), "cut {cut}");
                assert_eq!(
                    l.capture.records.len() % 10,
                    0,
                    "cut {cut}: whole chunks only"
                );
                assert_eq!(
                    l.capture.records[..],
                    full.records[..l.capture.records.len()]
                );
                match l.info.torn_chunk {
                    Some(t) => assert!(matches!(
                        parse(bytes),
                        Err(CaptureError::Truncated { chunk, .. }) if chunk == t
                    )),
                    None => assert!(parse(bytes).is_ok()),
                }
            }
            Err(CaptureError::BadMagic) => assert!(cut < 16, "cut {cut}"),
            Err(CaptureError::Empty) => assert_eq!(cut, 0),
            Err(CaptureError::Truncated { chunk: 0, .. }) => {}
            Err(e) => panic!("cut {cut}: unexpected {e}"),
        }
    }
    // Without its last byte the summary chunk is torn: records kept, summary lost.
    let l = load(&good[..good.len() - 1], false).expect("torn summary");
    assert_eq!((l.capture.records.len(), l.info.torn_chunk), (30, Some(4)));
}

#[test]
fn precise_errors() {
    let (_d, path) = write(3, 10, true);
    let good = std::fs::read(&path).expect("read");
    assert!(matches!(parse(b""), Err(CaptureError::Empty)));
    assert!(matches!(
        parse(b"garbage garbage garbage"),
        Err(CaptureError::BadMagic)
    ));
    let mut v3 = good.clone();
    v3[8] = 3;
    assert!(matches!(
        parse(&v3),
        Err(CaptureError::UnsupportedVersion(3))
    ));
    // A flipped payload byte of the last chunk (the summary, chunk 2).
    let mut flipped = good.clone();
    let last = flipped.len() - 3;
    flipped[last] ^= 0xff;
    let err = parse(&flipped).expect_err("corrupt");
    assert!(
        matches!(err, CaptureError::Checksum { chunk: 2, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("chunk 2"), "{err}");
    // A flipped raw length in the first chunk's header is caught by the CRC too.
    let mut len_flip = good.clone();
    len_flip[16 + 4] ^= 0x01;
    assert!(matches!(
        parse(&len_flip),
        Err(CaptureError::Checksum { chunk: 0, .. })
    ));
    // Garbage after the summary is not a killed writer's tail.
    let mut trailing = good.clone();
    trailing.extend_from_slice(&[1, 2, 3]);
    assert!(matches!(
        load(&trailing, false),
        Err(CaptureError::Truncated { chunk: 3, .. })
    ));
}

#[test]
fn unknown_chunk_kinds_are_skipped() {
    let (_d, path) = write(3, 10, false);
    let mut bytes = std::fs::read(&path).expect("read");
    bytes.extend(super::chunk::encode(99, b"from the future").expect("chunk"));
    let c = parse(&bytes).expect("skips");
    assert_eq!(c.records.len(), 3);
}

/// The real thing: a child process writes and flushes every 20 ms, gets SIGKILL, and every
/// chunk it reported as flushed is there.
#[test]
fn writer_killed_with_sigkill_keeps_flushed_chunks() {
    use std::io::BufRead as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("killed.dtcap");
    let mut child = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "capture::tests::sigkill_child",
            "--ignored",
            "--nocapture",
        ])
        .env("DAMON_TRACE_KILL_CHILD", &path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("stdout");
    let mut flushed = 0u64;
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line.expect("line");
        if let Some(n) = line.strip_prefix("flushed ") {
            flushed = n.parse().expect("count");
            if flushed >= 5_000 {
                break;
            }
        }
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    let l = load_file(&path).expect("a killed writer's capture reads");
    assert!(l.capture.summary.is_none());
    let n = l.capture.records.len() as u64;
    assert!(n >= flushed, "{n} records, {flushed} reported flushed");
    assert!(
        l.capture
            .records
            .iter()
            .enumerate()
            .all(|(i, r)| *r == rec(i as u64))
    );
}

/// Not a test by itself: the process `writer_killed_with_sigkill_keeps_flushed_chunks` kills.
#[test]
#[ignore = "child process of writer_killed_with_sigkill_keeps_flushed_chunks"]
fn sigkill_child() {
    let Some(path) = std::env::var_os("DAMON_TRACE_KILL_CHILD") else {
        return;
    };
    let mut w = CaptureWriter::create(Path::new(&path), false, &meta()).expect("create");
    let mut i = 0u64;
    loop {
        for _ in 0..500 {
            w.push(&rec(i)).expect("push");
            i += 1;
        }
        w.flush().expect("flush");
        println!("flushed {i}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

pub fn data(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn check_golden(c: &Capture) {
    assert!(c.meta.kernel.release.starts_with("7.2."));
    assert_eq!(c.meta.functions.len(), 4);
    assert_eq!(c.records.len(), 3612);
    let summary = c.summary.as_ref().expect("complete capture");
    let emitted: u64 = summary.counters.values().map(|k| k.emitted).sum();
    assert_eq!(emitted, c.records.len() as u64);
    assert!(c.records.iter().all(|r| r.duration_ns > 0 && r.func < 4));
}

/// A real capture recorded by `cargo xtask demo` (Debian 7.2 guest, migrate-hot scenario)
/// in version 1: old files must stay readable as the format grows.
#[test]
fn reads_a_real_version_1_capture() {
    let l = load_file(&data("migrate-hot-7.2.dtcap")).expect("golden v1 capture");
    assert_eq!(l.info.version, 1);
    check_golden(&l.capture);
}

/// The same capture in version 2 (written by this writer from the version-1 file): the two
/// decode to the same capture, and version 2 is a fraction of the size.
#[test]
fn reads_the_same_capture_in_version_2() {
    let v1 = load_file(&data("migrate-hot-7.2.dtcap")).expect("v1");
    let v2 = load_file(&data("migrate-hot-7.2.v2.dtcap")).expect("golden v2 capture");
    assert_eq!(v2.info.version, 2);
    check_golden(&v2.capture);
    assert_eq!(v2.capture, v1.capture);
    let per_record = |l: &Loaded| l.info.file_bytes as f64 / l.capture.records.len() as f64;
    eprintln!(
        "bytes per record, whole file: v1 {:.2}, v2 {:.2}",
        per_record(&v1),
        per_record(&v2)
    );
    assert!(per_record(&v2) < per_record(&v1) / 4.0);
}

/// Rewrites a capture in the current version, as `record` would have written it (one chunk
/// per second of records). Run with `DAMON_TRACE_REGEN=1` to refresh the v2 fixture.
pub fn rewrite(c: &Capture, path: &Path) -> Result<u64, CaptureError> {
    let mut w = CaptureWriter::create(path, true, &c.meta)?;
    let mut second = None;
    for r in &c.records {
        let exit_s =
            (r.entry_ns + r.duration_ns).saturating_sub(c.meta.start_monotonic_ns) / 1_000_000_000;
        if second.is_some_and(|s| s != exit_s) {
            w.flush()?;
        }
        second = Some(exit_s);
        w.push(r)?;
    }
    match &c.summary {
        Some(s) => w.finish(s),
        None => {
            w.flush()?;
            Ok(w.records_written)
        }
    }
}

#[test]
fn regenerate_v2_fixture_on_request() {
    if std::env::var_os("DAMON_TRACE_REGEN").is_none() {
        return;
    }
    let c = read_file(&data("migrate-hot-7.2.dtcap")).expect("v1");
    rewrite(&c, &data("migrate-hot-7.2.v2.dtcap")).expect("write v2 fixture");
}

#[test]
fn version_1_files_built_here_follow_the_same_rules() {
    let json = serde_json::to_vec(&meta()).expect("json");
    let sum = serde_json::to_vec(&summary(2)).expect("json");
    let bytes = v1::build(&json, &[rec(0), rec(1)], Some(&sum));
    let c = parse(&bytes).expect("v1");
    assert_eq!(c.records, vec![rec(0), rec(1)]);
    let l = load(&bytes[..bytes.len() - 1], false).expect("torn v1 summary");
    assert_eq!(l.info.torn_chunk, Some(2));
    let mut flipped = bytes.clone();
    let last = flipped.len() - 2;
    flipped[last] ^= 0x10;
    assert!(matches!(
        parse(&flipped),
        Err(CaptureError::Checksum { chunk: 2, .. })
    ));
}

/// Inputs kept from fuzzing (`fuzz/`, see its README) and hand-made edge cases: each must
/// read or fail precisely, never panic; `valid-*` ones must read, all others must be refused.
#[test]
fn fuzz_regressions_never_panic() {
    let dir = data("fuzz-regressions");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("tests/data/fuzz-regressions") {
        let path = entry.expect("entry").path();
        let bytes = std::fs::read(&path).expect("input");
        let strict = load(&bytes, true);
        let tolerant = load(&bytes, false);
        let name = path.file_name().map(|f| f.to_string_lossy().into_owned());
        let valid = name.as_deref().is_some_and(|f| f.starts_with("valid-"));
        match (&tolerant, valid) {
            (Ok(_), true) | (Err(_), false) => {}
            (Ok(_), false) => panic!("{}: read, but it is not a valid capture", path.display()),
            (Err(e), true) => panic!("{}: {e}", path.display()),
        }
        if let (Ok(s), Ok(t)) = (&strict, &tolerant) {
            assert_eq!(s.capture, t.capture, "{}", path.display());
        }
        n += 1;
    }
    assert!(n > 0, "no regression inputs in {}", dir.display());
}

/// `fuzz/` compiles this module from its source on its own (`#[path]`), so the codec must not
/// reach into the rest of the crate; this keeps that true without building the fuzz target.
#[test]
fn codec_depends_on_nothing_else_in_the_crate() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/capture");
    for entry in std::fs::read_dir(&dir).expect("src/capture") {
        let path = entry.expect("entry").path();
        let name = path.file_name().map(|f| f.to_string_lossy().into_owned());
        if matches!(name.as_deref(), Some("tests.rs" | "proptests.rs")) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("source");
        assert!(
            !text.contains("crate::"),
            "{} uses crate:: — the fuzz target could not compile it",
            path.display()
        );
    }
}

/// Captures are private: mode 0600 when created, and when `force` overwrites a file that had
/// another mode; without `force` an existing file is refused and left alone.
#[test]
fn captures_are_created_0600() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.dtcap");
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    CaptureWriter::create(&path, false, &meta()).expect("create");
    assert_eq!(mode(&path), 0o600);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    assert!(matches!(
        CaptureWriter::create(&path, false, &meta()),
        Err(CaptureError::Exists { .. })
    ));
    assert_eq!(mode(&path), 0o644, "refused: untouched");
    CaptureWriter::create(&path, true, &meta()).expect("force");
    assert_eq!(mode(&path), 0o600, "overwritten: private");
}

/// The output check finds what would stop a capture from being written, and leaves nothing.
#[test]
fn output_check_leaves_nothing_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("new.dtcap");
    check_output(&path, false).expect("writable");
    assert!(!path.exists());
    std::fs::write(&path, b"old").expect("write");
    assert!(matches!(
        check_output(&path, false),
        Err(CaptureError::Exists { .. })
    ));
    check_output(&path, true).expect("force");
    assert_eq!(std::fs::read(&path).expect("read"), b"old", "not truncated");
    let under = path.join("x.dtcap");
    let e = check_output(&under, false).expect_err("parent is a file");
    assert!(e.to_string().contains("not a directory"), "{e}");
    assert!(e.is_input());
    let e = check_output(dir.path(), true).expect_err("a directory");
    assert!(e.to_string().contains("a directory"), "{e}");
}

#[test]
fn interval_marks_get_their_own_chunks_and_read_back_apart_from_calls() {
    use super::{IntervalHook, MarkCounters};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("m.dtcap");
    let mut m = meta();
    m.intervals = Some(IntervalHook {
        hook: "tracepoint:damon:damon_aggregated".into(),
        attached: true,
        detail: None,
    });
    let mark = |t: u64| CallRecord {
        entry_ns: t,
        value: 12,
        pid: 40,
        tid: 40,
        func: damon_common::AGGREGATION_MARK,
        ..CallRecord::default()
    };
    let mut w = CaptureWriter::create(&path, false, &m).expect("create");
    for i in 0..10 {
        w.push(&rec(i)).expect("push");
        if i % 3 == 0 {
            w.push(&mark(i * 100)).expect("push mark");
        }
        if i == 4 {
            w.flush().expect("flush");
        }
    }
    let mut s = summary(10);
    s.intervals = Some(MarkCounters {
        markers: 4,
        emitted: 4,
        ring_full: 0,
    });
    assert_eq!(
        w.finish(&s).expect("finish"),
        10,
        "only calls count as records"
    );
    let c = read_file(&path).expect("read");
    assert_eq!(c.records, (0..10).map(rec).collect::<Vec<_>>());
    assert_eq!(
        c.marks,
        vec![mark(0), mark(300), mark(600), mark(900)],
        "marks keep their order across chunks"
    );
    assert_eq!(c.meta.intervals, m.intervals);
    assert_eq!(c.summary.expect("summary").intervals, s.intervals);
    // Kind 4 chunks are what a reader without interval support skips: the records and
    // summary alone still make the whole capture.
    assert_eq!(chunk_kinds(&path), vec![1, 4, 2, 4, 2, 3]);
}

/// The kind of each chunk of a version-2 file, in order.
fn chunk_kinds(path: &Path) -> Vec<u32> {
    let bytes = std::fs::read(path).expect("bytes");
    let mut pos = HEADER_LEN;
    let mut kinds = Vec::new();
    while pos + 16 <= bytes.len() {
        kinds.push(u32::from_le_bytes(
            bytes[pos..pos + 4].try_into().expect("4"),
        ));
        let stored = u32::from_le_bytes(bytes[pos + 8..pos + 12].try_into().expect("4"));
        pos += 16 + stored as usize;
    }
    kinds
}

#[test]
fn captures_without_interval_fields_still_read() {
    // Metadata and summary JSON as written before the interval hook existed.
    let (_d, path) = write(3, u64::MAX, true);
    let c = read_file(&path).expect("read");
    assert!(c.marks.is_empty());
    assert_eq!(c.meta.intervals, None);
    assert_eq!(c.summary.expect("summary").intervals, None);
}

fn kernel_snapshot(second: u64) -> super::HistSnapshot {
    let mut buckets = vec![0u64; damon_common::HIST_BUCKETS as usize];
    buckets[12] = 10 * second;
    buckets[600 - 60] = second;
    let hist = super::KernelHist {
        count: 11 * second,
        sum_ns: 11 * second * 150,
        min_ns: 120,
        max_ns: 5200 + second,
        width_ns: 10,
        buckets,
        disturbed: None,
    };
    let counters = FunctionCounters {
        calls: 11 * second + 1,
        emitted: 11 * second,
        in_flight: 1,
        ..Default::default()
    };
    let mut s = super::HistSnapshot {
        elapsed_ns: second * 1_000_000_000,
        ..Default::default()
    };
    s.functions.insert(3, (counters, hist));
    s
}

/// Kernel mode: snapshots read back in order; the summary's histograms win over them; a
/// killed recorder's capture still has its last snapshot; older readers (which skip kind 6)
/// see a capture without records.
#[test]
fn kernel_mode_snapshots_round_trip_and_survive_a_kill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("k.dtcap");
    let kmeta = Meta {
        mode: crate::capture::Mode::Kernel,
        ..meta()
    };
    let mut w = CaptureWriter::create(&path, false, &kmeta).expect("create");
    for second in 1..=3 {
        w.push_snapshot(&kernel_snapshot(second)).expect("snapshot");
    }
    let killed = std::fs::read(&path).expect("read");
    let last = kernel_snapshot(4);
    let (counters, hist) = last.functions[&3].clone();
    let mut s = summary(0);
    s.counters.insert(3, counters);
    s.kernel_hist.insert(3, hist);
    w.finish(&s).expect("finish");

    let c = read_file(&path).expect("read");
    assert!(c.is_kernel_mode());
    assert!(c.records.is_empty());
    assert_eq!(
        c.hist_snapshots,
        (1..=3).map(kernel_snapshot).collect::<Vec<_>>()
    );
    assert_eq!(
        c.summary.as_ref().expect("summary").kernel_hist[&3],
        last.functions[&3].1
    );
    let end = c.final_hists().expect("final");
    assert_eq!(end.functions, last.functions);

    // Killed after three snapshots, torn inside a fourth chunk: readable to the third.
    let mut torn = killed.clone();
    torn.extend_from_slice(&super::chunk::encode(6, &[1, 2, 3]).expect("chunk")[..10]);
    let c = load(&torn, false).expect("tolerant").capture;
    assert!(c.summary.is_none());
    assert_eq!(c.final_hists(), Some(kernel_snapshot(3)));

    // A reader that does not know kind 6 skips it: same as a capture without snapshots.
    let mut plain = std::fs::read(&path).expect("read");
    plain.truncate(HEADER_LEN);
    let meta_chunk =
        super::chunk::encode(KIND_META, &serde_json::to_vec(&kmeta).expect("json")).expect("chunk");
    plain.extend_from_slice(&meta_chunk);
    plain.extend_from_slice(&super::chunk::encode(99, b"x").expect("chunk"));
    assert!(parse(&plain).expect("skips").hist_snapshots.is_empty());

    // A corrupt snapshot (valid CRC) is a precise error.
    let mut bad = killed;
    bad.extend_from_slice(&super::chunk::encode(6, &[0, 1, 3]).expect("chunk"));
    let err = parse(&bad).expect_err("corrupt");
    assert!(
        matches!(err, CaptureError::Malformed { chunk: 4, .. }),
        "{err}"
    );
}

/// A task filter and the filtered counts are kept; captures written before them read as "no
/// filter, nothing filtered" (the fixture predates both).
#[test]
fn task_filter_and_filtered_counts_round_trip_and_old_captures_have_none() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("f.dtcap");
    let mut m = meta();
    m.filter = TaskFilter {
        tgid: Some(4242),
        tid: None,
        cgroup: Some(CgroupFilter {
            path: "/sys/fs/cgroup/adhoc".to_owned(),
            id: 9876,
        }),
    };
    let mut s = summary(1);
    s.counters.get_mut(&3).expect("function 3").filtered = 2000;
    let mut w = CaptureWriter::create(&path, false, &m).expect("create");
    w.push(&rec(0)).expect("push");
    w.finish(&s).expect("finish");
    let c = read_file(&path).expect("read");
    assert_eq!(c.meta.filter, m.filter);
    assert_eq!(
        c.meta.filter.describe(),
        "--tgid 4242 --cgroup /sys/fs/cgroup/adhoc (id 9876)"
    );
    assert_eq!(c.summary.expect("summary").counters[&3].filtered, 2000);
    let old = read_file(&data("migrate-hot-7.2.dtcap")).expect("fixture");
    assert!(old.meta.filter.is_off());
    let summary = old.summary.expect("summary");
    assert!(summary.counters.values().all(|c| c.filtered == 0));
}

/// Disturbance counts (unknown and saturated ones too) survive the file; only a chunk with a
/// nonzero count is stored as kind 8, so a capture without any is byte for byte what older
/// builds wrote (kinds 2 and 5) and reads with every count 0.
#[test]
fn disturbance_counts_round_trip_in_kind_8_chunks_only_where_needed() {
    use damon_common::disturb::{LOST, SATURATED, UNKNOWN};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("d.dtcap");
    let mut m = meta();
    m.disturbance = Some(super::DisturbanceStatus {
        measured: true,
        why_not: None,
        hardirq_sources: vec!["kstat.irqs_sum".into(), "irq_stat (21 counts)".into()],
        breakdown: false,
        irq_time_missing: None,
        irq_clock: None,
    });
    let counts = [[1, 0, UNKNOWN, UNKNOWN], [0, 0, SATURATED, 2], LOST];
    let records: Vec<CallRecord> = (0..9)
        .map(|i| {
            let mut r = rec(i);
            if i >= 6 {
                r.set_disturbance(counts[(i - 6) as usize]);
            }
            if (3..6).contains(&i) {
                r.arg0 = 7;
            }
            r
        })
        .collect();
    let mut w = CaptureWriter::create(&path, false, &m).expect("create");
    for (i, r) in records.iter().enumerate() {
        w.push(r).expect("push");
        if i % 3 == 2 {
            w.flush().expect("flush");
        }
    }
    w.finish(&summary(9)).expect("finish");
    assert_eq!(chunk_kinds(&path), vec![1, 2, 5, 8, 3]);
    let c = read_file(&path).expect("read");
    assert_eq!(c.records, records);
    assert_eq!(c.meta.disturbance, m.disturbance);
    assert!(super::DisturbanceStatus::measured(&c.meta));
}

/// Captures written before disturbance existed (the kind-2 fixture; a kind-5 chunk built
/// here) read with every count 0 and metadata that says they were not measured.
#[test]
fn old_record_chunks_read_with_zero_disturbance_and_not_measured() {
    let old = read_file(&data("migrate-hot-7.2.v2.dtcap")).expect("fixture");
    assert!(!old.records.is_empty());
    assert!(old.records.iter().all(|r| r.disturbance() == [0; 4]));
    assert_eq!(old.meta.disturbance, None);
    assert!(!super::DisturbanceStatus::measured(&old.meta));
    let (_d, path) = write(0, 1, false);
    let mut bytes = std::fs::read(&path).expect("bytes");
    let with_args = CallRecord {
        arg0: -1,
        arg1: 5,
        ..rec(1)
    };
    let mut raw = Vec::new();
    super::columns::encode(&[with_args], super::columns::Layout::Args, &mut raw);
    bytes.extend(super::chunk::encode(KIND_RECORDS_ARGS, &raw).expect("chunk"));
    let c = parse(&bytes).expect("reads");
    assert_eq!(c.records, vec![with_args]);
    assert_eq!(c.records[0].disturbance(), [0; 4]);
}

/// A calibration measured beside the session: the header says pending, the summary holds the
/// floors, and reading the capture puts them in `meta.calibration`; a capture that ends
/// before its summary (killed) still says pending.
#[test]
fn a_calibration_beside_the_session_reads_from_the_summary() {
    use crate::stats::calibration::{Calibration, CalibrationStatus};
    let dir = tempfile::tempdir().expect("tempdir");
    let pending = Calibration::not_run(CalibrationStatus::Pending, "beside".into());
    let mut done = Calibration::not_run(CalibrationStatus::Ok, String::new());
    done.calls = 20_000;
    let mut m = meta();
    m.calibration = Some(serde_json::to_value(&pending).expect("json"));
    let status = |c: &Capture| {
        Calibration::from_meta(c.meta.calibration.as_ref())
            .expect("a calibration")
            .status
    };
    for finished in [true, false] {
        let path = dir.path().join(format!("{finished}.dtcap"));
        let mut w = CaptureWriter::create(&path, false, &m).expect("create");
        w.push(&rec(1)).expect("push");
        if finished {
            let mut s = summary(1);
            s.calibration = Some(serde_json::to_value(&done).expect("json"));
            w.finish(&s).expect("finish");
        } else {
            w.flush().expect("flush");
            drop(w);
        }
        let c = read_file(&path).expect("read");
        if finished {
            assert_eq!(status(&c), CalibrationStatus::Ok);
            assert_eq!(c.meta.calibration.as_ref().expect("cal")["calls"], 20_000);
        } else {
            assert_eq!(status(&c), CalibrationStatus::Pending);
        }
    }
}

/// Slow calls go into kind-11 chunks as they are flushed, read back in order into
/// `slow_calls`, and survive a writer that never finished; their settings and counts ride in
/// the metadata and summary.
#[test]
fn slow_calls_round_trip_in_kind_11_chunks_and_survive_an_unfinished_writer() {
    use super::{SlowCall, SlowCounters, SlowSettings};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.dtcap");
    let mut m = meta();
    m.slow = Some(SlowSettings {
        threshold_ns: 1_000_000,
        stack_depth: 32,
        max_per_function: 1000,
    });
    let slow = |i: u64| SlowCall {
        call: CallRecord {
            duration_ns: 2_000_000 + i,
            ..rec(i)
        },
        stack: vec![format!("ksys_read+{i:#x}"), "do_syscall_64+0x82".into()],
    };
    let mut w = CaptureWriter::create(&path, false, &m).expect("create");
    w.push(&rec(0)).expect("push");
    w.push_slow(&[slow(0), slow(1)]).expect("slow");
    w.flush().expect("flush");
    w.push_slow(&[slow(2)]).expect("slow");
    w.flush().expect("flush");
    // A killed recorder: no summary, the flushed slow calls are there.
    let c = read_file(&path).expect("read unfinished");
    assert_eq!(c.slow_calls, vec![slow(0), slow(1), slow(2)]);
    let mut s = summary(1);
    s.slow.insert(
        3,
        SlowCounters {
            kept: 3,
            ring_full: 1,
            over_limit: 2,
        },
    );
    w.finish(&s).expect("finish");
    let c = read_file(&path).expect("read");
    assert_eq!(c.slow_calls, vec![slow(0), slow(1), slow(2)]);
    assert_eq!(c.meta.slow, m.slow);
    assert_eq!(c.summary.expect("summary").slow, s.slow);
    assert_eq!(chunk_kinds(&path), vec![1, 11, 2, 11, 3]);
}
