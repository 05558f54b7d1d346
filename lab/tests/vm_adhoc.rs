//! Ad-hoc use as with funclatency/bpftrace, in real guests: `--func` globs expand to the
//! functions the kernel itself lists as traceable, and a glob too wide or matching nothing is
//! refused (exit 2); `--tgid` and `--cgroup` time only the selected tasks' calls, the others
//! being counted as filtered in the kernel.
//!
//! The ground truth is not the tool's: the guest's own `available_filter_functions` for the
//! globs; for the filters, a `dd bs=1 count=3000` of /dev/zero into /dev/null with its stderr
//! closed (a write to a closed descriptor fails before `vfs_write`), so its process calls
//! `vfs_write` exactly 3000 times, while another dd writes 2000 bytes in another process at
//! the same time.
use std::time::Duration;

mod common;
use common::{entry, json, read, u};
use damon_lab::kernel::Kernel;

/// Writes of the selected process (one per byte).
const MINE: u64 = 3000;
/// Writes of the other process, which the filter must leave out.
const OTHER: u64 = 2000;

/// The traceable functions matching an extended regex, as the kernel lists them (ftrace's
/// list minus the kprobe blacklist), one per line, sorted: `$1` the regex, `$2` the file.
const TRACEABLE: &str =
    damon_lab::script::without_header(include_str!("scripts/vm_adhoc_traceable.sh"));

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_adhoc_func_globs_expand_to_the_kernels_traceable_functions() {
    let script = format!(
        "{TRACEABLE}
ls /sys/kernel/tracing/available_filter_functions > /dev/null
traceable '^vfs_rea.$' rea.expected
traceable '^vfs_read' read.expected
traceable '^vfs_' vfs.expected
damon-trace record --func 'vfs_rea?' --no-calibrate --duration 2s -o /out/rea.dtcap \
  2> /out/rea.err; echo $? > /out/rea.status
damon-trace record --func 'vfs_read*' --no-calibrate --duration 2s -o /out/read.dtcap \
  2> /out/read.err; echo $? > /out/read.status
damon-trace export /out/read.dtcap --format json -o /out/read.json
damon-trace record --func 'vfs_*' --no-calibrate --duration 2s -o /out/wide.dtcap \
  2> /out/wide.err; echo $? > /out/wide.status
damon-trace record --func 'vfs_raed*' --no-calibrate --duration 2s -o /out/none.dtcap \
  2> /out/none.err; echo $? > /out/none.status
"
    );
    let run = common::run_script(Kernel::DEBIAN_7_2, script, Duration::from_secs(400));
    let dir = run.dir();
    let lines =
        |name: &str| -> Vec<String> { read(dir, name).lines().map(str::to_owned).collect() };
    // `vfs_rea?`: exactly the kernel's 8-character vfs_rea* names (vfs_read).
    let rea = lines("rea.expected");
    assert_eq!(rea, ["vfs_read"], "the guest's list");
    assert_eq!(
        read(dir, "rea.status").trim(),
        "0",
        "{}",
        read(dir, "rea.err")
    );
    let err = read(dir, "rea.err");
    assert!(
        err.contains("--func 'vfs_rea?' matches 1 traceable function: vfs_read"),
        "{err}"
    );
    // `vfs_read*`: every traceable vfs_read* function of the kernel, each traced.
    let expected = lines("read.expected");
    assert!(expected.len() >= 2, "vfs_read and more: {expected:?}");
    let err = read(dir, "read.err");
    assert_eq!(read(dir, "read.status").trim(), "0", "{err}");
    let stated = format!(
        "--func 'vfs_read*' matches {} traceable functions: {}",
        expected.len(),
        expected.join(", ")
    );
    assert!(err.contains(&stated), "expected `{stated}` in:\n{err}");
    let export = json(dir, "read.json");
    let traced: Vec<&str> = export["meta"]["functions"]
        .as_array()
        .expect("functions")
        .iter()
        .map(|f| f["name"].as_str().expect("name"))
        .collect();
    assert_eq!(traced, expected, "the capture's functions");
    // `vfs_*`: more than the 11 slots; refused as a usage error with the count and names.
    let wide = lines("vfs.expected");
    assert!(wide.len() > 11, "{wide:?}");
    let err = read(dir, "wide.err");
    assert_eq!(read(dir, "wide.status").trim(), "2", "{err}");
    let says = format!(
        "--func 'vfs_*' matches {} traceable functions, at most 11 can be traced: {}, {},",
        wide.len(),
        wide[0],
        wide[1]
    );
    assert!(
        err.contains(&says) && err.contains("narrow the pattern"),
        "{says}\n{err}"
    );
    // A typo: nothing matches; the closest names are offered.
    let err = read(dir, "none.err");
    assert_eq!(read(dir, "none.status").trim(), "2", "{err}");
    assert!(
        err.contains("--func 'vfs_raed*' matches no traceable function; did you mean vfs_"),
        "{err}"
    );
    for f in ["read.err", "wide.err", "none.err"] {
        eprintln!("--- {f}\n{}", read(dir, f));
    }
}

/// Guest shell: `start_mine` starts the selected workload paused (its pid in $mine; `$1` runs
/// in it first), `trace` records vfs_write and vfs_read with `$1`'s filter options while both
/// workloads run, then exports the capture and its report as /out/$name.{json,report.json}.
const FILTER_RUN: &str =
    damon_lab::script::without_header(include_str!("scripts/vm_adhoc_filter_run.sh"));

/// Checks one filtered run: vfs_write has exactly the selected process's [`MINE`] records,
/// all its own; the other process's writes are counted as filtered; no filtered call left a
/// stamp (in flight) or an orphan exit; the identity holds; the report says what was left out.
fn check_filtered(dir: &std::path::Path, name: &str, filter: &str) {
    let err = read(dir, &format!("{name}.err"));
    assert!(!err.contains("unaccounted"), "{name}: {err}");
    assert!(err.contains(filter), "{name}: the filter is stated: {err}");
    assert_eq!(read(dir, &format!("{name}.mine.status")).trim(), "0");
    let other = read(dir, &format!("{name}.other"));
    assert!(other.contains(&format!("{OTHER}+0 records out")), "{other}");
    let mine: u64 = read(dir, &format!("{name}.pid"))
        .trim()
        .parse()
        .expect("pid");
    let export = json(dir, &format!("{name}.json"));
    let records = export["records"].as_array().expect("records");
    for f in ["vfs_write", "vfs_read"] {
        let id = u(entry(&export["meta"]["functions"], "name", f), "id");
        let c = &export["summary"]["counters"][id.to_string()];
        let acc = entry(&export["accounting"], "function", f);
        let of = |pid: Option<u64>| {
            records
                .iter()
                .filter(|r| r["function"] == f && pid.is_none_or(|p| u(r, "pid") == p))
                .count() as u64
        };
        assert_eq!(
            of(None),
            of(Some(mine)),
            "{name} {f}: only {mine}'s records"
        );
        let (calls, kept) = (u(acc, "calls"), u(acc, "records"));
        assert_eq!(
            calls,
            kept + u(acc, "dropped") + u(acc, "in_flight"),
            "{name} {f}: identity {acc}"
        );
        assert_eq!(u(acc, "dropped"), 0, "{name} {f}: {acc}");
        assert_eq!(u(acc, "in_flight"), 0, "{name} {f}: no stamp left: {acc}");
        assert_eq!(u(c, "orphan_exits"), 0, "{name} {f}: filtered exits: {c}");
        let filtered = c["filtered"].as_u64().unwrap_or(0);
        if f == "vfs_write" {
            assert_eq!(of(None), MINE, "{name}: exactly the selected dd's writes");
            assert_eq!(calls, MINE, "{name}: calls are the selected task's");
            assert!(
                filtered >= OTHER,
                "{name}: {filtered} filtered < {OTHER}: {c}"
            );
        } else {
            assert!(of(None) >= MINE, "{name} vfs_read: {}", of(None));
        }
        let report = json(dir, &format!("{name}.report.json"));
        let rf = common::function(&report, f);
        assert_eq!(u(rf, "filtered"), filtered, "{name} {f}: report {rf}");
        eprintln!(
            "{name} {f}: {calls} calls ({} of pid {mine}), {filtered} filtered",
            of(None)
        );
    }
    let text = read(dir, &format!("{name}.report.txt"));
    eprintln!("--- {name}.err\n{err}--- {name}.report.txt\n{text}");
    assert!(
        text.contains("calls of other tasks were filtered out in the kernel"),
        "{name}:\n{text}"
    );
}

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_adhoc_tgid_and_cgroup_time_only_the_selected_tasks() {
    let script = format!(
        "set -e\n{}{}
start_mine true
trace tgid --tgid $mine
grep -q ' /sys/fs/cgroup cgroup2 ' /proc/mounts || mount -t cgroup2 none /sys/fs/cgroup
mkdir -p /sys/fs/cgroup/adhoc
start_mine 'echo $$ > /sys/fs/cgroup/adhoc/cgroup.procs'
until grep -qx $mine /sys/fs/cgroup/adhoc/cgroup.procs; do sleep 0.1; done
trace cgroup --cgroup adhoc
",
        common::RECORDER_HELPERS,
        FILTER_RUN
            .replace("MINE", &MINE.to_string())
            .replace("OTHER", &OTHER.to_string())
    );
    let run = common::run_script(Kernel::DEBIAN_7_2, script, Duration::from_secs(600));
    let dir = run.dir();
    check_filtered(dir, "tgid", "--tgid");
    check_filtered(dir, "cgroup", "--cgroup /sys/fs/cgroup/adhoc");
}
