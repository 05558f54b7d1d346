//! `bench-floor`: the benchmark's floor programs (an fentry/fexit or a kprobe/kretprobe pair
//! that only reads the clock, once each; either pair also keeping a per-task stamp in a hash
//! map; the kprobe pair with the stamp and one ring record per call; a kprobe session keeping
//! the entry time in its cookie, with or without the record) attached to one function,
//! so `cargo xtask bench` can time the kernel's own attach path, the stamp any exact timing
//! needs and the record a stream tracer writes, next to ours.
use anyhow::Context as _;
use aya::{
    Ebpf, EbpfLoader,
    programs::{FEntry, FExit, KProbe},
};
use damon_common::{
    MAP_EVENTS, MAP_HIST, MAP_HIST_STATS, MAP_STAMPS,
    attach::{Hook, Timing},
};

use std::os::fd::{AsFd as _, OwnedFd};

/// The floor pairs and their program names are the object's, with its other names (see
/// [`programs`](crate::probe::loader::programs)).
pub use crate::probe::loader::programs::{FloorKind, floor_pair_names as program_names};
use crate::probe::loader::{attach::program, programs::EBPF_OBJECT, session};

/// The ring of the record floor: as large as the benchmark gives ours (`record --ring-size`),
/// so that every call of its loop finds room and pays a real reserve and submit.
pub const RECORD_FLOOR_RING_BYTES: u32 = 32 << 20;

/// Stamp map entries for the stamp floors, which keep one per task (the benchmark's loop is one
/// task; a session sizes the map for every task that may call its functions).
const FLOOR_STAMP_ENTRIES: u32 = 64;

/// An attached floor: the object's maps and, for a session floor, its program and link (aya
/// holds the others). Detached when dropped.
pub struct Floor {
    _bpf: Ebpf,
    _session: Option<(OwnedFd, OwnedFd)>,
}

/// Loads the object (the session's maps at their smallest where the floor programs do not use
/// them, the stamp map at [`FLOOR_STAMP_ENTRIES`]) and attaches the floor pair `kind` to
/// `symbol`; the pair stays attached while the returned value lives.
pub fn attach(symbol: &str, kind: FloorKind) -> anyhow::Result<Floor> {
    let btf = crate::probe::facts::sysfiles::aya_btf().context("reading the kernel's BTF")?;
    let ring_bytes = if kind.ring() {
        RECORD_FLOOR_RING_BYTES
    } else {
        4096
    };
    let mut bpf = EbpfLoader::new()
        .btf(Some(&btf))
        .map_max_entries(MAP_EVENTS, ring_bytes)
        .map_max_entries(MAP_HIST, 1)
        .map_max_entries(MAP_HIST_STATS, 1)
        .map_max_entries(damon_common::disturb::MAP_DISTURBED_HIST, 1)
        .map_max_entries(damon_common::disturb::MAP_DISTURBED_STATS, 1)
        .map_max_entries(MAP_STAMPS, FLOOR_STAMP_ENTRIES)
        .load(EBPF_OBJECT)
        .context("loading the eBPF object")?;
    let (entry, exit) = program_names(kind);
    let mut session = None;
    let facts = kind.attach().facts();
    // How the programs attach is the floor's method's: its hook and its timing.
    let attached = match (facts.hook, facts.timing) {
        (Hook::Trampoline, Timing::Stamp) => {
            let fexit: &mut FExit = program(&mut bpf, exit)?;
            fexit.load(symbol, &btf)?;
            fexit.attach()?;
            let fentry: &mut FEntry = program(&mut bpf, entry)?;
            fentry.load(symbol, &btf)?;
            fentry.attach().map(|_| ())
        }
        (Hook::Kprobe, Timing::Stamp) => [exit, entry].into_iter().try_for_each(|name| {
            let kprobe: &mut KProbe = program(&mut bpf, name)?;
            kprobe.load()?;
            kprobe.attach(symbol, 0).map(|_| ())
        }),
        (hook, Timing::Cookie) => {
            let kind = if hook == Hook::Trampoline {
                session::Kind::Fsession {
                    btf_id: session::function_btf_id(Some(&btf), symbol)?,
                    btf_obj_fd: None,
                }
            } else {
                session::Kind::Kprobe
            };
            let kfuncs = session::Kfuncs::resolve(Some(&btf))?;
            let mut insns = session::instructions(&bpf, entry)?;
            session::rewrite_kfunc_calls(&mut insns, &kfuncs)?;
            let prog = session::load(kind, entry, &insns)?;
            let link = session::attach(kind, prog.as_fd(), symbol)
                .with_context(|| format!("attaching {entry} to {symbol}"))?;
            session = Some((prog, link));
            Ok(())
        }
    };
    attached.with_context(|| format!("attaching {entry}/{exit} to {symbol}"))?;
    Ok(Floor {
        _bpf: bpf,
        _session: session,
    })
}
