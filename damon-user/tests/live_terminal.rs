//! `damon-trace live` on a real pseudo-terminal: the replayed screen shows every function and
//! `q` (or SIGTERM) gives the terminal back and exits 0; without a terminal, or on a kernel
//! that cannot be traced, it fails before touching the terminal.
use std::{
    fs::File,
    io::{Read as _, Write as _},
    os::fd::{FromRawFd as _, OwnedFd},
    os::unix::process::CommandExt as _,
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/migrate-hot-7.2.dtcap"
);
const FUNCTIONS: [&str; 4] = [
    "damon_hot_score",
    "damos_va_migrate_dests_add",
    "damon_migrate_pages",
    "lock_timer_base",
];
/// Switch to and from the alternate screen.
const ENTER_ALT: &str = "\x1b[?1049h";
const LEAVE_ALT: &str = "\x1b[?1049l";

/// A child running on the slave side of an 80x24 pty; what it draws collects in `screen`.
struct OnPty {
    child: Child,
    master: File,
    screen: Arc<Mutex<Vec<u8>>>,
}

fn spawn_on_pty(args: &[&str]) -> OnPty {
    let mut master = -1;
    let mut slave = -1;
    let size = libc::winsize {
        ws_row: 24,
        ws_col: 80,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: valid out-pointers; no name buffer and default termios are allowed (null).
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: openpty returned two fresh descriptors that nothing else owns.
    let (master, slave) = unsafe { (File::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_damon-trace"));
    cmd.args(args)
        .env("TERM", "xterm-256color")
        .stdin(slave.try_clone().expect("dup"))
        .stdout(slave.try_clone().expect("dup"))
        .stderr(Stdio::piped());
    // SAFETY: only async-signal-safe calls between fork and exec: a new session whose
    // controlling terminal is the pty (stdin), as a terminal emulator would set it up.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().expect("spawn damon-trace");
    drop(slave);
    let screen = Arc::new(Mutex::new(Vec::new()));
    let mut reader = master.try_clone().expect("dup master");
    let sink = Arc::clone(&screen);
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        // Ends with EIO once the child has exited and the slave is closed.
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().expect("screen").extend_from_slice(&buf[..n]);
        }
    });
    OnPty {
        child,
        master,
        screen,
    }
}

/// What an 80x24 terminal shows after `bytes`: enough of a VT100 for ratatui's output
/// (cursor moves, clears; colours ignored), since only changed cells are sent.
fn render(bytes: &[u8]) -> String {
    let (rows, cols) = (24usize, 80usize);
    let mut grid = vec![vec![' '; cols]; rows];
    let (mut row, mut col) = (0usize, 0usize);
    let text = String::from_utf8_lossy(bytes);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.peek() != Some(&'[') {
                chars.next();
                continue;
            }
            chars.next();
            let mut params = String::new();
            let mut last = ' ';
            for p in chars.by_ref() {
                if ('@'..='~').contains(&p) {
                    last = p;
                    break;
                }
                params.push(p);
            }
            let nums: Vec<usize> = params.split(';').map(|n| n.parse().unwrap_or(1)).collect();
            match last {
                'H' => {
                    row = nums.first().copied().unwrap_or(1).clamp(1, rows) - 1;
                    col = nums.get(1).copied().unwrap_or(1).clamp(1, cols) - 1;
                }
                'J' if params == "2" => grid = vec![vec![' '; cols]; rows],
                'h' | 'l' if params == "?1049" => grid = vec![vec![' '; cols]; rows],
                _ => {}
            }
        } else if c == '\r' {
            col = 0;
        } else if c == '\n' {
            row = (row + 1).min(rows - 1);
        } else if col < cols {
            grid[row][col] = c;
            col += 1;
        }
    }
    grid.into_iter()
        .map(|r| r.into_iter().collect::<String>().trim_end().to_owned() + "\n")
        .collect()
}

/// The screen was drawn full-screen and given back: the alternate screen is entered exactly
/// once, left after it, every function's panel is drawn between the two, and nothing of the
/// panels is drawn after leaving (the user's shell screen is not written over).
fn assert_full_screen_and_given_back(raw: &str, functions: &[&str]) {
    let enter = raw.find(ENTER_ALT);
    let leave = raw.rfind(LEAVE_ALT);
    let (Some(enter), Some(leave)) = (enter, leave) else {
        panic!("alternate screen entered at {enter:?}, left at {leave:?}:\n{raw:?}");
    };
    assert!(enter < leave, "left ({leave}) before entered ({enter})");
    assert_eq!(raw.matches(ENTER_ALT).count(), 1, "entered more than once");
    let inside = &raw[enter..leave];
    for f in functions {
        assert!(inside.contains(f), "{f} not drawn on the alternate screen");
    }
    let after = &raw[leave + LEAVE_ALT.len()..];
    for f in functions {
        assert!(
            !after.contains(f),
            "{f} drawn after leaving the alternate screen: {after:?}"
        );
    }
}

impl OnPty {
    fn raw(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().expect("screen")).into_owned()
    }

    /// The screen as a user would see it now.
    fn screen(&self) -> String {
        render(&self.screen.lock().expect("screen"))
    }

    fn wait_for_screen(&self, what: &[&str], timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while !what.iter().all(|w| self.screen().contains(w)) {
            assert!(
                Instant::now() < deadline,
                "screen never showed {what:?}:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_exit(&mut self, timeout: Duration) -> (i32, String) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                let mut err = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                // Let the reader thread collect the last bytes.
                std::thread::sleep(Duration::from_millis(100));
                return (status.code().unwrap_or(-1), err);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("still running after {timeout:?}:\n{}", self.screen());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn replay_on_a_terminal_shows_every_function_and_q_quits_cleanly() {
    let mut run = spawn_on_pty(&["live", "--replay", FIXTURE, "--speed", "0"]);
    run.wait_for_screen(&FUNCTIONS, Duration::from_secs(20));
    run.wait_for_screen(&["2961 calls", "replay ended"], Duration::from_secs(20));
    run.master.write_all(b"?").expect("type ?");
    run.wait_for_screen(&["keys — Esc or ? closes"], Duration::from_secs(10));
    run.master.write_all(b"q").expect("type q");
    let (code, err) = run.wait_exit(Duration::from_secs(10));
    assert_eq!(code, 0, "stderr: {err}");
    assert_full_screen_and_given_back(&run.raw(), &FUNCTIONS);
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn sigterm_gives_the_terminal_back_and_exits_0() {
    let mut run = spawn_on_pty(&["live", "--replay", FIXTURE]);
    run.wait_for_screen(&["lock_timer_base"], Duration::from_secs(20));
    // SAFETY: plain kill(2) on our own child's pid.
    let rc = unsafe { libc::kill(run.child.id() as i32, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let (code, err) = run.wait_exit(Duration::from_secs(10));
    assert_eq!(code, 0, "stderr: {err}");
    assert_full_screen_and_given_back(&run.raw(), &["lock_timer_base"]);
}

#[test]
fn without_a_terminal_live_says_so() {
    let out = Command::new(env!("CARGO_BIN_EXE_damon-trace"))
        .args(["live", "--replay", FIXTURE])
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("needs a terminal") && err.contains("record"),
        "{err}"
    );
}

#[test]
fn bad_replay_input_exits_2() {
    for args in [
        &["live", "--replay", "/nonexistent/capture"][..],
        &["live", "--replay", "/proc/self/status"][..],
        &["live", "--replay", FIXTURE, "--functions", "nope"][..],
        &["live", "--replay", FIXTURE, "--speed", "-1"][..],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_damon-trace"))
            .args(args)
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// On a kernel that forbids tracing (this project's hosts), `live` prints the diagnosis and
/// exits 1 before it takes over the terminal.
#[test]
fn live_on_an_untraceable_kernel_fails_before_taking_the_terminal() {
    let doctor = Command::new(env!("CARGO_BIN_EXE_damon-trace"))
        .args(["doctor"])
        .output()
        .expect("doctor");
    if doctor.status.success() {
        eprintln!("skipping: this host can trace");
        return;
    }
    let mut run = spawn_on_pty(&["live"]);
    let (code, err) = run.wait_exit(Duration::from_secs(30));
    assert_eq!(code, 1, "stderr: {err}");
    assert!(err.contains("cannot be traced"), "{err}");
    assert!(!run.raw().contains(ENTER_ALT), "{}", run.raw());
}
