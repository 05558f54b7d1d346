use crate::analysis::values::ValueDist;

#[test]
fn histogram_rows_are_nice_and_cover_every_value() {
    let d = ValueDist::new((0..100).collect()).unwrap();
    assert_eq!(d.histogram.len(), 10);
    assert_eq!((d.histogram[0].lo, d.histogram[0].hi), (0, 9));
    assert!(d.histogram.iter().all(|r| r.count == 10));
    assert_eq!((d.min, d.p50, d.p90, d.p99, d.max), (0, 49, 89, 98, 99));
    let d = ValueDist::new(vec![3, 3, 5]).unwrap();
    assert_eq!(d.histogram.len(), 3);
    assert_eq!(d.histogram[1].count, 0);
    assert_eq!(d.histogram.iter().map(|r| r.count).sum::<u64>(), 3);
    let d = ValueDist::new(vec![-7, 12]).unwrap();
    assert!(d.histogram.len() <= 10);
    assert!(d.histogram[0].lo <= -7 && d.histogram.last().unwrap().hi >= 12);
    let d = ValueDist::new(vec![i64::MIN, i64::MAX]).unwrap();
    assert_eq!(d.histogram.iter().map(|r| r.count).sum::<u64>(), 2);
    assert!(ValueDist::new(Vec::new()).is_none());
}
