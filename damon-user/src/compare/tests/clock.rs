//! Captures of the instruction clock: compared only with their own kind, and labelled in every
//! format.
use super::*;
use crate::capture::Clock;
use damon_common::attach::Attach;

fn under(clock: Clock, mut c: Capture) -> Capture {
    c.meta.clock = clock;
    c
}

/// A wall-clock capture against an instruction-clock one is refused, naming each capture's
/// clock and the remedy; so is a mix within one side.
#[test]
fn mixed_clocks_are_refused_with_cause_and_remedy() {
    let wall = run(200, 0);
    let insn = under(Clock::Instructions, run(200, 0));
    let err = build(
        &Inputs::pair(("before.dtcap", &wall), ("after.dtcap", &insn)),
        &opts(),
    )
    .expect_err("mixed clocks");
    for want in [
        "different clocks",
        "before.dtcap (wall)",
        "after.dtcap (instructions)",
        "under the same clock",
    ] {
        assert!(err.0.contains(want), "{want}: {}", err.0);
    }
    let side = Inputs {
        before: vec![("b1.dtcap", &insn), ("b2.dtcap", &wall)],
        after: vec![("a.dtcap", &insn)],
    };
    let err = build(&side, &opts()).expect_err("a side of mixed clocks");
    assert!(err.0.contains("b2.dtcap (wall)"), "{}", err.0);
}

/// Under the instruction clock every format names the clock and the unit, the verdict says
/// shorter (a path length), not faster; JSON states the clock. The wall clock's text is
/// unchanged: no clock line, `ns`.
#[test]
fn instruction_captures_are_labelled_in_every_format() {
    let b: Vec<Capture> = (0..3)
        .map(|i| under(Clock::Instructions, run(300, i)))
        .collect();
    let a: Vec<Capture> = (0..3)
        .map(|i| under(Clock::Instructions, run(300, i - 60)))
        .collect();
    let c = compare_runs(&b, &a);
    let t = timer(&c);
    assert!(t.significant, "{}", t.verdict);
    assert!(
        t.verdict.starts_with("after is shorter by") && t.verdict.contains(" insn "),
        "{}",
        t.verdict
    );
    let text = render::table(&c);
    assert!(text.contains("clock:  instruction clock (insn"), "{text}");
    assert!(
        text.contains("Range (insn)") && !text.contains("Range (ns)"),
        "{text}"
    );
    let md = render::markdown(&c);
    assert!(md.contains("- clock: instruction clock"), "{md}");
    assert!(
        md.contains("| Range (insn) |") && md.contains("| insn | before |"),
        "{md}"
    );
    let json = serde_json::to_value(&c).expect("json");
    assert_eq!(
        (json["clock"].as_str(), json["unit"].as_str()),
        (Some("instructions"), Some("insn"))
    );

    let w = compare_runs(&[run(300, 0), run(300, 1)], &[run(300, -60), run(300, -59)]);
    assert!(
        timer(&w).verdict.starts_with("after is faster by"),
        "{}",
        timer(&w).verdict
    );
    let text = render::table(&w);
    assert!(
        !text.contains("clock:") && text.contains("Range (ns)"),
        "{text}"
    );
    assert_eq!(serde_json::to_value(&w).expect("json")["clock"], "wall");
}

/// One path length: every call of a run `d` instructions (the after side of seed-000).
fn exact(d: u64) -> Capture {
    under(
        Clock::Instructions,
        capture(
            &[d; 300],
            AttachState::Traced(Attach::Fentry),
            AttachState::Traced(Attach::Fentry),
            "cpu",
        ),
    )
}

/// A side whose calls all take one value, and the other beyond it in every run: under the
/// instruction clock said as a difference in every run with its size, under the wall clock
/// left to Welch (whose one degree of freedom leaves it unresolved). A side whose calls vary
/// but whose medians agree by chance is not exact: Welch decides. An A/A of identical runs is
/// no difference, with nothing undefined in the text.
#[test]
fn a_difference_in_every_run_is_stated_under_the_instruction_clock() {
    let insn = |shift| under(Clock::Instructions, run(300, shift));
    let c = compare_runs(&[insn(49), insn(69)], &[exact(1500), exact(1500)]);
    let t = timer(&c);
    assert!(t.significant, "{}", t.verdict);
    assert!(
        t.verdict
            .starts_with("after is shorter in every run: by 60–80 insn at the median"),
        "{}",
        t.verdict
    );
    assert!(
        c.method.verdict.contains("difference in every run"),
        "{}",
        c.method.verdict
    );
    // Equal medians from varying calls (p50 ≠ p99): not exact, so Welch's df 1 decides.
    let c = compare_runs(&[insn(60), insn(80)], &[insn(0), insn(0)]);
    assert!(
        !timer(&c).verdict.contains("every run"),
        "{}",
        timer(&c).verdict
    );
    let wall = compare_runs(&[run(300, 60), run(300, 80)], &[run(300, 0), run(300, 0)]);
    assert!(
        !wall.method.verdict.contains("every run"),
        "{}",
        wall.method.verdict
    );
    let w = timer(&wall);
    assert!(
        !w.significant && !w.verdict.contains("every run"),
        "{}",
        w.verdict
    );

    let aa = compare_runs(&[exact(568), exact(568)], &[exact(568), exact(568)]);
    let t = timer(&aa);
    assert!(!t.significant, "{}", t.verdict);
    assert!(
        t.verdict.starts_with("no significant difference"),
        "{}",
        t.verdict
    );
    let text = render::table(&aa);
    assert!(
        !text.contains("NaN") && !text.contains("inf") && !text.contains(" ns"),
        "{text}"
    );
    assert!(
        text.contains("no run-to-run variation on either side"),
        "{text}"
    );
}

/// seed-001 under the instruction clock: both sides exact, one instruction apart in every run.
/// The difference is stated in every run; the Welch line states no interval or p-value, which
/// no variation could support (not `p=0`).
#[test]
fn two_exact_sides_one_instruction_apart() {
    let c = compare_runs(
        &[exact(528), exact(528), exact(528)],
        &[exact(527), exact(527), exact(527)],
    );
    let t = timer(&c);
    assert!(
        t.verdict
            .starts_with("after is shorter in every run: by 1 insn"),
        "{}",
        t.verdict
    );
    let text = render::table(&c);
    let welch = text
        .lines()
        .find(|l| l.starts_with("Welch's t"))
        .expect("the Welch line");
    assert!(
        welch.contains("-1 insn, no run-to-run variation") && !welch.contains("p="),
        "{welch}"
    );
    assert!(!text.contains("NaN") && !text.contains("inf"), "{text}");
}
