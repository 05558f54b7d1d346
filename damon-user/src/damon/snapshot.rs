//! A typed, serialisable summary of the DAMON configuration in sysfs (for capture metadata and
//! the scenario's progress line). Files an older kernel lacks read as `None`/empty.
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use super::sysfs::{DAMON_STAT, SysfsRoot, read_attr, read_num, read_num_opt, read_opt};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DamonSnapshot {
    /// `None` when the kernel has no DAMON_STAT module.
    pub damon_stat_enabled: Option<bool>,
    /// DAMON_STAT's own kdamond (`kdamond_pid` parameter) while it runs; it is not under
    /// `admin/kdamonds`.
    #[serde(default)]
    pub damon_stat_kdamond_pid: Option<u32>,
    pub kdamonds: Vec<KdamondSnapshot>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KdamondSnapshot {
    pub index: u32,
    pub state: String,
    /// The kdamond thread while it runs.
    pub pid: Option<u32>,
    pub contexts: Vec<ContextSnapshot>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContextSnapshot {
    pub operations: String,
    pub sample_us: u64,
    pub aggr_us: u64,
    pub update_us: u64,
    pub nr_regions_min: Option<u64>,
    pub nr_regions_max: Option<u64>,
    pub targets: Vec<TargetSnapshot>,
    pub schemes: Vec<SchemeSnapshot>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TargetSnapshot {
    /// Meaningful for vaddr/fvaddr.
    pub pid: Option<i64>,
    /// Initial regions `[start, end)` as configured (paddr/fvaddr need them).
    pub regions: Vec<(u64, u64)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SchemeSnapshot {
    pub action: String,
    /// Migration target (kernels with migrate_hot/migrate_cold).
    pub target_nid: Option<i64>,
    /// `(node id, weight)` (kernels with `dests/`).
    pub dests: Option<Vec<(u32, u32)>>,
    pub sz_min: u64,
    pub sz_max: u64,
    pub nr_accesses_min: u64,
    pub nr_accesses_max: u64,
    pub age_min: u64,
    pub age_max: u64,
    pub quota_ms: u64,
    pub quota_bytes: u64,
    pub quota_reset_interval_ms: u64,
    pub weight_sz_permil: u64,
    pub weight_nr_accesses_permil: u64,
    pub weight_age_permil: u64,
    pub watermark_metric: Option<String>,
    /// `apply_interval_us` (0: the aggregation interval); kernels before 6.7 lack it.
    #[serde(default)]
    pub apply_interval_us: Option<u64>,
    /// Filters of `filters/`, and of `core_filters/` and `ops_filters/` on kernels with them.
    #[serde(default)]
    pub filters: Vec<FilterSnapshot>,
    pub stats: SchemeStats,
}

/// One DAMOS filter; fields a kernel lacks, or that the filter type does not use, are `None`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FilterSnapshot {
    /// Directory it was read from: "filters", "core_filters" or "ops_filters".
    pub set: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub matching: Option<bool>,
    pub allow: Option<bool>,
    pub memcg_path: Option<String>,
    pub addr_start: Option<u64>,
    pub addr_end: Option<u64>,
    pub target_idx: Option<u64>,
    pub min: Option<u64>,
    pub max: Option<u64>,
}

/// The scheme's counters as of the last `update_schemes_stats` (sysfs does not refresh them
/// by itself on older kernels).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SchemeStats {
    pub nr_tried: u64,
    pub sz_tried: u64,
    pub nr_applied: u64,
    pub sz_applied: u64,
    pub qt_exceeds: u64,
}

/// Reads the whole configuration. A missing DAMON sysfs directory is an error.
pub fn snapshot(root: &SysfsRoot) -> Result<DamonSnapshot> {
    let kdamonds = root.kdamonds();
    let nr: u32 = read_num(&kdamonds.join("nr_kdamonds")).with_context(|| {
        format!(
            "no DAMON sysfs interface at {} (CONFIG_DAMON_SYSFS)",
            root.damon_dir().display()
        )
    })?;
    let damon_stat_enabled = read_bool(&root.module_enabled(DAMON_STAT))?;
    let stat_pid = root
        .module_enabled(DAMON_STAT)
        .with_file_name("kdamond_pid");
    let damon_stat_kdamond_pid =
        read_num_opt::<i64>(&stat_pid)?.and_then(|p| u32::try_from(p).ok());
    let kdamonds = (0..nr)
        .map(|i| read_kdamond(&kdamonds.join(i.to_string()), i))
        .collect::<Result<_>>()?;
    Ok(DamonSnapshot {
        damon_stat_enabled,
        damon_stat_kdamond_pid,
        kdamonds,
    })
}

fn read_kdamond(dir: &Path, index: u32) -> Result<KdamondSnapshot> {
    let state = read_attr(&dir.join("state"))?;
    // `pid` reads -1 while the kdamond is off.
    let pid = read_num_opt::<i64>(&dir.join("pid"))?.and_then(|p| u32::try_from(p).ok());
    let ctxs = dir.join("contexts");
    let nr: u32 = read_num(&ctxs.join("nr_contexts"))?;
    let contexts = (0..nr)
        .map(|i| read_context(&ctxs.join(i.to_string())))
        .collect::<Result<_>>()?;
    Ok(KdamondSnapshot {
        index,
        state,
        pid,
        contexts,
    })
}

fn read_context(dir: &Path) -> Result<ContextSnapshot> {
    let attrs = dir.join("monitoring_attrs");
    let iv = attrs.join("intervals");
    let targets_dir = dir.join("targets");
    let nr_targets: u32 = read_num(&targets_dir.join("nr_targets"))?;
    let targets = (0..nr_targets)
        .map(|i| read_target(&targets_dir.join(i.to_string())))
        .collect::<Result<_>>()?;
    let schemes_dir = dir.join("schemes");
    let nr_schemes: u32 = read_num(&schemes_dir.join("nr_schemes"))?;
    let schemes = (0..nr_schemes)
        .map(|i| read_scheme(&schemes_dir.join(i.to_string())))
        .collect::<Result<_>>()?;
    Ok(ContextSnapshot {
        operations: read_attr(&dir.join("operations"))?,
        sample_us: read_num(&iv.join("sample_us"))?,
        aggr_us: read_num(&iv.join("aggr_us"))?,
        update_us: read_num(&iv.join("update_us"))?,
        nr_regions_min: read_num_opt(&attrs.join("nr_regions/min"))?,
        nr_regions_max: read_num_opt(&attrs.join("nr_regions/max"))?,
        targets,
        schemes,
    })
}

fn read_target(dir: &Path) -> Result<TargetSnapshot> {
    let regions_dir = dir.join("regions");
    let nr: u32 = read_num_opt(&regions_dir.join("nr_regions"))?.unwrap_or(0);
    let regions = (0..nr)
        .map(|i| {
            let r = regions_dir.join(i.to_string());
            Ok((read_num(&r.join("start"))?, read_num(&r.join("end"))?))
        })
        .collect::<Result<_>>()?;
    Ok(TargetSnapshot {
        pid: read_num_opt(&dir.join("pid_target"))?,
        regions,
    })
}

fn read_scheme(dir: &Path) -> Result<SchemeSnapshot> {
    let ap = dir.join("access_pattern");
    let q = dir.join("quotas");
    let dests_dir = dir.join("dests");
    let dests = match read_num_opt::<u32>(&dests_dir.join("nr_dests"))? {
        None => None,
        Some(n) => Some(
            (0..n)
                .map(|i| {
                    let d = dests_dir.join(i.to_string());
                    Ok((read_num(&d.join("id"))?, read_num(&d.join("weight"))?))
                })
                .collect::<Result<_>>()?,
        ),
    };
    Ok(SchemeSnapshot {
        action: read_attr(&dir.join("action"))?,
        target_nid: read_num_opt(&dir.join("target_nid"))?,
        dests,
        sz_min: read_num(&ap.join("sz/min"))?,
        sz_max: read_num(&ap.join("sz/max"))?,
        nr_accesses_min: read_num(&ap.join("nr_accesses/min"))?,
        nr_accesses_max: read_num(&ap.join("nr_accesses/max"))?,
        age_min: read_num(&ap.join("age/min"))?,
        age_max: read_num(&ap.join("age/max"))?,
        quota_ms: read_num(&q.join("ms"))?,
        quota_bytes: read_num(&q.join("bytes"))?,
        quota_reset_interval_ms: read_num(&q.join("reset_interval_ms"))?,
        weight_sz_permil: read_num(&q.join("weights/sz_permil"))?,
        weight_nr_accesses_permil: read_num(&q.join("weights/nr_accesses_permil"))?,
        weight_age_permil: read_num(&q.join("weights/age_permil"))?,
        watermark_metric: read_opt(&dir.join("watermarks/metric"))?,
        apply_interval_us: read_num_opt(&dir.join("apply_interval_us"))?,
        filters: read_filters(dir)?,
        stats: read_stats(&dir.join("stats"))?,
    })
}

fn read_bool(path: &Path) -> Result<Option<bool>> {
    Ok(read_opt(path)?.map(|v| matches!(v.trim(), "Y" | "1")))
}

fn read_filters(scheme: &Path) -> Result<Vec<FilterSnapshot>> {
    let mut out = Vec::new();
    for set in ["filters", "core_filters", "ops_filters"] {
        let dir = scheme.join(set);
        let Some(n) = read_num_opt::<u32>(&dir.join("nr_filters"))? else {
            continue;
        };
        for i in 0..n {
            let f = dir.join(i.to_string());
            out.push(FilterSnapshot {
                set: set.to_owned(),
                kind: read_attr(&f.join("type"))?,
                matching: read_bool(&f.join("matching"))?,
                allow: read_bool(&f.join("allow"))?,
                memcg_path: read_opt(&f.join("memcg_path"))?.filter(|p| !p.is_empty()),
                addr_start: read_num_opt(&f.join("addr_start"))?,
                addr_end: read_num_opt(&f.join("addr_end"))?,
                target_idx: read_num_opt(&f.join("target_idx"))?,
                min: read_num_opt(&f.join("min"))?,
                max: read_num_opt(&f.join("max"))?,
            });
        }
    }
    Ok(out)
}

pub fn read_stats(dir: &Path) -> Result<SchemeStats> {
    Ok(SchemeStats {
        nr_tried: read_num(&dir.join("nr_tried"))?,
        sz_tried: read_num(&dir.join("sz_tried"))?,
        nr_applied: read_num(&dir.join("nr_applied"))?,
        sz_applied: read_num(&dir.join("sz_applied"))?,
        qt_exceeds: read_num(&dir.join("qt_exceeds"))?,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use std::fs;

    use super::super::{
        kdamond::apply,
        plan::Action,
        writes::{Monitor, SchemeConfig, scheme_writes},
    };
    use super::*;

    /// Creates the files a 7.2 (`dests = true`) or 6.12 kernel shows for one kdamond with one
    /// context, target, region and scheme, holding the kernel's defaults.
    pub(crate) fn fake_kernel_tree(root: &Path, dests: bool) -> SysfsRoot {
        let kd = root.join("sys/kernel/mm/damon/admin/kdamonds");
        let ctx = kd.join("0/contexts/0");
        let s = ctx.join("schemes/0");
        let mut files: Vec<(std::path::PathBuf, &str)> = vec![
            (kd.join("nr_kdamonds"), "0"),
            (kd.join("0/state"), "off"),
            (kd.join("0/pid"), "-1"),
            (kd.join("0/contexts/nr_contexts"), "0"),
            (ctx.join("operations"), "vaddr"),
            (ctx.join("avail_operations"), "vaddr fvaddr paddr"),
            (ctx.join("targets/nr_targets"), "0"),
            (ctx.join("targets/0/pid_target"), "0"),
            (ctx.join("targets/0/regions/nr_regions"), "0"),
            (ctx.join("targets/0/regions/0/start"), "0"),
            (ctx.join("targets/0/regions/0/end"), "0"),
            (ctx.join("schemes/nr_schemes"), "0"),
            (s.join("action"), "stat"),
            (s.join("target_nid"), "-1"),
            (s.join("watermarks/metric"), "none"),
            (s.join("quotas/ms"), "0"),
            (s.join("quotas/bytes"), "0"),
            (s.join("quotas/reset_interval_ms"), "0"),
            (s.join("quotas/weights/sz_permil"), "0"),
            (s.join("quotas/weights/nr_accesses_permil"), "0"),
            (s.join("quotas/weights/age_permil"), "0"),
        ];
        for (name, v) in [
            ("sample_us", "5000"),
            ("aggr_us", "100000"),
            ("update_us", "1000000"),
        ] {
            files.push((ctx.join("monitoring_attrs/intervals").join(name), v));
        }
        for (name, v) in [("min", "10"), ("max", "1000")] {
            files.push((ctx.join("monitoring_attrs/nr_regions").join(name), v));
        }
        for range in ["sz", "nr_accesses", "age"] {
            files.push((s.join("access_pattern").join(range).join("min"), "0"));
            files.push((s.join("access_pattern").join(range).join("max"), "0"));
        }
        for stat in [
            "nr_tried",
            "sz_tried",
            "nr_applied",
            "sz_applied",
            "qt_exceeds",
        ] {
            files.push((s.join("stats").join(stat), "0"));
        }
        if dests {
            files.push((s.join("dests/nr_dests"), "0"));
            files.push((s.join("dests/0/id"), "0"));
            files.push((s.join("dests/0/weight"), "0"));
        }
        for (path, value) in files {
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent).expect("mkdir");
            }
            fs::write(&path, format!("{value}\n")).expect("seed");
        }
        SysfsRoot::at(root)
    }

    #[test]
    fn snapshot_reads_back_an_applied_plan_on_both_layouts() {
        for dests in [true, false] {
            let dir = tempfile::tempdir().expect("tempdir");
            let root = fake_kernel_tree(dir.path(), dests);
            let cfg = SchemeConfig {
                action: Action::MigrateHot,
                monitor: if dests {
                    Monitor::Vaddr { pid: 321 }
                } else {
                    Monitor::Paddr {
                        start: 0x100000,
                        end: 0x4000_0000,
                    }
                },
                target_nid: 1,
                use_dests: dests,
                tuning: Default::default(),
            };
            apply(&root.kdamonds(), &scheme_writes(&cfg)).expect("apply");
            fs::write(root.kdamonds().join("0/state"), "on\n").expect("w");
            fs::write(root.kdamonds().join("0/pid"), "99\n").expect("w");
            let snap = snapshot(&root).expect("snapshot");
            assert_eq!(snap.damon_stat_enabled, None);
            let k = &snap.kdamonds[0];
            assert_eq!((k.state.as_str(), k.pid), ("on", Some(99)));
            let c = &k.contexts[0];
            assert_eq!(c.operations, if dests { "vaddr" } else { "paddr" });
            assert_eq!(
                (c.sample_us, c.aggr_us, c.update_us),
                (5000, 100000, 1000000)
            );
            let t = &c.targets[0];
            if dests {
                assert_eq!((t.pid, t.regions.len()), (Some(321), 0));
            } else {
                assert_eq!(t.regions, vec![(0x100000, 0x4000_0000)]);
            }
            let s = &c.schemes[0];
            assert_eq!(s.filters, Vec::new());
            assert_eq!(s.apply_interval_us, None);
            assert_eq!(s.action, "migrate_hot");
            assert_eq!(s.target_nid, Some(1));
            assert_eq!(s.dests, dests.then(|| vec![(1, 1)]));
            assert_eq!(
                (s.quota_ms, s.quota_bytes, s.quota_reset_interval_ms),
                (100, 1 << 25, 1000)
            );
            assert_eq!(
                (s.weight_nr_accesses_permil, s.weight_age_permil),
                (700, 300)
            );
            assert_eq!(
                (s.sz_min, s.sz_max, s.age_max),
                (4096, u64::MAX, u64::from(u32::MAX))
            );
            assert_eq!(s.stats, SchemeStats::default());
            let json = serde_json::to_value(&snap).expect("json");
            assert_eq!(
                json["kdamonds"][0]["contexts"][0]["schemes"][0]["action"],
                "migrate_hot"
            );
        }
    }

    #[test]
    fn snapshot_reads_filters_apply_interval_and_damon_stat_pid() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = fake_kernel_tree(dir.path(), true);
        let kd = root.kdamonds();
        let s = kd.join("0/contexts/0/schemes/0");
        let f = s.join("ops_filters/0");
        fs::create_dir_all(&f).expect("mkdir");
        for (path, v) in [
            (kd.join("nr_kdamonds"), "1"),
            (kd.join("0/contexts/nr_contexts"), "1"),
            (kd.join("0/contexts/0/schemes/nr_schemes"), "1"),
            (s.join("apply_interval_us"), "0"),
            (s.join("filters/nr_filters"), "0"),
            (s.join("ops_filters/nr_filters"), "1"),
            (f.join("type"), "anon"),
            (f.join("matching"), "Y"),
            (f.join("allow"), "N"),
            (f.join("memcg_path"), ""),
            (f.join("addr_start"), "0"),
        ] {
            fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            fs::write(&path, format!("{v}\n")).expect("seed");
        }
        let stat = dir.path().join("sys/module/damon_stat/parameters");
        fs::create_dir_all(&stat).expect("mkdir");
        fs::write(stat.join("enabled"), "Y\n").expect("w");
        fs::write(stat.join("kdamond_pid"), "57\n").expect("w");
        let snap = snapshot(&root).expect("snapshot");
        assert_eq!(
            (snap.damon_stat_enabled, snap.damon_stat_kdamond_pid),
            (Some(true), Some(57))
        );
        let scheme = &snap.kdamonds[0].contexts[0].schemes[0];
        assert_eq!(scheme.apply_interval_us, Some(0));
        assert_eq!(scheme.filters.len(), 1);
        let filter = &scheme.filters[0];
        assert_eq!(
            (filter.set.as_str(), filter.kind.as_str()),
            ("ops_filters", "anon")
        );
        assert_eq!((filter.matching, filter.allow), (Some(true), Some(false)));
        assert_eq!(
            (filter.memcg_path.as_deref(), filter.addr_end),
            (None, None)
        );
        let json = serde_json::to_value(&snap).expect("json");
        assert_eq!(
            json["kdamonds"][0]["contexts"][0]["schemes"][0]["filters"][0]["type"],
            "anon"
        );
    }

    #[test]
    fn snapshot_without_damon_names_the_config_option() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = snapshot(&SysfsRoot::at(dir.path())).expect_err("no damon");
        assert!(format!("{err:#}").contains("CONFIG_DAMON_SYSFS"));
    }
}
