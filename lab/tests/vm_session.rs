//! Sessions on Debian 6.12 and 7.2 (7.3 and 6.1 in `vm_kernels.rs`): `doctor`'s self-tests load
//! the session programs through damon-trace's own loader (kfunc calls,
//! `BPF_TRACE_KPROBE_SESSION` with a kprobe-multi link, `BPF_TRACE_FSESSION` with a tracing
//! link), attach them to getppid's kernel function and check the kernel's promises against the
//! calls they made. 6.12 has kprobe sessions but no fsession; 7.2 has both. One boot per
//! kernel.
use std::time::Duration;

mod common;
use common::{assert_session_holds, json, run_script};
use damon_lab::kernel::Kernel;

const CMD: &str = "damon-trace doctor --json --functions lock_timer_base > /out/doctor.json";

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_6_12_and_7_2_session_self_tests_hold() {
    for kernel in [Kernel::DEBIAN_6_12, Kernel::DEBIAN_7_2] {
        let run = run_script(kernel.clone(), CMD, Duration::from_secs(240));
        let doctor = json(run.dir(), "doctor.json");
        assert_session_holds(&doctor, "session");
        if kernel.has(|p| p.has_fsession) {
            assert_session_holds(&doctor, "fsession");
        } else {
            common::assert_session_absent(&doctor, "fsession", "this kernel has no fsession");
        }
        eprintln!(
            "{kernel}: {} {}",
            doctor["session_test"], doctor["fsession_test"]
        );
    }
}
