//! Verdicts across boots. One boot's intervals are over its rounds: they say how well that boot
//! pins a ratio, not how far the next boot lands (three boots of the same commit here put
//! kernel mode at 0.61, 0.55 and 0.60 × bpftrace, each with an interval about ±0.07). A claim
//! about a kernel rests on boots, so `cargo xtask bench --boots N` runs the overhead part in N
//! boots and `--combine` reads the `bench.json` of earlier runs: each boot gives one estimate
//! per configuration, and the verdict comes from the t interval over those estimates
//! ([`stats::mean_interval`]).
use std::{fmt::Write as _, fs, path::Path};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::{
    BenchOptions,
    stats::{self, RatioInterval, Verdict},
    table::Config,
};
use crate::util::status;

/// One configuration over every boot.
#[derive(Debug, Clone, PartialEq)]
pub struct AcrossBoots {
    pub config: Config,
    /// Each boot's added cost / bpftrace's (None where that boot has no estimate).
    pub per_boot: Vec<Option<f64>>,
    /// Mean over boots and its 95 % interval (boots as the unit).
    pub interval: Option<RatioInterval>,
    pub target: Option<f64>,
    /// "not met" too when the tracer missed calls in some boot, as within one boot.
    pub verdict: Option<Verdict>,
    /// Every boot's tracer counted every call of every round.
    pub all_traced: bool,
}

impl AcrossBoots {
    /// Boots that would make an interval like this one clear the target (None unless
    /// unresolved).
    pub fn boots_to_resolve(&self) -> Option<usize> {
        match (self.verdict, self.interval, self.target) {
            (Some(Verdict::Unresolved), Some(i), Some(t)) => stats::rounds_to_resolve(&i, t),
            _ => None,
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "config": self.config.name(),
            "per_boot": self.per_boot,
            "mean": self.interval.map(|i| i.estimate),
            "ci95": self.interval.map(|i| json!({
                "lo": i.lo,
                "hi": i.hi,
                "boots": i.rounds,
                "method": "t over the boots' estimates, B-1 df",
            })),
            "target_vs_bpftrace": self.target,
            "verdict": self.verdict.map(Verdict::as_str),
            "boots_to_resolve": self.boots_to_resolve(),
            "all_traced": self.all_traced,
        })
    }
}

/// A field every report must agree on (kernel, function, calls per loop): boots of different
/// kernels or loops measure different things and are not pooled.
fn same_everywhere(reports: &[Value], field: &str) -> Result<()> {
    let mut seen: Vec<String> = reports.iter().map(|r| r[field].to_string()).collect();
    seen.sort();
    seen.dedup();
    if seen.len() > 1 {
        bail!(
            "the runs differ in `{field}` ({}): combine boots of one kernel, function and loop",
            seen.join(", ")
        );
    }
    Ok(())
}

/// Every configuration that has an estimate in some boot, in table order, from one
/// `bench.json` per boot.
pub fn across_boots(reports: &[Value]) -> Result<Vec<AcrossBoots>> {
    if reports.len() < 2 {
        bail!(
            "a verdict across boots needs at least two boots, got {}: give more bench.json \
             files, or run `cargo xtask bench --boots N`",
            reports.len()
        );
    }
    for field in ["kernel", "func", "calls"] {
        same_everywhere(reports, field)?;
    }
    let mut boot_rows = Vec::new();
    for (i, r) in reports.iter().enumerate() {
        let rows = r["overhead"].as_array().with_context(|| {
            format!(
                "boot {} has no overhead rows (a run with --skip-overhead?)",
                i + 1
            )
        })?;
        boot_rows.push(rows);
    }
    let mut out = Vec::new();
    for config in Config::ALL {
        let rows: Vec<Option<&Value>> = boot_rows
            .iter()
            .map(|rows| rows.iter().find(|r| r["config"] == config.name()))
            .collect();
        let per_boot: Vec<Option<f64>> = rows
            .iter()
            .map(|r| r.and_then(|r| r["vs_bpftrace"].as_f64()))
            .collect();
        if per_boot.iter().all(Option::is_none) {
            continue;
        }
        let all_traced = rows
            .iter()
            .flatten()
            .all(|r| r["all_traced"].as_bool().unwrap_or(true));
        let estimates: Vec<f64> = per_boot.iter().flatten().copied().collect();
        let interval = stats::mean_interval(&estimates);
        let target = config.target_vs_bpftrace();
        let verdict = target.map(|t| match interval {
            _ if !all_traced => Verdict::NotMet,
            Some(i) => stats::verdict(&i, t),
            None => Verdict::Unresolved,
        });
        out.push(AcrossBoots {
            config,
            per_boot,
            interval,
            target,
            verdict,
            all_traced,
        });
    }
    Ok(out)
}

/// The Markdown table: one column per boot, then the mean over boots with its interval and
/// the verdict.
pub fn markdown(rows: &[AcrossBoots]) -> String {
    let boots = rows.first().map_or(0, |r| r.per_boot.len());
    let mut s = String::from("| configuration |");
    for b in 1..=boots {
        let _ = write!(s, " boot {b} |");
    }
    s.push_str(" mean over boots [95 % interval] | target: verdict |\n|---|");
    s.push_str(&"---:|".repeat(boots + 1));
    s.push_str("---|\n");
    for r in rows {
        let _ = write!(s, "| {} |", r.config.describe());
        for v in &r.per_boot {
            match v {
                Some(v) => {
                    let _ = write!(s, " {v:.2} |");
                }
                None => s.push_str(" – |"),
            }
        }
        match r.interval {
            Some(i) => {
                let _ = write!(s, " {:.2} [{:.2}, {:.2}] |", i.estimate, i.lo, i.hi);
            }
            None => s.push_str(" – |"),
        }
        let verdict = match (r.target, r.verdict) {
            (Some(t), Some(Verdict::Unresolved)) => match r.boots_to_resolve() {
                Some(n) => format!("≤ {t:.1}: unresolved — run more boots (≈ {n})"),
                None => format!("≤ {t:.1}: unresolved — run more boots"),
            },
            (Some(t), Some(v)) if !r.all_traced => {
                format!("≤ {t:.1}: {} (a boot's tracer missed calls)", v.as_str())
            }
            (Some(t), Some(v)) => format!("≤ {t:.1}: {}", v.as_str()),
            _ => String::new(),
        };
        let _ = writeln!(s, " {verdict} |");
    }
    s
}

/// The section `bench` writes for several boots (`bench.md`), from their reports.
pub fn section(reports: &[Value], sources: &[String]) -> Result<(String, Value)> {
    let rows = across_boots(reports)?;
    let mut md = format!(
        "## Per-call overhead across {} boots\n\n`{}` in a loop of {} `getppid` calls, {}. \
         Added cost / bpftrace's: each boot's estimate, their mean and its 95 % interval over \
         boots (t, {} degrees of freedom: boots are the unit, so the interval holds what moves \
         a whole boot, which no boot's own interval can).\n\n",
        reports.len(),
        reports[0]["func"].as_str().unwrap_or("?"),
        reports[0]["calls"],
        reports[0]["kernel"].as_str().unwrap_or("?"),
        reports.len() - 1,
    );
    md.push_str(&markdown(&rows));
    md.push_str("\nEach boot's own tables: ");
    md.push_str(&sources.join(", "));
    md.push_str(".\n\n");
    let json = json!({
        "boots": reports.len(),
        "sources": sources,
        "rows": rows.iter().map(AcrossBoots::to_json).collect::<Vec<_>>(),
    });
    Ok((md, json))
}

/// The boots in one run's `bench.json`: the run itself, or each of its boots when it ran
/// several (`boot_reports`).
pub fn read_reports(path: &Path) -> Result<Vec<Value>> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut v: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a bench.json", path.display()))?;
    let boots = v.as_object_mut().and_then(|o| o.remove("boot_reports"));
    Ok(match boots {
        Some(Value::Array(boots)) => boots,
        _ => vec![v],
    })
}

/// The overhead runs in `opts.boots` boots, one after another (each into `boot-K/`, with its
/// own bench.md and bench.json), then the verdicts across them into `md` and `report`.
pub fn overhead_boots(opts: &BenchOptions, md: &mut String, report: &mut Value) -> Result<bool> {
    let mut ok = true;
    let (mut reports, mut sources) = (Vec::new(), Vec::new());
    for boot in 1..=opts.boots {
        status("bench", format!("boot {boot} of {}", opts.boots));
        let dir = opts.out_dir.join(format!("boot-{boot}"));
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let boot_opts = BenchOptions {
            out_dir: dir.clone(),
            ..opts.clone()
        };
        let mut boot_md = String::new();
        let mut boot_report =
            json!({ "func": opts.func, "calls": opts.calls, "rounds": opts.rounds });
        ok &= super::overhead(&boot_opts, &mut boot_md, &mut boot_report)?;
        super::write_results(&dir, "bench", &boot_md, &boot_report)?;
        sources.push(format!("boot-{boot}/bench.md"));
        reports.push(boot_report);
    }
    let (section, across) = section(&reports, &sources)?;
    md.push_str(&section);
    report["across_boots"] = across;
    report["boot_reports"] = reports.into();
    Ok(ok)
}

/// `--combine`: the verdicts across the boots of earlier runs, into `boots.md` and
/// `boots.json`.
pub fn combine(opts: &BenchOptions) -> Result<bool> {
    let mut reports = Vec::new();
    let mut sources = Vec::new();
    for path in &opts.combine {
        let boots = read_reports(path)?;
        for i in 1..=boots.len() {
            sources.push(if boots.len() == 1 {
                path.display().to_string()
            } else {
                format!("{} (boot {i})", path.display())
            });
        }
        reports.extend(boots);
    }
    let (md, json) = section(&reports, &sources)?;
    println!("{md}");
    super::write_results(&opts.out_dir, "boots", &md, &json)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A boot's report with the given (config, vs_bpftrace, all_traced) rows.
    fn report(kernel: &str, rows: &[(Config, Option<f64>, bool)]) -> Value {
        json!({
            "func": "__do_sys_getppid",
            "calls": 200000,
            "kernel": kernel,
            "overhead": rows.iter().map(|(c, r, all)| json!({
                "config": c.name(),
                "vs_bpftrace": r,
                "all_traced": all,
            })).collect::<Vec<_>>(),
        })
    }

    #[test]
    fn boots_are_the_unit_of_the_verdict() {
        let k = "7.2.13+deb14-amd64";
        let reports = [
            report(
                k,
                &[
                    (Config::Untraced, None, true),
                    (Config::KernelFentry, Some(0.61), true),
                    (Config::StreamFentry, Some(0.67), true),
                    (Config::FloorFentryStamp, Some(0.44), true),
                ],
            ),
            report(
                k,
                &[
                    (Config::KernelFentry, Some(0.55), true),
                    (Config::StreamFentry, Some(0.63), true),
                ],
            ),
            report(
                k,
                &[
                    (Config::KernelFentry, Some(0.60), true),
                    (Config::StreamFentry, Some(0.72), true),
                    (Config::FloorFentryStamp, Some(0.42), true),
                ],
            ),
        ];
        let rows = across_boots(&reports).unwrap();
        // The untraced row has no estimate and no row here.
        let names: Vec<Config> = rows.iter().map(|r| r.config).collect();
        assert_eq!(
            names,
            [
                Config::StreamFentry,
                Config::KernelFentry,
                Config::FloorFentryStamp
            ]
        );
        // Kernel mode: mean 0.5867, sd 0.0321, ± 4.303 · 0.0321 / √3 = 0.0798: not met.
        let kernel = &rows[1];
        let i = kernel.interval.unwrap();
        assert!((i.estimate - 0.586_67).abs() < 1e-4, "{i:?}");
        assert!((i.lo - 0.506_9).abs() < 1e-3, "{i:?}");
        assert_eq!(kernel.verdict, Some(Verdict::NotMet));
        // Stream/fentry straddles 0.7 across boots.
        assert_eq!(rows[0].verdict, Some(Verdict::Unresolved));
        assert!(rows[0].boots_to_resolve().unwrap() > 3);
        // A floor has no target, and a boot without it is a gap, not a zero.
        let floor = &rows[2];
        assert_eq!(floor.verdict, None);
        assert_eq!(floor.per_boot, [Some(0.44), None, Some(0.42)]);
        assert_eq!(floor.interval.unwrap().rounds, 2);
        let md = markdown(&rows);
        assert!(
            md.contains(
                "| damon-trace --mode kernel --attach fentry | 0.61 | 0.55 | 0.60 | 0.59 [0.51, 0.67] | ≤ 0.4: not met |"
            ),
            "{md}"
        );
        assert!(md.contains("| 0.44 | – | 0.42 |"), "{md}");
        assert!(md.contains("unresolved — run more boots (≈"), "{md}");
    }

    #[test]
    fn a_boot_that_missed_calls_fails_the_target_across_boots() {
        let k = "7.2";
        let reports = [
            report(k, &[(Config::KernelFentry, Some(0.1), true)]),
            report(k, &[(Config::KernelFentry, Some(0.1), false)]),
        ];
        let rows = across_boots(&reports).unwrap();
        assert_eq!(rows[0].verdict, Some(Verdict::NotMet));
        assert!(markdown(&rows).contains("not met (a boot's tracer missed calls)"));
    }

    #[test]
    fn boots_of_different_kernels_or_one_boot_are_refused() {
        let a = report("7.2", &[(Config::KernelFentry, Some(0.5), true)]);
        let b = report("6.12", &[(Config::KernelFentry, Some(0.5), true)]);
        let err = across_boots(&[a.clone(), b]).unwrap_err().to_string();
        assert!(err.contains("`kernel`") && err.contains("6.12"), "{err}");
        assert!(across_boots(std::slice::from_ref(&a)).is_err());
        let no_rows = json!({"func": a["func"], "calls": a["calls"], "kernel": a["kernel"]});
        let err = across_boots(&[a, no_rows]).unwrap_err().to_string();
        assert!(err.contains("boot 2 has no overhead rows"), "{err}");
    }

    #[test]
    fn a_several_boot_run_is_read_as_its_boots() {
        let dir = tempfile::tempdir().unwrap();
        let one = report("7.2", &[(Config::KernelFentry, Some(0.5), true)]);
        let two = json!({ "boot_reports": [one.clone(), one.clone()], "across_boots": {} });
        let (p1, p2) = (dir.path().join("a.json"), dir.path().join("b.json"));
        fs::write(&p1, one.to_string()).unwrap();
        fs::write(&p2, two.to_string()).unwrap();
        assert_eq!(read_reports(&p1).unwrap(), std::slice::from_ref(&one));
        assert_eq!(read_reports(&p2).unwrap(), [one.clone(), one]);
        fs::write(&p1, "not json").unwrap();
        let err = format!("{:#}", read_reports(&p1).unwrap_err());
        assert!(err.contains("is not a bench.json"), "{err}");
    }
}
