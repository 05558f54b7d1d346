//! A session's cookie (see damon-ebpf's `session.rs`): the entry time in the low [`TIME_BITS`]
//! bits (a duration is their difference modulo 2^46 ns, 19.5 hours), the number of the
//! per-CPU slot that holds the call's disturbance snapshot in the next 2 bits
//! ([`crate::disturb::SESSION_SLOTS`]), and, in a kprobe session, two small arguments in the
//! top 16, a byte each (a kprobe session cannot read arguments at return: the registers that
//! held them are gone). Shared so the packing is tested on the host.

/// Bits of the entry time a cookie keeps.
pub const TIME_BITS: u32 = 46;
const SLOT_SHIFT: u32 = TIME_BITS;
const _: () = assert!(crate::disturb::SESSION_SLOTS == 4);

/// The snapshot slot's number in the cookie's bits 46 and 47.
#[inline(always)]
pub fn pack_slot(slot: u32) -> u64 {
    u64::from(slot & 3) << SLOT_SHIFT
}

/// The slot number [`pack_slot`] put in `cookie`.
#[inline(always)]
pub fn unpack_slot(cookie: u64) -> u32 {
    ((cookie >> SLOT_SHIFT) & 3) as u32
}

/// The full entry time of a call whose cookie is `cookie`, at its return `now`.
#[inline(always)]
pub fn entry_time(cookie: u64, now: u64) -> u64 {
    now.wrapping_sub(now.wrapping_sub(cookie) & TIME_MASK)
}
/// The entry time's bits of a cookie.
pub const TIME_MASK: u64 = (1 << TIME_BITS) - 1;
const ARGS_SHIFT: u32 = 48;

/// Two arguments in the cookie's top 16 bits, a byte each: node ids (or 0) in `0..=254` kept,
/// anything else (−1 = no node, a node id above 254) as 0xFF, read back as −1.
#[inline(always)]
pub fn pack_small([a, b]: [i64; 2]) -> u64 {
    let byte = |v: i64| {
        if (0..=254).contains(&v) {
            v as u64
        } else {
            0xFF
        }
    };
    (byte(a) | (byte(b) << 8)) << ARGS_SHIFT
}

/// The two arguments [`pack_small`] put in `cookie`.
#[inline(always)]
pub fn unpack_small(cookie: u64) -> [i64; 2] {
    let byte = |x: u64| if x == 0xFF { -1 } else { x as i64 };
    [
        byte((cookie >> ARGS_SHIFT) & 0xFF),
        byte(cookie >> (ARGS_SHIFT + 8)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_arguments_survive_beside_the_time() {
        let now = 0x1234_5678_9abc_u64 & TIME_MASK;
        for args in [[0, 0], [1, 254], [254, 3], [-1, 7], [-1, -1]] {
            for slot in 0..4 {
                let cookie = pack_small(args) | pack_slot(slot) | (now & TIME_MASK);
                assert_eq!(unpack_small(cookie), args, "{args:?}");
                assert_eq!(unpack_slot(cookie), slot, "{args:?}");
                assert_eq!(cookie & TIME_MASK, now, "the time is untouched: {args:?}");
            }
        }
        // Out of range: read back as "no node".
        assert_eq!(unpack_small(pack_small([255, 1 << 20])), [-1, -1]);
        assert_eq!(unpack_small(pack_small([i64::MIN, 300])), [-1, -1]);
    }

    #[test]
    fn a_duration_wraps_within_the_time_bits() {
        // Entry just before the 48-bit time wraps, return just after.
        let entry = (1u64 << TIME_BITS) - 10;
        let now = (1u64 << TIME_BITS) + 15;
        let cookie = pack_small([2, 3]) | pack_slot(3) | (entry & TIME_MASK);
        assert_eq!(now.wrapping_sub(cookie) & TIME_MASK, 25);
        assert_eq!(entry_time(cookie, now), entry);
    }

    #[test]
    fn the_full_entry_time_comes_back_at_return() {
        let entry = 0x0123_4567_89ab_cdef_u64;
        let cookie = pack_small([-1, 1]) | pack_slot(2) | (entry & TIME_MASK);
        for duration in [0, 1, 1_000_000, TIME_MASK] {
            assert_eq!(entry_time(cookie, entry + duration), entry, "{duration}");
        }
    }
}
