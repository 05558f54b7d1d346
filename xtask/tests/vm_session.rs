//! Kprobe sessions on the kernels that have them (Debian 6.12 and 7.2; 7.3 in `vm_kernels.rs`,
//! where 6.1's absence is checked too): `doctor`'s self-test loads the session program through
//! damon-trace's own loader (kfunc calls, `BPF_TRACE_KPROBE_SESSION`, a kprobe-multi link),
//! attaches it to getppid's kernel function and checks the kernel's promises against the
//! calls it made. One boot per kernel.
use std::time::Duration;

mod common;
use common::{assert_session_holds, json, run_script};
use xtask::kernel::Kernel;

const CMD: &str = "damon-trace doctor --json --functions lock_timer_base > /out/doctor.json";

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_6_12_and_7_2_kprobe_session_self_test_holds() {
    for kernel in [Kernel::Debian612, Kernel::Debian72] {
        let run = run_script(kernel.clone(), CMD, Duration::from_secs(240));
        let doctor = json(run.dir(), "doctor.json");
        assert_session_holds(&doctor);
        eprintln!("{kernel}: {}", doctor["session_test"]);
    }
}
