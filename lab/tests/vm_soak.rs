//! The one-minute soak that CI runs (the long one is `cargo xtask soak`): `record` for 60 s (or
//! until 45 s after the calibration beside it ended, if later) under the migrate-hot scenario in the 7.2 guest while the guest samples the recorder's
//! VmRSS and open fds on a 3 s schedule. Checks (shared with `cargo xtask soak`, see
//! `damon_lab::soak::Analysis`): after the warm-up (the first quarter, or the calibration beside
//! the session if it runs longer) no sample exceeds 1.25 times the warm-up's peak outside the
//! calibration plus 1 MiB (RssAnon, the heap: plus 256 KiB, and at most 16 MiB), the heap's
//! slope stays under its bound, the fd count never rises above the first steady sample's, and
//! every call is a record, a counted drop or in flight, with every record the kernel emitted in
//! the capture. Here also: the samples cover the run, with enough of them after warm-up for the
//! slope fit.
use damon_lab::{kernel::Kernel, soak};

const SECONDS: u64 = 60;

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_soak_one_minute_memory_fds_and_accounting_stay_flat() {
    let out = tempfile::tempdir().expect("temp dir");
    let (analysis, release) =
        soak::run_in_guest(Kernel::DEBIAN_7_2, SECONDS, 3, &out.path().join("out"))
            .expect("soak runs");
    eprintln!("{}", analysis.to_markdown(&release));
    // What the checks need, not a sample count: the guest samples on a fixed schedule (slots a
    // busy emulated guest misses are skipped), so a slower host may give fewer samples but
    // they still span the run. Watched until its last 10 s (the slots run to 57 s), so a
    // recorder that died or a sampler that stopped early fails here ...
    let last_t = analysis.samples.last().map_or(0.0, |s| s.t_s);
    assert!(
        last_t >= (SECONDS - 10) as f64,
        "the samples end at {last_t:.0} s of {SECONDS}: {}",
        analysis.summary()
    );
    // ... and the slope is fitted over the steady state: at least 6 samples after warm-up (3
    // is the fit's minimum) spanning at least half the run, so that a step of a few tens of
    // KiB as buffers grow is not read as a leak and a leak has time to show.
    let late = analysis.after_warmup();
    let span = late.last().map_or(0.0, |s| s.t_s) - late.first().map_or(0.0, |s| s.t_s);
    assert!(
        late.len() >= 6 && span >= (SECONDS / 2) as f64,
        "{} samples after warm-up spanning {span:.0} s (need 6 over {} s): {}",
        late.len(),
        SECONDS / 2,
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
