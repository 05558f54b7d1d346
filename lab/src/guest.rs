//! One way to boot a guest, for the VM tests, `seed`, `ab`, `soak`, `demo` and `bench`: a
//! builder over [`VmOptions`] (kernel, command, timeout, out dir, files, terminal, …) whose
//! [`Guest::run`] returns the outcome together with the directory holding the guest's /out.
//!
//! ```no_run
//! use std::time::Duration;
//! use damon_lab::{guest::Guest, kernel::Kernel};
//! let run = Guest::new(Kernel::DEBIAN_7_2, "damon-trace --version > /out/v.txt")
//!     .temp_out()
//!     .timeout(Duration::from_secs(120))
//!     .run_ok()?;
//! assert!(run.dir().join("v.txt").is_file());
//! # anyhow::Ok(())
//! ```
use std::{
    fs,
    ops::Deref,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context as _, Result, bail};

use crate::{
    kernel::Kernel,
    vm::{self, Interactive, VmOptions, VmOutcome},
};

/// A guest to boot: [`VmOptions`] with its out dir either given or a fresh temp dir.
#[derive(Debug, Clone)]
pub struct Guest {
    opts: VmOptions,
    temp_out: bool,
}

impl Guest {
    /// `cmd` on `kernel` with [`VmOptions::new`]'s defaults.
    pub fn new(kernel: Kernel, cmd: impl Into<String>) -> Self {
        Self {
            opts: VmOptions::new(kernel, cmd),
            temp_out: false,
        }
    }

    /// /out lands in `out` under a fresh temp dir, removed when the [`GuestRun`] is dropped.
    pub fn temp_out(mut self) -> Self {
        self.temp_out = true;
        self
    }

    /// /out lands in `dir` (cleared first).
    pub fn out_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.opts.out_dir = dir.into();
        self.temp_out = false;
        self
    }

    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.opts.timeout = timeout;
        self
    }

    /// The damon-trace to put in the guest (None: as [`vm::guest_binary`] chooses).
    pub fn binary(mut self, binary: Option<PathBuf>) -> Self {
        self.opts.binary = binary;
        self
    }

    /// Does not echo the console as it arrives.
    pub fn quiet(mut self) -> Self {
        self.opts.echo = false;
        self
    }

    /// The command runs with the serial console as its controlling terminal.
    pub fn interactive(mut self, terminal: Interactive) -> Self {
        self.opts.interactive = Some(terminal);
        self
    }

    /// The guest's clock (the host's time by default).
    pub fn clock(mut self, clock: crate::vm::GuestClock) -> Self {
        self.opts.clock = clock;
        self
    }

    /// Whether to boot the kernel's ELF image at its PVH entry where it has one (see
    /// [`VmOptions::direct_boot`]).
    pub fn direct_boot(mut self, on: bool) -> Self {
        self.opts.direct_boot = on;
        self
    }

    /// Extra kernel command-line parameters.
    pub fn kernel_args(mut self, args: &[&str]) -> Self {
        self.set_kernel_args(args.iter().map(|s| (*s).to_owned()).collect());
        self
    }

    pub fn set_kernel_args(&mut self, args: Vec<String>) {
        self.opts.kernel_args = args;
    }

    /// Host directories merged into the guest's `/`.
    pub fn trees(mut self, trees: Vec<PathBuf>) -> Self {
        self.opts.trees = trees;
        self
    }

    /// Host files copied into the guest: (host path, absolute guest path).
    pub fn files(mut self, files: Vec<(PathBuf, String)>) -> Self {
        self.opts.files = files;
        self
    }

    pub fn env(mut self, env: Vec<(String, String)>) -> Self {
        self.opts.env = env;
        self
    }

    /// Boots the Debian system with systemd as PID 1 (see [`VmOptions::systemd`]).
    pub fn systemd(mut self) -> Self {
        self.opts.systemd = true;
        self
    }

    pub fn memory_mib(mut self, mib: u32) -> Self {
        self.opts.memory_mib = mib;
        self
    }

    /// The options as [`vm::run`] will get them (the temp out dir is made by [`Guest::run`]).
    pub fn options(&self) -> &VmOptions {
        &self.opts
    }

    /// Boots the guest and runs the command; any exit status is an outcome.
    pub fn run(mut self) -> Result<GuestRun> {
        let temp = if self.temp_out {
            let t = tempfile::tempdir().context("creating a temp dir for /out")?;
            self.opts.out_dir = t.path().join("out");
            Some(t)
        } else {
            None
        };
        let outcome = vm::run(&self.opts)?;
        Ok(GuestRun {
            dir: self.opts.out_dir.clone(),
            outcome,
            temp,
        })
    }

    /// [`Guest::run`], with a non-zero status an error carrying the guest's kernel release,
    /// the background scenario's stderr (/out/scenario.err) and the end of the console.
    pub fn run_ok(self) -> Result<GuestRun> {
        let run = self.run()?;
        if run.status != 0 {
            bail!("{}", run.failure(40));
        }
        Ok(run)
    }
}

/// A guest that ran: its outcome (also through `Deref`) and where its /out is. A temp /out is
/// removed when the run is dropped, except while a test is failing (the thread panicking):
/// then it is kept and its path printed, so what the guest wrote (a recorder's stderr, the
/// scenario's) can explain the failure.
#[derive(Debug)]
pub struct GuestRun {
    pub outcome: VmOutcome,
    dir: PathBuf,
    temp: Option<tempfile::TempDir>,
}

impl Drop for GuestRun {
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Some(t) = self.temp.take()
        {
            eprintln!(
                "[xtask] the failed guest's /out is kept in {}",
                t.keep().join("out").display()
            );
        }
    }
}

impl Deref for GuestRun {
    type Target = VmOutcome;
    fn deref(&self) -> &VmOutcome {
        &self.outcome
    }
}

impl GuestRun {
    /// The guest's /out, copied back.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A file the guest wrote under /out, or "" when there is none.
    pub fn read(&self, name: &str) -> String {
        fs::read_to_string(self.dir.join(name)).unwrap_or_default()
    }

    /// What went wrong: the status, the kernel, the scenario's stderr and the console's last
    /// `lines` lines (the console holds the recorder's own errors; its end is enough when it
    /// was not echoed).
    pub fn failure(&self, lines: usize) -> String {
        let all: Vec<&str> = self.console.lines().collect();
        let tail = all[all.len().saturating_sub(lines)..].join("\n");
        format!(
            "the guest command failed with status {} on {}\n--- scenario.err ---\n{}\n\
             --- console (end) ---\n{tail}",
            self.status,
            self.kernel_release,
            self.read("scenario.err")
        )
    }
}

/// `K=V` of a command line's `--env`.
pub fn parse_kv(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not K=V"))?;
    Ok((k.to_owned(), v.to_owned()))
}

/// `HOST:GUEST` of a command line's `--file`, the guest path absolute.
pub fn parse_file(s: &str) -> Result<(PathBuf, String), String> {
    let (h, g) = s
        .rsplit_once(':')
        .ok_or_else(|| format!("`{s}` is not HOST:GUEST"))?;
    if !g.starts_with('/') {
        return Err(format!("guest path `{g}` must be absolute"));
    }
    Ok((PathBuf::from(h), g.to_owned()))
}
