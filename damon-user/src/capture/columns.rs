//! The uncompressed layout of a version-2 record chunk: one column per field, each a run of
//! LEB128 varints.
//!
//! ```text
//! count          varint
//! func[count]    varint
//! cpu[count]     varint
//! pid[count]     varint
//! tid[count]     varint
//! entry[count]   zigzag varint: entry_ns minus the previous record's entry_ns (wrapping;
//!                the first record's minus 0)
//! duration[count] varint
//! value[count]   zigzag varint
//! arg0[count]    zigzag varint   (chunk kinds 5 and 8)
//! arg1[count]    zigzag varint   (chunk kinds 5 and 8)
//! slept[count]     varint        (chunk kind 8 only; as the three below, a u16 where
//! preempted[count] varint         0xFFFF is `disturb::UNKNOWN`)
//! hardirqs[count]  varint
//! softirqs[count]  varint
//! off_cpu[count]   varint        (chunk kind 10 only, which has every column above; as
//! irq[count]       varint         the one below, a u32 in ns where 0xFFFFFFFF is
//!                                 `breakdown::UNKNOWN_NS`, 0xFFFFFFFE saturated)
//! ```
//! Why columns: zstd finds far more repetition in a run of CPU numbers or small durations than
//! in 40-byte rows where every field interleaves with the others; deltas turn 64-bit clock
//! stamps into a few bytes. Records keep their arrival order (about exit order), which is why
//! entry deltas may be negative.
use damon_common::CallRecord;

/// Appends `v` as an unsigned LEB128 varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Which optional columns follow the seven every record chunk has: each layout is one chunk
/// kind, so a capture whose records have no arguments or disturbance counts is stored exactly
/// as older builds stored it (and they read it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// No optional column (chunk kind 2, interval markers of kind 4).
    Plain,
    /// `arg0` and `arg1` (kind 5).
    Args,
    /// `arg0`, `arg1` and the four disturbance counts (kind 8).
    ArgsDisturbance,
    /// Those and the time breakdown, `off_cpu_ns` and `irq_ns` (kind 10).
    Breakdown,
}

impl Layout {
    /// Every layout, smallest first.
    pub const ALL: [Layout; 4] = [
        Layout::Plain,
        Layout::Args,
        Layout::ArgsDisturbance,
        Layout::Breakdown,
    ];

    /// The smallest layout that holds every field of `records`: arguments when one is
    /// nonzero, disturbance counts (with arguments, to keep one layout per extra) when one is,
    /// the breakdown (with both) when one of its fields is.
    pub fn of(records: &[CallRecord]) -> Layout {
        if records.iter().any(|r| breakdown(r) != [0; 2]) {
            Layout::Breakdown
        } else if records.iter().any(|r| r.disturbance() != [0; 4]) {
            Layout::ArgsDisturbance
        } else if records.iter().any(|r| r.arg0 != 0 || r.arg1 != 0) {
            Layout::Args
        } else {
            Layout::Plain
        }
    }

    fn args(self) -> bool {
        self != Layout::Plain
    }

    fn disturbance(self) -> bool {
        matches!(self, Layout::ArgsDisturbance | Layout::Breakdown)
    }

    fn breakdown(self) -> bool {
        self == Layout::Breakdown
    }
}

/// A record's breakdown fields, `[off_cpu_ns, irq_ns]`.
fn breakdown(r: &CallRecord) -> [u32; 2] {
    [r.off_cpu_ns, r.irq_ns]
}

/// Encodes records into the column layout, with the optional columns `layout` has.
pub fn encode(records: &[CallRecord], layout: Layout, out: &mut Vec<u8>) {
    put_varint(out, records.len() as u64);
    for field in [
        |r: &CallRecord| r.func,
        |r: &CallRecord| r.cpu,
        |r: &CallRecord| r.pid,
        |r: &CallRecord| r.tid,
    ] {
        for r in records {
            put_varint(out, u64::from(field(r)));
        }
    }
    let mut prev = 0u64;
    for r in records {
        put_varint(out, zigzag(r.entry_ns.wrapping_sub(prev) as i64));
        prev = r.entry_ns;
    }
    for r in records {
        put_varint(out, r.duration_ns);
    }
    for r in records {
        put_varint(out, zigzag(r.value));
    }
    if layout.args() {
        for r in records {
            put_varint(out, zigzag(r.arg0));
        }
        for r in records {
            put_varint(out, zigzag(r.arg1));
        }
    }
    if layout.disturbance() {
        for i in 0..4 {
            for r in records {
                put_varint(out, u64::from(r.disturbance()[i]));
            }
        }
    }
    if layout.breakdown() {
        for i in 0..2 {
            for r in records {
                put_varint(out, u64::from(breakdown(r)[i]));
            }
        }
    }
}

/// Reads varints from a byte slice, failing (never panicking) on a short or overlong one.
pub(super) struct Cursor<'a> {
    pub bytes: &'a [u8],
    pub pos: usize,
}

impl Cursor<'_> {
    pub fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(&b) = self.bytes.get(self.pos) else {
                return Err(format!("record columns end early at byte {}", self.pos));
            };
            self.pos += 1;
            // The tenth byte may only carry the top bit of a u64.
            if shift == 63 && b > 1 {
                return Err(format!("varint overflows 64 bits at byte {}", self.pos - 1));
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(format!("varint longer than 10 bytes at byte {}", self.pos))
    }

    pub fn u32(&mut self, what: &str) -> Result<u32, String> {
        let v = self.varint()?;
        u32::try_from(v).map_err(|_| format!("{what} {v} does not fit 32 bits"))
    }

    fn u16(&mut self, what: &str) -> Result<u16, String> {
        let v = self.varint()?;
        u16::try_from(v).map_err(|_| format!("{what} {v} does not fit 16 bits"))
    }
}

/// The disturbance columns, in the order [`CallRecord::disturbance`] has them.
const DISTURBANCE_COLUMNS: [&str; 4] = ["slept", "preempted", "hardirqs", "softirqs"];

/// Decodes a column layout written by [`encode`] (with the same `layout`), appending to
/// `out`; fields without a column are 0 (arguments, disturbance counts).
pub fn decode(bytes: &[u8], layout: Layout, out: &mut Vec<CallRecord>) -> Result<(), String> {
    let mut c = Cursor { bytes, pos: 0 };
    let count = c.varint()?;
    // Each record takes at least 7 bytes (one per column), which bounds what a corrupt count
    // can make us allocate.
    let fits = (bytes.len() / 7) as u64;
    if count > fits {
        return Err(format!(
            "record count {count} cannot fit in {} bytes of columns",
            bytes.len()
        ));
    }
    let n = count as usize;
    let start = out.len();
    out.resize(start + n, CallRecord::default());
    let rows = &mut out[start..];
    for r in rows.iter_mut() {
        r.func = c.u32("function id")?;
    }
    for r in rows.iter_mut() {
        r.cpu = c.u32("cpu")?;
    }
    for r in rows.iter_mut() {
        r.pid = c.u32("pid")?;
    }
    for r in rows.iter_mut() {
        r.tid = c.u32("tid")?;
    }
    let mut prev = 0u64;
    for r in rows.iter_mut() {
        prev = prev.wrapping_add(unzigzag(c.varint()?) as u64);
        r.entry_ns = prev;
    }
    for r in rows.iter_mut() {
        r.duration_ns = c.varint()?;
    }
    for r in rows.iter_mut() {
        r.value = unzigzag(c.varint()?);
    }
    if layout.args() {
        for r in rows.iter_mut() {
            r.arg0 = unzigzag(c.varint()?);
        }
        for r in rows.iter_mut() {
            r.arg1 = unzigzag(c.varint()?);
        }
    }
    if layout.disturbance() {
        for (i, what) in DISTURBANCE_COLUMNS.into_iter().enumerate() {
            for r in rows.iter_mut() {
                let mut d = r.disturbance();
                d[i] = c.u16(what)?;
                r.set_disturbance(d);
            }
        }
    }
    if layout.breakdown() {
        for r in rows.iter_mut() {
            r.off_cpu_ns = c.u32("off_cpu_ns")?;
        }
        for r in rows.iter_mut() {
            r.irq_ns = c.u32("irq_ns")?;
        }
    }
    if c.pos != bytes.len() {
        return Err(format!(
            "{} bytes left over after {count} records",
            bytes.len() - c.pos
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_and_zigzag_edges() {
        for v in [0, 1, 127, 128, 16383, 16384, u64::MAX / 2, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut c = Cursor { bytes: &b, pos: 0 };
            assert_eq!(c.varint(), Ok(v));
            assert_eq!(c.pos, b.len());
        }
        for v in [0, 1, -1, i64::MIN, i64::MAX, -64, 63] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
        // Eleven continuation bytes, or a tenth byte above 1, are errors.
        let mut c = Cursor {
            bytes: &[0xff; 11],
            pos: 0,
        };
        assert!(c.varint().is_err());
        let mut over = vec![0xff; 9];
        over.push(0x02);
        assert!(
            Cursor {
                bytes: &over,
                pos: 0
            }
            .varint()
            .is_err()
        );
    }

    /// Encodes `records` in `layout`, checks they decode back exactly and that every prefix
    /// is rejected without a panic; returns the bytes.
    fn round_trip(records: &[CallRecord], layout: Layout) -> Vec<u8> {
        let mut b = Vec::new();
        encode(records, layout, &mut b);
        let mut back = Vec::new();
        decode(&b, layout, &mut back).expect("decodes");
        assert_eq!(back, records);
        for cut in 0..b.len() {
            assert!(
                decode(&b[..cut], layout, &mut Vec::new()).is_err(),
                "cut {cut}"
            );
        }
        b
    }

    #[test]
    fn round_trips_extremes_and_disorder() {
        let records = vec![
            CallRecord {
                entry_ns: u64::MAX,
                duration_ns: u64::MAX,
                value: i64::MIN,
                pid: u32::MAX,
                tid: 0,
                cpu: 7,
                func: 3,
                arg0: -1,
                arg1: i64::MAX,
                ..CallRecord::default()
            },
            CallRecord {
                entry_ns: 5,
                duration_ns: 0,
                value: i64::MAX,
                ..Default::default()
            },
            CallRecord {
                entry_ns: 3,
                ..Default::default()
            },
        ];
        let mut b = round_trip(&records, Layout::Args);
        // Read without the argument columns, they are bytes left over.
        assert!(decode(&b, Layout::Plain, &mut Vec::new()).is_err());
        b.push(0);
        assert!(decode(&b, Layout::Args, &mut Vec::new()).is_err());
        // Without argument columns the args decode as 0.
        let mut b = Vec::new();
        encode(&records, Layout::Plain, &mut b);
        let mut back = Vec::new();
        decode(&b, Layout::Plain, &mut back).expect("decodes");
        assert_eq!(back[0].arg0, 0);
        assert_eq!(back[0].value, i64::MIN);
    }

    #[test]
    fn disturbance_columns_round_trip_with_unknown_and_saturated_counts() {
        use damon_common::disturb::{LOST, SATURATED, UNKNOWN};
        let counts = [
            [0, 0, 0, 0],
            [1, 0, UNKNOWN, UNKNOWN],
            [0, 3, UNKNOWN, UNKNOWN],
            [0, 0, SATURATED, 1],
            LOST,
        ];
        let records: Vec<CallRecord> = counts
            .iter()
            .enumerate()
            .map(|(i, &d)| {
                let mut r = CallRecord {
                    entry_ns: i as u64,
                    duration_ns: 100 + i as u64,
                    func: 2,
                    ..CallRecord::default()
                };
                r.set_disturbance(d);
                r
            })
            .collect();
        assert_eq!(Layout::of(&records), Layout::ArgsDisturbance);
        assert_eq!(Layout::of(&records[..1]), Layout::Plain);
        let b = round_trip(&records, Layout::ArgsDisturbance);
        // Read as a chunk of another kind, the extra columns are bytes left over.
        assert!(decode(&b, Layout::Args, &mut Vec::new()).is_err());
        // A count above 16 bits is refused, naming its column.
        let mut big = Vec::new();
        encode(&records[..1], Layout::Args, &mut big);
        for v in [0, 0, 1 << 16, 0] {
            put_varint(&mut big, v);
        }
        let err = decode(&big, Layout::ArgsDisturbance, &mut Vec::new()).expect_err("too big");
        assert!(err.contains("hardirqs 65536 does not fit 16 bits"), "{err}");
    }

    #[test]
    fn breakdown_columns_round_trip_with_unknown_and_saturated_times() {
        use damon_common::breakdown::{SATURATED_NS, UNKNOWN_NS};
        let times = [
            [0, 0],
            [0, 7],
            [999_000, 0],
            [SATURATED_NS, 3],
            [UNKNOWN_NS; 2],
        ];
        let records: Vec<CallRecord> = times
            .iter()
            .enumerate()
            .map(|(i, &[off_cpu_ns, irq_ns])| CallRecord {
                entry_ns: i as u64,
                duration_ns: 1_000_000 + i as u64,
                func: 2,
                off_cpu_ns,
                irq_ns,
                slept: u16::from(off_cpu_ns != 0),
                ..CallRecord::default()
            })
            .collect();
        assert_eq!(Layout::of(&records), Layout::Breakdown);
        assert_eq!(Layout::of(&records[..1]), Layout::Plain);
        // A breakdown field alone, with no disturbance count, still needs the columns.
        assert_eq!(Layout::of(&records[1..2]), Layout::Breakdown);
        let b = round_trip(&records, Layout::Breakdown);
        assert!(decode(&b, Layout::ArgsDisturbance, &mut Vec::new()).is_err());
        // A time above 32 bits is refused, naming its column.
        let mut big = Vec::new();
        encode(&records[..1], Layout::ArgsDisturbance, &mut big);
        put_varint(&mut big, 0);
        put_varint(&mut big, 1 << 32);
        let err = decode(&big, Layout::Breakdown, &mut Vec::new()).expect_err("too big");
        assert!(
            err.contains("irq_ns 4294967296 does not fit 32 bits"),
            "{err}"
        );
    }
}

#[cfg(test)]
mod proptests {
    use proptest::prelude::*;

    use super::*;

    /// A disturbance count: mostly small, sometimes saturated or unknown.
    fn count() -> impl Strategy<Value = u16> {
        prop_oneof![
            4 => Just(0u16),
            3 => 0u16..8,
            1 => any::<u16>(),
            1 => Just(damon_common::disturb::SATURATED),
            1 => Just(damon_common::disturb::UNKNOWN),
        ]
    }

    /// A breakdown field: mostly 0 or small, sometimes saturated or unknown.
    fn time() -> impl Strategy<Value = u32> {
        prop_oneof![
            4 => Just(0u32),
            3 => 0u32..100_000,
            1 => any::<u32>(),
            1 => Just(damon_common::breakdown::SATURATED_NS),
            1 => Just(damon_common::breakdown::UNKNOWN_NS),
        ]
    }

    fn record() -> impl Strategy<Value = CallRecord> {
        (
            any::<u64>(),
            any::<u64>(),
            any::<i64>(),
            any::<u32>(),
            any::<u32>(),
            0u32..64,
            0u32..16,
            any::<(i64, i64)>(),
            [count(), count(), count(), count()],
            [time(), time()],
        )
            .prop_map(
                |(
                    entry_ns,
                    duration_ns,
                    value,
                    pid,
                    tid,
                    cpu,
                    func,
                    (arg0, arg1),
                    d,
                    [off_cpu_ns, irq_ns],
                )| {
                    let mut r = CallRecord {
                        entry_ns,
                        duration_ns,
                        value,
                        pid,
                        tid,
                        cpu,
                        func,
                        arg0,
                        arg1,
                        off_cpu_ns,
                        irq_ns,
                        ..CallRecord::default()
                    };
                    r.set_disturbance(d);
                    r
                },
            )
    }

    proptest! {
        /// Every layout round-trips what it holds; the smallest layout that holds everything
        /// ([`Layout::of`]) round-trips the records exactly.
        #[test]
        fn columns_round_trip(records in prop::collection::vec(record(), 0..200)) {
            for layout in Layout::ALL {
                let mut bytes = Vec::new();
                encode(&records, layout, &mut bytes);
                let mut back = Vec::new();
                prop_assert!(decode(&bytes, layout, &mut back).is_ok());
                let mut want = records.clone();
                for r in &mut want {
                    if !layout.breakdown() {
                        (r.off_cpu_ns, r.irq_ns) = (0, 0);
                    }
                    if !layout.disturbance() {
                        r.set_disturbance([0; 4]);
                    }
                    if layout == Layout::Plain {
                        (r.arg0, r.arg1) = (0, 0);
                    }
                }
                prop_assert_eq!(back, want);
            }
            let layout = Layout::of(&records);
            let mut bytes = Vec::new();
            encode(&records, layout, &mut bytes);
            let mut back = Vec::new();
            prop_assert!(decode(&bytes, layout, &mut back).is_ok());
            prop_assert_eq!(back, records);
        }
    }
}
