//! The harness's other Debian kernels boot, ship /out back and are what the design says:
//! bookworm's 6.1 (virtio drivers as modules that /init loads; no DAMON; of the four functions
//! only `lock_timer_base`) and trixie-backports' 7.3 (all four functions, DAMON). One boot each.
use std::{fs, time::Duration};

mod common;
use common::{FOUR, function, json, run_script};
use damon_lab::kernel::{self, Kernel};

/// Doctor (its status: 0 when at least one of the selected functions can be traced), the
/// release and the loaded modules, all under /out.
const CMD: &str = "damon-trace doctor --json > /out/doctor.json; echo $? > /out/doctor.status
uname -r > /out/uname.txt
cat /proc/modules > /out/modules.txt";

/// Boots `kernel`, runs [`CMD`] and checks what every kernel must show: the release the
/// harness resolved (starting with `prefix`) in `uname -r` and in doctor's report, and
/// doctor's status (0: something is traceable). Returns doctor's report and /proc/modules.
fn boot(kernel: Kernel, prefix: &str) -> (serde_json::Value, String) {
    let expected = kernel::fetch(&kernel).expect("the kernel resolves").release;
    assert!(expected.starts_with(prefix), "{kernel} resolved {expected}");
    let run = run_script(kernel, CMD, Duration::from_secs(240));
    // The suite's guests boot the kernel's ELF image (6.1: unpacked from xz, 7.3: zstd).
    assert!(run.direct_boot, "{expected} was booted from its bzImage");
    let dir = run.dir();
    let read = |n: &str| fs::read_to_string(dir.join(n)).unwrap_or_else(|e| panic!("{n}: {e}"));
    assert_eq!(read("uname.txt").trim(), expected);
    let doctor = json(dir, "doctor.json");
    assert_eq!(doctor["kernel_release"], expected.as_str(), "{doctor}");
    assert_eq!(doctor["can_trace"], true, "{doctor}");
    assert_eq!(read("doctor.status").trim(), "0", "{doctor}");
    (doctor, read("modules.txt"))
}

fn check<'a>(doctor: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    common::entry(&doctor["checks"], "name", name)
}

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_6_1_boots_with_virtio_modules_and_has_only_lock_timer_base() {
    let (doctor, modules) = boot(Kernel::DEBIAN_6_1, "6.1.");
    // /out came back through virtio_console, which this kernel has as a module.
    for m in ["virtio_pci", "virtio_console"] {
        assert!(
            modules
                .lines()
                .any(|l| l.split_whitespace().next() == Some(m)),
            "{m} not loaded:\n{modules}"
        );
    }
    let ltb = function(&doctor, "lock_timer_base");
    assert_eq!(ltb["kallsyms"], "present", "{ltb}");
    assert_eq!(ltb["btf"], true, "{ltb}");
    assert_eq!(ltb["fentry"], "ok", "{ltb}");
    assert_eq!(ltb["kprobe"], "ok", "{ltb}");
    assert_eq!(ltb["traceable"], true, "{ltb}");
    for name in FOUR.iter().filter(|n| **n != "lock_timer_base") {
        let f = function(&doctor, name);
        assert_eq!(f["kallsyms"], "absent", "{f}");
        assert_eq!(f["traceable"], false, "{f}");
    }
    let damon = check(&doctor, "damon");
    assert_eq!(damon["level"], "warn", "{damon}");
    common::assert_says(damon, "found", "no /sys/kernel/mm/damon");
    common::assert_says(&doctor, "verdict", "1 of 4 functions");
    // No sessions before 6.10: said, not a warning, and no self-test ran.
    common::assert_session_absent(
        &doctor,
        "session",
        "kprobe sessions need Linux 6.10 or later",
    );
    common::assert_session_absent(
        &doctor,
        "fsession",
        "kprobe sessions need Linux 6.10 or later",
    );
}

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_3_boots_and_has_all_four_functions_and_damon() {
    let (doctor, modules) = boot(Kernel::DEBIAN_7_3, "7.3.");
    // The virtio drivers are built in: /init loaded nothing.
    assert!(
        !modules.lines().any(|l| l.starts_with("virtio")),
        "{modules}"
    );
    for name in FOUR {
        let f = function(&doctor, name);
        assert_eq!(f["kallsyms"], "present", "{f}");
        assert_eq!(f["fentry"], "ok", "{f}");
        assert_eq!(f["kprobe"], "ok", "{f}");
        assert_eq!(f["traceable"], true, "{f}");
    }
    let damon = check(&doctor, "damon");
    assert_eq!(damon["level"], "ok", "{damon}");
    common::assert_says(&doctor, "verdict", "4 of 4 functions");
    common::assert_session_holds(&doctor, "session");
    common::assert_session_holds(&doctor, "fsession");
}
