use std::path::Path;

use super::opts;
use crate::{
    capture::format::read_file,
    compare::{
        Inputs, build, render,
        values::{compare, side_by_side},
    },
};

#[test]
fn side_by_side_shares_one_grid() {
    let rows = side_by_side(&[0, 5, 5, 50], &[99, 98]);
    assert_eq!(rows.len(), 10);
    assert_eq!(rows.iter().map(|r| r.before).sum::<u64>(), 4);
    assert_eq!(rows.iter().map(|r| r.after).sum::<u64>(), 2);
    assert_eq!((rows[9].lo, rows[9].hi, rows[9].after), (90, 99, 2));
    assert!(side_by_side(&[], &[]).is_empty());
}

/// compare: a capture against itself gives identical before/after histograms of the
/// scores on one grid.
#[test]
fn compare_shows_value_distributions_side_by_side() {
    let c =
        read_file(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/migrate-hot-7.2.dtcap"))
            .expect("fixture");
    let cmp = compare("damon_hot_score", &[(&c, 0)], &[(&c, 0)], &|_| true);
    assert_eq!(cmp.len(), 1, "{cmp:?}");
    let d = &cmp[0];
    assert_eq!(d.name, "hotness_score");
    assert!(d.rows.iter().all(|r| r.before == r.after));
    let n = d.before.as_ref().unwrap().count;
    assert_eq!(d.rows.iter().map(|r| r.after).sum::<u64>(), n);
    let whole = build(&Inputs::pair(("a", &c), ("b", &c)), &opts()).expect("compare");
    let text = render::table(&whole);
    assert!(text.contains("hotness_score:\n  before: n "), "{text}");
    assert!(compare("lock_timer_base", &[(&c, 3)], &[(&c, 3)], &|_| true).is_empty());
}
