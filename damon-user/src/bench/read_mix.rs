//! `read-mix`: ground truth for slow calls (`record --slow`; hidden, the guest tests run it).
//!
//! One worker thread calls `vfs_read` from two callers of very different cost, in turn:
//! `read(2)` of `--read-bytes` from /dev/zero (`ksys_read`: long, `read_zero` clears the whole
//! buffer) and `pread64(2)` of `--pread-bytes` (`ksys_pread64`: a few bytes, short). Prints one
//! JSON line: the worker's tid and how many calls of each kind it made, and the bytes of each.
use std::{os::fd::AsRawFd as _, process::ExitCode};

use anyhow::Context as _;
use serde_json::json;

use crate::cli::instruments::ReadMixArgs;

pub fn run(args: &ReadMixArgs) -> anyhow::Result<ExitCode> {
    let zero = std::fs::File::open("/dev/zero").context("opening /dev/zero")?;
    let fd = zero.as_raw_fd();
    let (reads, preads) = (args.reads, args.preads);
    let (read_bytes, pread_bytes) = (args.read_bytes.max(1), args.pread_bytes.max(1));
    let worker = std::thread::spawn(move || -> anyhow::Result<u32> {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        let mut big = vec![1u8; read_bytes];
        let mut small = vec![1u8; pread_bytes];
        for i in 0..reads.max(preads) {
            if i < reads {
                // SAFETY: the buffer is valid for its length.
                let n = unsafe { libc::read(fd, big.as_mut_ptr().cast(), big.len()) };
                anyhow::ensure!(n >= 0, "read: {}", std::io::Error::last_os_error());
            }
            if i < preads {
                // SAFETY: as above.
                let n = unsafe { libc::pread64(fd, small.as_mut_ptr().cast(), small.len(), 0) };
                anyhow::ensure!(n >= 0, "pread64: {}", std::io::Error::last_os_error());
            }
        }
        Ok(tid)
    });
    let tid = worker
        .join()
        .map_err(|_| anyhow::anyhow!("the worker panicked"))??;
    drop(zero);
    println!(
        "{}",
        json!({
            "tid": tid,
            "reads": reads,
            "preads": preads,
            "read_bytes": read_bytes,
            "pread_bytes": pread_bytes,
        })
    );
    Ok(ExitCode::SUCCESS)
}
