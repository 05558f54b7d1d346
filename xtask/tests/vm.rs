//! Tests that boot a real Debian kernel in QEMU (TCG). Each is `#[ignore]`d so that a plain
//! `cargo test` stays fast and unprivileged; `cargo xtask test` runs them with
//! `cargo test -p xtask --test vm -- --ignored --test-threads=1`. Name new ones `vm_*` and
//! give each its own `out_dir`.
use std::{fs, time::Duration};

use xtask::{
    kernel::Kernel,
    vm::{self, VmOptions},
};

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_boots_and_returns_status_and_out() {
    let out = tempfile::tempdir().expect("temp dir");
    let mut opts = VmOptions::new(
        Kernel::Debian72,
        "damon-trace --version > /out/version.txt; echo guest-says-hi; exit 3",
    );
    opts.out_dir = out.path().join("out");
    opts.timeout = Duration::from_secs(240);
    let outcome = vm::run(&opts).expect("the guest runs");
    assert_eq!(outcome.status, 3, "console:\n{}", outcome.console);
    assert!(
        outcome.kernel_release.starts_with("7.2."),
        "{}",
        outcome.kernel_release
    );
    assert!(
        outcome.console.contains("guest-says-hi"),
        "console:\n{}",
        outcome.console
    );
    let version =
        fs::read_to_string(opts.out_dir.join("version.txt")).expect("/out/version.txt came back");
    assert!(
        version.starts_with("damon-trace"),
        "version.txt: {version:?}"
    );
}
