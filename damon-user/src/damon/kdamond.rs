//! Starting, stopping and querying the scenario's kdamond (index 0) through sysfs.
use std::{
    path::Path,
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

use super::{
    snapshot::{SchemeStats, read_stats},
    sysfs::{SysfsRoot, is_busy, read_attr, read_num, write_attr, write_error, write_raw},
    writes::SysfsWrite,
};

pub const KDAMOND_STATE: &str = "0/state";
const SCHEME_STATS: &str = "0/contexts/0/schemes/0/stats";
/// How long to wait for a kdamond to stop, or for sysfs to stop reporting it busy.
const SETTLE: Duration = Duration::from_secs(5);
/// After DAMON_STAT is switched off its kdamond may take a moment to release DAMON.
const START_RETRY: Duration = Duration::from_secs(3);

/// Performs the writes (relative to `kdamonds`) in order; the first failure stops with the
/// file and value named.
pub fn apply(kdamonds: &Path, writes: &[SysfsWrite]) -> Result<()> {
    for wr in writes {
        write_attr(&kdamonds.join(&wr.rel), &wr.value)?;
    }
    Ok(())
}

/// `state=on`, retrying briefly on EBUSY, then explaining who holds DAMON.
pub fn turn_on(kd: &Path) -> Result<()> {
    let state = kd.join(KDAMOND_STATE);
    let deadline = Instant::now() + START_RETRY;
    loop {
        match write_raw(&state, "on") {
            Ok(()) => break,
            Err(e) if is_busy(&e) && Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(100));
            }
            Err(e) if is_busy(&e) => bail!(
                "DAMON refused to start the kdamond (EBUSY): a kdamond started exclusively is \
                 still running. DAMON_STAT, DAMON_RECLAIM and DAMON_LRU_SORT do that (check \
                 `grep . /sys/module/damon_*/parameters/enabled` and write N to the enabled one), \
                 or another program drives DAMON; stop it and retry"
            ),
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "writing `on` to {}: DAMON rejected the configuration (see dmesg)",
                        state.display()
                    )
                });
            }
        }
    }
    Ok(())
}

/// Asks the kdamond to publish its scheme counters, then reads them.
pub fn refresh_stats(root: &SysfsRoot) -> Result<SchemeStats> {
    let kd = root.kdamonds();
    retry_busy(&kd.join(KDAMOND_STATE), "update_schemes_stats")?;
    read_stats(&kd.join(SCHEME_STATS))
}

/// Turns every running kdamond off and waits until each reads `off`.
pub fn stop_all(kdamonds: &Path) -> Result<()> {
    let nr: u32 = read_num(&kdamonds.join("nr_kdamonds"))?;
    for i in 0..nr {
        let state = kdamonds.join(i.to_string()).join("state");
        if read_attr(&state)? == "off" {
            continue;
        }
        // A kdamond whose target exited stops by itself between the read and the write; the
        // write then fails, which is fine as long as the state ends up `off`.
        let write = write_attr(&state, "off");
        let deadline = Instant::now() + SETTLE;
        while read_attr(&state)? != "off" {
            if Instant::now() > deadline {
                write?;
                bail!("kdamond {i} did not stop within {SETTLE:?}");
            }
            thread::sleep(Duration::from_millis(50));
        }
    }
    Ok(())
}

/// Writes, retrying while the kernel still reports a stopping kdamond as busy.
pub fn retry_busy(path: &Path, value: &str) -> Result<()> {
    let deadline = Instant::now() + SETTLE;
    loop {
        match write_raw(path, value) {
            Ok(()) => return Ok(()),
            Err(e) if is_busy(&e) && Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(write_error(e, path, value)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::super::writes::skeleton;
    use super::*;

    #[test]
    fn apply_writes_into_an_existing_tree_and_stops_at_missing_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kd = dir.path();
        fs::write(kd.join("nr_kdamonds"), "0\n").expect("seed");
        fs::create_dir_all(kd.join("0/contexts")).expect("mkdir");
        fs::write(kd.join("0/contexts/nr_contexts"), "0\n").expect("seed");
        let err = apply(kd, &skeleton()).expect_err("schemes dir is absent");
        assert!(format!("{err:#}").contains("nr_schemes"));
        assert_eq!(
            fs::read_to_string(kd.join("nr_kdamonds")).expect("read"),
            "1"
        );
        assert_eq!(
            fs::read_to_string(kd.join("0/contexts/nr_contexts")).expect("read"),
            "1"
        );
    }

    #[test]
    fn stop_all_turns_running_kdamonds_off_and_leaves_stopped_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kd = dir.path();
        fs::write(kd.join("nr_kdamonds"), "2\n").expect("seed");
        for (i, state) in [(0, "on"), (1, "off")] {
            fs::create_dir(kd.join(i.to_string())).expect("mkdir");
            fs::write(kd.join(format!("{i}/state")), format!("{state}\n")).expect("seed");
        }
        // A stopped kdamond's `state` must not be written (the kernel rejects `off` twice).
        fs::set_permissions(
            kd.join("1/state"),
            std::os::unix::fs::PermissionsExt::from_mode(0o444),
        )
        .expect("chmod");
        stop_all(kd).expect("stop");
        assert_eq!(read_attr(&kd.join("0/state")).expect("read"), "off");
        retry_busy(&kd.join("nr_kdamonds"), "0").expect("write");
        assert_eq!(read_attr(&kd.join("nr_kdamonds")).expect("read"), "0");
        assert!(retry_busy(&kd.join("missing"), "0").is_err());
    }
}
