//! `cargo xtask <command>`: see `cargo xtask --help`.
use std::{path::PathBuf, process::ExitCode, time::Duration};

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand};
use xtask::{
    bootstrap, build,
    kernel::{self, Kernel},
    testing::{self, TestOptions},
    vm::{self, Interactive, VmOptions},
};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "damon-trace developer tasks", version)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install what builds need (nightly + rust-src, musl target, bpf-linker); idempotent.
    Bootstrap,
    /// Build the static (musl) damon-trace and print its path.
    BuildStatic,
    /// Download (or find cached) a guest kernel and print its path and release.
    Kernel {
        /// 7.2 (Debian sid), 6.12 (Debian trixie) or a path to a bzImage.
        #[arg(long, default_value = "7.2")]
        kernel: Kernel,
    },
    /// Run CMD as root in a fresh QEMU guest with damon-trace on PATH; exits with CMD's status.
    Vm {
        /// 7.2 (Debian sid), 6.12 (Debian trixie) or a path to a bzImage.
        #[arg(long, default_value = "7.2")]
        kernel: Kernel,
        /// Receives what CMD writes under /out (cleared first). Default: target/vm-out.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Seconds before the guest is killed, boot (~5 s) included.
        #[arg(long, default_value_t = 300)]
        timeout: u64,
        /// Environment for CMD, repeatable: --env RUST_LOG=debug.
        #[arg(long = "env", value_name = "K=V", value_parser = parse_kv)]
        env: Vec<(String, String)>,
        /// Copy a host file into the guest, repeatable: --file ./capture.dtcap:/data/c.dtcap.
        #[arg(long = "file", value_name = "HOST:GUEST", value_parser = parse_file)]
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
        #[command(flatten)]
        term: TermArgs,
        /// The shell command (joined with spaces, run with `sh -c`).
        #[arg(last = true, required = true, num_args = 1..)]
        cmd: Vec<String>,
    },
    /// The main job on a machine whose kernel forbids tracing: boot the 7.2 guest, run the
    /// DAMON migrate-hot scenario, record it and print the report. The capture is left in
    /// target/vm-out/damon.dtcap for `damon-trace report`.
    Demo {
        /// 7.2 (Debian sid), 6.12 (Debian trixie) or a path to a bzImage.
        #[arg(long, default_value = "7.2")]
        kernel: Kernel,
        /// How long to record, in seconds.
        #[arg(long, default_value_t = 20)]
        seconds: u64,
        /// Extra arguments for `damon-trace record` (e.g. "--attach kprobe").
        #[arg(long, default_value = "")]
        record_args: String,
    },
    /// Run every check: fmt, clippy, host tests, then the VM tests.
    Test {
        /// Skip the VM tests (local iteration only; CI runs them).
        #[arg(long)]
        skip_vm: bool,
    },
}

/// The guest terminal of `--tty` runs; each defaults to the host terminal's.
#[derive(clap::Args)]
struct TermArgs {
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

fn parse_kv(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not K=V"))?;
    Ok((k.to_owned(), v.to_owned()))
}

fn parse_file(s: &str) -> Result<(PathBuf, String), String> {
    let (h, g) = s
        .rsplit_once(':')
        .ok_or_else(|| format!("`{s}` is not HOST:GUEST"))?;
    if !g.starts_with('/') {
        return Err(format!("guest path `{g}` must be absolute"));
    }
    Ok((PathBuf::from(h), g.to_owned()))
}

/// Guest script of `demo`: the scenario in the background (its log goes to /out), a recording
/// while it runs, then the report.
fn demo_command(seconds: u64, record_args: &str) -> String {
    format!(
        "damon-trace scenario migrate-hot --duration {scenario}s > /out/scenario.log 2>&1 &
scenario=$!
sleep 3
damon-trace record -o /out/damon.dtcap --duration {seconds}s {record_args} || exit $?
kill -INT $scenario 2>/dev/null; wait $scenario
echo
damon-trace report /out/damon.dtcap",
        scenario = seconds + 30
    )
}

fn main() -> ExitCode {
    match real_main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn real_main() -> Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Bootstrap => {
            bootstrap::ensure()?;
        }
        Cmd::BuildStatic => {
            let tc = bootstrap::ensure()?;
            println!("{}", build::build_static(&tc)?.display());
        }
        Cmd::Kernel { kernel } => {
            bootstrap::ensure()?;
            let k = kernel::fetch(&kernel)?;
            println!("{} {}", k.release, k.vmlinuz.display());
        }
        Cmd::Vm {
            kernel,
            out,
            timeout,
            env,
            files,
            binary,
            kernel_args,
            tty,
            term,
            cmd,
        } => {
            let binary = match binary {
                Some(b) => b,
                None => build::build_static(&bootstrap::ensure()?)?,
            };
            let mut opts = VmOptions::new(kernel, cmd.join(" "));
            if let Some(out) = out {
                opts.out_dir = out;
            }
            opts.timeout = Duration::from_secs(timeout);
            opts.env = env;
            opts.files = files;
            opts.binary = Some(binary);
            opts.kernel_args = kernel_args;
            opts.interactive = tty.then(|| term.interactive());
            let outcome = vm::run(&opts)?;
            let code = u8::try_from(outcome.status).context("exit status out of range")?;
            return Ok(ExitCode::from(code));
        }
        Cmd::Demo {
            kernel,
            seconds,
            record_args,
        } => {
            let mut opts = VmOptions::new(kernel, demo_command(seconds, &record_args));
            opts.binary = Some(build::build_static(&bootstrap::ensure()?)?);
            opts.timeout = Duration::from_secs(seconds + 240);
            let outcome = vm::run(&opts)?;
            if outcome.status == 0 {
                eprintln!(
                    "capture: {} (read it with `damon-trace report`)",
                    opts.out_dir.join("damon.dtcap").display()
                );
            }
            let code = u8::try_from(outcome.status).context("exit status out of range")?;
            return Ok(ExitCode::from(code));
        }
        Cmd::Test { skip_vm } => testing::run_all(&TestOptions { skip_vm })?,
    }
    Ok(ExitCode::SUCCESS)
}
