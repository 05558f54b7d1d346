//! Slow calls kept whole (`record --slow DURATION`): what a capture holds of them. The kernel
//! side and its bounds are in `damon_common::slow`.
use damon_common::CallRecord;
use serde::{Deserialize, Serialize};

/// One slow call: its record (with its time breakdown when the capture has one) and the kernel
/// stack at its return, symbolized when it was recorded so that any machine shows names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowCall {
    pub call: CallRecord,
    /// Innermost first: `symbol+0xoffset` (` [module]` appended for a module's symbol), or
    /// `[unknown]` where no symbol covers the address (a capture holds no kernel address).
    pub stack: Vec<String>,
}

/// What `record --slow` was asked (in the capture's metadata).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlowSettings {
    /// A call is slow when its wall time is at least this.
    pub threshold_ns: u64,
    /// Return addresses kept per stack (`damon_common::slow::SLOW_STACK_DEPTH`).
    pub stack_depth: u32,
    /// Slow calls kept per function at most; later ones are only counted.
    pub max_per_function: u64,
}

/// One function's slow calls at the end of a session (in the summary). Every slow call is in
/// `kept` or one of the two losses; each is also an ordinary record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlowCounters {
    /// Kept in the capture with their stacks.
    pub kept: u64,
    /// Lost in the kernel: the slow calls' ring was full (the reader was behind).
    pub ring_full: u64,
    /// Received, but past [`SlowSettings::max_per_function`].
    pub over_limit: u64,
}

impl SlowCounters {
    /// All slow calls the kernel saw.
    pub fn total(&self) -> u64 {
        self.kept + self.ring_full + self.over_limit
    }

    /// What was counted after `earlier` (an earlier reading of the same counters).
    pub fn since(&self, earlier: &SlowCounters) -> SlowCounters {
        SlowCounters {
            kept: self.kept.saturating_sub(earlier.kept),
            ring_full: self.ring_full.saturating_sub(earlier.ring_full),
            over_limit: self.over_limit.saturating_sub(earlier.over_limit),
        }
    }
}

/// Chunk kind 11's payload (`docs/capture-format.md`): the slow calls in arrival order, each its
/// record's 15 fields little-endian in `CallRecord`'s order (72 bytes), a `u16` frame count,
/// then each frame as a `u16` length and its UTF-8 name.
pub(super) fn encode(calls: &[SlowCall], out: &mut Vec<u8>) {
    for s in calls {
        let c = &s.call;
        for v in [c.entry_ns, c.duration_ns] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in [c.value, c.arg0, c.arg1] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in [c.pid, c.tid, c.cpu, c.func] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in [c.slept, c.preempted, c.hardirqs, c.softirqs] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in [c.off_cpu_ns, c.irq_ns] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        let frames = &s.stack[..s.stack.len().min(usize::from(u16::MAX))];
        out.extend_from_slice(&(frames.len() as u16).to_le_bytes());
        for f in frames {
            let name = &f.as_bytes()[..f.len().min(usize::from(u16::MAX))];
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(name);
        }
    }
}

/// Reads [`encode`]'s payload into `out`; an error says what was cut short.
pub(super) fn decode(mut raw: &[u8], out: &mut Vec<SlowCall>) -> Result<(), String> {
    fn take<'a>(raw: &mut &'a [u8], n: usize, what: &str) -> Result<&'a [u8], String> {
        if raw.len() < n {
            return Err(format!("slow calls: {what} cut short"));
        }
        let (head, tail) = raw.split_at(n);
        *raw = tail;
        Ok(head)
    }
    fn u64_(raw: &mut &[u8]) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            take(raw, 8, "a record")?.try_into().expect("8"),
        ))
    }
    fn u32_(raw: &mut &[u8]) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            take(raw, 4, "a record")?.try_into().expect("4"),
        ))
    }
    fn u16_(raw: &mut &[u8], what: &str) -> Result<u16, String> {
        Ok(u16::from_le_bytes(
            take(raw, 2, what)?.try_into().expect("2"),
        ))
    }
    while !raw.is_empty() {
        let call = CallRecord {
            entry_ns: u64_(&mut raw)?,
            duration_ns: u64_(&mut raw)?,
            value: u64_(&mut raw)? as i64,
            arg0: u64_(&mut raw)? as i64,
            arg1: u64_(&mut raw)? as i64,
            pid: u32_(&mut raw)?,
            tid: u32_(&mut raw)?,
            cpu: u32_(&mut raw)?,
            func: u32_(&mut raw)?,
            slept: u16_(&mut raw, "a record")?,
            preempted: u16_(&mut raw, "a record")?,
            hardirqs: u16_(&mut raw, "a record")?,
            softirqs: u16_(&mut raw, "a record")?,
            off_cpu_ns: u32_(&mut raw)?,
            irq_ns: u32_(&mut raw)?,
        };
        let n = u16_(&mut raw, "a stack")?;
        let mut stack = Vec::with_capacity(usize::from(n));
        for _ in 0..n {
            let len = u16_(&mut raw, "a frame")?;
            let name = take(&mut raw, usize::from(len), "a frame")?;
            stack.push(String::from_utf8_lossy(name).into_owned());
        }
        out.push(SlowCall { call, stack });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_calls_round_trip_and_a_cut_payload_is_an_error() {
        let calls = vec![
            SlowCall {
                call: CallRecord {
                    entry_ns: 1,
                    duration_ns: u64::MAX,
                    value: -1,
                    arg0: i64::MIN,
                    arg1: 7,
                    pid: 2,
                    tid: 3,
                    cpu: 4,
                    func: 5,
                    slept: 6,
                    preempted: 7,
                    hardirqs: u16::MAX,
                    softirqs: 9,
                    off_cpu_ns: 10,
                    irq_ns: u32::MAX,
                },
                stack: vec!["ksys_read+0x6b".into(), "ext4_x+0x1 [ext4]".into()],
            },
            SlowCall {
                call: CallRecord::default(),
                stack: Vec::new(),
            },
        ];
        let mut raw = Vec::new();
        encode(&calls, &mut raw);
        let mut back = Vec::new();
        decode(&raw, &mut back).expect("decodes");
        assert_eq!(back, calls);
        for cut in [1, 10, raw.len() - 80] {
            let mut out = Vec::new();
            assert!(
                decode(&raw[..raw.len() - cut], &mut out).is_err(),
                "cut {cut}"
            );
        }
    }
}
