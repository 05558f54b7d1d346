//! `--debug-probes`: the eBPF programs' diagnostics of their rare paths (an orphan exit, stale
//! stamps, a full stamp map or ring, a zero cookie at a session's return, a filtered task; see
//! damon-ebpf's `plog.rs`), written with aya-log into the object's log ring and read back here
//! with aya-log's reader.
//!
//! Off by default: the level global is then 0 in the object's read-only data, so the verifier
//! drops every log call as dead code, and the ring is the smallest one.
use std::{
    collections::VecDeque,
    sync::{Arc, Mutex, PoisonError},
};

use aya::{Ebpf, EbpfLoader};
use aya_log::EbpfLogger;

pub use crate::trace::ProbeLogLevel;

/// aya-log-ebpf's names in the object: the log ring and the level global.
pub const MAP_AYA_LOGS: &str = "AYA_LOGS";
pub const GLOBAL_AYA_LOG_LEVEL: &str = "AYA_LOG_LEVEL";
/// The log ring's size while the log is off (nothing is written to it): one page.
pub const OFF_RING_BYTES: u32 = 4096;
/// Lines kept between two reads; more are counted, not kept.
const MAX_LINES: usize = 1000;

/// The value of `AYA_LOG_LEVEL` for `level`: aya-log's levels are `log`'s (error 1 … trace 5);
/// a log call runs when its level is at most this.
pub fn level_global(level: ProbeLogLevel) -> &'static u8 {
    match level {
        ProbeLogLevel::Off => &0,
        ProbeLogLevel::Debug => &(log::Level::Debug as u8),
        ProbeLogLevel::Trace => &(log::Level::Trace as u8),
    }
}

/// Writes `level` into the object about to be loaded, and shrinks the log ring while it is off.
pub fn configure(loader: &mut EbpfLoader<'_>, level: ProbeLogLevel) {
    // Not `must_exist`: an object built without the `probe-log` feature has no log calls.
    loader.override_global(GLOBAL_AYA_LOG_LEVEL, level_global(level), false);
    if level == ProbeLogLevel::Off {
        loader.map_max_entries(MAP_AYA_LOGS, OFF_RING_BYTES);
    }
}

#[derive(Default)]
struct Lines {
    queue: VecDeque<String>,
    dropped: u64,
}

/// aya-log's reader hands each line to a `log::Log`: this one keeps it, with the function's
/// name for its id.
struct Sink {
    names: Vec<(u32, String)>,
    lines: Arc<Mutex<Lines>>,
}

impl log::Log for Sink {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        let text = name_functions(&record.args().to_string(), &self.names);
        let mut lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.queue.len() < MAX_LINES {
            lines.queue.push_back(text);
        } else {
            lines.dropped += 1;
        }
    }

    fn flush(&self) {}
}

/// The probes' log of one session.
pub struct ProbeLog {
    reader: EbpfLogger<Sink>,
    lines: Arc<Mutex<Lines>>,
}

/// What the probes logged since the last read.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ProbeLines {
    pub lines: Vec<String>,
    /// Lines beyond [`MAX_LINES`] between two reads, not kept.
    pub dropped: u64,
}

impl ProbeLog {
    /// Takes the log ring out of `bpf` (after every program is loaded: a session program's
    /// loader relocates against all of the object's maps). `names`: function id → name.
    pub fn start(bpf: &mut Ebpf, names: Vec<(u32, String)>) -> anyhow::Result<ProbeLog> {
        let lines = Arc::new(Mutex::new(Lines::default()));
        let sink = Sink {
            names,
            lines: Arc::clone(&lines),
        };
        let reader = EbpfLogger::init_with_logger(bpf, sink).map_err(|e| {
            anyhow::anyhow!("--debug-probes: opening the probes' log ring ({MAP_AYA_LOGS}): {e}")
        })?;
        Ok(ProbeLog { reader, lines })
    }

    /// Everything logged since the last read.
    pub fn read(&mut self) -> ProbeLines {
        self.reader.flush();
        let mut lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        ProbeLines {
            lines: lines.queue.drain(..).collect(),
            dropped: std::mem::take(&mut lines.dropped),
        }
    }
}

/// `text` with each `fn#ID` of a known id replaced by the function's name.
pub fn name_functions(text: &str, names: &[(u32, String)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("fn#") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 3..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let name = after[..digits]
            .parse::<u32>()
            .ok()
            .and_then(|id| names.iter().find(|(i, _)| *i == id));
        match name {
            Some((_, name)) => out.push_str(name),
            None => out.push_str(&rest[at..at + 3 + digits]),
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_ids_become_names() {
        let names = vec![
            (0, "damon_hot_score".to_owned()),
            (4, "vfs_read".to_owned()),
        ];
        assert_eq!(
            name_functions(
                "orphan exit (no stamps) fn#4 tid 12 cpu 1 frame ffff n 0",
                &names
            ),
            "orphan exit (no stamps) vfs_read tid 12 cpu 1 frame ffff n 0"
        );
        assert_eq!(
            name_functions("fn#0 and fn#9 fn#", &names),
            "damon_hot_score and fn#9 fn#"
        );
        assert_eq!(name_functions("no id here", &names), "no id here");
    }

    #[test]
    fn levels_are_aya_logs() {
        // aya-log-common's `Level` (the eBPF side compares against these numbers).
        assert_eq!(*level_global(ProbeLogLevel::Off), 0);
        assert_eq!(*level_global(ProbeLogLevel::Debug), 4);
        assert_eq!(*level_global(ProbeLogLevel::Trace), 5);
    }
}
