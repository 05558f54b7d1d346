//! The .deb on a real Debian system: the 7.2 kernel booting Debian trixie with systemd as PID 1
//! (`damon_lab::sysimage`, built once and cached). The README's install section, as a user with
//! sudo types it: `sudo apt install ./damon-trace_…_amd64.deb` (offline: the package must need
//! nothing the image lacks), `sudo systemctl enable --now damon-trace-serve`, the metrics
//! endpoint; the unit's sandbox (capabilities, what its dynamic user can read); `stop` leaving
//! no BPF object, `restart`; `damon-trace doctor` without sudo, `sudo damon-trace live` in a
//! pty at 80x24 and 132x40, `man`, bash completion; `apt remove` and `apt purge` leaving
//! nothing behind.
mod common;

use std::{path::Path, sync::OnceLock, time::Duration};

use common::{FOUR, auto_attach, json, read};
use damon_lab::{
    kernel::Kernel,
    script::{STOP_SCENARIO, start_scenario},
    sysimage,
    vm::Screen,
};
use xtask::dist::Artifacts;

/// `cargo xtask dist`'s packages of the suite's static binary (`$DAMON_TRACE_BIN`, else a
/// fresh `build-static`), in a folder of this file's own.
fn artifacts() -> &'static Artifacts {
    static DIST: OnceLock<Artifacts> = OnceLock::new();
    DIST.get_or_init(|| common::packages("packages-systemd-test"))
}

/// CAP_PERFMON (38) and CAP_BPF (39): what the unit grants, as /proc/PID/status shows a set.
const UNIT_CAPS: u64 = (1 << 38) | (1 << 39);

/// Guest shell helpers.
/// - `snap NAME`: the kernel's BPF objects as root's `doctor --leftovers` (`$snap_bin`, a copy
///   of the installed binary) lists them (see vm_cleanup.rs),
///   retried until none of ours is listed (maps go after an RCU grace period), in NAME.json.
/// - `metrics FILE`: the endpoint scraped into FILE, retried for up to 2 minutes (serve binds
///   first, then attaches: slow under TCG).
/// - `as_alice CMD`: CMD in a login shell of the sudo user.
/// - `leftovers`: everything of the package still on the system, one line each.
const HELPERS: &str =
    damon_lab::script::without_header(include_str!("scripts/vm_systemd_helpers.sh"));

/// The user's bash with its completions loaded (`bash -ic`, as in a terminal): what TAB offers
/// after `damon-trace ` and after `damon-trace live --attach `.
const COMPLETE: &str =
    damon_lab::script::without_header(include_str!("scripts/vm_systemd_complete.sh"));

fn script(deb: &str) -> String {
    let scenario = start_scenario(90, "");
    format!(
        r#"{HELPERS}
cat > /run/complete.sh << 'EOF'
{COMPLETE}
EOF
chmod 644 /run/complete.sh
systemctl is-system-running --wait > /out/system-state.txt 2>&1
systemctl --failed --no-legend > /out/failed-units.txt
grep -h . /proc/sys/kernel/kptr_restrict /proc/sys/kernel/perf_event_paranoid \
    /proc/sys/kernel/unprivileged_bpf_disabled > /out/sysctls.txt
# Install as the README says, from the user's folder.
as_alice "cp /srv/{deb} . && sudo apt install -y ./{deb}" > /out/install.txt 2>&1
echo $? > /out/install.rc
dpkg -L damon-trace > /out/dpkg-files.txt
# snap's lister, kept outside the package so that it still lists after apt remove.
cp /usr/bin/damon-trace /run/snap-lister
snap_bin=/run/snap-lister
snap before
as_alice "sudo systemctl enable --now damon-trace-serve" > /out/enable.txt 2>&1
echo $? > /out/enable.rc
metrics /out/metrics-first.txt; echo $? > /out/metrics-first.rc
systemctl is-active damon-trace-serve > /out/active.txt
# DAMON at work, so its functions have calls too.
{scenario}sleep 10
metrics /out/metrics.txt; echo $? > /out/metrics.rc
{STOP_SCENARIO}
pid=$(systemctl show -p MainPID --value damon-trace-serve)
grep -E '^(Uid|Gid|Cap[A-Za-z]+):' /proc/$pid/status > /out/serve-status.txt
for set in CapEff CapPrm CapAmb CapBnd; do
    echo "$set $(capsh --decode=$(awk -v s=$set: '$1 == s {{ print $2 }}' /proc/$pid/status))"
done > /out/serve-caps.txt
systemctl show -p AmbientCapabilities -p CapabilityBoundingSet damon-trace-serve \
    > /out/unit-caps.txt
ps -o user= -p $pid > /out/serve-user.txt
snap during
# doctor inside the unit's own sandbox: every [Service] setting but ExecStart and Restart*.
set --
while IFS= read -r line; do set -- "$@" -p "$line"; done << EOF
$(sed -n '/^\[Service\]/,/^\[/p' /usr/lib/systemd/system/damon-trace-serve.service \
    | grep -E '^[A-Za-z]+=' | grep -vE '^(ExecStart|Restart|RestartSec|Type)=')
EOF
systemd-run --quiet --wait --pipe --collect "$@" /usr/bin/damon-trace doctor \
    > /out/doctor-unit.txt 2>&1
echo $? > /out/doctor-unit.rc
systemd-run --quiet --wait --pipe --collect "$@" /usr/bin/damon-trace doctor --json \
    > /out/doctor-unit.json 2> /out/doctor-unit.err
kptr=$(cat /proc/sys/kernel/kptr_restrict)
sysctl -q -w kernel.kptr_restrict=1
systemd-run --quiet --wait --pipe --collect "$@" /usr/bin/damon-trace doctor --json \
    > /out/doctor-unit-kptr.json 2> /out/doctor-unit-kptr.err
sysctl -q -w kernel.kptr_restrict=$kptr
as_alice "sudo systemctl stop damon-trace-serve" > /out/stop.txt 2>&1; echo $? > /out/stop.rc
systemctl is-active damon-trace-serve > /out/active-after-stop.txt
snap after-stop
as_alice "sudo systemctl restart damon-trace-serve" > /out/restart.txt 2>&1
echo $? > /out/restart.rc
metrics /out/metrics-restart.txt; echo $? > /out/metrics-restart.rc
systemctl is-active damon-trace-serve > /out/active-restart.txt
journalctl -b -u damon-trace-serve -o cat --no-pager > /out/journal.txt
# The user without and with sudo.
as_alice "damon-trace doctor" > /out/doctor-user.txt 2>&1; echo $? > /out/doctor-user.rc
as_alice "sudo damon-trace doctor --json" > /out/doctor-sudo.json 2> /out/doctor-sudo.err
echo $? > /out/doctor-sudo.rc
as_alice "MANWIDTH=100 man damon-trace-compare" > /out/man.txt 2> /out/man.err
echo $? > /out/man.rc
as_alice "bash -ic '. /run/complete.sh'" > /out/complete.txt 2> /out/complete.err
live_pty 24 80
live_pty 40 132
# Remove (serve still running: the package stops it), then purge.
as_alice "sudo apt remove -y damon-trace" > /out/remove.txt 2>&1; echo $? > /out/remove.rc
snap after-remove
leftovers > /out/after-remove.txt
as_alice "sudo apt purge -y damon-trace" > /out/purge.txt 2>&1; echo $? > /out/purge.rc
leftovers > /out/after-purge.txt
exit 0
"#
    )
}

/// One `live_pty ROWS COLS` of the script: `sudo damon-trace live` drew all four functions'
/// panels on the whole terminal, counted lock_timer_base's calls, quit on `q` with status 0,
/// and left the terminal as it found it (main screen, cursor shown, the same `stty -g`).
fn live_in_pty(dir: &std::path::Path, rows: u16, cols: u16) {
    let n = format!("live-{rows}x{cols}");
    let err = read(dir, &format!("{n}.err"));
    let raw = std::fs::read(dir.join(format!("{n}.typescript")))
        .unwrap_or_else(|e| panic!("{n}.typescript: {e}; script said: {err}"));
    // The last frame live drew: everything before it left the alternate screen.
    let leave = b"\x1b[?1049l";
    let end = raw
        .windows(leave.len())
        .rposition(|w| w == leave)
        .unwrap_or_else(|| panic!("{n}: live never left the alternate screen; script said: {err}"));
    let mut screen = Screen::new(rows, cols);
    screen.feed(&raw[..end]);
    let frame = screen.text();
    println!("--- {n}: the last frame ---\n{frame}");
    assert_eq!(
        rc(dir, &format!("{n}.live.rc")),
        0,
        "{n}: live's status\n{frame}"
    );
    assert_eq!(rc(dir, &format!("{n}.script-rc")), 0, "{n}: {err}");
    for f in FOUR {
        assert!(frame.contains(f), "{n}: no {f} panel\n{frame}");
    }
    assert!(
        common::called(&frame, "lock_timer_base"),
        "{n}: lock_timer_base counted no calls\n{frame}"
    );
    let lines: Vec<&str> = frame.split('\n').collect();
    assert_eq!(lines.len(), usize::from(rows), "{n}\n{frame}");
    assert!(
        !lines[usize::from(rows) - 1].trim().is_empty(),
        "{n}: live did not use the terminal's last row\n{frame}"
    );
    let widest = lines.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(
        widest > usize::from(cols) * 9 / 10,
        "{n}: live used {widest} of {cols} columns\n{frame}"
    );
    let mut after = Screen::new(rows, cols);
    after.feed(&raw);
    assert!(
        !after.alternate_screen() && !after.cursor_hidden(),
        "{n}: the terminal was left in full-screen mode"
    );
    assert_eq!(
        read(dir, &format!("{n}.stty-after")),
        read(dir, &format!("{n}.stty-before")),
        "{n}: terminal settings (raw mode) not restored"
    );
}

/// The value of `name`'s `damon_trace_call_duration_seconds_count` series in a scrape.
fn count(metrics: &str, name: &str) -> Option<u64> {
    let label = format!("function=\"{name}\"");
    metrics
        .lines()
        .filter(|l| l.starts_with("damon_trace_call_duration_seconds_count{") && l.contains(&label))
        .find_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
}

/// The BPF objects of a `snap` without systemd's cgroup programs (names starting `sd_`).
fn not_systemds(dir: &std::path::Path, name: &str) -> serde_json::Value {
    let mut objects = json(dir, &format!("{name}.json"))["bpf_objects"].clone();
    for kind in ["programs", "maps", "links"] {
        if let Some(list) = objects[kind].as_array_mut() {
            list.retain(|o| !o["name"].as_str().is_some_and(|n| n.starts_with("sd_")));
        }
    }
    objects
}

fn rc(dir: &std::path::Path, name: &str) -> i32 {
    read(dir, name)
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// How many of the BPF objects a `snap` listed are ours (programs, maps and links).
fn ours(dir: &std::path::Path, name: &str) -> usize {
    let doctor = json(dir, &format!("{name}.json"));
    let objects = &doctor["bpf_objects"];
    assert!(objects.is_object(), "{name}: no bpf_objects in {doctor}");
    ["programs", "maps", "links"]
        .iter()
        .map(|k| {
            objects[*k]
                .as_array()
                .unwrap_or_else(|| panic!("{name}: {k} in {objects}"))
                .iter()
                .filter(|o| o["ours"] == true)
                .count()
        })
        .sum()
}

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_systemd_deb_install_serve_unit_and_removal() {
    let a = artifacts();
    let deb_name = a
        .deb
        .file_name()
        .and_then(|n| n.to_str())
        .expect("deb name")
        .to_owned();
    let run = common::boot_ok(
        common::guest(
            Kernel::DEBIAN_7_2,
            script(&deb_name),
            Duration::from_secs(1200),
        )
        .systemd()
        .memory_mib(sysimage::GUEST_MIB)
        .binary(Some(a.binary.clone()))
        .files(vec![(a.deb.clone(), format!("/srv/{deb_name}"))]),
    );
    let dir = run.dir();
    println!(
        "systemd guest: ready {:.1} s after qemu started, whole run {:.1} s",
        run.boot_time.as_secs_f64(),
        run.total_time.as_secs_f64()
    );
    let show = |name: &str| println!("--- {name} ---\n{}", read(dir, name));
    for f in [
        "system-state.txt",
        "failed-units.txt",
        "sysctls.txt",
        "install.txt",
        "journal.txt",
        "serve-status.txt",
        "serve-caps.txt",
        "unit-caps.txt",
        "doctor-unit.txt",
        "doctor-user.txt",
        "complete.txt",
        "after-remove.txt",
        "after-purge.txt",
    ] {
        show(f);
    }
    let metrics = read(dir, "metrics.txt");
    let counts: Vec<&str> = metrics.lines().filter(|l| l.contains("_count{")).collect();
    println!("--- metrics.txt (counts) ---\n{}", counts.join("\n"));
    println!(
        "--- man.txt (head) ---\n{}",
        read(dir, "man.txt")
            .lines()
            .take(12)
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(
        read(dir, "system-state.txt").trim(),
        "running",
        "failed units: {}",
        read(dir, "failed-units.txt")
    );

    let paranoid = check_install_and_serve(dir);
    check_sandbox(dir, paranoid);
    check_objects_stop_and_restart(dir);
    check_user_tools(dir);
    // `sudo damon-trace live` in the user's terminal, at 80x24 and at 132x40.
    for (rows, cols) in [(24, 80), (40, 132)] {
        live_in_pty(dir, rows, cols);
    }

    check_removal(dir);
}

/// apt install, `enable --now`, the journal and the scrape; returns perf_event_paranoid.
fn check_install_and_serve(dir: &Path) -> i32 {
    let metrics = read(dir, "metrics.txt");
    // apt installs it offline: no dependency to fetch.
    let install = read(dir, "install.txt");
    assert_eq!(rc(dir, "install.rc"), 0, "{install}");
    assert!(install.contains("Setting up damon-trace"), "{install}");

    // enable --now: active, serving, with a clean start naming each attach method.
    assert_eq!(rc(dir, "enable.rc"), 0, "{}", read(dir, "enable.txt"));
    assert_eq!(rc(dir, "metrics-first.rc"), 0, "endpoint never answered");
    assert_eq!(read(dir, "active.txt").trim(), "active");
    let journal = read(dir, "journal.txt");
    assert!(
        journal.contains("serving metrics on http://127.0.0.1:9464/metrics"),
        "{journal}"
    );
    // --attach auto picks a kprobe session on 7.2 (the unit cannot read the preemption model in
    // debugfs, and preemptible is the safe guess then), kprobe for damon_hot_score (stream
    // mode: its arguments do not fit in a session's cookie). Debian's perf_event_paranoid=3 (a
    // Debian patch) refuses perf_event_open, hence kprobes, to anyone without CAP_SYS_ADMIN,
    // which the unit does not grant: serve then falls back to fentry/fexit for it and says so.
    // A kprobe session links through bpf(2) (a kprobe-multi link), which the setting does not
    // govern.
    let paranoid: i32 = read(dir, "sysctls.txt")
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .expect("perf_event_paranoid");
    for f in FOUR {
        let preferred = auto_attach(&Kernel::DEBIAN_7_2, f, "stream");
        let line = journal
            .lines()
            .find(|l| l.split_whitespace().next() == Some(f))
            .unwrap_or_else(|| panic!("journal does not say how {f} is attached:\n{journal}"));
        let attach = line.split_whitespace().nth(1);
        if paranoid >= 3 && preferred == "kprobe" {
            assert_eq!(attach, Some("fentry"), "{line}");
            assert!(
                line.contains("kprobe/kretprobe failed") && line.contains("fell back to fentry"),
                "{line}"
            );
            // … and says why, naming the setting.
            assert!(
                line.contains(&format!("kernel.perf_event_paranoid is {paranoid}")),
                "{line}"
            );
        } else {
            assert_eq!(attach, Some(preferred), "{line}");
        }
    }
    // damon-trace's own failures read `damon-trace: error: …`, Rust's `panicked at`.
    for bad in ["error:", "panicked", "warning:"] {
        assert!(!journal.contains(bad), "journal has {bad:?}:\n{journal}");
    }

    // Every traced function has its series; lock_timer_base and (under the scenario) DAMON's
    // hot-page scoring have calls.
    assert_eq!(rc(dir, "metrics.rc"), 0);
    for f in FOUR {
        let n = count(&metrics, f).unwrap_or_else(|| panic!("no {f} series in\n{metrics}"));
        println!("{f}: {n} calls");
    }
    assert!(count(&metrics, "lock_timer_base").unwrap() > 0, "{metrics}");
    assert!(count(&metrics, "damon_hot_score").unwrap() > 0, "{metrics}");

    paranoid
}

/// The serve process's capabilities and user; doctor under the unit's settings.
fn check_sandbox(dir: &Path, paranoid: i32) {
    // The serve process holds exactly what the unit grants, as a user that is not root.
    let status = read(dir, "serve-status.txt");
    let set = |key: &str| -> u64 {
        let line = status
            .lines()
            .find(|l| l.starts_with(&format!("{key}:")))
            .unwrap_or_else(|| panic!("{key} in {status}"));
        u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
    };
    for key in ["CapEff", "CapPrm", "CapAmb", "CapBnd"] {
        assert_eq!(set(key), UNIT_CAPS, "{key}: {status}");
    }
    let uid = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .expect("Uid");
    assert_ne!(uid, "0", "serve runs as root: {status}");
    let unit_caps = read(dir, "unit-caps.txt");
    for key in ["AmbientCapabilities", "CapabilityBoundingSet"] {
        let line = unit_caps.lines().find(|l| l.starts_with(key)).expect(key);
        let mut names: Vec<&str> = line.split_once('=').unwrap().1.split_whitespace().collect();
        names.sort_unstable();
        assert_eq!(names, ["cap_bpf", "cap_perfmon"], "{unit_caps}");
    }
    let caps = read(dir, "serve-caps.txt");
    for line in caps.lines() {
        assert!(line.ends_with("=cap_perfmon,cap_bpf"), "{caps}");
    }

    // doctor in the unit's sandbox: can trace, and says what it cannot see.
    let unit_doctor = json(dir, "doctor-unit.json");
    assert_eq!(
        unit_doctor["can_trace"],
        true,
        "doctor under the unit's settings:\n{}",
        read(dir, "doctor-unit.txt")
    );
    assert_eq!(rc(dir, "doctor-unit.rc"), 0);
    // What the unit's user cannot read is said, with what it costs: debugfs and tracefs are
    // root's (mode 0700), and kprobes are refused under perf_event_paranoid > 2.
    let unit_text = read(dir, "doctor-unit.txt");
    for said in [
        "model not readable (debugfs is readable by root only)",
        "tracefs is readable by root only",
    ] {
        assert!(
            unit_text.contains(said),
            "doctor under the unit does not say {said:?}:\n{unit_text}"
        );
    }
    if paranoid >= 3 {
        let refusal = format!("kernel.perf_event_paranoid is {paranoid}");
        assert_eq!(
            unit_text.matches(&refusal).count(),
            FOUR.len(),
            "each function's kprobe line names the setting:\n{unit_text}"
        );
        // … and the attach check draws the conclusion: auto ends up on fentry/fexit.
        assert!(
            unit_text.contains("--attach auto falls back to fentry/fexit here")
                && unit_text.contains("perf_event_paranoid above 2 refuses kprobe/kretprobe"),
            "{unit_text}"
        );
    }
    // kallsyms shows the unit's user names without addresses under kptr_restrict=1: enough.
    let kptr = json(dir, "doctor-unit-kptr.json");
    assert_eq!(kptr["can_trace"], true, "kptr_restrict=1: {kptr}");
}

/// The kernel's BPF objects before, during and after; stop and restart.
fn check_objects_stop_and_restart(dir: &Path) {
    // Our programs, maps and links while it runs; none after stop; restart serves again.
    assert!(ours(dir, "during") > 0, "serve's objects not listed");
    assert_eq!(ours(dir, "before"), 0);
    assert_eq!(rc(dir, "stop.rc"), 0, "{}", read(dir, "stop.txt"));
    assert_eq!(read(dir, "active-after-stop.txt").trim(), "inactive");
    assert_eq!(ours(dir, "after-stop"), 0, "objects left after stop");
    // Beside ours, only systemd's own cgroup programs (`sd_devices`, `sd_fw_*`, one set per
    // unit with such settings) may come and go: everything else is as before the install.
    assert_eq!(
        not_systemds(dir, "after-stop"),
        not_systemds(dir, "before"),
        "the kernel's BPF objects after stop differ from before install"
    );
    assert_eq!(rc(dir, "restart.rc"), 0, "{}", read(dir, "restart.txt"));
    assert_eq!(rc(dir, "metrics-restart.rc"), 0);
    assert_eq!(read(dir, "active-restart.txt").trim(), "active");
    assert!(count(&read(dir, "metrics-restart.txt"), "lock_timer_base").is_some());
}

/// What the user with sudo meets: doctor with and without sudo, man, bash completion.
fn check_user_tools(dir: &Path) {
    // Without sudo, doctor fails and says why (the rest it can still read, BTF included);
    // with sudo it can trace.
    let user = read(dir, "doctor-user.txt");
    for f in FOUR {
        let line = common::row(&user, &format!("  {f}"));
        assert!(line.join(" ").contains("btf yes"), "{f}: {user}");
    }
    assert_ne!(rc(dir, "doctor-user.rc"), 0, "{user}");
    assert!(
        user.contains("CAP_BPF") && user.contains("sudo"),
        "doctor without sudo does not say what is missing:\n{user}"
    );
    assert_eq!(
        rc(dir, "doctor-sudo.rc"),
        0,
        "{}",
        read(dir, "doctor-sudo.err")
    );
    assert_eq!(json(dir, "doctor-sudo.json")["can_trace"], true);

    // man renders the page; bash completes subcommands and --attach values.
    let man = read(dir, "man.txt");
    assert_eq!(rc(dir, "man.rc"), 0, "{}", read(dir, "man.err"));
    assert!(
        man.contains("damon-trace-compare") && man.contains("SYNOPSIS"),
        "{man}"
    );
    let complete = read(dir, "complete.txt");
    let section = |name: &str| -> Vec<&str> {
        let start = complete
            .find(&format!("--- {name}\n"))
            .unwrap_or_else(|| panic!("{name} in {complete}\n{}", read(dir, "complete.err")));
        complete[start..]
            .lines()
            .skip(1)
            .take_while(|l| !l.starts_with("--- "))
            .collect()
    };
    let subcommands = section("subcommands");
    for sub in [
        "doctor", "live", "record", "report", "compare", "export", "serve", "scenario",
    ] {
        assert!(subcommands.contains(&sub), "{sub} in {subcommands:?}");
    }
    let mut attach_values = section("attach");
    attach_values.sort_unstable();
    assert_eq!(
        attach_values,
        ["auto", "fentry", "fsession", "kprobe", "kprobe-session"],
        "{complete}"
    );
}

/// apt remove, then apt purge.
fn check_removal(dir: &Path) {
    // remove: the package's files, its unit, its process and objects gone; the enablement
    // link (configuration, as with every Debian package's units: dh_installsystemd's scripts
    // do the same) stays until purge, and systemd lists the unit it names as not found;
    // purge: nothing at all.
    assert_eq!(rc(dir, "remove.rc"), 0, "{}", read(dir, "remove.txt"));
    assert_eq!(ours(dir, "after-remove"), 0, "objects left after remove");
    let removed = read(dir, "after-remove.txt");
    for line in removed.lines() {
        assert!(
            line == "dpkg deinstall ok config-files"
                || (line.starts_with("unit ")
                    && line.contains("damon-trace-serve.service not-found inactive dead"))
                || line.ends_with("/multi-user.target.wants/damon-trace-serve.service")
                || line.starts_with("path /var/lib/systemd/deb-systemd-helper-enabled/"),
            "left after apt remove: {line}\n{removed}"
        );
    }
    assert_eq!(rc(dir, "purge.rc"), 0, "{}", read(dir, "purge.txt"));
    let purged = read(dir, "after-purge.txt");
    assert!(purged.trim().is_empty(), "left after apt purge:\n{purged}");
}
