//! The one-minute soak that CI runs (the long one is `cargo xtask soak`): `record` for 60 s
//! under the migrate-hot scenario in the 7.2 guest while the guest samples the recorder's
//! VmRSS and open fds every 3 s. Checks (shared with `cargo xtask soak`, see
//! `xtask::soak::Analysis`): no sample after the first quarter exceeds 1.25 times the warm-up
//! peak plus 1 MiB (RssAnon, the heap: plus 256 KiB), the fd count never rises above its first sample, and every call is a
//! record, a counted drop or in flight, with every record the kernel emitted in the capture.
use xtask::{kernel::Kernel, soak};

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_soak_one_minute_memory_fds_and_accounting_stay_flat() {
    let out = tempfile::tempdir().expect("temp dir");
    let (analysis, release) =
        soak::run_in_guest(Kernel::Debian72, 60, 3, &out.path().join("out")).expect("soak runs");
    eprintln!("{}", analysis.to_markdown(&release));
    assert!(
        analysis.samples.len() >= 12,
        "expected a sample every 3 s for 60 s: {}",
        analysis.summary()
    );
    assert!(analysis.duration_s >= 59.0, "{}", analysis.summary());
    assert!(
        analysis.failures.is_empty(),
        "{}\n{}",
        analysis.summary(),
        analysis.to_markdown(&release)
    );
}
