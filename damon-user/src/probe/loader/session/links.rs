//! The traced functions a session program times (`--attach kprobe-session | fsession`): one
//! program of the object per function (`ksession_*` / `fsession_*`), loaded and linked by this
//! module's parent, its fds held here until detach. The kernel's skip counts are read from them
//! while they live and kept when they go.
use std::{
    collections::BTreeMap,
    os::fd::{AsFd as _, AsRawFd as _, OwnedFd},
};

use aya::{Btf, Ebpf};

use super::{
    Kfuncs, Kind, Relocated, SessionError, attach, function_btf_id, load, module_btf,
    rewrite_kfunc_calls,
};
use crate::{
    probe::facts::KernelFacts,
    probe::loader::{
        programs::{program_names, timed_attach, timed_load},
        skips,
    },
    trace::{Attach, TracedFunction},
};

/// One function's session program and its link.
struct Link {
    kind: Kind,
    prog: OwnedFd,
    /// `None` once detached.
    link: Option<OwnedFd>,
    /// The link's own `missed` count (fprobe), read when it was detached.
    link_missed_at_detach: u64,
}

impl Link {
    /// Runs the kernel skipped: the program's `recursion_misses` (entry and return runs alike:
    /// one program) plus, for a kprobe session, the fprobe's own `missed`.
    fn misses(&self) -> Option<u64> {
        let in_prog = skips::recursion_misses(self.prog.as_fd())?;
        let in_link = match (&self.link, self.kind) {
            (Some(link), Kind::Kprobe) => skips::kprobe_multi_missed(link.as_fd()).unwrap_or(0),
            (None, _) => self.link_missed_at_detach,
            _ => 0,
        };
        Some(in_prog + in_link)
    }
}

/// The session programs attached, by function id.
#[derive(Default)]
pub struct SessionLinks {
    links: BTreeMap<u32, Link>,
    /// Resolved once, at the first attach.
    kfuncs: Option<Kfuncs>,
    /// The object relocated to this tracer's maps, at the first attach.
    relocated: Option<Relocated>,
}

impl SessionLinks {
    /// Loads `func`'s session program of `method` and attaches it; on failure, says why (the
    /// kernel feature missing, or the kernel's refusal).
    pub fn attach(
        &mut self,
        bpf: &Ebpf,
        func: &TracedFunction,
        method: Attach,
        btf: Option<&Btf>,
    ) -> Result<(), SessionError> {
        // A module's function: its BTF object, held until the program is loaded.
        let mut module_btf = None;
        let kind = match method {
            Attach::Fsession if !KernelFacts::get().fsession() => {
                return Err(SessionError::NoFsession);
            }
            Attach::Fsession => match function_btf_id(btf, &func.symbol) {
                Ok(btf_id) => Kind::Fsession {
                    btf_id,
                    btf_obj_fd: None,
                },
                Err(SessionError::NotInBtf(s)) => {
                    let m = module_btf::find(&s)
                        .map_err(SessionError::ModuleBtf)?
                        .ok_or(SessionError::NotInBtf(s))?;
                    let kind = Kind::Fsession {
                        btf_id: m.btf_id,
                        btf_obj_fd: Some(m.btf.as_raw_fd()),
                    };
                    module_btf = Some(m);
                    kind
                }
                Err(e) => return Err(e),
            },
            _ => Kind::Kprobe,
        };
        let kfuncs = match &self.kfuncs {
            Some(k) => k.clone(),
            None => self.kfuncs.insert(Kfuncs::resolve(btf)?).clone(),
        };
        let (name, _) = program_names(func, method);
        let relocated = match &self.relocated {
            Some(r) => r,
            None => self.relocated.insert(Relocated::new(bpf).map_err(|why| {
                SessionError::Relocation {
                    prog: name.clone(),
                    why,
                }
            })?),
        };
        let mut insns = relocated.instructions(&name)?;
        rewrite_kfunc_calls(&mut insns, &kfuncs)?;
        let prog = timed_load(&name, || load(kind, &name, &insns))?;
        drop(module_btf);
        let link = timed_attach(&name, &func.symbol, || {
            attach(kind, prog.as_fd(), &func.symbol)
        })?;
        self.links.insert(
            func.id,
            Link {
                kind,
                prog,
                link: Some(link),
                link_missed_at_detach: 0,
            },
        );
        Ok(())
    }

    /// Every function is attached: drops the relocated object (megabytes of the eBPF object's
    /// copy, for the session's whole life otherwise). A later [`SessionLinks::attach`]
    /// relocates again.
    pub fn attached_all(&mut self) {
        self.relocated = None;
    }

    /// The kernel's count of skipped runs of function `id`'s session program (entry or
    /// return); `None` if it has none or the kernel does not say.
    pub fn misses(&self, id: u32) -> Option<u64> {
        self.links.get(&id)?.misses()
    }

    /// Detaches every session program at once (entry and return parts go together; a call
    /// inside a function then gets no return run and stays in flight). The programs stay
    /// loaded, so their skip counts can still be read.
    pub fn detach_all(&mut self) {
        for l in self.links.values_mut() {
            if let (Some(link), Kind::Kprobe) = (&l.link, l.kind) {
                l.link_missed_at_detach = skips::kprobe_multi_missed(link.as_fd()).unwrap_or(0);
            }
            l.link = None;
        }
    }
}

/// What a kprobe session keeps of a function's arguments: it cannot read them at return (the
/// registers that held them are gone), and its 8-byte cookie holds the entry time in 48 bits
/// and two bytes besides (`session::pack_small` in damon-ebpf). Node ids fit
/// (`damos_va_migrate_dests_add`, `damon_migrate_pages`: ids above 254 read as −1);
/// `damon_hot_score`'s `nr_accesses` and `age` do not and are not recorded.
pub(crate) fn kprobe_session_args(a: &mut crate::capture::ArgStatus) {
    if a.function == damon_common::FunctionId::DamonHotScore.symbol() {
        a.missing.append(&mut a.recorded);
        a.detail = Some(
            "a kprobe session cannot read arguments at return and its cookie has no room for \
             nr_accesses and age; --attach fsession (Linux 7.x) or fentry/kprobe record them"
                .to_owned(),
        );
    } else if !a.recorded.is_empty() {
        let note = "kprobe session: node ids above 254 are recorded as -1";
        a.detail = Some(match a.detail.take() {
            Some(d) => format!("{d}; {note}"),
            None => note.to_owned(),
        });
    }
}

/// What a session-timed function's counters are read from.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SessionCounts {
    /// Entry runs that counted a call.
    pub calls: u64,
    /// Calls timed: records, or kernel buckets.
    pub timed: u64,
    pub ring_full: u64,
    /// Return runs that found no cookie (an fsession call whose entry run was skipped).
    pub orphans: u64,
    /// The kernel's count of skipped runs of the one program, entry and return alike.
    pub misses: Option<u64>,
    /// An fsession (whose return run is not tied to its entry run) rather than a kprobe
    /// session (whose skipped entry has no return run).
    pub fsession: bool,
}

/// A session-timed function's counters.
///
/// Each call's two runs either ran or were skipped, each skip one miss. A call with both runs
/// is timed (or lost to a full ring); an entry run without its return is a skipped return, or a
/// call still inside the function (`open`: the two look the same to us); a return run without
/// its entry is an orphan (fsession only: a kprobe session's skipped entry gets no return run,
/// nor a miss for it); a call with neither is two misses (fsession only). So
/// `misses = skipped returns + orphans + 2 × calls with neither` (fsession) or
/// `misses = skipped returns + skipped entries` (kprobe session). The open calls are taken as
/// skipped returns as far as the misses allow (and, for an fsession, the parity of what is
/// left); the rest are in flight. Exact whenever no call is still inside the function: at the
/// end of a session whose calls have returned (what the exactness tests check against the
/// calls a workload made), or whenever the kernel skipped nothing.
pub(crate) fn session_counters(c: SessionCounts) -> crate::capture::FunctionCounters {
    let open = c.calls.saturating_sub(c.timed + c.ring_full);
    let misses = c.misses.unwrap_or(0);
    let (skipped_returns, skipped_entries) = if c.fsession {
        let paired = misses.saturating_sub(c.orphans);
        let mut r = paired.min(open);
        if (paired - r) % 2 == 1 {
            r = r.saturating_sub(1);
        }
        let neither = (paired - r) / 2;
        (r, c.orphans + neither)
    } else {
        let r = misses.min(open);
        (r, misses - r)
    };
    crate::capture::FunctionCounters {
        calls: c.calls,
        emitted: c.timed,
        ring_full: c.ring_full,
        orphan_exits: c.orphans,
        stale_entries: skipped_returns,
        in_flight: open - skipped_returns,
        skipped_entries: c.misses.map(|_| skipped_entries),
        skipped_exits: c.misses.map(|m| m - skipped_entries),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fsession run of the exactness test on 7.2 with preempt=full (60 000 getppid calls
    /// by three tasks pinned to one CPU): the counts the kernel and the program gave.
    #[test]
    fn fsession_counts_of_a_run_add_up_to_the_calls_made() {
        let c = session_counters(SessionCounts {
            calls: 32402,
            timed: 32399,
            ring_full: 0,
            orphans: 1,
            misses: Some(55198),
            fsession: true,
        });
        assert_eq!(c.made(), 60000);
        assert_eq!((c.stale_entries, c.in_flight), (3, 0));
        assert_eq!(c.skipped_entries, Some(1 + 27597));
        assert_eq!(c.made(), c.emitted + c.dropped() + c.in_flight);
    }

    #[test]
    fn kprobe_session_skips_are_entries_or_returns() {
        // Nothing skipped: the open calls are in flight.
        let c = session_counters(SessionCounts {
            calls: 100,
            timed: 97,
            misses: Some(0),
            ..Default::default()
        });
        assert_eq!((c.in_flight, c.stale_entries, c.made()), (3, 0, 100));
        // Five skips, two calls open: two skipped returns, three skipped entries.
        let c = session_counters(SessionCounts {
            calls: 100,
            timed: 98,
            misses: Some(5),
            ..Default::default()
        });
        assert_eq!((c.in_flight, c.stale_entries), (0, 2));
        assert_eq!((c.skipped_entries, c.skipped_exits), (Some(3), Some(2)));
        assert_eq!(c.made(), 103);
        assert_eq!(c.made(), c.emitted + c.dropped() + c.in_flight);
    }

    #[test]
    fn fsession_parity_leaves_a_call_in_flight() {
        // One orphan, four misses: three left for returns and pairs; two calls open. Two
        // skipped returns would leave one miss, which no pair makes: one return skipped, one
        // pair (two misses), and the other open call is in flight.
        let c = session_counters(SessionCounts {
            calls: 10,
            timed: 8,
            orphans: 1,
            misses: Some(4),
            fsession: true,
            ..Default::default()
        });
        assert_eq!((c.stale_entries, c.in_flight), (1, 1));
        assert_eq!(c.skipped_entries, Some(2));
        assert_eq!(c.made(), c.emitted + c.dropped() + c.in_flight);
    }
}
