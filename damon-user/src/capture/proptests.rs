//! Mutations of a real capture and arbitrary bytes: the reader never panics.
use proptest::prelude::*;

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
