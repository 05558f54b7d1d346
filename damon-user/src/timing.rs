//! `--debug-timing`: where a command's start goes, phase by phase.
//!
//! A process-wide recorder, off unless [`enable`] was called (by `main`, for `--debug-timing`
//! or `DAMON_TRACE_DEBUG_TIMING=1`). Off, [`phase`] and [`mark`] read one atomic flag and
//! return: no lock, no allocation (give a dynamic name as `format_args!(…)`, which is only
//! formatted when the recorder is on), and nothing is ever printed.
//!
//! On, each [`phase`] guard records its name, when it began and, when dropped, how long it
//! took; a phase opened while another is open is nested under it (phases are opened and closed
//! on one thread, in stack order, as the start path does). [`mark`] records a moment (the first
//! record). [`print_once`] writes the table to stderr the first time it is called: a session
//! calls it when the first record arrives, `main` once more at the end (a no-op by then unless
//! no record came).
//!
//! Times count from the [`Instant`] `main` took first thing; the header adds how long before
//! that the kernel started the process (`/proc/self/stat`'s start time, in clock ticks of
//! 10 ms). That is the process's fork, not its exec: the same moment for a command a shell
//! forked for it, but a shell that execs its last command (`sh -c "a; damon-trace …"`) hands
//! over a process that began with the shell.
use std::{
    fmt::{Display, Write as _},
    sync::{
        Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

/// Whether the recorder is on; read without the lock.
static ON: AtomicBool = AtomicBool::new(false);
/// The thread that turned it on (`main`'s): the only one whose phases and marks count, so a
/// helper thread (calibration beside the session) cannot break the phases' nesting.
static THREAD: std::sync::OnceLock<std::thread::ThreadId> = std::sync::OnceLock::new();
/// The recorder, once [`enable`]d.
static RECORDER: Mutex<Option<Recorder>> = Mutex::new(None);

/// One row: a phase (with its duration once it ended) or a mark.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    name: String,
    /// Phases open around it when it began.
    depth: usize,
    /// Since the origin.
    start: Duration,
    /// `None`: a mark, or a phase not ended yet (see `phase`).
    took: Option<Duration>,
    phase: bool,
}

/// What has been recorded since the origin.
#[derive(Debug)]
struct Recorder {
    origin: Instant,
    /// How long before the origin the process started (exec), when `/proc` says.
    exec_before: Option<Duration>,
    entries: Vec<Entry>,
    /// Indices of the phases open now, innermost last.
    open: Vec<usize>,
    printed: bool,
}

impl Recorder {
    fn new(origin: Instant, exec_before: Option<Duration>) -> Recorder {
        Recorder {
            origin,
            exec_before,
            entries: Vec::new(),
            open: Vec::new(),
            printed: false,
        }
    }

    fn push(&mut self, name: String, at: Instant, phase: bool) -> usize {
        self.entries.push(Entry {
            name,
            depth: self.open.len(),
            start: at.saturating_duration_since(self.origin),
            took: None,
            phase,
        });
        let index = self.entries.len() - 1;
        if phase {
            self.open.push(index);
        }
        index
    }

    fn end(&mut self, index: usize, at: Instant) {
        if let Some(e) = self.entries.get_mut(index) {
            e.took = Some(at.saturating_duration_since(self.origin + e.start));
        }
        self.open.retain(|&i| i != index);
    }

    /// The table: a header, then one row per phase or mark in the order they began.
    fn render(&self) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let mut out =
            String::from("damon-trace --debug-timing: ms since main() began (its first Instant)");
        match self.exec_before {
            Some(d) => {
                let _ = write!(
                    out,
                    "; the process began {:.0} ms before (fork: /proc/self/stat start time, \
                     10 ms ticks)",
                    ms(d)
                );
            }
            None => out.push_str("; the process's start time is unknown"),
        }
        out.push('\n');
        let _ = writeln!(out, "{:>10} {:>10}  phase", "start ms", "took ms");
        for e in &self.entries {
            let took = match (e.phase, e.took) {
                (true, Some(d)) => format!("{:.1}", ms(d)),
                (true, None) => "open".to_owned(),
                (false, _) => "-".to_owned(),
            };
            let indent = "  ".repeat(e.depth);
            let _ = writeln!(out, "{:>10.1} {took:>10}  {indent}{}", ms(e.start), e.name);
        }
        out
    }
}

/// Turns the recorder on, with times counted from `origin` (what `main` took first).
pub fn enable(origin: Instant) {
    let exec_before = exec_before(origin);
    let mut r = RECORDER.lock().unwrap_or_else(|e| e.into_inner());
    r.get_or_insert_with(|| Recorder::new(origin, exec_before));
    let _ = THREAD.set(std::thread::current().id());
    ON.store(true, Ordering::Release);
}

/// How long before `origin` the kernel started (forked) this process: `/proc/self/stat` field 22
/// (clock ticks since boot) against `CLOCK_BOOTTIME` now.
fn exec_before(origin: Instant) -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let ticks = start_ticks(&stat)?;
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz <= 0 {
        return None;
    }
    let started = Duration::from_secs_f64(ticks as f64 / hz as f64);
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer for the duration of the call.
    if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) } != 0 {
        return None;
    }
    let now = Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32);
    let origin_boot = now.checked_sub(origin.elapsed())?;
    Some(origin_boot.saturating_sub(started))
}

/// Field 22 of `/proc/<pid>/stat` (starttime): counted after the command name's closing
/// parenthesis, since the name may hold spaces and parentheses.
fn start_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    // `rest` begins with field 3 (state).
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// Whether the recorder is on, for this thread.
pub fn enabled() -> bool {
    ON.load(Ordering::Acquire) && THREAD.get() == Some(&std::thread::current().id())
}

/// Records a phase from now until the guard is dropped.
#[must_use = "the phase ends when the guard is dropped"]
pub fn phase(name: impl Display) -> Phase {
    if !enabled() {
        return Phase(None);
    }
    let at = Instant::now();
    let mut r = RECORDER.lock().unwrap_or_else(|e| e.into_inner());
    Phase(r.as_mut().map(|r| r.push(name.to_string(), at, true)))
}

/// Records a moment (no duration), such as the first record.
pub fn mark(name: impl Display) {
    if !enabled() {
        return;
    }
    let at = Instant::now();
    if let Some(r) = RECORDER.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        r.push(name.to_string(), at, false);
    }
}

/// A running phase; dropping it ends the phase.
#[derive(Debug)]
pub struct Phase(Option<usize>);

impl Drop for Phase {
    fn drop(&mut self) {
        let Some(index) = self.0 else { return };
        let at = Instant::now();
        if let Some(r) = RECORDER.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            r.end(index, at);
        }
    }
}

/// The table so far; `None` when the recorder is off.
pub fn report() -> Option<String> {
    if !enabled() {
        return None;
    }
    RECORDER
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map(Recorder::render)
}

/// Writes the table to stderr, the first time only; nothing when the recorder is off.
pub fn print_once() {
    let first = enabled()
        && RECORDER
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
            .is_some_and(|r| !std::mem::replace(&mut r.printed, true));
    if let Some(text) = report().filter(|_| first) {
        eprint!("{text}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No test turns the global recorder on: it stays off for the whole test process.
    #[test]
    fn off_by_default_records_and_prints_nothing() {
        assert!(!enabled());
        {
            let _g = phase(format_args!("load {}", "fentry_x"));
            mark("first record");
        }
        assert!(report().is_none());
        assert!(RECORDER.lock().unwrap().is_none());
        print_once();
    }

    #[test]
    fn the_table_nests_phases_and_shows_marks() {
        let origin = Instant::now();
        let at = |ms: u64| origin + Duration::from_millis(ms);
        let mut r = Recorder::new(origin, Some(Duration::from_millis(30)));
        let outer = r.push("diagnosis".into(), at(2), true);
        let inner = r.push("btf: parse".into(), at(3), true);
        r.end(inner, at(403));
        r.end(outer, at(1002));
        let open = r.push("tracer load".into(), at(1010), true);
        r.push("first record".into(), at(1500), false);
        assert_eq!(r.entries[3].depth, 1, "inside the open phase");
        r.end(open, at(1600));
        r.push("after".into(), at(1700), false);
        let text = r.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "damon-trace --debug-timing: ms since main() began (its first Instant); the process \
             began 30 ms before (fork: /proc/self/stat start time, 10 ms ticks)"
        );
        assert_eq!(lines[1], "  start ms    took ms  phase");
        assert_eq!(lines[2], "       2.0     1000.0  diagnosis");
        assert_eq!(lines[3], "       3.0      400.0    btf: parse");
        assert_eq!(lines[4], "    1010.0      590.0  tracer load");
        assert_eq!(lines[5], "    1500.0          -    first record");
        assert_eq!(lines[6], "    1700.0          -  after");
        assert_eq!(lines.len(), 7);
    }

    #[test]
    fn an_unfinished_phase_says_so() {
        let origin = Instant::now();
        let mut r = Recorder::new(origin, None);
        r.push("attach".into(), origin, true);
        let text = r.render();
        assert!(
            text.lines()
                .next()
                .unwrap()
                .ends_with("; the process's start time is unknown")
        );
        assert_eq!(text.lines().nth(2), Some("       0.0       open  attach"));
    }

    #[test]
    fn the_start_time_is_field_22() {
        let stat = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 \
                    987654 1000 50 18446744073709551615";
        assert_eq!(start_ticks(stat), Some(987_654));
        assert_eq!(start_ticks("garbage"), None);
        let own = std::fs::read_to_string("/proc/self/stat").unwrap();
        assert!(start_ticks(&own).is_some(), "{own}");
        assert!(exec_before(Instant::now()).is_some());
    }
}
