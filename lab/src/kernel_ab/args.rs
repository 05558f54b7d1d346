//! `cargo xtask kernel-ab`'s command line.
use std::path::PathBuf;

use super::{DEFAULT_RUNS, DEFAULT_SECONDS, KernelAbOptions};

#[derive(Debug, Clone, clap::Args)]
pub struct KernelAbArgs {
    /// A patch under xtask/kernel-ab (seed-000, seed-001, seed-003, control) or the path of a
    /// unified diff against the kernel source (-p1, as `git diff` writes it).
    pub patch: String,
    /// Apply the diff reversed: the source already has it, so the kernel without it is the
    /// "before" (the shipped seeds say so themselves).
    #[arg(long)]
    pub reverse: bool,
    /// Boots per kernel (at least 2: the verdict is over runs).
    #[arg(long, default_value_t = DEFAULT_RUNS, value_parser = clap::value_parser!(u32).range(2..=50))]
    pub runs: u32,
    /// Seconds each run records (20 or 20s).
    #[arg(long, default_value_t = DEFAULT_SECONDS, value_parser = crate::util::parse_seconds)]
    pub duration: u64,
    /// Arguments for `damon-trace scenario migrate-hot`, replacing the patch's own (seed-003:
    /// "--dest-node same").
    #[arg(long, allow_hyphen_values = true)]
    pub scenario_args: Option<String>,
    /// `make -j` for the kernel builds. Default: the number of CPUs.
    #[arg(long, default_value_t = 0)]
    pub jobs: usize,
    /// Receives the images, captures, runs.json, compare.* and seed.txt. Default:
    /// target/kernel-ab/<patch>.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Build and boot nothing: compare the captures already in OUT again.
    #[arg(long)]
    pub compare_only: bool,
    /// Use this static damon-trace (in the guests and for the compare) instead of building one.
    #[arg(long = "bin")]
    pub binary: Option<PathBuf>,
    #[command(flatten)]
    pub clock: crate::vm::ClockArgs,
}

impl KernelAbArgs {
    /// The options, with `binary` (built by the caller when not given).
    pub fn options(self, binary: PathBuf) -> KernelAbOptions {
        KernelAbOptions {
            reverse: self.reverse,
            runs: self.runs,
            seconds: self.duration,
            scenario_args: self.scenario_args,
            out_dir: self.out,
            binary: Some(binary),
            compare_only: self.compare_only,
            jobs: self.jobs,
            clock: self.clock.clock,
            ..KernelAbOptions::new(&self.patch)
        }
    }
}
