//! Runs a shell command as root inside a fresh QEMU (TCG) guest booting a stock Debian kernel.
//!
//! The guest has `damon-trace` (static musl build) and busybox on PATH, proc/sys/dev, debugfs,
//! tracefs, securityfs and bpffs mounted, two NUMA nodes (cpu 0 on node 0, cpu 1 on node 1,
//! 512 MiB each), and an empty tmpfs at `/out`. Whatever the command writes under `/out` is
//! copied back into [`VmOptions::out_dir`] (cleared first). The console (kernel messages at
//! loglevel 1, the command's stdout and stderr) is echoed live and returned.
//!
//! ```no_run
//! use std::time::Duration;
//! use damon_lab::{kernel::Kernel, vm::{self, VmOptions}};
//! let out = tempfile::tempdir()?;
//! let mut opts = VmOptions::new(Kernel::DEBIAN_7_2, "damon-trace --version > /out/v.txt; exit 3");
//! opts.out_dir = out.path().to_path_buf();
//! opts.timeout = Duration::from_secs(120);
//! let outcome = vm::run(&opts)?;
//! assert_eq!(outcome.status, 3);
//! assert!(out.path().join("v.txt").is_file());
//! # anyhow::Ok(())
//! ```
//!
//! With [`VmOptions::interactive`] the command runs instead in a session of its own whose
//! controlling terminal is the serial console (`/dev/ttyS0`, sized with `stty`, `TERM` set), so
//! full-screen programs work; its keyboard is our stdin (raw mode, for people) or a script of
//! [`KeyStep`]s fired when the rendered screen shows something (for tests), and
//! [`VmOutcome::terminal`] keeps the raw console and the screens the steps saw.
//!
//! Errors (not a non-zero status) report a guest that panicked, hung past the timeout, or died
//! before printing its exit marker; each names the cause and the console's last lines.
mod console;
mod hostterm;
pub mod interactive;
mod outdir;
pub mod screen;
mod session;
mod stream;

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::Mutex,
    thread,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context as _, Result, bail};

pub use self::{
    hostterm::is_interactive as host_is_interactive,
    interactive::{Input, Interactive, KeyStep, StepLog, TerminalLog, Trigger},
    screen::Screen,
};
use crate::{
    bootstrap, build, host,
    initramfs::{self, GuestTty, InitSpec, OUT_PORT, WINSIZE_PORT},
    kernel::{self, Kernel},
    util::{self, status},
};

/// What to run and how.
#[derive(Debug, Clone)]
pub struct VmOptions {
    pub kernel: Kernel,
    /// Run with `sh -c` as root in `/`, stdin from /dev/null (or the console, see
    /// [`VmOptions::interactive`]); its exit status is the outcome's.
    pub cmd: String,
    /// Receives the guest's `/out` (cleared first). Default: `target/vm-out`.
    pub out_dir: PathBuf,
    /// Wall-clock limit for the whole guest run, boot included (boot takes ~5 s under TCG),
    /// under the wall clock; [`GuestClock::timeout_factor`] times this under another.
    pub timeout: Duration,
    /// Exported in the guest before the command runs.
    pub env: Vec<(String, String)>,
    /// Extra host files copied into the guest: (host path, absolute guest path).
    pub files: Vec<(PathBuf, String)>,
    /// Host directories merged into the guest's `/` (see [`InitSpec::trees`]).
    pub trees: Vec<PathBuf>,
    /// Guest RAM in MiB, split evenly between the two NUMA nodes (default 1024).
    pub memory_mib: u32,
    /// The `damon-trace` to put in the guest. None: `$DAMON_TRACE_BIN` if set, else a fresh
    /// `build-static` (once per process).
    pub binary: Option<PathBuf>,
    /// Extra kernel command-line parameters, e.g. `lockdown=confidentiality`.
    pub kernel_args: Vec<String>,
    /// Echo the console to stdout as it arrives (captured by the test harness as usual).
    pub echo: bool,
    /// Run the command in a new session with the serial console (ttyS0) as its controlling
    /// terminal, sized and typed as given, its input scripted or forwarded from our stdin.
    pub interactive: Option<Interactive>,
    /// Boot the Debian system of [`crate::sysimage`] with systemd as PID 1 instead of the
    /// busybox /init: the command runs as root from a oneshot unit once `multi-user.target` is
    /// reached, with that system's tools (and no `damon-trace` put on PATH: install it).
    /// [`VmOptions::trees`] and [`VmOptions::interactive`] are not supported there.
    pub systemd: bool,
    /// The guest's clock: the host's time, or QEMU's instruction counter (see [`GuestClock`]).
    pub clock: GuestClock,
    /// Boot the kernel's ELF image at its PVH entry where it has one ([`kernel::pvh`]): 1.6 s
    /// sooner under TCG, at the kernel's link address (no KASLR). Debian's kernels only (a
    /// bzImage given by path boots as it is). The guest tests do; the
    /// measurement commands (ab, seed, bench, soak, demo) boot the bzImage, as a machine does.
    pub direct_boot: bool,
}

/// A guest script as a status line shows it: a one-line command whole, a longer script by its
/// first command (not `set -e`, a comment or a blank line) and its length (the script itself
/// is in the test or command that wrote it).
fn first_line(cmd: &str) -> String {
    let lines: Vec<&str> = cmd.trim().lines().collect();
    let first = lines
        .iter()
        .map(|l| l.trim())
        .find(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("set "))
        .unwrap_or_default();
    match lines.len() {
        0 | 1 => cmd.trim().to_owned(),
        n => format!("{first} … ({n} lines)"),
    }
}

/// The environment variable that tells the guest's `damon-trace` its clock (`record --clock`).
pub const CLOCK_ENV: &str = "DAMON_TRACE_CLOCK";

/// The clock a guest runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum GuestClock {
    /// The host's time, as QEMU's TCG gives it by default: a call lasts as long as the host
    /// took to emulate it, whatever else the host was doing.
    #[default]
    Wall,
    /// QEMU's instruction counter ([`ICOUNT`]): the guest's clock advances one nanosecond per
    /// instruction executed, so a duration is a path length, the same in every boot. The
    /// guest's `damon-trace` is told so (`DAMON_TRACE_CLOCK=instructions`) and labels its
    /// captures with it.
    Instructions,
}

/// QEMU's `-icount` for [`GuestClock::Instructions`]: `shift=0`, one instruction per
/// nanosecond of the guest's clock, so that a duration reads as an instruction count;
/// `sleep=on` (QEMU's default, stated), so that an idle guest's clock follows the host's and a
/// guest's sleeps and `--duration`s last about as long as they say (with `sleep=off` the clock
/// jumps to the next timer whenever the guest idles). `align` stays off: it only delays the
/// host to keep the two clocks close, it does not change what is counted. What was measured
/// with these options, and what only QEMU's documentation says: docs/accuracy.md ("The
/// instruction clock").
pub const ICOUNT: &str = "shift=0,sleep=on";

/// `--clock` of every command that boots a guest.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct ClockArgs {
    /// The guests' clock: wall (the host's time) or instructions (QEMU's instruction counter,
    /// one ns per instruction executed: durations are path lengths, the same in every boot,
    /// shown in insn; boots take about three times as long). damon-trace in the guest is told
    /// (DAMON_TRACE_CLOCK) and labels its captures; compare refuses to mix the two.
    #[arg(long, value_enum, default_value_t = GuestClock::Wall)]
    pub clock: GuestClock,
}

impl GuestClock {
    /// How much longer a guest may take under this clock than under the wall clock: its
    /// timeout is scaled by this (a boot took 16.7 s instead of 4.6 s under the instruction
    /// clock, and busy stretches run about as much slower).
    pub fn timeout_factor(self) -> u32 {
        match self {
            GuestClock::Wall => 1,
            GuestClock::Instructions => 4,
        }
    }

    /// A default output directory's name under this clock: `name`, or `name-instructions`,
    /// so that the two clocks' results of one comparison sit side by side.
    pub fn dir_name(self, name: &str) -> String {
        match self {
            GuestClock::Wall => name.to_owned(),
            c => format!("{name}-{}", c.as_str()),
        }
    }

    /// The unit of a duration measured under this clock, as damon-trace names it.
    pub fn unit(self) -> &'static str {
        match self {
            GuestClock::Wall => "ns",
            GuestClock::Instructions => "insn",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            GuestClock::Wall => "wall",
            GuestClock::Instructions => "instructions",
        }
    }
}

impl VmOptions {
    pub fn new(kernel: Kernel, cmd: impl Into<String>) -> Self {
        Self {
            kernel,
            cmd: cmd.into(),
            out_dir: util::target_dir().join("vm-out"),
            timeout: Duration::from_secs(300),
            env: Vec::new(),
            files: Vec::new(),
            trees: Vec::new(),
            memory_mib: 1024,
            binary: None,
            kernel_args: Vec::new(),
            echo: true,
            interactive: None,
            systemd: false,
            clock: GuestClock::Wall,
            direct_boot: false,
        }
    }
}

/// How the guest run ended.
#[derive(Debug, Clone)]
pub struct VmOutcome {
    /// The command's exit status.
    pub status: i32,
    /// The console without terminal control characters and the harness's marker lines.
    pub console: String,
    /// `uname -r` of the guest kernel.
    pub kernel_release: String,
    /// Where `/out` was copied.
    pub out_dir: PathBuf,
    /// From starting QEMU until the command started.
    pub boot_time: Duration,
    /// From starting QEMU until it exited.
    pub total_time: Duration,
    /// Interactive runs: the raw console and the screens the scripted keys saw.
    pub terminal: Option<TerminalLog>,
    /// The kernel was booted at its PVH entry (see [`VmOptions::direct_boot`]).
    pub direct_boot: bool,
}

/// The guest machine. Never KVM: /dev/kvm exists on the CI machines but fails with "emulation
/// failure". Not -nographic: that also puts SeaBIOS on the serial line (banner, terminal
/// resets). qemu 7.2 rejects `-numa node,mem=`, hence the memory backends (see [`memory_args`]).
/// Single-threaded TCG: with thread=multi a 7.2 guest once died at boot with "Oops: int3" in
/// sched_clock_cpu (a stale breakpoint from the kernel's own text patching seen by the other
/// vCPU), and fentry attaching patches text the same way; one thread boots and attaches as fast
/// here (measured: doctor's 8 attaches in 3.9 s single vs 4.5 s multi).
#[rustfmt::skip]
const QEMU_MACHINE: &[&str] = &[
    "-accel", "tcg,thread=single", "-cpu", "max", "-smp", "2",
    "-numa", "node,memdev=m0,cpus=0,nodeid=0",
    "-numa", "node,memdev=m1,cpus=1,nodeid=1",
    "-display", "none", "-monitor", "none",
    // The console is QEMU's stdio, and stdin is a pipe from us (or /dev/null): QEMU never
    // touches the user's terminal, and signal=off keeps it from ever turning a typed Ctrl-C
    // into its own shutdown.
    "-chardev", "stdio,id=console,signal=off", "-serial", "chardev:console",
    "-no-reboot", "-no-user-config", "-nic", "none",
    "-device", "virtio-serial-pci",
];

/// `-m` and the two nodes' memory backends for `mib` of guest RAM.
fn memory_args(mib: u32) -> Vec<String> {
    let node = (mib / 2).max(128);
    vec![
        "-m".into(),
        (node * 2).to_string(),
        "-object".into(),
        format!("memory-backend-ram,id=m0,size={node}M"),
        "-object".into(),
        format!("memory-backend-ram,id=m1,size={node}M"),
    ]
}

static BUILT: Mutex<Option<PathBuf>> = Mutex::new(None);

/// The static `damon-trace` to put into the guest (built at most once per process).
pub fn guest_binary(opts: &VmOptions) -> Result<PathBuf> {
    if let Some(b) = &opts.binary {
        return Ok(b.clone());
    }
    if let Some(b) = std::env::var_os("DAMON_TRACE_BIN").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(b));
    }
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(b) = built.as_ref() {
        return Ok(b.clone());
    }
    let tc = bootstrap::ensure()?;
    let bin = build::build_static(&tc)?;
    *built = Some(bin.clone());
    Ok(bin)
}

/// Boots a guest, runs `opts.cmd`, copies `/out` back and returns the command's status.
pub fn run(opts: &VmOptions) -> Result<VmOutcome> {
    let opts = &for_the_clock(opts);
    let binary = guest_binary(opts)?;
    crate::elf::ensure_static(&binary)?;
    let tools = host::ensure()?;
    let mut kernel = kernel::fetch(&opts.kernel)?;
    let direct = direct_boot(opts, &mut kernel)?;
    let work = tempfile::Builder::new()
        .prefix("damon-vm-")
        .tempdir()
        .context("creating a temp dir")?;
    let nonce = format!(
        "{:x}{:x}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    );
    let out_tar = work.path().join("out.tar");
    let (mut qemu, winsize) = qemu_command(opts, &tools, &kernel, &binary, work.path(), &nonce)?;
    status(
        "vm",
        format!(
            "booting {} ({}){}, timeout {} s: {}",
            kernel.release,
            opts.kernel,
            match opts.clock {
                GuestClock::Wall => "",
                GuestClock::Instructions => ", instruction clock",
            },
            opts.timeout.as_secs(),
            first_line(&opts.cmd)
        ),
    );
    let start = Instant::now();
    die_with_parent(&mut qemu);
    let mut child = qemu.spawn().context("starting qemu-system-x86_64")?;
    // Drained concurrently: a full stderr pipe would stall QEMU.
    let stderr = child
        .stderr
        .take()
        .map(|e| thread::spawn(move || console::read_all(e)));
    let stdout = child.stdout.take().context("qemu stdout")?;
    let watched = console::watch(stdout, child.stdin.take(), winsize, opts, &nonce, start);
    let console = match watched {
        Ok(c) => c,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
    };
    let qemu_status = wait_with_grace(&mut child, Duration::from_secs(15))?;
    let stderr = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
    let total_time = start.elapsed();
    let tail = console::tail(&console.text, 25);
    let Some(exit_status) = console.exit else {
        if let Some(line) = console.text.lines().find(|l| l.contains("Kernel panic")) {
            bail!("the guest kernel panicked: {line}\n--- console tail ---\n{tail}");
        }
        let stderr = stderr.trim();
        let stderr = if stderr.is_empty() {
            String::new()
        } else {
            format!("\n--- qemu stderr ---\n{stderr}")
        };
        bail!(
            "the guest stopped before /init printed its exit marker (qemu {qemu_status}): the \
             command powered off or rebooted the guest, or /init was killed (out of memory?)\
             {stderr}\n--- console tail ---\n{tail}"
        );
    };
    let bytes = console
        .out_bytes
        .with_context(|| format!("the guest could not ship /out\n{tail}"))?;
    outdir::receive_out(&out_tar, bytes, &opts.out_dir)?;
    status(
        "vm",
        format!(
            "exit status {exit_status}; boot {:.1} s, total {:.1} s; /out in {}",
            console.boot.as_secs_f64(),
            total_time.as_secs_f64(),
            opts.out_dir.display()
        ),
    );
    Ok(VmOutcome {
        status: exit_status,
        console: console.text,
        kernel_release: kernel.release,
        out_dir: opts.out_dir.clone(),
        boot_time: console.boot,
        total_time,
        terminal: console.terminal,
        direct_boot: direct,
    })
}

/// With [`VmOptions::direct_boot`], points `kernel` at its ELF image where it has one and says
/// whether it does. Only the cached Debian kernels: a bzImage given by path gets no file
/// written beside it.
fn direct_boot(opts: &VmOptions, kernel: &mut kernel::KernelImage) -> Result<bool> {
    if !opts.direct_boot || opts.kernel.suite().is_none() {
        return Ok(false);
    }
    let Some(elf) = kernel::pvh::elf_image(&kernel.vmlinuz)? else {
        return Ok(false);
    };
    // QEMU's -kernel: the ELF image instead of the bzImage (the release is read already).
    kernel.vmlinuz = elf;
    Ok(true)
}

/// The QEMU command for `opts` (its initramfs written into `work`), and the link that passes
/// the user's terminal size on when the guest's console is the user's terminal.
fn qemu_command(
    opts: &VmOptions,
    tools: &host::HostTools,
    kernel: &kernel::KernelImage,
    binary: &std::path::Path,
    work: &std::path::Path,
    nonce: &str,
) -> Result<(Command, Option<hostterm::WinsizeLink>)> {
    let initrd = work.join("initramfs.cpio");
    if opts.systemd {
        anyhow::ensure!(
            opts.trees.is_empty() && opts.interactive.is_none(),
            "the systemd guest takes files, not trees, and runs no interactive command"
        );
        let image = crate::sysimage::ensure()?;
        let overlay = crate::sysimage::Overlay {
            cmd: &opts.cmd,
            env: &opts.env,
            files: &opts.files,
            nonce,
        };
        crate::sysimage::write_initrd(&image, &overlay, &initrd)?;
    } else {
        write_busybox_initrd(opts, tools, kernel, binary, nonce, &initrd)?;
    }
    let out_tar = work.join("out.tar");
    let mut append = String::from("console=ttyS0 quiet loglevel=1 panic=-1");
    if opts.systemd {
        // No status lines between the harness's markers.
        append.push_str(" systemd.show_status=0 rd.udev.log_level=0 udev.log_level=0");
    }
    for a in &opts.kernel_args {
        append.push(' ');
        append.push_str(a);
    }
    qemu_rest(opts, tools, kernel, work, &initrd, &out_tar, &append)
}

/// `opts` under its clock: beyond the wall clock, the timeout scaled by
/// [`GuestClock::timeout_factor`] and the guest's damon-trace told the clock ([`CLOCK_ENV`])
/// unless the caller's environment already says which.
fn for_the_clock(opts: &VmOptions) -> std::borrow::Cow<'_, VmOptions> {
    if opts.clock == GuestClock::Wall {
        return std::borrow::Cow::Borrowed(opts);
    }
    let mut o = opts.clone();
    o.timeout *= opts.clock.timeout_factor();
    if !o.env.iter().any(|(k, _)| k == CLOCK_ENV) {
        o.env
            .insert(0, (CLOCK_ENV.to_owned(), opts.clock.as_str().to_owned()));
    }
    std::borrow::Cow::Owned(o)
}

/// The busybox /init's initramfs (see [`initramfs::write`]).
fn write_busybox_initrd(
    opts: &VmOptions,
    tools: &host::HostTools,
    kernel: &kernel::KernelImage,
    binary: &std::path::Path,
    nonce: &str,
    initrd: &std::path::Path,
) -> Result<()> {
    let spec = InitSpec {
        busybox: &tools.busybox,
        damon_trace: binary,
        cmd: &opts.cmd,
        env: &opts.env,
        files: &opts.files,
        trees: &opts.trees,
        modules: &kernel.modules,
        nonce,
        tty: opts.interactive.as_ref().map(|i| GuestTty {
            rows: i.rows,
            cols: i.cols,
            term: &i.term,
        }),
    };
    initramfs::write(initrd, &spec)
}

/// The QEMU command around a written initrd.
fn qemu_rest(
    opts: &VmOptions,
    tools: &host::HostTools,
    kernel: &kernel::KernelImage,
    work: &std::path::Path,
    initrd: &std::path::Path,
    out_tar: &std::path::Path,
    append: &str,
) -> Result<(Command, Option<hostterm::WinsizeLink>)> {
    let mut qemu = Command::new(&tools.qemu);
    qemu.args(memory_args(opts.memory_mib)).args(QEMU_MACHINE);
    if opts.clock == GuestClock::Instructions {
        qemu.args(["-icount", ICOUNT]);
    }
    qemu.arg("-chardev")
        .arg(format!("file,id=out,path={}", out_tar.display()))
        .arg("-device")
        .arg(format!("virtserialport,chardev=out,name={OUT_PORT}"))
        .arg("-kernel")
        .arg(&kernel.vmlinuz)
        .arg("-initrd")
        .arg(initrd)
        .args(["-append", append])
        .stdin(if opts.interactive.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // People resize their terminals: pass it on (a script's terminal has a fixed size).
    let winsize = match &opts.interactive {
        Some(Interactive {
            input: Input::Terminal,
            ..
        }) => {
            let path = work.join("winsize.sock");
            let link = hostterm::WinsizeLink::listen(&path)?;
            qemu.arg("-chardev")
                .arg(format!("socket,id=winsize,path={}", path.display()))
                .arg("-device")
                .arg(format!(
                    "virtserialport,chardev=winsize,name={WINSIZE_PORT}"
                ));
            Some(link)
        }
        _ => None,
    };
    Ok((qemu, winsize))
}

/// A guest outliving us would hold the CPU for up to its timeout (an hour for the demo) with
/// nobody reading its console: QEMU gets SIGKILL when the thread that started it exits, which
/// covers an xtask killed by a signal that cannot be caught.
fn die_with_parent(qemu: &mut Command) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: the closure runs in the forked child before exec and only makes one prctl
    // system call, which is async-signal-safe and allocates nothing.
    unsafe {
        qemu.pre_exec(|| {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
                .map_err(std::io::Error::from)
        });
    }
}

/// Waits for QEMU to exit after `poweroff -f`, killing it if it lingers.
fn wait_with_grace(child: &mut Child, grace: Duration) -> Result<std::process::ExitStatus> {
    let until = Instant::now() + grace;
    loop {
        if let Some(st) = child.try_wait().context("waiting for qemu")? {
            return Ok(st);
        }
        if Instant::now() >= until {
            let _ = child.kill();
            return child.wait().context("waiting for qemu after kill");
        }
        thread::sleep(Duration::from_millis(50));
    }
}
