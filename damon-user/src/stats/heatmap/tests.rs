use super::*;
use crate::stats::rng::Rng;

#[test]
fn slots_tile_the_number_line_in_order() {
    let mut next = 0u64;
    for slot in 0..(EXACT_BELOW as u16 + 40 * SUB_SLOTS as u16) {
        let (lo, hi) = slot_range(slot);
        assert_eq!(lo, next, "slot {slot}");
        assert_eq!(slot_of(lo), slot);
        assert_eq!(slot_of(hi), slot);
        // At most 1/64 of its values wide.
        assert!(
            (hi - lo) * SUB_SLOTS <= lo.max(1),
            "slot {slot}: {lo}..={hi}"
        );
        next = hi + 1;
    }
    assert_eq!(slot_range(slot_of(u64::MAX)).1, u64::MAX);
}

#[test]
fn columns_count_calls_by_entry_time_and_keep_marks() {
    let mut h = Heatmap::new(1_000, 100, 10, Overflow::Scroll);
    h.add(1_000, 50); // column 0
    h.add(1_099, 50); // column 0
    h.add(1_100, 70); // column 1
    h.add(1_350, 5_000); // column 3
    h.mark(1_360);
    let cols: Vec<_> = h.columns().map(|(t, c)| (t, c.calls, c.marks)).collect();
    assert_eq!(
        cols,
        [(1_000, 2, 0), (1_100, 1, 0), (1_200, 0, 0), (1_300, 1, 1)]
    );
    assert_eq!(h.end_ns(), 1_400);
    assert_eq!(h.range(10), Some((50, slot_range(slot_of(5_000)).1)));
    assert_eq!(h.range(1), Some(slot_range(slot_of(5_000))));
}

#[test]
fn scrolling_keeps_the_newest_columns_and_counts_what_fell_off() {
    let mut h = Heatmap::new(0, 10, 3, Overflow::Scroll);
    for t in 0..50 {
        h.add(t, 7);
    }
    // Columns 2, 3, 4 are kept: 30 calls; the 20 before scrolled out, uncounted here.
    assert_eq!(h.calls(), 30);
    assert_eq!(h.columns().next().unwrap().0, 20);
    h.add(5, 7); // older than the oldest kept column
    assert_eq!(h.off_left, 1);
    // A jump far ahead leaves the new column and the empty ones before it.
    h.add(10_000, 7);
    assert_eq!(h.calls(), 1);
    assert_eq!(h.columns().last().unwrap().0, 10_000);
    assert_eq!(h.columns().next().unwrap().0, 9_980);
}

#[test]
fn coarsening_keeps_every_call_and_mark_and_doubles_the_width() {
    let mut h = Heatmap::new(100, 10, 4, Overflow::Coarsen);
    let mut rng = Rng::new(7);
    let mut calls = 0;
    for t in 0..1_000u64 {
        if rng.next_u64().is_multiple_of(3) {
            h.add(100 + t, 1 + rng.next_u64() % 10_000);
            calls += 1;
        }
        if t % 97 == 0 {
            h.mark(100 + t);
        }
    }
    assert_eq!(h.calls(), calls);
    assert_eq!(h.columns().map(|(_, c)| c.marks).sum::<u32>(), 11);
    assert!(h.columns().count() <= 4);
    // 1000 ns in at most 4 columns from 10 ns by doubling: 320 ns.
    assert_eq!(h.width_ns(), 320);
    assert_eq!(h.off_left, 0);
    // Column sums match a recount at the final width.
    let starts: Vec<u64> = h.columns().map(|(t, _)| t).collect();
    assert_eq!(starts, [100, 420, 740, 1060]);
}

#[test]
fn percentiles_are_slot_tops_and_exact_below_128() {
    let mut h = Heatmap::new(0, 1_000, 4, Overflow::Scroll);
    for d in 1..=100u64 {
        h.add(0, d);
    }
    let (_, c) = h.columns().next().unwrap();
    assert_eq!(c.percentiles(&[50.0, 99.0, 100.0]), Some(vec![50, 99, 100]));
    let mut h = Heatmap::new(0, 1_000, 4, Overflow::Scroll);
    for d in [1_000u64, 10_000, 100_000] {
        h.add(0, d);
    }
    let (_, c) = h.columns().next().unwrap();
    let p = c.percentiles(&[50.0]).unwrap()[0];
    assert!((10_000..=10_000 + 10_000 / 64).contains(&p), "{p}");
}

#[test]
fn log_rows_are_exact_sums_of_slots() {
    let mut h = Heatmap::new(0, 1_000, 4, Overflow::Scroll);
    let mut rng = Rng::new(11);
    let values: Vec<u64> = (0..5_000).map(|_| 200 + rng.next_u64() % 50_000).collect();
    for &v in &values {
        h.add(0, v);
    }
    let (lo, hi) = h.range(1).unwrap();
    for max_rows in [1, 3, 8, 20, 60, 500] {
        let edges = log_edges(lo, hi, max_rows);
        assert!(edges.len() - 1 <= max_rows, "{max_rows}: {edges:?}");
        assert!(edges[0] <= lo && *edges.last().unwrap() > hi, "{edges:?}");
        let (_, c) = h.columns().next().unwrap();
        let rows = c.rows(&edges);
        assert_eq!((rows.below, rows.above), (0, 0));
        for (k, &n) in rows.counts.iter().enumerate() {
            let truth = values
                .iter()
                .filter(|&&v| edges[k] <= v && v < edges[k + 1])
                .count() as u64;
            assert_eq!(n, truth, "row {k} of {max_rows}: {edges:?}");
        }
    }
}

#[test]
fn linear_rows_use_a_1_2_5_width_and_count_the_rest_outside() {
    let edges = linear_edges(130, 970, 10, 20);
    assert_eq!(edges, [100, 200, 300, 400, 500, 600, 700, 800, 900, 1_000]);
    let edges = linear_edges(130, 970, 100, 20);
    assert_eq!(edges.first(), Some(&120));
    assert_eq!(edges.last(), Some(&980));
    let mut h = Heatmap::new(0, 1_000, 4, Overflow::Scroll);
    for v in [50, 150, 250, 5_000] {
        h.add(0, v);
    }
    let (_, c) = h.columns().next().unwrap();
    let rows = c.rows(&[100, 200, 300]);
    assert_eq!((rows.counts, rows.below, rows.above), (vec![1, 1], 1, 1));
}

#[test]
fn a_late_call_lands_in_its_sealed_column() {
    let mut h = Heatmap::new(0, 100, 8, Overflow::Coarsen);
    h.add(10, 500);
    h.add(20, 40);
    h.add(150, 40); // column 1 starts: column 0 keeps only its non-empty slots
    h.add(30, 40); // a call that arrived late, into column 0
    h.add(40, 9_000);
    let cols: Vec<Vec<(u16, u32)>> = h.columns().map(|(_, c)| c.slots().collect()).collect();
    let s = slot_of;
    assert_eq!(
        cols,
        [vec![(40, 2), (s(500), 1), (s(9_000), 1)], vec![(40, 1)]]
    );
    assert_eq!(h.calls(), 5);
    let (_, c) = h.columns().next().unwrap();
    assert_eq!(c.calls, 4);
    assert_eq!(c.percentiles(&[50.0]), Some(vec![40]));
}
