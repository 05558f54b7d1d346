//! What is written into the eBPF object before it is loaded: kernel struct offsets and facts
//! read from BTF and sysfs, and the stamp map's size.
use std::path::Path;

use damon_common::FunctionId;

/// Test knob: the environment variable that sets the stamp map's size (see
/// [`stamp_map_entries`]).
pub const STAMP_MAP_ENTRIES_ENV: &str = "DAMON_TRACE_MAX_IN_FLIGHT";

/// Entries of the stamp map (one per task and traced function that has called it):
/// [`damon_common::MAX_IN_FLIGHT`], or `$DAMON_TRACE_MAX_IN_FLIGHT` when that is a positive
/// number. A test knob, not a user option: a map small enough to fill lets a guest test drive
/// the `stamp_full` drop path with a handful of tasks (`xtask/tests/vm_drops.rs`). The size
/// is not stored in the capture: the drop warning names the size of the process that prints it.
pub fn stamp_map_entries() -> u32 {
    std::env::var(STAMP_MAP_ENTRIES_ENV)
        .ok()
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
    Vec<crate::capture::ArgStatus>,
);

/// The struct field offsets and kernel facts the programs need ([`OFFSET_UNKNOWN`] / 0 where
/// they cannot be found) and what each function's records will carry.
pub(super) fn field_offsets(functions: &[FunctionId]) -> Fields {
    use damon_common::{
        GLOBAL_DESTS_NODE_ID_ARR_OFF, GLOBAL_DESTS_NR_OFF, GLOBAL_PAGE_STRUCT_SIZE,
        GLOBAL_REGION_AGE_OFF, GLOBAL_REGION_NR_ACCESSES_OFF, GLOBAL_VMEMMAP_BASE_SYM,
        OFFSET_UNKNOWN,
    };
    let parsed = crate::probe::btf::Btf::from_sys_fs();
    let btf = || parsed.as_ref().map_err(Clone::clone);
    let mut globals = Vec::new();
    let mut globals64 = Vec::new();
    let mut ranges = Vec::new();
    let mut statuses = Vec::new();
    for &func in functions {
        let names = func.arg_names();
        if names.iter().all(|n| n.is_empty()) {
            continue;
        }
        let mut status = crate::capture::ArgStatus {
            function: func.symbol().to_owned(),
            recorded: Vec::new(),
            missing: Vec::new(),
            detail: None,
        };
        match func {
            FunctionId::DamonHotScore => {
                for (field, global) in [
                    ("nr_accesses", GLOBAL_REGION_NR_ACCESSES_OFF),
                    ("age", GLOBAL_REGION_AGE_OFF),
                ] {
                    match btf().and_then(|b| b.int_member_offset("damon_region", field, 4)) {
                        Ok(off) => {
                            globals.push((global, off));
                            status.recorded.push(field.to_owned());
                        }
                        Err(e) => {
                            globals.push((global, OFFSET_UNKNOWN));
                            status.missing.push(field.to_owned());
                            status.detail = Some(format!("struct damon_region.{field}: {e}"));
                        }
                    }
                }
            }
            FunctionId::DamosVaMigrateDestsAdd => {
                let folio = (|| {
                    let sym = crate::probe::folio_node::data_symbol_address("vmemmap_base")?;
                    let size = btf()?.struct_size("page")?;
                    let r = crate::probe::folio_node::node_pfn_ranges(Path::new("/sys"))?;
                    Ok::<_, String>((sym, size, r))
                })();
                match folio {
                    Ok((sym, size, r)) => {
                        globals64.push((GLOBAL_VMEMMAP_BASE_SYM, sym));
                        globals64.push((GLOBAL_PAGE_STRUCT_SIZE, u64::from(size)));
                        ranges = r;
                        status.recorded.push("folio_nid".to_owned());
                    }
                    Err(e) => {
                        status.missing.push("folio_nid".to_owned());
                        status.detail = Some(format!("folio node: {e}"));
                    }
                }
                let dests = btf().and_then(|b| {
                    Ok((
                        b.ptr_member_offset("damos_migrate_dests", "node_id_arr")?,
                        b.int_member_offset("damos_migrate_dests", "nr_dests", 8)?,
                    ))
                });
                match dests {
                    Ok((arr, nr)) => {
                        globals.push((GLOBAL_DESTS_NODE_ID_ARR_OFF, arr));
                        globals.push((GLOBAL_DESTS_NR_OFF, nr));
                        status.recorded.push("dest_nid".to_owned());
                    }
                    Err(e) => {
                        status.missing.push("dest_nid".to_owned());
                        status.detail = Some(format!("destination node: {e}"));
                    }
                }
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
