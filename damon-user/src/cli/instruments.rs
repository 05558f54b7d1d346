//! The arguments of the instrument commands (`bench-loop`, `disturb-loop`, `bench-decode`,
//! `bench-floor`, `bench-heatmap`, `read-mix`, `switch-loop`: hidden helpers of the project's
//! benchmarks and guest tests, not part of the user contract). They run in `bench/`; the commands exist with the
//! `instruments` feature only (`cargo xtask build-static` sets it, `cargo xtask dist` does not).
use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub struct LoopArgs {
    /// System calls each task times (after a warm-up of a tenth as many, unless --no-warmup).
    #[arg(long, default_value_t = 1_000_000)]
    pub calls: u64,
    /// Tasks (threads) that each run the loop at the same time.
    #[arg(long, default_value_t = 1)]
    pub tasks: u32,
    /// Where the tasks run: `none` (the scheduler decides), `same` (all on CPU 0, so they
    /// preempt one another) or `spread` (task i on CPU i modulo the CPUs).
    #[arg(long, value_enum, default_value_t = Pin::None)]
    pub pin: Pin,
    /// No warm-up: every task makes exactly --calls system calls (the exactness tests count
    /// them).
    #[arg(long)]
    pub no_warmup: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Pin {
    None,
    Same,
    Spread,
}

#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// Records to push through each measured path.
    #[arg(long, default_value_t = 20_000_000)]
    pub records: u64,
    /// Size of the synthetic ring image in bytes (the default ring size of record/live).
    #[arg(long, default_value_t = damon_common::DEFAULT_RING_BYTES)]
    pub ring_size: u32,
    /// Items handed to the aggregation per drain (what one wake-up of the reader finds).
    #[arg(long, default_value_t = 4096)]
    pub batch: usize,
    /// Leave out the capture write measurement (to profile the others alone).
    #[arg(long)]
    pub skip_write: bool,
    /// Directory for the capture written by the write measurement (removed afterwards).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct FloorArgs {
    /// The kernel function to attach the floor pair to.
    #[arg(long)]
    pub func: String,
    /// fentry: an fentry/fexit pair reading the clock once each; kprobe: a kprobe/kretprobe
    /// pair reading the clock once each; fentry-stamp, kprobe-stamp: either pair keeping each
    /// task's entry time in a hash map, as any exact timing must; kprobe-stamp-ring: the
    /// kprobe stamp pair also writing a 72-byte ring record per call; session: one kprobe
    /// session program keeping the entry time in the call's cookie (Linux ≥ 6.10);
    /// session-ring: the session floor writing the record too; fsession: the session floor on
    /// the BPF trampoline (Linux 7.x).
    #[arg(long, value_parser = ["fentry", "kprobe", "fentry-stamp", "kprobe-stamp", "kprobe-stamp-ring", "session", "session-ring", "fsession"])]
    pub attach: String,
}

#[derive(Debug, Args)]
pub struct DisturbArgs {
    /// The system call each call makes: `sleep` (nanosleep of 1 ms: the task sleeps in
    /// `hrtimer_nanosleep`), `zero` (read of --bytes from /dev/zero: `read_zero` runs that
    /// long), `getppid` (a call too short to be disturbed, mostly).
    #[arg(long, value_parser = ["sleep", "zero", "getppid"])]
    pub work: String,
    #[arg(long, default_value_t = 100)]
    pub calls: u64,
    /// Bytes each `zero` call reads.
    #[arg(long, default_value_t = 1 << 20)]
    pub bytes: usize,
    /// Doubles --bytes (up to 256 MiB) until a `zero` call alone takes at least this many
    /// milliseconds, timed first by another thread on the worker's CPU: a call that should
    /// span several ticks however fast the machine reads.
    #[arg(long, value_name = "MS")]
    pub min_call_ms: Option<u64>,
    /// A spinning thread on the worker's CPU.
    #[arg(long)]
    pub hog: bool,
    /// The spinning thread only during odd-numbered calls (0-based).
    #[arg(long, conflicts_with = "hog")]
    pub hog_odd: bool,
    /// This many timer interrupts a second on the worker's CPU (a perf CPU-clock hrtimer,
    /// which wakes no task), during every call.
    #[arg(long, value_name = "HZ")]
    pub timer_storm: Option<u64>,
    /// The timer storm only during odd-numbered calls, each made after a random part of a
    /// storm period. A `zero` call then reads `--bytes`, doubled until it takes half the
    /// storm's period, and the storm is slowed where it takes longer (timed first by another
    /// thread on the same CPU), so that about one call in two meets it however fast or slow
    /// the machine makes the calls.
    #[arg(long, requires = "timer_storm")]
    pub storm_odd: bool,
}

#[derive(Debug, Args)]
pub struct ReadMixArgs {
    /// read(2) calls of --read-bytes from /dev/zero (the long caller of vfs_read).
    #[arg(long, default_value_t = 50)]
    pub reads: u64,
    #[arg(long, default_value_t = 16 << 20)]
    pub read_bytes: usize,
    /// pread64(2) calls of --pread-bytes (the short caller), in turn with the reads.
    #[arg(long, default_value_t = 500)]
    pub preads: u64,
    #[arg(long, default_value_t = 16)]
    pub pread_bytes: usize,
}

#[derive(Debug, Args)]
pub struct SwitchArgs {
    /// Round trips of one byte between two threads pinned to CPU 0 (two context switches
    /// each).
    #[arg(long, default_value_t = 20_000)]
    pub round_trips: u64,
}

#[derive(Debug, Args)]
pub struct HeatmapArgs {
    /// Calls in the synthetic capture (or fed to the screen).
    #[arg(long, default_value_t = 50_000_000)]
    pub records: u64,
    /// Seconds of the records' clock the calls span.
    #[arg(long, default_value_t = 600)]
    pub seconds: u64,
    /// Write the synthetic capture to FILE instead of timing frames.
    #[arg(long, value_name = "FILE")]
    pub write: Option<PathBuf>,
    /// Frames timed at each checkpoint (the median is reported).
    #[arg(long, default_value_t = 21)]
    pub frames: usize,
}
