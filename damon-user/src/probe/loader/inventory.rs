//! Every BPF program, map and link the kernel holds, and which of them are ours (`doctor`'s
//! "leaves no trace" check and the tests that assert it).
use serde::Serialize;

use crate::probe::loader::{
    attach::error_chain,
    programs::{MAP_NAMES, all_program_names},
};

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
        let msg = error_chain(e);
        if !msg.contains("No such file or directory") {
            errors.push(format!("listing {what}: {msg}"));
        }
    };
    out.programs = list_named(
        "programs",
        aya::programs::loaded_programs(),
        &our_program_names(),
        |p| {
            let kind = type_name(format!("{:?}", p.program_type()), "BPF_PROG_TYPE_");
            (p.id(), kind, kernel_name(p.name()))
        },
        &mut note,
    );
    out.maps = list_named(
        "maps",
        aya::maps::loaded_maps(),
        &our_map_names(),
        |m| (m.id(), kind(m.map_type()), kernel_name(m.name())),
        &mut note,
    );
    out.links = list_links(&out.programs, &mut note);
    errors.dedup();
    if !errors.is_empty() {
        out.error = Some(errors.join("; "));
    }
    out
}

/// What [`list_bpf_objects`] does with an error: `note("programs", err)`.
type Note<'a> = dyn FnMut(&str, &dyn std::error::Error) + 'a;

/// Lower-case name of a map or link type, `unknown` when aya does not know it.
fn kind<T: std::fmt::Debug, E>(t: Result<T, E>) -> String {
    t.map_or_else(
        |_| "unknown".to_owned(),
        |t| type_name(format!("{t:?}"), ""),
    )
}

/// Programs or maps, each ours when its (kernel) name is one of `ours`; `describe` gives an
/// object's id, kind and name.
fn list_named<T, E: std::error::Error>(
    what: &str,
    loaded: impl Iterator<Item = Result<T, E>>,
    ours: &[String],
    describe: impl Fn(&T) -> (u32, String, String),
    note: &mut Note<'_>,
) -> Vec<BpfObject> {
    let mut objects = Vec::new();
    for item in loaded {
        match item {
            Ok(item) => {
                let (id, kind, name) = describe(&item);
                objects.push(BpfObject {
                    id,
                    kind,
                    ours: ours.contains(&name),
                    name: Some(name),
                    program_id: None,
                });
            }
            Err(e) => note(what, &e),
        }
    }
    objects
}

/// Links, each ours when the program it attaches is.
fn list_links(programs: &[BpfObject], note: &mut Note<'_>) -> Vec<BpfObject> {
    let mut links = Vec::new();
    for l in aya::programs::loaded_links() {
        match l {
            Ok(l) => {
                let prog = l.program_id();
                links.push(BpfObject {
                    id: l.id(),
                    kind: kind(l.link_type()),
                    name: None,
                    program_id: Some(prog),
                    ours: programs.iter().any(|p| p.id == prog && p.ours),
                });
            }
            Err(e) => note("links", &e),
        }
    }
    links
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_lose_the_prefix_and_case() {
        assert_eq!(
            type_name("BPF_PROG_TYPE_TRACING".to_owned(), "BPF_PROG_TYPE_"),
            "tracing"
        );
        assert_eq!(type_name("PerCpuArray".to_owned(), ""), "percpuarray");
        // Without the prefix the whole name is kept.
        assert_eq!(type_name("Kprobe".to_owned(), "BPF_PROG_TYPE_"), "kprobe");
        #[derive(Debug)]
        struct PerCpuArray;
        assert_eq!(kind::<_, ()>(Ok(PerCpuArray)), "percpuarray");
        assert_eq!(kind::<PerCpuArray, ()>(Err(())), "unknown");
    }

    #[test]
    fn kernel_names_are_lossy_utf8() {
        assert_eq!(kernel_name(b"fentry_u4"), "fentry_u4");
        assert_eq!(kernel_name(b"a\xffb"), "a\u{fffd}b");
    }

    #[test]
    fn our_names_as_the_kernel_shows_them() {
        let programs = our_program_names();
        assert!(
            programs
                .iter()
                .all(|n| n.chars().count() <= KERNEL_NAME_LEN)
        );
        for shown in [
            "kretprobe_u14",
            "fentry_damon_ho",
            "kretprobe_damos",
            "calib_trigger",
        ] {
            assert!(programs.iter().any(|n| n == shown), "{shown}");
        }
        assert_eq!(our_map_names().len(), MAP_NAMES.len());
        assert!(our_map_names().iter().any(|n| n == "HSTATS"));
        assert_eq!(truncated("exactly15chars_"), "exactly15chars_");
        assert_eq!(truncated("sixteen_chars_xy"), "sixteen_chars_x");
    }

    #[test]
    fn ours_lists_programs_then_maps_then_links() {
        let object = |id, name: Option<&str>, program_id, ours| BpfObject {
            id,
            kind: "tracing".to_owned(),
            name: name.map(str::to_owned),
            program_id,
            ours,
        };
        let objects = BpfObjects {
            programs: vec![
                object(1, Some("fentry_u4"), None, true),
                object(2, Some("other"), None, false),
            ],
            maps: vec![object(3, Some("EVENTS"), None, true)],
            links: vec![
                object(4, None, Some(1), true),
                object(5, None, None, true),
                object(6, None, Some(2), false),
            ],
            error: None,
        };
        assert_eq!(
            objects.ours(),
            [
                "program fentry_u4 (id 1, tracing)",
                "map EVENTS (id 3, tracing)",
                "link 4 of program 1 (tracing)",
                "link 5 (tracing)",
            ]
        );
    }
}
