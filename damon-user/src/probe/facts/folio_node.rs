//! What the eBPF program needs to tell which NUMA node a folio is on without `folio_nid()`.
//!
//! `folio_nid()` decodes `page->flags` with shifts that depend on the kernel's configuration
//! (SECTIONS/NODES/ZONES/LAST_CPUPID widths), which BTF does not describe. Instead: on x86-64
//! with SPARSEMEM_VMEMMAP (the `vmemmap_base` variable exists) a folio's page frame number is
//! `(folio − vmemmap_base) / sizeof(struct page)`, and sysfs says which node owns which memory
//! block, hence which pfn ranges. The program reads `vmemmap_base` itself (at the address
//! /proc/kallsyms gives) and maps the pfn through the ranges passed here; no address or pfn
//! leaves the kernel: records carry only node numbers.
use std::{collections::BTreeMap, fs, path::Path};

use damon_common::{MAX_NODE_RANGES, NodePfnRange};

/// Address of a data symbol in /proc/kallsyms (0 = hidden by kptr_restrict: unknown).
pub fn data_symbol_address(name: &str) -> Result<u64, String> {
    symbol_address(name, &["d", "D", "b", "B"]).map_err(|e| {
        if e.starts_with("no ") {
            format!("{e}: not an x86-64 SPARSEMEM_VMEMMAP kernel")
        } else {
            e
        }
    })
}

/// Address of a symbol of one of the kallsyms types `kinds` (0 = hidden: an error).
pub fn symbol_address(name: &str, kinds: &[&str]) -> Result<u64, String> {
    let text = super::sysfiles::kallsyms().map_err(|e| format!("reading /proc/kallsyms: {e}"))?;
    for line in text.lines() {
        let mut p = line.split_whitespace();
        if let (Some(addr), Some(kind), Some(sym), None) = (p.next(), p.next(), p.next(), p.next())
            && sym == name
            && kinds.contains(&kind)
        {
            let a = u64::from_str_radix(addr, 16).map_err(|e| format!("{name}: {e}"))?;
            if a == 0 {
                return Err(format!(
                    "/proc/kallsyms hides the address of {name} (kptr_restrict)"
                ));
            }
            return Ok(a);
        }
    }
    Err(format!("no {name} in /proc/kallsyms"))
}

/// Node pfn ranges from sysfs (`/sys/devices/system/node/node*/memory*` and the memory block
/// size), adjacent blocks of one node merged. A block that several nodes list is left out
/// (its folios get no node).
pub fn node_pfn_ranges(sys: &Path) -> Result<Vec<NodePfnRange>, String> {
    let bs_path = sys.join("devices/system/memory/block_size_bytes");
    let bs =
        fs::read_to_string(&bs_path).map_err(|e| format!("reading {}: {e}", bs_path.display()))?;
    let block_bytes = u64::from_str_radix(bs.trim().trim_start_matches("0x"), 16)
        .map_err(|e| format!("{}: {e}", bs_path.display()))?;
    let pages_per_block = block_bytes / 4096;
    let node_dir = sys.join("devices/system/node");
    let mut owner: BTreeMap<u64, Option<u32>> = BTreeMap::new();
    let entries =
        fs::read_dir(&node_dir).map_err(|e| format!("reading {}: {e}", node_dir.display()))?;
    for e in entries.flatten() {
        let Some(nid) = numbered::<u32>(&e, "node") else {
            continue;
        };
        for m in fs::read_dir(e.path()).into_iter().flatten().flatten() {
            let Some(block) = numbered::<u64>(&m, "memory") else {
                continue;
            };
            owner
                .entry(block)
                .and_modify(|o| {
                    if *o != Some(nid) {
                        *o = None;
                    }
                })
                .or_insert(Some(nid));
        }
    }
    let mut ranges: Vec<NodePfnRange> = Vec::new();
    for (block, nid) in owner {
        let Some(nid) = nid else { continue };
        let (start, end) = (block * pages_per_block, (block + 1) * pages_per_block);
        match ranges.last_mut() {
            Some(r) if r.nid == u64::from(nid) && r.end_pfn == start => r.end_pfn = end,
            _ => ranges.push(NodePfnRange {
                start_pfn: start,
                end_pfn: end,
                nid: u64::from(nid),
            }),
        }
    }
    if ranges.is_empty() {
        return Err("sysfs lists no memory blocks per node".to_owned());
    }
    if ranges.len() > MAX_NODE_RANGES as usize {
        return Err(format!(
            "{} node pfn ranges, more than the {MAX_NODE_RANGES} the program holds",
            ranges.len()
        ));
    }
    Ok(ranges)
}

/// N of a sysfs entry named `<prefix>N` (`node1`, `memory32`); `None` for other entries.
fn numbered<T: std::str::FromStr>(entry: &fs::DirEntry, prefix: &str) -> Option<T> {
    entry
        .file_name()
        .to_str()?
        .strip_prefix(prefix)?
        .parse()
        .ok()
}

/// Writes the memory nodes' pfn ranges into their map (nothing when none were found).
pub(crate) fn fill_node_pfns(
    bpf: &mut aya::Ebpf,
    node_ranges: &[damon_common::NodePfnRange],
) -> anyhow::Result<()> {
    use anyhow::Context as _;
    if !node_ranges.is_empty() {
        let mut map: aya::maps::Array<_, damon_common::NodePfnRange> = aya::maps::Array::try_from(
            bpf.map_mut(damon_common::MAP_NODE_PFNS)
                .context("the node pfn map is missing from the eBPF object")?,
        )?;
        for (i, r) in node_ranges.iter().enumerate() {
            map.set(i as u32, r, 0)
                .context("filling the node pfn map")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_blocks_per_node_and_drops_shared_ones() {
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path();
        fs::create_dir_all(sys.join("devices/system/memory")).unwrap();
        fs::write(
            sys.join("devices/system/memory/block_size_bytes"),
            "8000000\n",
        )
        .unwrap();
        for (node, blocks) in [(0, &[0u64, 1, 2, 3][..]), (1, &[3, 4, 5][..])] {
            let nd = sys.join(format!("devices/system/node/node{node}"));
            fs::create_dir_all(&nd).unwrap();
            for b in blocks {
                fs::create_dir_all(nd.join(format!("memory{b}"))).unwrap();
            }
            fs::write(nd.join("meminfo"), "").unwrap();
        }
        let r = node_pfn_ranges(sys).unwrap();
        // 128 MiB blocks = 32768 pages; block 3 is listed by both nodes and left out.
        assert_eq!(
            r,
            vec![
                NodePfnRange {
                    start_pfn: 0,
                    end_pfn: 3 * 32768,
                    nid: 0
                },
                NodePfnRange {
                    start_pfn: 4 * 32768,
                    end_pfn: 6 * 32768,
                    nid: 1
                },
            ]
        );
        assert!(node_pfn_ranges(&sys.join("nope")).is_err());
    }
}
