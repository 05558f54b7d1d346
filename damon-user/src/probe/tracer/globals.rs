//! What is written into the eBPF object before it is loaded: kernel struct offsets and facts
//! read from BTF and sysfs, and the stamp map's size.
use std::path::Path;

use damon_common::{
    FunctionId, GLOBAL_DESTS_NODE_ID_ARR_OFF, GLOBAL_DESTS_NR_OFF, GLOBAL_PAGE_STRUCT_SIZE,
    GLOBAL_REGION_AGE_OFF, GLOBAL_REGION_NR_ACCESSES_OFF, GLOBAL_VMEMMAP_BASE_SYM, OFFSET_UNKNOWN,
};

use crate::capture::ArgStatus;

/// Test knob: the environment variable that sets the stamp map's size (see
/// [`stamp_map_entries`]).
pub const STAMP_MAP_ENTRIES_ENV: &str = "DAMON_TRACE_MAX_IN_FLIGHT";

/// Entries of the stamp map (one per task and traced function that has called it):
/// [`damon_common::MAX_IN_FLIGHT`], or `$DAMON_TRACE_MAX_IN_FLIGHT` when that is a positive
/// number. A test knob, not a user option: a map small enough to fill lets a guest test drive
/// the `stamp_full` drop path with a handful of tasks (`lab/tests/vm_drops.rs`). The size
/// is not stored in the capture: the drop warning names the size of the process that prints it.
pub fn stamp_map_entries() -> u32 {
    entries_from(std::env::var(STAMP_MAP_ENTRIES_ENV).ok().as_deref())
}

/// [`stamp_map_entries`] for the variable's value.
fn entries_from(value: Option<&str>) -> u32 {
    value
        .and_then(|v| v.trim().parse::<u32>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(damon_common::MAX_IN_FLIGHT)
}

/// What [`field_offsets`] gives the loader: `u32` offsets, `u64` globals, the node pfn ranges
/// and what each function's records will carry.
pub(super) type Fields = (
    Vec<(&'static str, u32)>,
    Vec<(&'static str, u64)>,
    Vec<damon_common::NodePfnRange>,
    Vec<ArgStatus>,
);

/// The kernel's BTF as parsed for the field offsets, or why it could not be.
pub(super) type ParsedBtf = Result<crate::probe::facts::btf::Btf, String>;

/// The struct field offsets and kernel facts the programs need ([`OFFSET_UNKNOWN`] / 0 where
/// they cannot be found) and what each function's records will carry.
pub(super) fn field_offsets(functions: &[FunctionId], parsed: &ParsedBtf) -> Fields {
    let mut globals = Vec::new();
    let mut globals64 = Vec::new();
    let mut ranges = Vec::new();
    let mut statuses = Vec::new();
    for &func in functions {
        let names = func.arg_names();
        if names.iter().all(|n| n.is_empty()) {
            continue;
        }
        let mut status = ArgStatus {
            function: func.symbol().to_owned(),
            recorded: Vec::new(),
            missing: Vec::new(),
            detail: None,
        };
        match func {
            FunctionId::DamonHotScore => region_fields(parsed, &mut globals, &mut status),
            FunctionId::DamosVaMigrateDestsAdd => {
                folio_node_fields(parsed, &mut globals64, &mut ranges, &mut status);
                dests_fields(parsed, &mut globals, &mut status);
            }
            _ => status.recorded.extend(
                names
                    .iter()
                    .filter(|n| !n.is_empty())
                    .map(|n| n.to_string()),
            ),
        }
        statuses.push(status);
    }
    (globals, globals64, ranges, statuses)
}

/// Notes in `status` whether `field` is recorded, or, with `what` and the error, why not.
fn note(status: &mut ArgStatus, field: &str, what: &str, found: &Result<(), String>) {
    match found {
        Ok(()) => status.recorded.push(field.to_owned()),
        Err(e) => {
            status.missing.push(field.to_owned());
            status.detail = Some(format!("{what}: {e}"));
        }
    }
}

/// `damon_hot_score`: the offsets of `struct damon_region`'s `nr_accesses` and `age`.
fn region_fields(
    parsed: &ParsedBtf,
    globals: &mut Vec<(&'static str, u32)>,
    status: &mut ArgStatus,
) {
    for (field, global) in [
        ("nr_accesses", GLOBAL_REGION_NR_ACCESSES_OFF),
        ("age", GLOBAL_REGION_AGE_OFF),
    ] {
        let off = parsed
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|b| b.int_member_offset("damon_region", field, 4));
        globals.push((global, *off.as_ref().unwrap_or(&OFFSET_UNKNOWN)));
        let what = format!("struct damon_region.{field}");
        note(status, field, &what, &off.map(drop));
    }
}

/// `damos_va_migrate_dests_add`'s folio node: `vmemmap_base`, the size of `struct page` and
/// the nodes' pfn ranges.
fn folio_node_fields(
    parsed: &ParsedBtf,
    globals64: &mut Vec<(&'static str, u64)>,
    ranges: &mut Vec<damon_common::NodePfnRange>,
    status: &mut ArgStatus,
) {
    let folio = (|| {
        let sym = crate::probe::facts::folio_node::data_symbol_address("vmemmap_base")?;
        let size = parsed.as_ref().map_err(Clone::clone)?.struct_size("page")?;
        let r = crate::probe::facts::folio_node::node_pfn_ranges(Path::new("/sys"))?;
        Ok::<_, String>((sym, size, r))
    })();
    let found = folio.map(|(sym, size, r)| {
        globals64.push((GLOBAL_VMEMMAP_BASE_SYM, sym));
        globals64.push((GLOBAL_PAGE_STRUCT_SIZE, u64::from(size)));
        *ranges = r;
    });
    note(status, "folio_nid", "folio node", &found);
}

/// `damos_va_migrate_dests_add`'s destination: the offsets of `struct damos_migrate_dests`'s
/// `node_id_arr` and `nr_dests`.
fn dests_fields(
    parsed: &ParsedBtf,
    globals: &mut Vec<(&'static str, u32)>,
    status: &mut ArgStatus,
) {
    let dests = parsed.as_ref().map_err(Clone::clone).and_then(|b| {
        Ok((
            b.ptr_member_offset("damos_migrate_dests", "node_id_arr")?,
            b.int_member_offset("damos_migrate_dests", "nr_dests", 8)?,
        ))
    });
    let found = dests.map(|(arr, nr)| {
        globals.push((GLOBAL_DESTS_NODE_ID_ARR_OFF, arr));
        globals.push((GLOBAL_DESTS_NR_OFF, nr));
    });
    note(status, "dest_nid", "destination node", &found);
}

#[cfg(test)]
mod tests {
    use damon_common::MAX_IN_FLIGHT;

    use super::*;

    #[test]
    fn stamp_map_size_knob() {
        assert_eq!(entries_from(None), MAX_IN_FLIGHT);
        assert_eq!(entries_from(Some("64")), 64);
        assert_eq!(entries_from(Some(" 64\n")), 64);
        for ignored in ["0", "-1", "", "many", "4294967296"] {
            assert_eq!(entries_from(Some(ignored)), MAX_IN_FLIGHT, "{ignored:?}");
        }
    }

    #[test]
    fn notes_say_what_is_recorded_and_why_not() {
        let mut status = ArgStatus {
            function: "damos_va_migrate_dests_add".to_owned(),
            recorded: Vec::new(),
            missing: Vec::new(),
            detail: None,
        };
        note(&mut status, "folio_nid", "folio node", &Ok(()));
        note(
            &mut status,
            "dest_nid",
            "destination node",
            &Err("no BTF".to_owned()),
        );
        assert_eq!(status.recorded, ["folio_nid"]);
        assert_eq!(status.missing, ["dest_nid"]);
        assert_eq!(status.detail.as_deref(), Some("destination node: no BTF"));
        // The last failure's detail is kept.
        note(&mut status, "x", "later", &Err("e".to_owned()));
        assert_eq!(status.detail.as_deref(), Some("later: e"));
    }
}
