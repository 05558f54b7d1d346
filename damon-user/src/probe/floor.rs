//! `bench-floor`: the benchmark's floor programs (an fentry/fexit or a kprobe/kretprobe pair
//! that only reads the clock, once each, or an fentry/fexit pair that also keeps a per-task
//! stamp in a hash map) attached to one function, so `cargo xtask bench` can time the kernel's
//! own attach path, and the stamp any exact timing needs, next to ours.
use anyhow::Context as _;
use aya::{
    Btf, Ebpf, EbpfLoader,
    programs::{FEntry, FExit, KProbe},
};
use damon_common::{MAP_EVENTS, MAP_HIST, MAP_HIST_STATS};

use crate::probe::{attach::program, programs::EBPF_OBJECT};

/// Which floor pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloorKind {
    /// fentry/fexit, reading the clock once each.
    Fentry,
    /// kprobe/kretprobe, reading the clock once each.
    Kprobe,
    /// fentry/fexit, reading the clock once each and keeping the entry time per task in a
    /// hash map (lookup on both sides).
    FentryStamp,
}

impl FloorKind {
    pub const ALL: [FloorKind; 3] = [FloorKind::Fentry, FloorKind::Kprobe, FloorKind::FentryStamp];

    /// `bench-floor --attach`'s value.
    pub const fn as_str(self) -> &'static str {
        match self {
            FloorKind::Fentry => "fentry",
            FloorKind::Kprobe => "kprobe",
            FloorKind::FentryStamp => "fentry-stamp",
        }
    }

    pub fn parse(s: &str) -> Option<FloorKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// The floor pair's program names: (entry, exit).
pub const fn program_names(kind: FloorKind) -> (&'static str, &'static str) {
    match kind {
        FloorKind::Fentry => ("floor_fentry", "floor_fexit"),
        FloorKind::Kprobe => ("floor_kprobe", "floor_kretprobe"),
        FloorKind::FentryStamp => ("floor_st_fentry", "floor_st_fexit"),
    }
}

/// Loads the object (the session's maps at their smallest: the floor programs do not use
/// them) and attaches the floor pair `kind` to `symbol`; the pair stays attached while the
/// returned value lives.
pub fn attach(symbol: &str, kind: FloorKind) -> anyhow::Result<Ebpf> {
    let btf = Btf::from_sys_fs().context("reading the kernel's BTF")?;
    let mut bpf = EbpfLoader::new()
        .btf(Some(&btf))
        .map_max_entries(MAP_EVENTS, 4096)
        .map_max_entries(MAP_HIST, 1)
        .map_max_entries(MAP_HIST_STATS, 1)
        .load(EBPF_OBJECT)
        .context("loading the eBPF object")?;
    let (entry, exit) = program_names(kind);
    let attached = match kind {
        FloorKind::Fentry | FloorKind::FentryStamp => {
            let fexit: &mut FExit = program(&mut bpf, exit)?;
            fexit.load(symbol, &btf)?;
            fexit.attach()?;
            let fentry: &mut FEntry = program(&mut bpf, entry)?;
            fentry.load(symbol, &btf)?;
            fentry.attach().map(|_| ())
        }
        FloorKind::Kprobe => [exit, entry].into_iter().try_for_each(|name| {
            let kprobe: &mut KProbe = program(&mut bpf, name)?;
            kprobe.load()?;
            kprobe.attach(symbol, 0).map(|_| ())
        }),
    };
    attached.with_context(|| format!("attaching {entry}/{exit} to {symbol}"))?;
    Ok(bpf)
}
