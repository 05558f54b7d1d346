//! `bench-floor`: the benchmark's floor programs (an fentry/fexit pair that only reads the
//! clock, or an empty kprobe/kretprobe pair) attached to one function, so `cargo xtask bench`
//! can time the kernel's own attach path next to ours.
use anyhow::Context as _;
use aya::{
    Btf, Ebpf, EbpfLoader,
    programs::{FEntry, FExit, KProbe},
};
use damon_common::{MAP_EVENTS, MAP_HIST, MAP_HIST_STATS};

use crate::{
    probe::{attach::program, programs::EBPF_OBJECT},
    trace::AttachMethod,
};

/// The floor pair's program names: (entry, exit).
pub const fn program_names(method: AttachMethod) -> (&'static str, &'static str) {
    match method {
        AttachMethod::Fentry => ("floor_fentry", "floor_fexit"),
        AttachMethod::Kprobe => ("floor_kprobe", "floor_kretprobe"),
    }
}

/// Loads the object (maps at their smallest: the floor programs use none) and attaches the
/// floor pair of `method` to `symbol`; the pair stays attached while the returned value lives.
pub fn attach(symbol: &str, method: AttachMethod) -> anyhow::Result<Ebpf> {
    let btf = Btf::from_sys_fs().context("reading the kernel's BTF")?;
    let mut bpf = EbpfLoader::new()
        .btf(Some(&btf))
        .map_max_entries(MAP_EVENTS, 4096)
        .map_max_entries(MAP_HIST, 1)
        .map_max_entries(MAP_HIST_STATS, 1)
        .load(EBPF_OBJECT)
        .context("loading the eBPF object")?;
    let (entry, exit) = program_names(method);
    let attached = match method {
        AttachMethod::Fentry => {
            let fexit: &mut FExit = program(&mut bpf, exit)?;
            fexit.load(symbol, &btf)?;
            fexit.attach()?;
            let fentry: &mut FEntry = program(&mut bpf, entry)?;
            fentry.load(symbol, &btf)?;
            fentry.attach().map(|_| ())
        }
        AttachMethod::Kprobe => [exit, entry].into_iter().try_for_each(|name| {
            let kprobe: &mut KProbe = program(&mut bpf, name)?;
            kprobe.load()?;
            kprobe.attach(symbol, 0).map(|_| ())
        }),
    };
    attached.with_context(|| format!("attaching {entry}/{exit} to {symbol}"))?;
    Ok(bpf)
}
