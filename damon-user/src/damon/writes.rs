//! The scheme configuration a preset writes, as a pure list of sysfs writes (relative to
//! `kdamonds/`, in an order the kernel accepts). Nothing here touches the filesystem: the
//! writes are performed by [`super::kdamond::apply`].
use std::path::PathBuf;

use super::plan::{Action, OpsKind};
use crate::error::UsageError;

/// DAMON intervals (µs): sample often enough that a hot page is seen within an aggregation.
pub const SAMPLE_US: u64 = 5_000;
pub const AGGR_US: u64 = 100_000;
pub const UPDATE_US: u64 = 1_000_000;
/// Quota: without one the kernel never calls `damon_hot_score`.
pub const QUOTA_MS: u64 = 100;
pub const QUOTA_BYTES: u64 = 32 << 20;
pub const QUOTA_RESET_MS: u64 = 1_000;
/// Prioritisation weights: sysfs defaults them to 0, which makes every score 0 (nothing applies).
pub const WEIGHT_SZ: u32 = 0;
pub const WEIGHT_NR_ACCESSES: u32 = 700;
pub const WEIGHT_AGE: u32 = 300;
/// Upper bound for `nr_accesses`: above the AGGR_US/SAMPLE_US = 20 samples an aggregation can hold.
pub const NR_ACCESSES_MAX: u32 = 200;

/// What DAMON watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Monitor {
    Vaddr {
        pid: u32,
    },
    /// Physical range, `end` exclusive.
    Paddr {
        start: u64,
        end: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemeConfig {
    pub action: Action,
    pub monitor: Monitor,
    /// Migration target (migrate_hot/migrate_cold only; ignored for the other actions).
    pub target_nid: u32,
    /// Also write `dests/` (migrations on kernels that have it; otherwise only `target_nid`).
    pub use_dests: bool,
    pub tuning: Tuning,
}

/// How often DAMON samples, aggregates and applies the scheme, and into how many regions it
/// splits the target. The scheme scores every region (`damon_hot_score`) once per apply
/// interval, in one burst inside kdamond: many regions and short intervals make dense bursts
/// (the overload test uses that to overflow a small ring buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuning {
    pub sample_us: u64,
    pub aggr_us: u64,
    /// `schemes/<N>/apply_interval_us`; `None` keeps the kernel's default (0: every
    /// aggregation).
    pub apply_us: Option<u64>,
    /// `monitoring_attrs/nr_regions/{min,max}`; `None` keeps the kernel's defaults (10, 1000).
    pub regions: Option<(u64, u64)>,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            sample_us: SAMPLE_US,
            aggr_us: AGGR_US,
            apply_us: None,
            regions: None,
        }
    }
}

/// DAMON's own floor for `nr_regions/min`.
pub const MIN_REGIONS: u64 = 3;

impl Tuning {
    /// Checks what the kernel would refuse only when the kdamond is turned on (with a bare
    /// EINVAL), so that the user gets the reason up front.
    pub fn validate(&self) -> Result<(), UsageError> {
        if self.sample_us == 0 || self.aggr_us < self.sample_us {
            return Err(UsageError(format!(
                "--aggr-interval ({} µs) must be at least --sample-interval ({} µs)",
                self.aggr_us, self.sample_us
            )));
        }
        if let Some((min, max)) = self.regions
            && (min < MIN_REGIONS || max < min)
        {
            return Err(UsageError(format!(
                "--regions {min}: DAMON needs at least {MIN_REGIONS} regions"
            )));
        }
        Ok(())
    }

    /// `--regions N`: at least N regions, and room for DAMON's default maximum above that.
    pub fn with_regions(mut self, n: u64) -> Tuning {
        self.regions = Some((n, n.max(1000)));
        self
    }
}

/// One write, relative to the `kdamonds` directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysfsWrite {
    pub rel: PathBuf,
    pub value: String,
}

fn w(rel: &str, value: impl ToString) -> SysfsWrite {
    SysfsWrite {
        rel: PathBuf::from(rel),
        value: value.to_string(),
    }
}

/// One kdamond with one context and one scheme: enough to probe the scheme directory's layout.
/// Writing `nr_kdamonds` replaces every kdamond directory, so the scenario always uses index 0.
pub fn skeleton() -> Vec<SysfsWrite> {
    vec![
        w("nr_kdamonds", 1),
        w("0/contexts/nr_contexts", 1),
        w("0/contexts/0/schemes/nr_schemes", 1),
    ]
}

/// The complete configuration, in an order the kernel accepts (`nr_*` before the directories
/// they create). Starts with the skeleton so it is valid on a fresh tree too.
pub fn scheme_writes(cfg: &SchemeConfig) -> Vec<SysfsWrite> {
    let mut out = skeleton();
    out.extend(context_writes(cfg.monitor, &cfg.tuning));
    out.extend(target_writes(cfg.monitor));
    out.extend(action_writes(cfg));
    out.extend(access_pattern_writes(cfg.action));
    out.extend(quota_writes());
    out
}

const CTX: &str = "0/contexts/0";
const SCHEME: &str = "0/contexts/0/schemes/0";

/// The operations set, the intervals and (when asked) the region bounds.
fn context_writes(monitor: Monitor, t: &Tuning) -> Vec<SysfsWrite> {
    let ops = match monitor {
        Monitor::Vaddr { .. } => OpsKind::Vaddr,
        Monitor::Paddr { .. } => OpsKind::Paddr,
    };
    let mut out = vec![w(&format!("{CTX}/operations"), ops.name())];
    let iv = format!("{CTX}/monitoring_attrs/intervals");
    out.push(w(&format!("{iv}/sample_us"), t.sample_us));
    out.push(w(&format!("{iv}/aggr_us"), t.aggr_us));
    out.push(w(&format!("{iv}/update_us"), UPDATE_US.max(t.aggr_us)));
    if let Some((min, max)) = t.regions {
        let nr = format!("{CTX}/monitoring_attrs/nr_regions");
        // Max first: the kernel checks min <= max only on commit, but keep every step valid.
        out.push(w(&format!("{nr}/max"), max));
        out.push(w(&format!("{nr}/min"), min));
    }
    out
}

/// The one target: the workload's pid (vaddr) or one physical region (paddr).
fn target_writes(monitor: Monitor) -> Vec<SysfsWrite> {
    let mut out = vec![w(&format!("{CTX}/targets/nr_targets"), 1)];
    match monitor {
        Monitor::Vaddr { pid } => out.push(w(&format!("{CTX}/targets/0/pid_target"), pid)),
        Monitor::Paddr { start, end } => {
            let r = format!("{CTX}/targets/0/regions");
            out.push(w(&format!("{r}/nr_regions"), 1));
            out.push(w(&format!("{r}/0/start"), start));
            out.push(w(&format!("{r}/0/end"), end));
        }
    }
    out
}

/// The action, its apply interval, and a migration's target node and destinations.
fn action_writes(cfg: &SchemeConfig) -> Vec<SysfsWrite> {
    let mut out = vec![w(&format!("{SCHEME}/action"), cfg.action.sysfs_name())];
    if let Some(us) = cfg.tuning.apply_us {
        out.push(w(&format!("{SCHEME}/apply_interval_us"), us));
    }
    let migrates = cfg.action.migrates();
    if migrates {
        out.push(w(&format!("{SCHEME}/target_nid"), cfg.target_nid));
    }
    if migrates && cfg.use_dests {
        out.push(w(&format!("{SCHEME}/dests/nr_dests"), 1));
        out.push(w(&format!("{SCHEME}/dests/0/id"), cfg.target_nid));
        out.push(w(&format!("{SCHEME}/dests/0/weight"), 1));
    }
    out
}

/// Which regions the scheme takes.
fn access_pattern_writes(action: Action) -> Vec<SysfsWrite> {
    let ap = format!("{SCHEME}/access_pattern");
    // Cold actions take only regions not accessed in the last aggregation; hot ones take
    // every region and let the quota's prioritisation (the scores) pick the hottest.
    let nr_max = if action.targets_cold() {
        0
    } else {
        NR_ACCESSES_MAX
    };
    vec![
        w(&format!("{ap}/sz/min"), 4096),
        w(&format!("{ap}/sz/max"), u64::MAX),
        w(&format!("{ap}/nr_accesses/min"), 0),
        w(&format!("{ap}/nr_accesses/max"), nr_max),
        w(&format!("{ap}/age/min"), 0),
        w(&format!("{ap}/age/max"), u32::MAX),
    ]
}

/// The quota and its prioritisation weights: what makes the kernel score regions.
fn quota_writes() -> Vec<SysfsWrite> {
    let q = format!("{SCHEME}/quotas");
    vec![
        w(&format!("{q}/ms"), QUOTA_MS),
        w(&format!("{q}/bytes"), QUOTA_BYTES),
        w(&format!("{q}/reset_interval_ms"), QUOTA_RESET_MS),
        w(&format!("{q}/weights/sz_permil"), WEIGHT_SZ),
        w(
            &format!("{q}/weights/nr_accesses_permil"),
            WEIGHT_NR_ACCESSES,
        ),
        w(&format!("{q}/weights/age_permil"), WEIGHT_AGE),
    ]
}

/// The largest "System RAM" range in `/proc/iomem`, as `[start, end)`. `None` if there is
/// none, or if every address reads as 0 (what non-root readers are shown).
pub fn largest_system_ram(iomem: &str) -> Option<(u64, u64)> {
    iomem
        .lines()
        .filter_map(|line| {
            let (range, name) = line.split_once(" : ")?;
            if name.trim() != "System RAM" {
                return None;
            }
            let (start, end) = range.trim().split_once('-')?;
            let start = u64::from_str_radix(start, 16).ok()?;
            let end = u64::from_str_radix(end, 16).ok()?.checked_add(1)?;
            (end > start + 1).then_some((start, end))
        })
        .max_by_key(|(start, end)| end - start)
}

#[cfg(test)]
pub(super) mod tests {
    use std::path::Path;

    use super::*;

    /// The last value written to `rel`.
    pub(in super::super) fn value_of<'a>(writes: &'a [SysfsWrite], rel: &str) -> Option<&'a str> {
        writes
            .iter()
            .rev()
            .find(|w| w.rel == Path::new(rel))
            .map(|w| w.value.as_str())
    }

    /// Short intervals, an apply interval and many regions: every optional write.
    fn dense() -> Tuning {
        Tuning {
            sample_us: 1_000,
            aggr_us: 10_000,
            apply_us: Some(10_000),
            regions: None,
        }
        .with_regions(2000)
    }

    #[test]
    fn tuning_sets_regions_and_intervals_only_when_asked() {
        let cfg = |tuning| SchemeConfig {
            action: Action::MigrateHot,
            monitor: Monitor::Vaddr { pid: 1 },
            target_nid: 1,
            use_dests: true,
            tuning,
        };
        let nr = "0/contexts/0/monitoring_attrs/nr_regions";
        let apply = "0/contexts/0/schemes/0/apply_interval_us";
        let iv = "0/contexts/0/monitoring_attrs/intervals";
        let plain = scheme_writes(&cfg(Tuning::default()));
        assert!(value_of(&plain, &format!("{nr}/min")).is_none());
        assert!(value_of(&plain, apply).is_none());
        assert_eq!(value_of(&plain, &format!("{iv}/aggr_us")), Some("100000"));
        let dense = dense();
        dense.validate().expect("valid");
        let ws = scheme_writes(&cfg(dense));
        assert_eq!(value_of(&ws, &format!("{nr}/min")), Some("2000"));
        assert_eq!(value_of(&ws, &format!("{nr}/max")), Some("2000"));
        assert_eq!(value_of(&ws, apply), Some("10000"));
        assert_eq!(value_of(&ws, &format!("{iv}/sample_us")), Some("1000"));
        assert_eq!(value_of(&ws, &format!("{iv}/aggr_us")), Some("10000"));
        assert_eq!(Tuning::default().with_regions(50).regions, Some((50, 1000)));
        assert!(Tuning::default().with_regions(2).validate().is_err());
        let slow_sample = Tuning {
            sample_us: 200_000,
            ..Tuning::default()
        };
        assert!(slow_sample.validate().is_err());
    }

    #[test]
    fn iomem_largest_system_ram() {
        let iomem = "00000000-00000fff : Reserved\n\
                     00001000-0009fbff : System RAM\n\
                     000a0000-000bffff : PCI Bus 0000:00\n\
                     00100000-3ffdffff : System RAM\n\
                     \x20 01000000-01ffffff : Kernel code\n\
                     \x20 02000000-0257ffff : Kernel rodata\n\
                     3ffe0000-3fffffff : Reserved\n\
                     100000000-11fffffff : System RAM\n\
                     fd000000-fdffffff : PCI Bus 0000:00\n";
        assert_eq!(largest_system_ram(iomem), Some((0x100000, 0x3ffe0000)));
        // Unprivileged readers see zeros: no usable range.
        let hidden = "00000000-00000000 : System RAM\n00000000-00000000 : System RAM\n";
        assert_eq!(largest_system_ram(hidden), None);
        assert_eq!(largest_system_ram("garbage\n"), None);
    }

    /// The whole sequence, in order (`nr_*` before the directories they create), with every
    /// optional write (dests, regions, apply interval); and the part a physical target
    /// changes.
    #[test]
    fn complete_write_sequences() {
        let lines = |cfg: &SchemeConfig| -> Vec<String> {
            scheme_writes(cfg)
                .iter()
                .map(|w| format!("{}={}", w.rel.display(), w.value))
                .collect()
        };
        let dense = dense();
        let hot = lines(&SchemeConfig {
            action: Action::MigrateHot,
            monitor: Monitor::Vaddr { pid: 4242 },
            target_nid: 1,
            use_dests: true,
            tuning: dense,
        });
        assert_eq!(hot, GOLDEN_VADDR_HOT.lines().collect::<Vec<_>>());
        let cold = lines(&SchemeConfig {
            action: Action::MigrateCold,
            monitor: Monitor::Paddr {
                start: 0x100000,
                end: 0x4000_0000,
            },
            target_nid: 1,
            use_dests: false,
            tuning: Tuning::default(),
        });
        let from = cold
            .iter()
            .position(|l| l.ends_with("targets/nr_targets=1"))
            .expect("targets");
        let golden: Vec<&str> = GOLDEN_PADDR_COLD_TARGET.lines().collect();
        assert_eq!(cold[from..from + golden.len()], golden[..]);
        assert!(cold[from + golden.len()].ends_with("access_pattern/sz/min=4096"));
        assert!(cold.contains(&"0/contexts/0/operations=paddr".to_owned()));
        assert!(
            cold.iter()
                .all(|l| !l.contains("dests") && !l.contains("pid_target"))
        );
    }

    const GOLDEN_VADDR_HOT: &str = r"nr_kdamonds=1
0/contexts/nr_contexts=1
0/contexts/0/schemes/nr_schemes=1
0/contexts/0/operations=vaddr
0/contexts/0/monitoring_attrs/intervals/sample_us=1000
0/contexts/0/monitoring_attrs/intervals/aggr_us=10000
0/contexts/0/monitoring_attrs/intervals/update_us=1000000
0/contexts/0/monitoring_attrs/nr_regions/max=2000
0/contexts/0/monitoring_attrs/nr_regions/min=2000
0/contexts/0/targets/nr_targets=1
0/contexts/0/targets/0/pid_target=4242
0/contexts/0/schemes/0/action=migrate_hot
0/contexts/0/schemes/0/apply_interval_us=10000
0/contexts/0/schemes/0/target_nid=1
0/contexts/0/schemes/0/dests/nr_dests=1
0/contexts/0/schemes/0/dests/0/id=1
0/contexts/0/schemes/0/dests/0/weight=1
0/contexts/0/schemes/0/access_pattern/sz/min=4096
0/contexts/0/schemes/0/access_pattern/sz/max=18446744073709551615
0/contexts/0/schemes/0/access_pattern/nr_accesses/min=0
0/contexts/0/schemes/0/access_pattern/nr_accesses/max=200
0/contexts/0/schemes/0/access_pattern/age/min=0
0/contexts/0/schemes/0/access_pattern/age/max=4294967295
0/contexts/0/schemes/0/quotas/ms=100
0/contexts/0/schemes/0/quotas/bytes=33554432
0/contexts/0/schemes/0/quotas/reset_interval_ms=1000
0/contexts/0/schemes/0/quotas/weights/sz_permil=0
0/contexts/0/schemes/0/quotas/weights/nr_accesses_permil=700
0/contexts/0/schemes/0/quotas/weights/age_permil=300";
    const GOLDEN_PADDR_COLD_TARGET: &str = r"0/contexts/0/targets/nr_targets=1
0/contexts/0/targets/0/regions/nr_regions=1
0/contexts/0/targets/0/regions/0/start=1048576
0/contexts/0/targets/0/regions/0/end=1073741824
0/contexts/0/schemes/0/action=migrate_cold
0/contexts/0/schemes/0/target_nid=1";
}
