//! The soak's checks on made-up samples: what passes, what fails and why.
use super::*;

fn report(calls: u64, count: u64, dropped: u64) -> Value {
    let f = |name: &str| {
        json!({"name": name, "calls": calls, "count": count, "dropped": dropped,
               "in_flight": 0, "emitted": count})
    };
    json!({
        "meta": {"complete": true, "duration_ns": 60_000_000_000u64},
        "functions": FUNCTIONS.map(f),
    })
}

fn samples(rss: &[u64], fds: &[u64]) -> String {
    rss.iter()
        .zip(fds)
        .enumerate()
        .map(|(i, (r, f))| format!("{}.5 {r} {} 100 50 {f}\n", 100 + 3 * i, r - 150))
        .collect()
}

#[test]
fn flat_memory_and_exact_accounting_pass() {
    let s = parse_samples(&samples(
        &[9000, 9400, 9500, 9450, 9500, 9480, 9500, 9490],
        &[12; 8],
    ))
    .expect("parse");
    assert_eq!(s[0].t_s, 0.0);
    assert_eq!((s[1].t_s, s[1].anon_kib, s[1].fds), (3.0, 9250, 12));
    let a = Analysis::new(s, &report(100, 90, 10), None);
    assert!(a.failures.is_empty(), "{:?}", a.failures);
    assert_eq!(a.early_max_rss_kib, 9400);
    // Warm-up: the first quarter (to 5.25 s), at least two samples; six judged after it.
    assert_eq!((a.warmup_samples, a.after_warmup().len()), (2, 6));
    assert_eq!(a.after_warmup()[0].t_s, 6.0);
    assert_eq!(a.rss_bound_kib, 9400 * 5 / 4 + 1024);
    assert_eq!(a.anon_bound_kib, 9250 * 5 / 4 + 256);
    assert_eq!(a.totals.calls, 400);
    assert!(a.summary().ends_with("PASS"), "{}", a.summary());
    assert!(
        a.to_markdown("7.2")
            .contains("| 21 | 9490 | 9340 | 100 | 50 | 12 |")
    );
}

#[test]
fn growth_fd_leaks_and_gaps_fail() {
    let grow = parse_samples(&samples(
        &[9000, 9000, 10000, 11000, 12000, 13000, 14000, 16000],
        &[12, 12, 12, 12, 13, 12, 12, 12],
    ))
    .expect("parse");
    let a = Analysis::new(grow, &report(100, 80, 10), None);
    let all = a.failures.join("\n");
    assert!(all.contains("RSS grew: 13000 KiB at 15 s"), "{all}");
    assert!(all.contains("RssAnon grew: 11850 KiB at 12 s"), "{all}");
    assert!(all.contains("open fds grew from 12 to 13"), "{all}");
    assert!(all.contains("calls 100 != records 80"), "{all}");
    // More fds during the warm-up only (the calibration's tracer) is no leak.
    let warm = parse_samples(&samples(
        &[9000, 9000, 9000, 9000, 9000, 9000, 9000, 9000],
        &[12, 40, 12, 12, 12, 12, 12, 12],
    ))
    .expect("parse");
    let a = Analysis::new(warm, &report(100, 90, 10), None);
    assert!(a.failures.is_empty(), "{:?}", a.failures);
    assert!(parse_samples("1 2 3").is_err());
}

/// The calibration beside the session (here to 12 s of 21: past the first quarter) holds
/// fds and heap; the warm-up lasts as long, and the bounds come from the samples after it.
#[test]
fn the_calibration_extends_the_warm_up_and_sets_no_bound() {
    let rss = [60000, 95000, 99000, 98000, 16000, 16100, 16100, 16100];
    let s = parse_samples(&samples(&rss, &[31, 72, 80, 54, 37, 37, 37, 37])).expect("parse");
    let a = Analysis::new(s.clone(), &report(100, 90, 10), Some(12.0));
    assert!(a.failures.is_empty(), "{:?}", a.failures);
    assert_eq!((a.warmup_samples, a.warmup_s), (5, 12.0));
    // The first sample after the calibration, not the calibration's peak.
    assert_eq!(a.early_max_rss_kib, 16100);
    assert_eq!(a.rss_bound_kib, 16100 * 5 / 4 + 1024);
    assert!(
        a.summary().contains("(calibration ended by 12 s)"),
        "{}",
        a.summary()
    );
    // Without the marker the calibration's heap falls after the first quarter.
    let blind = Analysis::new(s, &report(100, 90, 10), None);
    assert!(
        blind
            .failures
            .join("\n")
            .contains("RssAnon grew: 98850 KiB at 6 s"),
        "{:?}",
        blind.failures
    );
    // An fd that stays after the calibration, or a heap kept from the start, fails.
    let fds = parse_samples(&samples(&rss, &[31, 72, 80, 54, 37, 38, 38, 38])).expect("parse");
    let a = Analysis::new(fds, &report(100, 90, 10), Some(9.0));
    assert!(
        a.failures
            .join("\n")
            .contains("open fds grew from 37 to 38 at 15 s"),
        "{:?}",
        a.failures
    );
    let kept = [95000, 95000, 95000, 95000, 95000, 95000, 95000, 95000];
    let s = parse_samples(&samples(&kept, &[37; 8])).expect("parse");
    let all = Analysis::new(s, &report(100, 90, 10), Some(3.0))
        .failures
        .join("\n");
    assert!(
        all.contains("RssAnon grew: 94850 KiB at 6 s > bound 16384 KiB"),
        "{all}"
    );
    assert!(!all.contains("RSS grew"), "{all}");
}

/// A leak of 64 bytes a call at 168 calls/s (10.5 KiB/s: the level bounds, 1.25 × the
/// warm-up peak + 256 KiB, let it pass for a minute) fails by its slope; steps of 20 KiB
/// as buffers grow do not.
#[test]
fn a_slow_leak_fails_by_its_slope_and_steps_do_not() {
    let calls = 168 * 60 / 4;
    let at = |anon: &dyn Fn(f64) -> f64| {
        let text: String = (0..21)
            .map(|i| {
                let t = 3.0 * f64::from(i);
                let a = anon(t) as u64;
                format!("{t} {} {a} 100 50 30\n", a + 11_000)
            })
            .collect();
        Analysis::new(
            parse_samples(&text).expect("parse"),
            &report(calls, calls, 0),
            None,
        )
    };
    let leak = at(&|t| 1300.0 + 64.0 * 168.0 * t / 1024.0);
    let all = leak.failures.join("\n");
    assert!(
        !all.contains("RssAnon grew:"),
        "the level bound alone: {all}"
    );
    assert!(all.contains("RssAnon grows 10.50 KiB/s"), "{all}");
    assert!(all.contains("a leak of about 64 bytes a call"), "{all}");
    let steps = at(&|t| 1300.0 + 20.0 * (t / 20.0).floor());
    assert!(steps.failures.is_empty(), "{:?}", steps.failures);
    assert!(steps.anon_slope_kib_s.expect("fitted") > 0.5);
}
