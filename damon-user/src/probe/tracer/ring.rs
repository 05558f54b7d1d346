//! Reads call records from the BPF ring buffer on tokio.
use std::io;

use aya::maps::{MapData, RingBuf};
use damon_common::{CALL_RECORD_SIZE, CallRecord};
use tokio::io::unix::AsyncFd;

/// The longest a record waits in the ring when the kernel has not woken the reader.
pub const DRAIN_PERIOD: std::time::Duration = std::time::Duration::from_millis(50);

pub struct RingReader {
    fd: AsyncFd<RingBuf<MapData>>,
    /// Items whose size was not that of a [`CallRecord`]; never expected, counted to be sure.
    pub malformed: u64,
}

/// Decodes one ring item; `None` if its size is wrong.
pub fn decode(bytes: &[u8]) -> Option<CallRecord> {
    debug_assert_eq!(CALL_RECORD_SIZE, std::mem::size_of::<CallRecord>());
    decode_as(bytes)
}

/// Decodes one ring item as a `T`; `None` if its size is not `T`'s.
pub fn decode_as<T: aya::Pod>(bytes: &[u8]) -> Option<T> {
    if bytes.len() != std::mem::size_of::<T>() {
        return None;
    }
    // SAFETY: the length was checked; T is Pod (any bit pattern is valid), and
    // read_unaligned copes with the ring's 8-byte alignment not being guaranteed to Rust.
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

impl RingReader {
    pub fn new(ring: RingBuf<MapData>) -> io::Result<RingReader> {
        // SAFETY: the ring owns its map fd (MapData), keeps it open while we hold it, and
        // as_raw_fd always returns that same fd.
        let fd = unsafe { AsyncFd::register_with_interest(ring, tokio::io::Interest::READABLE) }
            .map_err(io::Error::from)?;
        Ok(RingReader { fd, malformed: 0 })
    }

    /// Hands every record currently in the ring to `sink`; returns how many.
    pub fn drain(&mut self, sink: &mut impl FnMut(CallRecord)) -> usize {
        let ring = self.fd.get_mut();
        let mut n = 0;
        while let Some(item) = ring.next() {
            match decode(&item) {
                Some(r) => {
                    sink(r);
                    n += 1;
                }
                None => self.malformed += 1,
            }
        }
        n
    }

    /// Waits until the kernel signals new data, or at most [`DRAIN_PERIOD`], then drains it
    /// all. The kernel programs wake the reader only once a sixteenth of the ring waits (one
    /// wake-up per thousands of records under load); the period bounds how long a trickle of
    /// records waits unread.
    pub async fn drain_when_ready(
        &mut self,
        sink: &mut impl FnMut(CallRecord),
    ) -> io::Result<usize> {
        if let Ok(guard) = tokio::time::timeout(DRAIN_PERIOD, self.fd.readable_mut()).await {
            guard?.clear_ready();
        }
        Ok(self.drain(sink))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_records_and_rejects_wrong_sizes() {
        let rec = CallRecord {
            entry_ns: 1,
            duration_ns: 42,
            value: -3,
            arg0: 5,
            arg1: -6,
            pid: 7,
            tid: 8,
            cpu: 1,
            func: 3,
            slept: 1,
            preempted: 2,
            hardirqs: u16::MAX,
            softirqs: 4,
            off_cpu_ns: 1_000,
            irq_ns: u32::MAX,
        };
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&rec.entry_ns.to_le_bytes());
        bytes.extend_from_slice(&rec.duration_ns.to_le_bytes());
        bytes.extend_from_slice(&rec.value.to_le_bytes());
        bytes.extend_from_slice(&rec.arg0.to_le_bytes());
        bytes.extend_from_slice(&rec.arg1.to_le_bytes());
        for v in [rec.pid, rec.tid, rec.cpu, rec.func] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        for v in rec.disturbance() {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        for v in [rec.off_cpu_ns, rec.irq_ns] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(decode(&bytes), Some(rec));
        assert_eq!(decode(&bytes[..71]), None);
        bytes.push(0);
        assert_eq!(decode(&bytes), None);
    }
}
