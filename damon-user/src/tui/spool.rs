//! Keeps every record of the session so `s` can save a capture of everything so far, and
//! writes `--record`'s capture.
//!
//! Records go to disk as they arrive (the `--record` file itself, or a temporary capture
//! removed at exit), so memory stays bounded however long the session runs; a replay keeps
//! them in memory, where its capture already is.
use std::{
    path::{Path, PathBuf},
    time::{SystemTime, UNIX_EPOCH},
};

use anyhow::Context as _;
use damon_common::CallRecord;

use crate::capture::{
    HistSnapshot, Meta, SlowCall, Summary,
    format::{CaptureError, CaptureWriter, read_file},
};

pub enum Spool {
    Disk(DiskSpool),
    Memory(Vec<CallRecord>),
}

pub struct DiskSpool {
    /// `None` once finished.
    writer: Option<CaptureWriter>,
    path: PathBuf,
    /// A private file for `s` only, deleted when the spool goes.
    temporary: bool,
}

impl Drop for DiskSpool {
    fn drop(&mut self) {
        if self.temporary {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Spool {
    /// The `--record` capture.
    pub fn record(path: &Path, force: bool, meta: &Meta) -> anyhow::Result<Spool> {
        let mut writer = CaptureWriter::create(path, force, meta)
            .with_context(|| format!("creating capture {}", path.display()))?;
        writer.flush().context("writing the capture header")?;
        Ok(Spool::Disk(DiskSpool {
            writer: Some(writer),
            path: path.to_owned(),
            temporary: false,
        }))
    }

    /// A temporary capture in `$TMPDIR`, mode 0600, removed at exit.
    pub fn temporary(meta: &Meta) -> anyhow::Result<Spool> {
        let path = std::env::temp_dir().join(format!(
            "damon-trace-live-{}-{}.dtcap",
            std::process::id(),
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        let writer = CaptureWriter::create(&path, false, meta)
            .with_context(|| format!("creating the session's spool {}", path.display()))?;
        Ok(Spool::Disk(DiskSpool {
            writer: Some(writer),
            path,
            temporary: true,
        }))
    }

    pub fn push(&mut self, records: &[CallRecord]) -> Result<(), CaptureError> {
        match self {
            Spool::Disk(d) => {
                if let Some(w) = &mut d.writer {
                    for r in records {
                        w.push(r)?;
                    }
                }
                Ok(())
            }
            Spool::Memory(v) => {
                v.extend_from_slice(records);
                Ok(())
            }
        }
    }

    /// `--slow`: slow calls with their stacks, into the file (a replay's memory spool gets
    /// none: its source sends none).
    pub fn push_slow(&mut self, calls: &[SlowCall]) -> Result<(), CaptureError> {
        match self {
            Spool::Disk(DiskSpool {
                writer: Some(w), ..
            }) => w.push_slow(calls),
            _ => Ok(()),
        }
    }

    /// Kernel mode: writes a histogram snapshot into the file (a memory spool has no use for
    /// it: a replay's capture keeps its own).
    pub fn push_snapshot(&mut self, snapshot: &HistSnapshot) -> Result<(), CaptureError> {
        match self {
            Spool::Disk(DiskSpool {
                writer: Some(w), ..
            }) => w.push_snapshot(snapshot),
            _ => Ok(()),
        }
    }

    /// Pushes buffered records to the file (once a second, so a killed process keeps them).
    pub fn flush(&mut self) -> Result<(), CaptureError> {
        match self {
            Spool::Disk(DiskSpool {
                writer: Some(w), ..
            }) => w.flush(),
            _ => Ok(()),
        }
    }

    /// The `--record` file, if this spool is one.
    pub fn recording(&self) -> Option<&Path> {
        match self {
            Spool::Disk(d) if !d.temporary => Some(&d.path),
            _ => None,
        }
    }

    /// Writes a complete capture of every record so far into `dir`, under a new timestamped
    /// name; returns its path and the number of records.
    pub fn save_snapshot(
        &mut self,
        meta: &Meta,
        summary: &Summary,
        dir: &Path,
        now: SystemTime,
    ) -> anyhow::Result<(PathBuf, u64)> {
        let from_disk;
        let mut slow = Vec::new();
        let records: &[CallRecord] = match self {
            Spool::Disk(d) => {
                if let Some(w) = &mut d.writer {
                    w.flush()?;
                }
                let back = read_file(&d.path)
                    .with_context(|| format!("reading back {}", d.path.display()))?;
                // Interval markers too: the writer puts them back in their own chunks.
                from_disk = back
                    .records
                    .into_iter()
                    .chain(back.marks)
                    .collect::<Vec<_>>();
                slow = back.slow_calls;
                &from_disk
            }
            Spool::Memory(v) => v,
        };
        let (path, mut writer) = create_unique(dir, &snapshot_name(now), meta)?;
        for r in records {
            writer.push(r)?;
        }
        writer.push_slow(&slow)?;
        let n = writer
            .finish(summary)
            .with_context(|| format!("finishing {}", path.display()))?;
        Ok((path, n))
    }

    /// Ends the `--record` capture with the session's summary; returns its path and record
    /// count. Other spools are just dropped (a temporary one is deleted).
    pub fn finish(self, summary: &Summary) -> anyhow::Result<Option<(PathBuf, u64)>> {
        let Spool::Disk(mut d) = self else {
            return Ok(None);
        };
        let Some(writer) = d.writer.take() else {
            return Ok(None);
        };
        if d.temporary {
            return Ok(None);
        }
        let n = writer
            .finish(summary)
            .with_context(|| format!("finishing capture {}", d.path.display()))?;
        Ok(Some((d.path.clone(), n)))
    }
}

/// Creates `dir/name.dtcap`, or `name-1.dtcap`, `name-2.dtcap`… if taken (never overwrites).
fn create_unique(dir: &Path, name: &str, meta: &Meta) -> anyhow::Result<(PathBuf, CaptureWriter)> {
    for n in 0..1000 {
        let file = if n == 0 {
            format!("{name}.dtcap")
        } else {
            format!("{name}-{n}.dtcap")
        };
        let path = dir.join(file);
        match CaptureWriter::create(&path, false, meta) {
            Ok(w) => return Ok((path, w)),
            Err(CaptureError::Exists { .. }) => {}
            Err(e) => return Err(e).with_context(|| format!("creating {}", path.display())),
        }
    }
    anyhow::bail!("no free file name for {name} in {}", dir.display())
}

/// `damon-trace-20261130-091744` (UTC), for captures saved with `s`.
pub fn snapshot_name(now: SystemTime) -> String {
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let t = secs % 86_400;
    format!(
        "damon-trace-{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        t / 3600,
        t / 60 % 60,
        t % 60
    )
}

/// Gregorian date of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::test_support::fixture;
    use std::time::Duration;

    #[test]
    fn snapshot_names_are_utc_timestamps() {
        let at = |s| UNIX_EPOCH + Duration::from_secs(s);
        assert_eq!(snapshot_name(at(0)), "damon-trace-19700101-000000");
        assert_eq!(
            snapshot_name(at(951_782_400)),
            "damon-trace-20000229-000000"
        );
        assert_eq!(
            snapshot_name(at(1_796_029_775)),
            "damon-trace-20261130-090935"
        );
        assert_eq!(
            snapshot_name(at(4_102_444_799)),
            "damon-trace-20991231-235959"
        );
    }

    #[test]
    fn saves_everything_so_far_without_overwriting() {
        let capture = fixture();
        let dir = tempfile::tempdir().expect("tempdir");
        let record_path = dir.path().join("rec.dtcap");
        let mut spool = Spool::record(&record_path, false, &capture.meta).expect("spool");
        assert_eq!(spool.recording(), Some(record_path.as_path()));
        spool.push(&capture.records[..100]).expect("push");
        let summary = capture.summary.clone().expect("summary");
        let now = UNIX_EPOCH + Duration::from_secs(1_796_029_775);
        let (first, n) = spool
            .save_snapshot(&capture.meta, &summary, dir.path(), now)
            .expect("save");
        assert_eq!(n, 100);
        assert!(first.ends_with("damon-trace-20261130-090935.dtcap"));
        spool.push(&capture.records[100..]).expect("push");
        let (second, n) = spool
            .save_snapshot(&capture.meta, &summary, dir.path(), now)
            .expect("save again");
        assert_eq!(n, 3612);
        assert!(second.ends_with("damon-trace-20261130-090935-1.dtcap"));
        let saved = read_file(&second).expect("a complete capture");
        assert_eq!(saved.records, capture.records);
        assert_eq!(saved.summary, Some(summary.clone()));
        let (path, n) = spool.finish(&summary).expect("finish").expect("recording");
        assert_eq!((path, n), (record_path.clone(), 3612));
        assert_eq!(read_file(&record_path).expect("record").records.len(), 3612);
        // `--record` captures and `s` snapshots are private to their owner.
        use std::os::unix::fs::PermissionsExt as _;
        for p in [&record_path, &first, &second] {
            let mode = std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", p.display());
        }
    }

    #[test]
    fn snapshots_keep_the_interval_markers() {
        let capture = read_file(Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/intervals-7.2.dtcap"
        )))
        .expect("interval capture");
        let dir = tempfile::tempdir().expect("tempdir");
        let mut spool =
            Spool::record(&dir.path().join("rec.dtcap"), false, &capture.meta).expect("spool");
        // As the ring delivers them: markers among the calls.
        let mut stream = capture.records.clone();
        stream.extend_from_slice(&capture.marks);
        spool.push(&stream).expect("push");
        let summary = capture.summary.clone().expect("summary");
        let now = UNIX_EPOCH + Duration::from_secs(1_796_029_775);
        let (path, n) = spool
            .save_snapshot(&capture.meta, &summary, dir.path(), now)
            .expect("save");
        assert_eq!(n, capture.records.len() as u64, "markers are not records");
        let saved = read_file(&path).expect("snapshot");
        assert_eq!(saved.records, capture.records);
        assert_eq!(saved.marks, capture.marks);
    }

    #[test]
    fn a_temporary_spool_leaves_nothing_behind() {
        let capture = fixture();
        let mut spool = Spool::temporary(&capture.meta).expect("spool");
        spool.push(&capture.records[..10]).expect("push");
        let Spool::Disk(d) = &spool else {
            panic!("on disk")
        };
        let path = d.path.clone();
        assert!(path.exists());
        assert_eq!(spool.recording(), None);
        let summary = capture.summary.clone().expect("summary");
        assert!(spool.finish(&summary).expect("finish").is_none());
        assert!(!path.exists());
    }
}
