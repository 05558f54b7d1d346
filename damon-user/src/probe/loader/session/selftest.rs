//! `doctor`'s checks that kprobe sessions and fsessions work on the running kernel as the tool
//! relies on them, measured rather than assumed: the self-test program (`sess_probe`, or
//! `fsess_probe` for the trampoline, in damon-ebpf) on the kernel function behind getppid(2),
//! while this process calls getppid a known number of times.
use std::os::fd::AsFd as _;

use aya::{EbpfLoader, maps::Array};
use damon_common::{GLOBAL_SESSION_PROBE_TGID, MAP_EVENTS, MAP_SESSION_PROBE, attach::Attach};
use serde::Serialize;

use super::{
    Kfuncs, Kind, SessionError, attach, function_btf_id, instructions, load, rewrite_kfunc_calls,
};
use crate::probe::loader::programs::EBPF_OBJECT;

/// The programs' names in the object: the kprobe session's and the fsession's.
pub use crate::probe::loader::programs::{
    FSESSION_SELFTEST_PROGRAM as FSESSION_PROGRAM, SESSION_SELFTEST_PROGRAM as PROGRAM,
};
/// Where getppid(2) enters the kernel, by kernel version and configuration; the first that
/// takes a kprobe session link is used.
const GETPPID: [&str; 3] = ["__x64_sys_getppid", "__do_sys_getppid", "__se_sys_getppid"];
/// getppid calls per phase.
pub const CALLS: u64 = 1000;

/// What the self-test saw; `calls` per phase.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SelfTest {
    /// A kprobe session or an fsession, written as the method's probes (`kprobe session`,
    /// `fsession`).
    #[serde(serialize_with = "probes_of")]
    pub kind: Attach,
    pub symbol: String,
    pub calls: u64,
    /// Phase 1 (the entry asks for the return run): entry runs, return runs, return runs that
    /// found the cookie zero.
    pub entries: u64,
    pub returns: u64,
    pub zero_cookies: u64,
    /// Phase 2 (the entry writes no cookie and declines the return run, which an fsession
    /// cannot do): entry runs, return runs, and those that found the cookie zero.
    pub declined_entries: u64,
    pub returns_after_decline: u64,
    pub zero_cookies_after_decline: u64,
    /// Runs the kernel skipped (the program's `recursion_misses`), both phases.
    pub skipped: Option<u64>,
}

fn probes_of<S: serde::Serializer>(kind: &Attach, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(kind.probes())
}

impl SelfTest {
    fn fsession(&self) -> bool {
        self.kind == Attach::Fsession
    }

    /// Whether the kernel behaved as the tool relies on: every call's entry ran (or was
    /// skipped and counted), every entry that asked for it got its return run with its own
    /// cookie; a declined kprobe-session entry got no return run, and an fsession entry that
    /// wrote no cookie found it zero at return (the kernel zeroes it per invocation).
    pub fn holds(&self) -> bool {
        let skipped = self.skipped.unwrap_or(0);
        let phase2 = if self.fsession() {
            self.returns_after_decline == self.declined_entries
                && self.zero_cookies_after_decline == self.returns_after_decline
        } else {
            self.returns_after_decline == 0
        };
        self.entries + self.declined_entries + skipped >= 2 * self.calls
            && self.entries <= self.calls
            && self.declined_entries <= self.calls
            && self.returns == self.entries
            && self.zero_cookies == 0
            && phase2
    }

    /// One line for `doctor`.
    pub fn describe(&self) -> String {
        format!(
            "{} on {}: {} calls → {} entry and {} return runs, {} cookies lost; {} calls whose \
             entry {} → {} entry and {} return runs{}{}",
            self.kind.probes(),
            self.symbol,
            self.calls,
            self.entries,
            self.returns,
            self.zero_cookies,
            self.calls,
            if self.fsession() {
                "wrote no cookie"
            } else {
                "declined"
            },
            self.declined_entries,
            self.returns_after_decline,
            if self.fsession() {
                format!(" ({} with a zero cookie)", self.zero_cookies_after_decline)
            } else {
                String::new()
            },
            self.skipped.map_or(String::new(), |n| format!(
                "; {n} runs skipped by the kernel"
            ))
        )
    }
}

fn getppid_calls(n: u64) {
    for _ in 0..n {
        // SAFETY: a syscall without arguments or side effects.
        std::hint::black_box(unsafe { libc::syscall(libc::SYS_getppid) });
    }
}

/// Loads the self-test program as a kprobe session (`fsession`: as an fsession), attaches it
/// to getppid's kernel function, makes [`CALLS`] calls with the entry asking for the return
/// run, then [`CALLS`] with it declining, and reads the counts. Needs the privileges tracing
/// needs.
pub fn self_test(btf: Option<&aya::Btf>, fsession: bool) -> Result<SelfTest, SessionError> {
    let kfuncs = Kfuncs::resolve(btf)?;
    if fsession && !crate::probe::facts::KernelFacts::get().fsession() {
        return Err(SessionError::NoFsession);
    }
    let program = if fsession { FSESSION_PROGRAM } else { PROGRAM };
    let tgid = std::process::id();
    let other = |why: String| SessionError::Relocation {
        prog: program.to_owned(),
        why,
    };
    let mut bpf = EbpfLoader::new()
        .btf(btf)
        .override_global(GLOBAL_SESSION_PROBE_TGID, &tgid, true)
        .map_max_entries(MAP_EVENTS, 4096)
        .load(EBPF_OBJECT)
        .map_err(|e| other(format!("creating the maps: {e}")))?;
    let mut insns = instructions(&bpf, program)?;
    rewrite_kfunc_calls(&mut insns, &kfuncs)?;
    let mut errors = Vec::new();
    let mut linked = None;
    for symbol in GETPPID {
        let attached = (if fsession {
            function_btf_id(btf, symbol).map(|btf_id| Kind::Fsession {
                btf_id,
                btf_obj_fd: None,
            })
        } else {
            Ok(Kind::Kprobe)
        })
        .and_then(|kind| {
            let prog = load(kind, program, &insns)?;
            let link = attach(kind, prog.as_fd(), symbol)?;
            Ok((prog, link))
        });
        match attached {
            Ok(pair) => {
                linked = Some((symbol, pair));
                break;
            }
            Err(e) => errors.push(e),
        }
    }
    let Some((symbol, (prog, link))) = linked else {
        // The error of the most telling attempt: one that got as far as the kernel.
        let telling = |e: &SessionError| !matches!(e, SessionError::NotInBtf(_));
        let pos = errors.iter().position(telling).unwrap_or(0);
        return Err(errors.swap_remove(pos));
    };
    let map = bpf
        .map_mut(MAP_SESSION_PROBE)
        .ok_or_else(|| other(format!("map {MAP_SESSION_PROBE} missing")))?;
    let mut counts: Array<_, u64> =
        Array::try_from(map).map_err(|e| other(format!("map {MAP_SESSION_PROBE}: {e}")))?;
    let read = |a: &Array<_, u64>, i: u32| a.get(&i, 0).unwrap_or(0);
    getppid_calls(CALLS);
    let (entries, returns, zero_cookies) = (read(&counts, 0), read(&counts, 1), read(&counts, 2));
    counts
        .set(4, 1, 0)
        .map_err(|e| other(format!("setting the decline flag: {e}")))?;
    getppid_calls(CALLS);
    let declined_entries = read(&counts, 3);
    let returns_after_decline = read(&counts, 1) - returns;
    let zero_cookies_after_decline = read(&counts, 2) - zero_cookies;
    let skipped = crate::probe::loader::skips::recursion_misses(prog.as_fd());
    drop(link);
    Ok(SelfTest {
        kind: if fsession {
            Attach::Fsession
        } else {
            Attach::KprobeSession
        },
        symbol: symbol.to_owned(),
        calls: CALLS,
        entries,
        returns,
        zero_cookies,
        declined_entries,
        returns_after_decline,
        zero_cookies_after_decline,
        skipped,
    })
}
