use crate::{
    capture::Clock,
    probe::calibrate::text::{describe_floor, format_ns, render_text},
    stats::calibration::{Calibration, CalibrationStatus, Floor, FloorDistribution, HeldOut},
};

#[test]
fn formats_corrected_values_with_their_sign() {
    assert_eq!(format_ns(-3.0), "-3");
    assert_eq!(format_ns(2.25), "2.2");
}

#[test]
fn renders_floors_held_out_and_failures() {
    let floor = FloorDistribution::from_durations(&(90..=110).collect::<Vec<u64>>());
    let held = HeldOut {
        function: "bpf_fentry_test2".into(),
        count: 21,
        median_ns: 102.0,
        corrected_median_ns: 2.0,
        uncertainty_ns: 9.0,
    };
    let cal = Calibration::for_tests(
        21,
        vec![
            Floor {
                held_out: Some(held),
                took_ns: 1_500_000_000,
                ..Floor::for_tests(floor)
            },
            Floor {
                attach: crate::trace::Attach::Kprobe,
                error: Some("kernel has no kprobes".into()),
                took_ns: 0,
                ..Floor::for_tests(None)
            },
        ],
    );
    let text = render_text(&cal, Clock::Wall);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].ends_with("held-out bpf_fentry_test2"), "{text}");
    assert!(
        lines[1].starts_with("fentry/stream       21       91      100      109"),
        "{text}"
    );
    assert!(lines[1].contains("+2.0 ± 9 ns (raw median 102)"), "{text}");
    assert!(lines[1].contains("1.5 s"), "{text}");
    assert_eq!(
        lines[2],
        "kprobe/stream  not measured: kernel has no kprobes"
    );
    let failed = Calibration::not_run(CalibrationStatus::Failed, "fentry/stream: EPERM".into());
    assert!(
        render_text(&failed, Clock::Wall)
            .starts_with("no probe floor measured: fentry/stream: EPERM")
    );
    // With floors, each failed one says why on its line, once.
    let mut both_failed = cal.clone();
    both_failed.status = CalibrationStatus::Failed;
    both_failed.floors.remove(0);
    let text = render_text(&both_failed, Clock::Wall);
    assert!(!text.contains("no probe floor measured"), "{text}");
    assert_eq!(text.matches("kernel has no kprobes").count(), 1, "{text}");
    // Under the instruction clock the same floors are instructions, and say so.
    let insn = render_text(&cal, Clock::Instructions);
    assert!(insn.starts_with("clock: instruction clock (insn"), "{insn}");
    assert!(insn.contains("+2.0 ± 9 insn (raw median 102)"), "{insn}");
    assert!(
        insn.lines()
            .last()
            .expect("legend")
            .starts_with("insn, timing"),
        "{insn}"
    );
    assert!(!insn.contains(" ns"), "{insn}");
}

#[test]
fn describes_a_floor() {
    let mut f = Floor {
        attach: crate::trace::Attach::Kprobe,
        untimed: 2,
        ..Floor::for_tests(FloorDistribution::from_durations(&[
            100, 110, 120, 130, 140,
        ]))
    };
    f.settle_uncertainty();
    assert_eq!(
        describe_floor(&f, "ns"),
        "kprobe/stream floor 120 ± 20 ns (5 calls of an empty function, 2 not timed)"
    );
    let failed = Floor {
        floor: None,
        error: Some("EPERM".into()),
        ..f
    };
    assert_eq!(
        describe_floor(&failed, "ns"),
        "kprobe/stream floor not measured: EPERM"
    );
}

/// A capture whose calibration beside the session never finished (the recorder was killed)
/// says so where a skipped or failed one does.
#[test]
fn a_pending_calibration_is_one_that_did_not_finish() {
    let pending = Calibration::not_run(CalibrationStatus::Pending, "beside".into());
    let note = crate::analysis::build::latencies_note(Some(&pending), "ns");
    assert!(
        note.contains("calibration did not finish before the recorder ended (beside)"),
        "{note}"
    );
}
