//! Every BPF program, map and link the kernel holds, and which of them are ours (`doctor`'s
//! "leaves no trace" check and the tests that assert it).
use serde::Serialize;

use crate::probe::programs::{MAP_NAMES, all_program_names};

/// The kernel keeps this many characters of a program or map name (BPF_OBJ_NAME_LEN - 1).
const KERNEL_NAME_LEN: usize = 15;

/// `name` as the kernel shows it (truncated).
fn truncated(name: &str) -> String {
    name.chars().take(KERNEL_NAME_LEN).collect()
}

/// Program names of ours, as the kernel shows them (truncated).
fn our_program_names() -> Vec<String> {
    all_program_names().iter().map(|n| truncated(n)).collect()
}

/// Map names of ours, as the kernel shows them (truncated).
fn our_map_names() -> Vec<String> {
    MAP_NAMES.iter().map(|n| truncated(n)).collect()
}

/// One BPF program, map or link the kernel holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BpfObject {
    pub id: u32,
    /// Kernel type, lower case without prefix: programs `tracing`, `kprobe`; maps `ringbuf`,
    /// `percpuarray`, `hash`; links `tracing`, `perfevent`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Programs and maps: the (truncated) name; links have none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Links: the program they attach.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program_id: Option<u32>,
    /// Has the name of one of damon-trace's programs or maps, or links one of those programs.
    pub ours: bool,
}

/// Every BPF program, map and link in the kernel (all processes, not only ours), read with
/// BPF_{PROG,MAP,LINK}_GET_NEXT_ID; the ground truth for "leaves no trace".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BpfObjects {
    pub programs: Vec<BpfObject>,
    pub maps: Vec<BpfObject>,
    pub links: Vec<BpfObject>,
    /// Why (part of) the listing is missing, e.g. EPERM without CAP_SYS_ADMIN.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl BpfObjects {
    /// Ours only, programs then maps then links, for messages: `program NAME (id N, TYPE)`.
    pub fn ours(&self) -> Vec<String> {
        let describe = |what: &str, o: &BpfObject| match (&o.name, o.program_id) {
            (Some(n), _) => format!("{what} {n} (id {}, {})", o.id, o.kind),
            (None, Some(p)) => format!("{what} {} of program {p} ({})", o.id, o.kind),
            (None, None) => format!("{what} {} ({})", o.id, o.kind),
        };
        let pick = |what: &'static str, v: &'_ [BpfObject]| {
            v.iter()
                .filter(|o| o.ours)
                .map(|o| describe(what, o))
                .collect::<Vec<_>>()
        };
        let mut out = pick("program", &self.programs);
        out.extend(pick("map", &self.maps));
        out.extend(pick("link", &self.links));
        out
    }
}

/// Lower-case type name without the kernel's prefix (`BPF_PROG_TYPE_TRACING` → `tracing`,
/// `PerCpuArray` → `percpuarray`).
fn type_name(debug: String, prefix: &str) -> String {
    debug
        .strip_prefix(prefix)
        .unwrap_or(&debug)
        .to_ascii_lowercase()
}

fn kernel_name(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Lists every BPF object the kernel holds. Uses the raw names (no aya feature probing, which
/// would itself load programs and maps while we list). An object freed between "next id" and
/// "open by id" (ENOENT) is skipped; any other error is kept in `error`.
pub fn list_bpf_objects() -> BpfObjects {
    let mut out = BpfObjects::default();
    let mut errors: Vec<String> = Vec::new();
    let mut note = |what: &str, e: &dyn std::error::Error| {
        let mut msg = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            msg.push_str(": ");
            msg.push_str(&s.to_string());
            source = s.source();
        }
        if !msg.contains("No such file or directory") {
            errors.push(format!("listing {what}: {msg}"));
        }
    };
    let prog_names = our_program_names();
    for p in aya::programs::loaded_programs() {
        match p {
            Ok(p) => {
                let name = kernel_name(p.name());
                out.programs.push(BpfObject {
                    id: p.id(),
                    kind: type_name(format!("{:?}", p.program_type()), "BPF_PROG_TYPE_"),
                    ours: prog_names.contains(&name),
                    name: Some(name),
                    program_id: None,
                });
            }
            Err(e) => note("programs", &e),
        }
    }
    let map_names = our_map_names();
    for m in aya::maps::loaded_maps() {
        match m {
            Ok(m) => {
                let name = kernel_name(m.name());
                let kind = m.map_type().map_or_else(
                    |_| "unknown".to_owned(),
                    |t| type_name(format!("{t:?}"), ""),
                );
                out.maps.push(BpfObject {
                    id: m.id(),
                    kind,
                    ours: map_names.contains(&name),
                    name: Some(name),
                    program_id: None,
                });
            }
            Err(e) => note("maps", &e),
        }
    }
    for l in aya::programs::loaded_links() {
        match l {
            Ok(l) => {
                let prog = l.program_id();
                let kind = l.link_type().map_or_else(
                    |_| "unknown".to_owned(),
                    |t| type_name(format!("{t:?}"), ""),
                );
                out.links.push(BpfObject {
                    id: l.id(),
                    kind,
                    name: None,
                    program_id: Some(prog),
                    ours: out.programs.iter().any(|p| p.id == prog && p.ours),
                });
            }
            Err(e) => note("links", &e),
        }
    }
    errors.dedup();
    if !errors.is_empty() {
        out.error = Some(errors.join("; "));
    }
    out
}
