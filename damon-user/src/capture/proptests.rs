//! Mutations of a real capture and arbitrary bytes: the reader never panics.
use proptest::prelude::*;

use damon_common::{CallRecord, breakdown, disturb};

use super::{format::*, tests::data};

fn fixture() -> &'static [u8] {
    static BYTES: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BYTES.get_or_init(|| std::fs::read(data("migrate-hot-7.2.v2.dtcap")).expect("fixture"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Flipped bytes anywhere in a real file: an error naming a chunk, or (in bytes no
    /// check covers, like the reserved header word) the same capture. Never a panic.
    #[test]
    fn flipped_bytes_are_caught(flips in prop::collection::vec((0usize..23_677, 1u8..=255), 1..4)) {
        let mut bytes = fixture().to_vec();
        for (at, x) in flips {
            let at = at % bytes.len();
            bytes[at] ^= x;
        }
        if let Ok(c) = parse(&bytes) {
            let good = parse(fixture()).expect("fixture");
            prop_assert_eq!(c, good);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(mut bytes in prop::collection::vec(any::<u8>(), 0..2_000), v2 in any::<bool>()) {
        if v2 && bytes.len() >= 16 {
            bytes[..8].copy_from_slice(MAGIC);
            bytes[8..12].copy_from_slice(&2u32.to_le_bytes());
        }
        let _ = load(&bytes, true);
        let _ = load(&bytes, false);
    }
}

/// A record of function 3 with these disturbance counts (any u16, unknown and saturated
/// ones included), breakdown times (likewise) and arguments.
fn record() -> impl Strategy<Value = CallRecord> {
    let count = prop_oneof![
        6 => Just(0u16),
        2 => any::<u16>(),
        1 => Just(disturb::SATURATED),
        1 => Just(disturb::UNKNOWN),
    ];
    let time = prop_oneof![
        6 => Just(0u32),
        2 => any::<u32>(),
        1 => Just(breakdown::SATURATED_NS),
        1 => Just(breakdown::UNKNOWN_NS),
    ];
    (
        any::<u64>(),
        0u64..1_000_000,
        prop_oneof![Just(0i64), any::<i64>()],
        prop::array::uniform4(count),
        prop::array::uniform2(time),
    )
        .prop_map(|(entry_ns, duration_ns, arg0, d, [off_cpu_ns, irq_ns])| {
            let mut r = CallRecord {
                entry_ns,
                duration_ns,
                arg0,
                func: 3,
                off_cpu_ns,
                irq_ns,
                ..CallRecord::default()
            };
            r.set_disturbance(d);
            r
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever mix of clean, disturbed and argument-carrying records each chunk holds, the
    /// file gives them back exactly, in order.
    #[test]
    fn records_with_disturbance_round_trip_through_the_writer(
        chunks in prop::collection::vec(prop::collection::vec(record(), 0..40), 1..5)
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("p.dtcap");
        let mut w = CaptureWriter::create(&path, false, &super::tests::meta()).expect("create");
        for chunk in &chunks {
            for r in chunk {
                w.push(r).expect("push");
            }
            w.flush().expect("flush");
        }
        let n = chunks.iter().map(Vec::len).sum::<usize>() as u64;
        w.finish(&super::tests::summary(n)).expect("finish");
        let c = read_file(&path).expect("read");
        prop_assert_eq!(c.records, chunks.concat());
    }
}
