//! `cargo xtask <command>`: see `cargo xtask --help`.
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};
use damon_lab::{bootstrap, build, cli::LabCmd};
use xtask::{
    shape,
    testing::{self, TestOptions},
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
    /// Build what goes onto a real machine: the stripped static binary (dist profile) with its
    /// man pages, shell completions and `serve`'s systemd unit, as target/packages/
    /// damon-trace-VERSION-x86_64-linux-musl.tar.gz and damon-trace_VERSION_amd64.deb.
    Dist,
    #[command(flatten)]
    Lab(Box<LabCmd>),
    /// The code's shape: damon-user's top-level modules and the workspace's crates import only
    /// from their own layer or lower ones (xtask/src/shape/layers.rs), no import cycle, clap
    /// only in the command line. Exit 1 when any is broken (also a `test` stage). Files over
    /// 600 lines and functions over 100 are warnings.
    Shape,
    /// Run every check: fmt, shape, clippy, host tests, then the VM tests.
    Test {
        /// Skip the VM tests (local iteration only; CI runs them).
        #[arg(long)]
        skip_vm: bool,
    },
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
        Cmd::Dist => {
            let dist = xtask::dist::run_dist(&bootstrap::ensure()?)?;
            println!("{}\n{}", dist.tarball.display(), dist.deb.display());
        }
        Cmd::Lab(cmd) => return damon_lab::cli::run(*cmd),
        Cmd::Shape => {
            let shape = shape::check(&damon_lab::util::workspace_root())?;
            print!("{}", shape.render());
            if !shape.ok() {
                return Ok(ExitCode::FAILURE);
            }
        }
        Cmd::Test { skip_vm } => testing::run_all(&TestOptions { skip_vm })?,
    }
    Ok(ExitCode::SUCCESS)
}
