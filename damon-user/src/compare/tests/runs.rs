use crate::{
    compare::runs::{MAX_RUNS, needed, rates_differ},
    stats::runs,
};

#[test]
fn rates_are_called_different_only_beyond_run_to_run_variation() {
    // The 62-vs-245 case of one run each: flagged.
    assert!(rates_differ(&[62.0 / 25.0], &[245.0 / 25.0]).is_some_and(|r| r > 3.9));
    assert_eq!(rates_differ(&[100.0], &[120.0]), None);
    assert!(rates_differ(&[100.0], &[60.0]).is_some());
    // Several runs whose spread covers the difference: not flagged.
    assert_eq!(
        rates_differ(&[60.0, 250.0, 120.0], &[245.0, 70.0, 150.0]),
        None
    );
    // Several runs, consistently 2× apart: flagged.
    assert!(rates_differ(&[100.0, 104.0, 98.0], &[200.0, 195.0, 210.0]).is_some());
    // Consistent but small (5 %): not flagged.
    assert_eq!(
        rates_differ(&[100.0, 100.5, 99.5], &[105.0, 105.2, 104.8]),
        None
    );
    // A side that never called it.
    assert!(rates_differ(&[0.0], &[5.0]).is_some());
    assert_eq!(rates_differ(&[0.0], &[0.0]), None);
}

#[test]
fn advice_uses_observed_or_typical_variation_and_says_which() {
    let n = needed("lock_timer_base", -2000.0, 20_000.0, None, 0.05).expect("advice");
    assert!((n.run_sd_ns - 0.123 * 20_000.0).abs() < 1e-9, "{n:?}");
    assert!(
        n.basis.contains("typical") && n.basis.contains("A/A"),
        "{}",
        n.basis
    );
    assert!(n.basis.contains("12.3 %"), "{}", n.basis);
    // sd 2460 ns for a 2000 ns shift (d = 0.81): about 25 runs a side.
    assert!(n.per_side.is_some_and(|k| (20..=30).contains(&k)), "{n:?}");
    let tiny = needed("lock_timer_base", -50.0, 20_000.0, None, 0.05).expect("advice");
    assert_eq!(tiny.per_side, None, "more than {MAX_RUNS} runs");
    let other = needed("vfs_read", 10.0, 1000.0, None, 0.05).expect("advice");
    assert!(other.basis.contains("not measured"), "{}", other.basis);
    assert!(needed("x", 0.0, 1.0, None, 0.05).is_none());
    let t = runs::welch(&[10.0, 12.0, 11.0], &[20.0, 22.0, 21.0]).expect("t");
    let obs = needed("x", 10.0, 10.0, Some(&t), 0.05).expect("advice");
    assert!((obs.run_sd_ns - 1.0).abs() < 1e-9 && obs.basis.contains("these runs"));
}
