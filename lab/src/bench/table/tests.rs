//! The table's statistics and rendering, on runs with known answers.
use super::*;

fn run(round: u32, config: Config, ns: f64, traced: Option<u64>) -> Run {
    Run {
        round,
        config,
        ns_per_call: ns,
        traced,
    }
}

#[test]
fn medians_pair_each_round_with_its_own_untraced_run() {
    let mut runs = Vec::new();
    for (round, base) in [(1, 100.0), (2, 110.0), (3, 90.0)] {
        runs.push(run(round, Config::Untraced, base, None));
        runs.push(run(round, Config::Bpftrace, base + 200.0, Some(1000)));
        runs.push(run(round, Config::StreamFentry, base + 100.0, Some(1000)));
        runs.push(run(round, Config::KernelFentry, base + 100.0, Some(1000)));
    }
    let rows = rows(&runs, 1000).unwrap();
    let get = |c| rows.iter().find(|r| r.config == c).unwrap();
    assert_eq!(get(Config::Untraced).median_ns, 100.0);
    assert_eq!(get(Config::Untraced).added_ns, 0.0);
    assert_eq!(get(Config::Bpftrace).added_ns, 200.0);
    assert_eq!(get(Config::Bpftrace).vs_bpftrace, Some(1.0));
    let s = get(Config::StreamFentry);
    assert_eq!(s.added_ns, 100.0);
    assert_eq!(s.vs_bpftrace, Some(0.5));
    assert_eq!(s.target_met, Some(true));
    assert!((s.ratio_untraced - 2.0).abs() < 1e-9);
    // 0.5 > 0.4: kernel mode misses its target.
    assert_eq!(get(Config::KernelFentry).target_met, Some(false));
    assert!(!rows.iter().any(|r| r.config == Config::StreamKprobe));
    let md = markdown(&rows, "ns");
    assert!(md.contains("| damon-trace --mode stream --attach fentry (reader paused) | 200.0 | 100.0 | 2.00 | 0.50 [0.50, 0.50] | ≤ 0.7 ✓ met | 1000 |"), "{md}");
    assert!(md.contains("≤ 0.4 ✗ not met"), "{md}");
}

#[test]
fn a_tracer_that_missed_calls_cannot_meet_its_target() {
    let runs = [
        run(1, Config::Untraced, 100.0, None),
        run(1, Config::Bpftrace, 300.0, Some(1000)),
        run(1, Config::StreamFentry, 101.0, Some(3)),
    ];
    let rows = rows(&runs, 1000).unwrap();
    let s = &rows[2];
    assert!(!s.all_traced);
    assert_eq!(s.target_met, Some(false));
    assert!(markdown(&rows, "ns").contains("3 (short!)"));
    // Under the instruction clock the header counts instructions.
    let insn = markdown(&rows, "insn");
    assert!(
        insn.starts_with("| configuration | insn/call (median) | added insn/call (median) |"),
        "{insn}"
    );
    assert!(super::rows(&runs[1..], 1000).is_err());
}

#[test]
fn noisy_rounds_give_an_interval_and_a_verdict_only_when_it_is_clear() {
    // bpftrace adds 200 ns, stream/fentry about 100 and kernel mode about 70 (±20 per
    // round); the untraced base drifts between rounds, which the pairing cancels.
    let mut runs = Vec::new();
    for (round, base, jitter) in [
        (1, 600.0, 20.0),
        (2, 900.0, -20.0),
        (3, 700.0, 10.0),
        (4, 500.0, -10.0),
    ] {
        runs.push(run(round, Config::Untraced, base, None));
        runs.push(run(round, Config::Bpftrace, base + 200.0, Some(1000)));
        runs.push(run(
            round,
            Config::StreamFentry,
            base + 100.0 + jitter,
            Some(1000),
        ));
        runs.push(run(
            round,
            Config::KernelFentry,
            base + 70.0 - jitter,
            Some(1000),
        ));
        runs.push(run(round, Config::FloorFentry, base + 40.0, None));
    }
    let rows = rows(&runs, 1000).unwrap();
    let get = |c| rows.iter().find(|r| r.config == c).unwrap();
    let s = get(Config::StreamFentry);
    let i = s.interval.unwrap();
    assert!((s.vs_bpftrace.unwrap() - 0.5).abs() < 1e-9);
    assert!(i.lo < 0.5 && 0.5 < i.hi && i.hi < 0.7, "{i:?}");
    assert_eq!((s.verdict, s.target_met), (Some(Verdict::Met), Some(true)));
    // 0.35, but its interval reaches over 0.4: not decided either way.
    let k = get(Config::KernelFentry);
    assert!(k.interval.unwrap().lo < 0.35 && k.interval.unwrap().hi > 0.4);
    assert_eq!((k.verdict, k.target_met), (Some(Verdict::Unresolved), None));
    // The floor counts no calls and has no target, but its ratio is shown.
    let f = get(Config::FloorFentry);
    assert!(f.all_traced && f.verdict.is_none());
    assert!((f.vs_bpftrace.unwrap() - 0.2).abs() < 1e-9);
    let md = markdown(&rows, "ns");
    // Its half-width 0.145 at 4 rounds, 0.05 from the target: ≈ 4 × 8.4 rounds.
    assert!(
        md.contains("≤ 0.4 ? unresolved — run more rounds (≈ 34 rounds)"),
        "{md}"
    );
    assert!(md.contains("| floor: fentry/fexit pair reading the clock once each | 690.0 | 40.0 | 1.06 | 0.20 [0.20, 0.20] |  | – |"), "{md}");
    let json = k.to_json();
    assert_eq!(json["verdict"], "unresolved — run more rounds");
    assert!(json["vs_bpftrace_ci95"]["hi"].as_f64().unwrap() > 0.4);
    assert_eq!(json["rounds_to_resolve"], 34);
}

#[test]
fn bpftrace_histograms_and_loop_lines_parse() {
    let bt = "Attaching 3 probes...\nready\n\n\n@ns: \n[100, 110)          12 |@@@@          |\n[110, 120)        1000 |@@@@@@@@@@@@@@@@|\n[5120, ...)          3 |               |\n";
    assert_eq!(bpftrace_hist_total(bt), Some(1015));
    assert_eq!(bpftrace_hist_total("Attaching 3 probes...\n"), None);
    let (calls, ns) =
        parse_loop("noise\n{\"calls\":1000,\"elapsed_ns\":5000,\"ns_per_call\":5.0}\n").unwrap();
    assert_eq!((calls, ns), (1000, 5.0));
    assert!(parse_loop("nothing").is_err());
    assert_eq!(median(&[3.0, 1.0, 2.0, 10.0]), Some(2.5));
    assert_eq!(median(&[]), None);
}
