//! The lab's commands of `cargo xtask` (`kernel`, `vm`, `demo`, `soak`, `seed`, `ab`,
//! `patch-ab`, `kernel-ab`, `bench`): their arguments, flattened into xtask's own, and [`run`].
use std::{path::PathBuf, process::ExitCode, time::Duration};

use anyhow::{Context as _, Result};
use clap::Subcommand;

use crate::{
    ab::{self, AbOptions, Attach, Mode},
    bench::{self, BenchOptions},
    bootstrap, build,
    demo::{self, Demo},
    guest::Guest,
    kernel::{self, Kernel},
    seed::{self, Seed, SeedOptions},
    soak,
    util::parse_seconds,
    vm::{ClockArgs, Interactive},
};

/// The lab's subcommands, in `cargo xtask --help`'s order.
#[derive(Subcommand)]
pub enum LabCmd {
    /// Download (or find cached) a guest kernel and print its path and release.
    Kernel {
        /// 7.3 (Debian trixie-backports), 7.2 (Debian sid), 6.12 (Debian trixie), 6.1 (Debian
        /// bookworm) or a path to a bzImage.
        #[arg(long, default_value = "7.2")]
        kernel: Kernel,
    },
    /// Run CMD as root in a fresh QEMU guest with damon-trace on PATH; exits with CMD's status.
    Vm {
        /// 7.3 (Debian trixie-backports), 7.2 (Debian sid), 6.12 (Debian trixie), 6.1 (Debian
        /// bookworm) or a path to a bzImage.
        #[arg(long, default_value = "7.2")]
        kernel: Kernel,
        /// Receives what CMD writes under /out (cleared first). Default: target/vm-out.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Seconds before the guest is killed, boot (~5 s) included.
        #[arg(long, default_value_t = 300)]
        timeout: u64,
        /// Environment for CMD, repeatable: --env RUST_LOG=debug.
        #[arg(long = "env", value_name = "K=V", value_parser = crate::guest::parse_kv)]
        env: Vec<(String, String)>,
        /// Copy a host file into the guest, repeatable: --file ./capture.dtcap:/data/c.dtcap.
        #[arg(long = "file", value_name = "HOST:GUEST", value_parser = crate::guest::parse_file)]
        files: Vec<(PathBuf, String)>,
        /// Use this static damon-trace instead of building one.
        #[arg(long = "bin")]
        binary: Option<PathBuf>,
        /// Extra kernel command-line parameter, repeatable: --append lockdown=confidentiality.
        #[arg(long = "append", value_name = "PARAM")]
        kernel_args: Vec<String>,
        /// Run CMD with the guest console as its terminal (for full-screen apps): our stdin is
        /// forwarded in raw mode (Ctrl-C included; Ctrl-A x kills the guest).
        #[arg(long)]
        tty: bool,
        /// Boot a Debian trixie system with systemd as PID 1 (built once, cached) instead of
        /// the busybox initramfs; CMD runs from a oneshot unit once the system is up, with no
        /// damon-trace on PATH (copy the .deb in with --file and install it).
        #[arg(long, conflicts_with = "tty")]
        systemd: bool,
        /// Boot a Debian kernel's ELF image at its PVH entry, as the VM tests do: 1.6 s sooner
        /// under TCG, at the kernel's link address (no KASLR)
        #[arg(long)]
        direct_boot: bool,
        #[command(flatten)]
        clock: ClockArgs,
        #[command(flatten)]
        term: TermArgs,
        /// The shell command (joined with spaces, run with `sh -c`).
        #[arg(last = true, required = true, num_args = 1..)]
        cmd: Vec<String>,
    },
    /// The main job on a machine whose kernel forbids tracing: boot the 7.2 guest with the
    /// DAMON migrate-hot scenario running and open `damon-trace live` in this terminal (`q`
    /// quits). Without a terminal, or with --report: record a while and print the report; the
    /// capture is left in target/vm-out/damon.dtcap for `damon-trace report`.
    Demo {
        /// 7.3 (Debian trixie-backports), 7.2 (Debian sid), 6.12 (Debian trixie), 6.1 (Debian
        /// bookworm) or a path to a bzImage.
        #[arg(long, default_value = "7.2")]
        kernel: Kernel,
        /// Record and print the report instead of the live screen (works without a terminal).
        #[arg(long)]
        report: bool,
        /// With --report: how long to record, in seconds.
        #[arg(long, default_value_t = 20)]
        seconds: u64,
        /// With --report: extra arguments for `damon-trace record` (e.g. "--attach kprobe").
        #[arg(long, default_value = "")]
        record_args: String,
        /// Extra arguments for `damon-trace live` (e.g. "--window 30").
        #[arg(long, default_value = "")]
        live_args: String,
        #[command(flatten)]
        clock: ClockArgs,
        #[command(flatten)]
        term: TermArgs,
        /// Use this static damon-trace instead of building one.
        #[arg(long = "bin")]
        binary: Option<PathBuf>,
    },
    /// Long soak outside CI: `damon-trace record` for MINUTES under the migrate-hot scenario
    /// in a guest, sampling the recorder's RSS and open fds; writes the curve as Markdown and
    /// JSON under target/soak/ and fails if memory grows, fds grow, or a call is unaccounted.
    Soak {
        /// How long to record.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=24 * 60))]
        minutes: u64,
        /// 7.3 (Debian trixie-backports), 7.2 (Debian sid), 6.12 (Debian trixie), 6.1 (Debian
        /// bookworm) or a path to a bzImage.
        #[arg(long, default_value = "7.2")]
        kernel: Kernel,
    },
    /// A seed measurement on the Debian kernels, as kernel patches post them: hot-score
    /// (damon_hot_score per-call latency on 7.2), lock-timer-ab (lock_timer_base on 6.12
    /// against 7.2, --runs boots each, interleaved, compared over runs) or same-node (time per aggregation interval in the migration functions
    /// when the destination is the memory's own node). Boots the guest(s), records 20 s under
    /// the migrate-hot scenario, prints the report and checks its invariants.
    Seed {
        #[arg(value_enum)]
        seed: Seed,
        /// Receives the captures and the rendered text, JSON and Markdown.
        /// Default: target/seed/<name>.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Use this static damon-trace instead of building one.
        #[arg(long = "bin")]
        binary: Option<PathBuf>,
        /// lock-timer-ab: boots per kernel, interleaved (the run is the unit of replication).
        #[arg(long, default_value_t = seed::LOCK_TIMER_AB_RUNS, value_parser = clap::value_parser!(u32).range(1..=50))]
        runs: u32,
    },
    /// A/B data for comparing two kernels, the run (one fresh boot) as the unit of
    /// replication: boots BEFORE and AFTER interleaved (before, after, before, …; --runs boots
    /// each), records the same functions with the same probe under `damon-trace scenario
    /// migrate-hot` in each, keeps the captures as OUT/before-N.dtcap and OUT/after-N.dtcap
    /// with OUT/runs.json, then runs `damon-trace compare --before F… --after F…` on this host
    /// into OUT/compare.{txt,json,md} and prints compare.txt.
    Ab {
        /// The reference kernel: 7.3 (Debian trixie-backports), 7.2 (Debian sid), 6.12 (Debian
        /// trixie), 6.1 (Debian bookworm) or a path to a bzImage.
        #[arg(long)]
        before: Kernel,
        /// The kernel judged against it (the same as --before for an A/A run).
        #[arg(long)]
        after: Kernel,
        /// Boots per kernel.
        #[arg(long, default_value_t = ab::DEFAULT_RUNS, value_parser = clap::value_parser!(u32).range(1..=100))]
        runs: u32,
        /// Extra arguments for `damon-trace scenario migrate-hot` (e.g. "--dest-node same").
        #[arg(long, default_value = "", allow_hyphen_values = true)]
        scenario_args: String,
        /// Seconds each run records (20 or 20s).
        #[arg(long, default_value_t = ab::DEFAULT_SECONDS, value_parser = parse_seconds)]
        duration: u64,
        /// The functions to record, comma-separated. Default: the four built-ins.
        #[arg(long, value_delimiter = ',')]
        functions: Vec<String>,
        /// The probe, the same on both kernels (auto would pick kprobe on the preemptible 7.x
        /// kernels and fentry on 6.x, whose costs differ).
        #[arg(long, value_enum, default_value_t = Attach::Fentry)]
        attach: Attach,
        /// Recording mode. Default: record's.
        #[arg(long, value_enum)]
        mode: Option<Mode>,
        /// Receives the captures, runs.json and compare.* (its old captures are removed first).
        /// Default: target/ab/<before>-vs-<after>.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Use this static damon-trace (in the guests and for the compare) instead of building
        /// one.
        #[arg(long = "bin")]
        binary: Option<PathBuf>,
        /// Boot nothing: compare the captures already in OUT again.
        #[arg(long)]
        compare_only: bool,
        #[command(flatten)]
        clock: ClockArgs,
    },
    /// A kernel patch as the only difference, outside CI: builds the two variants of
    /// xtask/patches/PATCH as livepatch modules (a Debian chroot with the guest kernel's
    /// headers and compiler, cached), boots one guest under the migrate-hot scenario, loads
    /// the variants alternately (before, after, … --runs each), records the patched function
    /// for --duration after each load, and prints the multi-run compare. Patches: seed-000
    /// (damon_hot_score: age loop vs fls), control (a known 1 µs ndelay). Run as root.
    PatchAb {
        /// A directory under xtask/patches (seed-000, control).
        patch: String,
        /// Loads per variant.
        #[arg(long, default_value_t = crate::patch_ab::DEFAULT_RUNS, value_parser = clap::value_parser!(u32).range(1..=50))]
        runs: u32,
        /// Seconds each run records (15 or 15s).
        #[arg(long, default_value_t = crate::patch_ab::DEFAULT_SECONDS, value_parser = parse_seconds)]
        duration: u64,
        /// A Debian kernel with a livepatch-enabled build and headers in its suite.
        #[arg(long, default_value = "7.2")]
        kernel: Kernel,
        /// Receives the captures, logs and compare.*. Default: target/patch-ab/<patch>.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Boot nothing: compare the --runs captures already in OUT again.
        #[arg(long)]
        compare_only: bool,
        /// Use this static damon-trace (in the guest and for the compare) instead of building
        /// one.
        #[arg(long = "bin")]
        binary: Option<PathBuf>,
        #[command(flatten)]
        clock: ClockArgs,
    },
    /// A kernel patch as two kernels, outside CI: builds Debian's linux-source of the guest
    /// kernel's release (7.2) with a small configuration in patch-ab's chroot, then the
    /// variant with PATCH applied (the seeds reversed: the source has them), boots the pair
    /// A B B A … (--runs each, kprobe sessions) and prints the multi-run compare and the
    /// patch's own view. Builds are cached under ~/.cache/damon-trace/kernel-ab. Run as root.
    KernelAb(crate::kernel_ab::args::KernelAbArgs),
    /// Benchmarks outside CI: per-call overhead of tracing a syscall's kernel function in one
    /// guest boot or --boots N (untraced, bpftrace, damon-trace's methods, alternating for
    /// --rounds), userspace throughput on this host, optionally `live`'s memory at full rate
    /// (target/bench/bench.{md,json}); or, with --startup, start-up against bpftrace's.
    Bench {
        /// System calls per timed loop.
        #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1000..))]
        calls: u64,
        /// Rounds of the configurations after a warm-up round, each in an order rotated by one
        /// (ratios to bpftrace with 95 % intervals over rounds are reported). 30: on this
        /// loaded 2-core host 8 rounds left two of three targets unresolved, and their
        /// intervals said about 32 rounds would settle stream/fentry's (about 2 min a round).
        #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(2..=100))]
        rounds: u32,
        /// Guest boots of the overhead runs, one after another. With 2 or more, each boot's
        /// tables go to target/bench/boot-K/ and the verdicts come from the boots (t interval
        /// over each boot's estimate): a boot's own interval is over its rounds and does not
        /// hold what moves a whole boot.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
        boots: u32,
        /// Run nothing: combine the bench.json files of earlier runs (one boot each, or a
        /// --boots run's) into verdicts across their boots, written to
        /// target/bench/boots.{md,json}. Boots of one kernel, function and loop only.
        #[arg(long, num_args = 1.., value_name = "BENCH_JSON")]
        combine: Vec<PathBuf>,
        /// 7.3 (Debian trixie-backports, bpftrace from trixie), 7.2 (Debian sid), 6.12 (Debian
        /// trixie) or 6.1 (Debian bookworm): the guest kernel and bpftrace's suite.
        #[arg(long, default_value = "7.2")]
        kernel: Kernel,
        /// The traced kernel function the loop calls (getppid's).
        #[arg(long, default_value = bench::DEFAULT_FUNC)]
        func: String,
        /// Records per userspace throughput path.
        #[arg(long, default_value_t = 20_000_000)]
        decode_records: u64,
        /// Also run `live` at full rate for this many minutes in a guest and sample its memory.
        #[arg(long, default_value_t = 0)]
        live_rss_minutes: u64,
        /// Skip the per-call overhead runs.
        #[arg(long)]
        skip_overhead: bool,
        /// Only these configurations (comma-separated names as in the table's files, e.g.
        /// stream-ksession,kernel-ksession,floor-session); untraced and bpftrace always run,
        /// the ratios need them. stream-ksession-nolog builds damon-trace a second time,
        /// without the probes' log calls.
        #[arg(long, value_delimiter = ',', value_name = "NAMES", value_parser = parse_bench_config)]
        configs: Vec<bench::table::Config>,
        /// Use this static damon-trace instead of building one.
        #[arg(long = "bin")]
        binary: Option<PathBuf>,
        #[command(flatten)]
        clock: ClockArgs,
        #[command(flatten)]
        startup: bench::startup::StartupArgs,
    },
}

/// The guest terminal of `--tty` runs; each defaults to the host terminal's.
#[derive(clap::Args)]
pub struct TermArgs {
    /// Terminal rows in the guest (default: this terminal's, else 24).
    #[arg(long, value_parser = clap::value_parser!(u16).range(2..))]
    rows: Option<u16>,
    /// Terminal columns in the guest (default: this terminal's, else 80).
    #[arg(long, value_parser = clap::value_parser!(u16).range(10..))]
    cols: Option<u16>,
    /// TERM in the guest (default: $TERM, else xterm-256color).
    #[arg(long)]
    term: Option<String>,
}

impl TermArgs {
    fn interactive(self) -> Interactive {
        Interactive::terminal(self.rows, self.cols, self.term)
    }
}

fn parse_bench_config(name: &str) -> Result<bench::table::Config, String> {
    use bench::table::Config;
    Config::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Config::ALL.iter().map(|c| c.name()).collect();
        format!("unknown configuration; one of: {}", names.join(", "))
    })
}

/// The `--bin` given, else a fresh `build-static`.
fn binary_or_build(binary: Option<PathBuf>) -> Result<PathBuf> {
    match binary {
        Some(b) => Ok(b),
        None => build::build_static(&bootstrap::ensure()?),
    }
}

/// Runs one of the lab's commands; its exit code becomes xtask's.
pub fn run(cmd: LabCmd) -> Result<ExitCode> {
    match cmd {
        LabCmd::Kernel { kernel } => {
            bootstrap::ensure()?;
            let k = kernel::fetch(&kernel)?;
            println!("{} {}", k.release, k.vmlinuz.display());
            Ok(ExitCode::SUCCESS)
        }
        cmd @ (LabCmd::Vm { .. } | LabCmd::Demo { .. }) => guest_command(cmd),
        cmd => Ok(if measurement(cmd)? {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }),
    }
}

/// `vm` and `demo`: a guest whose exit status becomes ours.
fn guest_command(cmd: LabCmd) -> Result<ExitCode> {
    match cmd {
        LabCmd::Vm {
            kernel,
            out,
            timeout,
            env,
            files,
            binary,
            kernel_args,
            tty,
            systemd,
            direct_boot,
            clock,
            term,
            cmd,
        } => {
            let binary = binary_or_build(binary)?;
            let mut guest = Guest::new(kernel, cmd.join(" "))
                .clock(clock.clock)
                .timeout(Duration::from_secs(timeout))
                .env(env)
                .files(files)
                .binary(Some(binary))
                .direct_boot(direct_boot);
            guest.set_kernel_args(kernel_args);
            if let Some(out) = out {
                guest = guest.out_dir(out);
            }
            if tty {
                guest = guest.interactive(term.interactive());
            }
            if systemd {
                guest = guest.systemd().memory_mib(crate::sysimage::GUEST_MIB);
            }
            let outcome = guest.run()?;
            let code = u8::try_from(outcome.status).context("exit status out of range")?;
            Ok(ExitCode::from(code))
        }
        LabCmd::Demo {
            kernel,
            report,
            seconds,
            record_args,
            live_args,
            clock,
            term,
            binary,
        } => {
            let demo = Demo {
                kernel,
                report,
                seconds,
                record_args,
                live_args,
                terminal: term.interactive(),
                clock: clock.clock,
            };
            let binary = binary_or_build(binary)?;
            let status = demo::run(&demo, binary)?;
            let code = u8::try_from(status).context("exit status out of range")?;
            Ok(ExitCode::from(code))
        }
        _ => unreachable!("run sends only vm and demo here"),
    }
}

/// `soak`, `seed`, `ab`, `patch-ab` and `bench`: whether the measurement met its checks.
fn measurement(cmd: LabCmd) -> Result<bool> {
    match cmd {
        LabCmd::Soak { minutes, kernel } => soak::run(kernel, minutes),
        LabCmd::Seed {
            seed,
            out,
            binary,
            runs,
        } => {
            let binary = binary_or_build(binary)?;
            let mut opts = SeedOptions::new(out.unwrap_or_else(|| seed.default_out_dir()));
            opts.binary = Some(binary);
            opts.runs = runs;
            seed::main(seed, &opts)
        }
        LabCmd::Ab {
            before,
            after,
            runs,
            scenario_args,
            duration,
            functions,
            attach,
            mode,
            out,
            binary,
            compare_only,
            clock,
        } => {
            let binary = binary_or_build(binary)?;
            let mut opts = AbOptions::new(before, after);
            opts.clock = clock.clock;
            if let Some(dir) = opts.out_dir.file_name().and_then(|d| d.to_str()) {
                opts.out_dir = opts.out_dir.with_file_name(clock.clock.dir_name(dir));
            }
            if let Some(out) = out {
                opts.out_dir = out;
            }
            opts.runs = runs;
            opts.scenario_args = scenario_args;
            opts.seconds = duration;
            opts.functions = functions;
            opts.attach = attach;
            opts.mode = mode;
            opts.binary = Some(binary);
            opts.compare_only = compare_only;
            ab::main(&opts)
        }
        LabCmd::PatchAb {
            patch,
            runs,
            duration,
            kernel,
            out,
            binary,
            compare_only,
            clock,
        } => {
            let mut opts = crate::patch_ab::PatchAbOptions::new(&patch);
            opts.clock = clock.clock;
            opts.out_dir = opts.out_dir.with_file_name(clock.clock.dir_name(&patch));
            opts.compare_only = compare_only;
            if let Some(out) = out {
                opts.out_dir = out;
            }
            opts.runs = runs;
            opts.seconds = duration;
            opts.kernel = kernel;
            opts.binary = Some(binary_or_build(binary)?);
            crate::patch_ab::main(&opts)
        }
        LabCmd::KernelAb(args) => {
            let binary = binary_or_build(args.binary.clone())?;
            crate::kernel_ab::main(&args.options(binary))
        }
        cmd @ LabCmd::Bench { .. } => bench_command(cmd),
        _ => {
            unreachable!("run sends only soak, seed, ab, patch-ab, kernel-ab and bench here")
        }
    }
}

/// `cargo xtask bench`.
fn bench_command(cmd: LabCmd) -> Result<bool> {
    let LabCmd::Bench {
        calls,
        rounds,
        boots,
        combine,
        kernel,
        func,
        decode_records,
        live_rss_minutes,
        skip_overhead,
        configs,
        binary,
        clock,
        startup,
    } = cmd
    else {
        unreachable!("bench_command takes bench only")
    };
    if startup.startup {
        return bench::startup::run(&kernel, &binary_or_build(binary)?, startup.starts);
    }
    // Combining earlier runs needs no binary.
    let binary = if combine.is_empty() {
        binary_or_build(binary)?
    } else {
        binary.unwrap_or_default()
    };
    let configs = bench::selected_configs(&configs);
    let runs = combine.is_empty() && !skip_overhead;
    let binary_no_log = bench::binary_without_probe_log(runs, &configs)?;
    let opts = BenchOptions {
        kernel,
        calls,
        rounds,
        boots,
        combine,
        func,
        decode_records,
        live_rss_minutes,
        skip_overhead,
        configs,
        binary,
        binary_no_log,
        out_dir: crate::util::target_dir().join(clock.clock.dir_name("bench")),
        clock: clock.clock,
    };
    bench::run(&opts)
}
