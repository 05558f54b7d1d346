//! Kprobe sessions (`BPF_TRACE_KPROBE_SESSION`, Linux ≥ 6.10) and fsessions
//! (`BPF_TRACE_FSESSION`, Linux 7.x), loaded by code of our own because aya 0.14 (and 0.16)
//! stops short of them: it has neither attach type, loads no kfunc calls and creates no
//! kprobe-multi links. aya keeps loading the maps (and every other
//! program); this module takes one program of the same object, relocated against aya's maps
//! with `aya-obj`, and does the three steps aya lacks, under the kernel's UAPI names:
//! - its kfunc placeholders become kfunc calls (`BPF_PSEUDO_KFUNC_CALL`, the kfunc's BTF id
//!   in the running kernel's vmlinux BTF; see `damon_common::KFUNC_PLACEHOLDERS`);
//! - `BPF_PROG_LOAD` as `BPF_PROG_TYPE_KPROBE` with `expected_attach_type`
//!   `BPF_TRACE_KPROBE_SESSION` (or `BPF_PROG_TYPE_TRACING`, `BPF_TRACE_FSESSION` and the
//!   function's BTF id);
//! - `BPF_LINK_CREATE` of a kprobe-multi link (fprobe) with that attach type on one symbol (or
//!   a tracing link).
//!
//! A session program runs at a call's entry and again at its return; an entry run that
//! returns non-zero has no return run; the 8 bytes of `bpf_session_cookie` belong to one
//! invocation. `doctor` checks these on the running kernel ([`selftest::self_test`]).
use std::{
    collections::HashSet,
    ffi::CString,
    os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd},
};

use aya::{Ebpf, maps::Map};
use aya_obj::{
    Object,
    generated::{BPF_PSEUDO_KFUNC_CALL, bpf_attr, bpf_insn},
};
use damon_common::KFUNC_PLACEHOLDERS;

use crate::probe::{
    facts::sysfiles::StartCache,
    loader::{programs::EBPF_OBJECT, skips::bpf},
};

/// `enum bpf_attach_type`'s `BPF_TRACE_KPROBE_SESSION` (UAPI, Linux ≥ 6.10).
pub const BPF_TRACE_KPROBE_SESSION: u32 = 56;
/// `enum bpf_attach_type`'s `BPF_TRACE_FSESSION` (UAPI, Linux 7.x).
pub const BPF_TRACE_FSESSION: u32 = 58;
/// `BPF_PROG_TYPE_KPROBE` and `BPF_PROG_TYPE_TRACING`.
const BPF_PROG_TYPE_KPROBE: u32 = 2;
const BPF_PROG_TYPE_TRACING: u32 = 26;

/// Which kind of session a program is loaded as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `BPF_TRACE_KPROBE_SESSION`: fprobe, attached to symbols by a kprobe-multi link.
    Kprobe,
    /// `BPF_TRACE_FSESSION`: the BPF trampoline, bound at load to the function's BTF id (in
    /// vmlinux's BTF, or in the BTF object `btf_obj_fd` of the module that has the function:
    /// see [`module_btf`]).
    Fsession {
        btf_id: u32,
        btf_obj_fd: Option<i32>,
    },
}

impl Kind {
    fn attach_type(self) -> u32 {
        match self {
            Kind::Kprobe => BPF_TRACE_KPROBE_SESSION,
            Kind::Fsession { .. } => BPF_TRACE_FSESSION,
        }
    }

    /// The attach method this kind of session is.
    pub fn attach(self) -> damon_common::attach::Attach {
        match self {
            Kind::Kprobe => damon_common::attach::Attach::KprobeSession,
            Kind::Fsession { .. } => damon_common::attach::Attach::Fsession,
        }
    }

    /// As doctor and errors name it.
    pub fn name(self) -> &'static str {
        self.attach().probes()
    }
}
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
/// `BPF_JMP | BPF_CALL`.
const CALL: u8 = 0x85;

/// Why a session cannot be had here; each names what is missing.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(
        "no BTF of the running kernel (/sys/kernel/btf/vmlinux): kfunc calls cannot be resolved"
    )]
    NoBtf,
    #[error("kprobe sessions need Linux 6.10 or later: this kernel's BTF has no kfunc `{0}`")]
    NoKfunc(&'static str),
    #[error("this kernel has no fsession (BPF_TRACE_FSESSION is not in its BTF; Linux 7.x)")]
    NoFsession,
    #[error(
        "`{0}` is not a function in this kernel's BTF nor in a loaded module's (an fsession \
         attaches by BTF id)"
    )]
    NotInBtf(String),
    #[error("reading the modules' BTF: {0}")]
    ModuleBtf(String),
    #[error("program `{0}` is not in the eBPF object")]
    NoProgram(String),
    #[error("relocating the eBPF object for `{prog}`: {why}")]
    Relocation { prog: String, why: String },
    #[error("a call to kfunc placeholder {0:#x} that no kfunc is known for")]
    UnknownPlaceholder(i32),
    #[error("the kernel refused to load `{prog}` as a {kind}: {err}{log}")]
    Load {
        prog: String,
        kind: &'static str,
        err: std::io::Error,
        log: String,
    },
    #[error("the kernel refused a {kind} link on `{symbol}`: {err}")]
    Link {
        symbol: String,
        kind: &'static str,
        err: std::io::Error,
    },
}

/// The BTF ids of the kfuncs the object calls, in the order of `KFUNC_PLACEHOLDERS`.
#[derive(Debug, Clone, PartialEq)]
pub struct Kfuncs(Vec<(i32, u32)>);

impl Kfuncs {
    /// Looks each kfunc up in the running kernel's BTF.
    pub fn resolve(btf: Option<&aya::Btf>) -> Result<Kfuncs, SessionError> {
        let btf = btf.ok_or(SessionError::NoBtf)?;
        crate::probe::facts::session_kfunc_ids(btf)
            .map(Kfuncs)
            .map_err(SessionError::NoKfunc)
    }

    #[cfg(test)]
    fn new(ids: Vec<(i32, u32)>) -> Kfuncs {
        Kfuncs(ids)
    }
}

/// Turns every call of a kfunc placeholder into a kfunc call (`src_reg` =
/// `BPF_PSEUDO_KFUNC_CALL`, `imm` = the kfunc's BTF id, `off` = 0: vmlinux); returns how many.
/// Helper calls (small ids) and calls of subprograms (`src_reg` 1) are left alone.
pub fn rewrite_kfunc_calls(insns: &mut [bpf_insn], kfuncs: &Kfuncs) -> Result<usize, SessionError> {
    let mut n = 0;
    for ins in insns.iter_mut() {
        if ins.code != CALL || ins.src_reg() != 0 {
            continue;
        }
        let is_placeholder = KFUNC_PLACEHOLDERS.iter().any(|&(p, _)| p == ins.imm);
        if !is_placeholder {
            if ins.imm >= KFUNC_PLACEHOLDERS[0].0 {
                return Err(SessionError::UnknownPlaceholder(ins.imm));
            }
            continue;
        }
        let id = kfuncs
            .0
            .iter()
            .find(|(p, _)| *p == ins.imm)
            .map(|&(_, id)| id)
            .ok_or(SessionError::UnknownPlaceholder(ins.imm))?;
        ins.set_src_reg(BPF_PSEUDO_KFUNC_CALL as u8);
        ins.off = 0;
        ins.imm = id as i32;
        n += 1;
    }
    Ok(n)
}

/// The file descriptor of one of aya's maps (the variants the object uses).
fn map_fd(map: &Map) -> Option<BorrowedFd<'_>> {
    let data = match map {
        Map::Array(m) | Map::PerCpuArray(m) | Map::HashMap(m) | Map::PerCpuHashMap(m) => m,
        Map::LruHashMap(m) | Map::RingBuf(m) => m,
        _ => return None,
    };
    Some(data.fd().as_fd())
}

/// The embedded eBPF object, parsed once per process: parsing it whole (its BTF included)
/// took 0.3–0.5 s in a 7.2 guest, and a session loads up to four session programs of it, a
/// calibration more (`--debug-timing`). Each caller relocates its own copy.
fn parsed() -> Result<Object, String> {
    PARSED.get_or_init(|| {
        let _t = crate::timing::phase("ELF object parsed (once)");
        Object::parse(EBPF_OBJECT).map_err(|e| e.to_string())
    })
}

/// [`parsed`]'s object, kept for the start ([`crate::probe::release`] drops it).
pub(in crate::probe) static PARSED: StartCache<Result<Object, String>> = StartCache::new();

/// Program `prog` of the embedded object (the one `bpf` was loaded from), its map references
/// relocated to `bpf`'s maps and its subprogram calls linked: the instructions aya would load.
pub fn instructions(bpf: &Ebpf, prog: &str) -> Result<Vec<bpf_insn>, SessionError> {
    Relocated::new(bpf)
        .map_err(|why| SessionError::Relocation {
            prog: prog.to_owned(),
            why,
        })?
        .instructions(prog)
}

/// The object `bpf` was loaded from, every program's map references relocated to `bpf`'s
/// maps and its subprogram calls linked, once for all the session programs a tracer loads
/// (relocating took 0.25–0.3 s a program in a 7.2 guest).
pub struct Relocated {
    obj: Object,
}

impl Relocated {
    pub fn new(bpf: &Ebpf) -> Result<Relocated, String> {
        let _t = crate::timing::phase("session programs: maps relocated, calls linked");
        let mut obj = parsed()?;
        let mut fds = Vec::new();
        for name in obj.maps.keys() {
            let map = bpf
                .map(name)
                .ok_or_else(|| format!("map {name} was not created"))?;
            let fd = map_fd(map).ok_or_else(|| format!("map {name}: unexpected type"))?;
            fds.push((name.clone(), fd.as_raw_fd()));
        }
        let maps = std::mem::take(&mut obj.maps);
        let text: HashSet<usize> = obj.functions.keys().map(|(section, _)| *section).collect();
        obj.relocate_maps(
            fds.iter()
                .map(|(name, fd)| (name.as_str(), *fd, &maps[name])),
            &text,
        )
        .map_err(|e| e.to_string())?;
        obj.relocate_calls(&text).map_err(|e| e.to_string())?;
        Ok(Relocated { obj })
    }

    /// Program `prog`'s instructions, as aya would load them.
    pub fn instructions(&self, prog: &str) -> Result<Vec<bpf_insn>, SessionError> {
        let key = self
            .obj
            .programs
            .get(prog)
            .ok_or_else(|| SessionError::NoProgram(prog.to_owned()))?
            .function_key();
        Ok(self.obj.functions[&key].instructions.clone())
    }
}

/// The `bpf_attr` of `BPF_PROG_LOAD` for a session program of `kind`.
fn prog_load_attr(
    kind: Kind,
    name: &str,
    insns: &[bpf_insn],
    license: &CString,
    log: &mut [u8],
) -> bpf_attr {
    // SAFETY: a C union of integers, for which all zeroes is valid.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // SAFETY: writing the `BPF_PROG_LOAD` member of a zeroed union.
    let a = unsafe { &mut attr.__bindgen_anon_3 };
    a.expected_attach_type = kind.attach_type();
    match kind {
        Kind::Kprobe => a.prog_type = BPF_PROG_TYPE_KPROBE,
        Kind::Fsession { btf_id, btf_obj_fd } => {
            a.prog_type = BPF_PROG_TYPE_TRACING;
            a.attach_btf_id = btf_id;
            if let Some(fd) = btf_obj_fd {
                a.__bindgen_anon_1.attach_btf_obj_fd = fd as u32;
            }
        }
    }
    a.insn_cnt = insns.len() as u32;
    a.insns = insns.as_ptr() as u64;
    a.license = license.as_ptr() as u64;
    for (d, s) in a.prog_name.iter_mut().zip(name.bytes().take(15)) {
        *d = s as libc::c_char;
    }
    if !log.is_empty() {
        a.log_level = 1;
        a.log_size = log.len() as u32;
        a.log_buf = log.as_mut_ptr() as u64;
    }
    attr
}

/// Loads `insns` (kfunc calls already rewritten) as the session program `name` of `kind`. On
/// a refusal, loads again with the verifier's log and keeps its end in the error.
pub fn load(kind: Kind, name: &str, insns: &[bpf_insn]) -> Result<OwnedFd, SessionError> {
    let license = CString::new("GPL").expect("no NUL");
    let mut attr = prog_load_attr(kind, name, insns, &license, &mut []);
    let err = match bpf(BPF_PROG_LOAD, &mut attr) {
        // SAFETY: the kernel returned a new file descriptor that nothing else owns.
        Ok(fd) => return Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) }),
        Err(e) => e,
    };
    let mut buf = vec![0u8; 1 << 20];
    let mut attr = prog_load_attr(kind, name, insns, &license, &mut buf);
    let _ = bpf(BPF_PROG_LOAD, &mut attr);
    let text = String::from_utf8_lossy(&buf);
    let text = text.trim_end_matches('\0').trim_end();
    let tail: Vec<&str> = text.lines().rev().take(12).collect();
    let log = if tail.is_empty() {
        String::new()
    } else {
        format!(
            "\nverifier log (end):\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        )
    };
    Err(SessionError::Load {
        prog: name.to_owned(),
        kind: kind.name(),
        err,
        log,
    })
}

/// The `bpf_attr` of `BPF_LINK_CREATE` for a session of `kind`: a kprobe-multi link on the
/// symbols behind `syms`, or a tracing link (the target was fixed at load).
fn link_attr(kind: Kind, prog: BorrowedFd<'_>, syms: &[*const libc::c_char]) -> bpf_attr {
    // SAFETY: as in `prog_load_attr`.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // SAFETY: writing the `BPF_LINK_CREATE` member of a zeroed union.
    let l = unsafe { &mut attr.link_create };
    l.__bindgen_anon_1.prog_fd = prog.as_raw_fd() as u32;
    l.attach_type = kind.attach_type();
    if kind == Kind::Kprobe {
        // SAFETY: writing the kprobe-multi member of a zeroed union.
        let k = unsafe { &mut l.__bindgen_anon_3.kprobe_multi };
        k.cnt = syms.len() as u32;
        k.syms = syms.as_ptr() as u64;
    }
    attr
}

/// Attaches the session program `prog` of `kind` to kernel function `symbol` (kprobe: the
/// kernel resolves the name through kallsyms; fsession: the program was bound to it at load);
/// the link lives as long as the returned fd.
pub fn attach(kind: Kind, prog: BorrowedFd<'_>, symbol: &str) -> Result<OwnedFd, SessionError> {
    let failed = |err| SessionError::Link {
        symbol: symbol.to_owned(),
        kind: kind.name(),
        err,
    };
    let name = CString::new(symbol)
        .map_err(|_| failed(std::io::Error::from(std::io::ErrorKind::InvalidInput)))?;
    let syms = [name.as_ptr()];
    let mut attr = link_attr(kind, prog, &syms);
    match bpf(BPF_LINK_CREATE, &mut attr) {
        // SAFETY: as in `load`.
        Ok(fd) => Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) }),
        Err(err) => Err(failed(err)),
    }
}

/// The BTF id of kernel function `symbol` (an fsession's target).
pub fn function_btf_id(btf: Option<&aya::Btf>, symbol: &str) -> Result<u32, SessionError> {
    btf.ok_or(SessionError::NoBtf)?
        .id_by_type_name_kind(symbol, aya_obj::btf::BtfKind::Func)
        .map_err(|_| SessionError::NotInBtf(symbol.to_owned()))
}

pub mod links;
pub mod module_btf;
pub mod selftest;

#[cfg(test)]
mod tests;
