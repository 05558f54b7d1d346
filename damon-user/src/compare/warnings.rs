//! The warnings of a comparison: what differs between the runs beyond the functions (tool,
//! machine, kernel command line, DAMON's configuration and work, probe floors, completeness)
//! and, per function, different work on the two sides (pure).
use super::{runs, side::distinct, signed};
use crate::{capture::Capture, stats::calibration::Calibration};

/// `s` cut to at most `max` characters, with an ellipsis when cut.
fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    s.chars().take(max).collect::<String>() + "…"
}

/// A rate with three significant digits or so.
fn rate(x: f64) -> String {
    match x.abs() {
        v if v >= 100.0 => format!("{x:.0}"),
        v if v >= 10.0 => format!("{x:.1}"),
        _ => format!("{x:.2}"),
    }
}

/// Bytes per second in the unit that keeps the digits: a scheme applied under a small
/// workload moves KiB, not MiB, a second.
fn byte_rate(x: f64) -> String {
    match x.abs() {
        v if v >= 1048576.0 => format!("{:.1} MiB/s", x / 1048576.0),
        v if v >= 1024.0 => format!("{:.1} KiB/s", x / 1024.0),
        _ => format!("{x:.0} B/s"),
    }
}

/// Different work on the two sides, beyond what run-to-run variation explains: calls per
/// second, calls per DAMON aggregation interval.
pub fn workload_warnings(
    name: &str,
    b: &[runs::RunSummary],
    a: &[runs::RunSummary],
) -> Vec<String> {
    let mut out = Vec::new();
    type Rate = fn(&runs::RunSummary) -> Option<f64>;
    let checks: [(&str, Rate); 2] = [
        ("calls/s", |r| r.calls_per_s),
        ("calls per aggregation interval", |r| r.calls_per_interval),
    ];
    for (what, get) in checks {
        let (vb, va) = (runs::values(b, get), runs::values(a, get));
        if let Some(ratio) = runs::rates_differ(&vb, &va) {
            let list = |v: &[f64]| v.iter().map(|&x| rate(x)).collect::<Vec<_>>().join(", ");
            out.push(format!(
                "{name}: the sides did different work: {what} before {}, after {} ({ratio:.2}×{}): \
                 part of any latency difference may be the workload's; run the same workload \
                 on both kernels, with several runs a side (one capture per boot: \
                 `damon-trace compare --before A1 A2 A3 --after B1 B2 B3`)",
                list(&vb),
                list(&va),
                if vb.len() < 2 || va.len() < 2 {
                    format!(
                        ", beyond the {:.1}× single runs may differ by",
                        runs::RATE_RATIO
                    )
                } else {
                    ", beyond the run-to-run variation".to_owned()
                }
            ));
        }
    }
    out
}

/// What differs between the runs beyond the functions: tool version, machine, kernel command
/// line, DAMON's configuration and the work its schemes did, probe floors, completeness.
pub fn header_warnings(b: &[(&str, &Capture)], a: &[(&str, &Capture)]) -> Vec<String> {
    let mut w = Vec::new();
    let all = || b.iter().chain(a).map(|r| r.1);
    let distinct = |side: &[(&str, &Capture)], get: &dyn Fn(&Capture) -> String| {
        distinct(side.iter().map(|r| get(r.1)))
    };
    let (vb, va) = (
        distinct(b, &|c| c.meta.tool_version.clone()),
        distinct(a, &|c| c.meta.tool_version.clone()),
    );
    if vb != va || vb.len() > 1 {
        // Readable formats compare; the probes' cost or the accounting may have changed.
        w.push(format!(
            "the captures were written by different damon-trace versions: before {}, after {}: \
             part of any difference may be the tool's",
            vb.join(", "),
            va.join(", ")
        ));
    }
    if all().any(|c| c.meta.cpu_model.is_empty()) {
        w.push(
            "the CPU model of a capture is unknown (written by an older damon-trace): make sure \
             all ran on the same machine"
                .to_owned(),
        );
    } else {
        let (mb, ma) = (
            distinct(b, &|c| c.meta.cpu_model.clone()),
            distinct(a, &|c| c.meta.cpu_model.clone()),
        );
        if mb != ma || mb.len() > 1 {
            w.push(format!(
                "different CPU models: before `{}`, after `{}`: the difference includes the machine",
                mb.join("`, `"),
                ma.join("`, `")
            ));
        }
    }
    for (label, side) in [("before", b), ("after", a)] {
        let k = distinct(side, &|c| c.meta.kernel.release.clone());
        if k.len() > 1 {
            w.push(format!(
                "the {label} runs are of different kernels ({}): a side should be one kernel",
                k.join(", ")
            ));
        }
    }
    if all().all(|c| !c.meta.kernel.cmdline.is_empty()) {
        let (cb, ca) = (
            distinct(b, &|c| c.meta.kernel.cmdline.clone()),
            distinct(a, &|c| c.meta.kernel.cmdline.clone()),
        );
        if cb != ca || cb.len() > 1 {
            w.push(format!(
                "the kernels were booted with different command lines: before `{}`, after `{}`: \
                 preemption, mitigations or isolation may differ",
                cb.join("` | `"),
                ca.join("` | `")
            ));
        }
    }
    w.extend(damon_warnings(b, a));
    w.extend(calibration_warning(b, a));
    for (label, side) in [("before", b), ("after", a)] {
        for (file, c) in side {
            if c.summary.is_none() {
                w.push(format!(
                    "the {label} capture {file} is incomplete (its recorder was killed): drops \
                     are unknown"
                ));
            }
        }
    }
    w
}

/// DAMON's configuration at the start of a run, without what changes by itself (state, pids,
/// regions, scheme statistics).
fn damon_config(c: &Capture) -> Option<serde_json::Value> {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                for k in ["stats", "pid", "state", "regions", "damon_stat_kdamond_pid"] {
                    m.remove(k);
                }
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v = c.meta.damon.clone()?;
    strip(&mut v);
    Some(v)
}

/// Bytes DAMON's schemes applied their action to per second of the run (end − start of
/// `sz_applied`, all schemes), when the capture has both snapshots.
fn scheme_bytes_per_s(c: &Capture) -> Option<f64> {
    let total = |v: &serde_json::Value| -> u64 {
        let mut sum = 0;
        for k in v["kdamonds"].as_array().into_iter().flatten() {
            for ctx in k["contexts"].as_array().into_iter().flatten() {
                for s in ctx["schemes"].as_array().into_iter().flatten() {
                    sum += s["stats"]["sz_applied"].as_u64().unwrap_or(0);
                }
            }
        }
        sum
    };
    let summary = c.summary.as_ref()?;
    let (start, end) = (c.meta.damon.as_ref()?, summary.damon_end.as_ref()?);
    let secs = summary.duration_ns as f64 / 1e9;
    (secs > 0.0).then(|| total(end).saturating_sub(total(start)) as f64 / secs)
}

fn damon_warnings(b: &[(&str, &Capture)], a: &[(&str, &Capture)]) -> Vec<String> {
    let mut w = Vec::new();
    let configs: Vec<(&str, Option<serde_json::Value>)> = b
        .iter()
        .chain(a)
        .map(|&(f, c)| (f, damon_config(c)))
        .collect();
    if let Some((first, reference)) = configs.iter().find(|c| c.1.is_some()) {
        let reference = reference.as_ref().expect("found");
        for (file, cfg) in &configs {
            if let Some(cfg) = cfg
                && cfg != reference
            {
                let mut diffs = Vec::new();
                crate::analysis::damon::diff("", reference, cfg, &mut diffs);
                // A field only one damon-trace version records is unknown, not different.
                diffs.retain(|d| !d.contains(": null -> ") && !d.ends_with(" -> null"));
                if diffs.is_empty() {
                    continue;
                }
                w.push(format!(
                    "DAMON was configured differently in {file} than in {first}: {}{}",
                    diffs
                        .iter()
                        .take(3)
                        .map(|d| shorten(d, 160))
                        .collect::<Vec<_>>()
                        .join("; "),
                    if diffs.len() > 3 { "; …" } else { "" }
                ));
                break;
            }
        }
    }
    let rate = |side: &[(&str, &Capture)]| -> Vec<f64> {
        side.iter()
            .filter_map(|r| scheme_bytes_per_s(r.1))
            .collect()
    };
    let (rb, ra) = (rate(b), rate(a));
    if let Some(ratio) = runs::rates_differ(&rb, &ra) {
        let list = |v: &[f64]| {
            v.iter()
                .map(|&x| byte_rate(x))
                .collect::<Vec<_>>()
                .join(", ")
        };
        w.push(format!(
            "DAMON's schemes did different work: applied per second before {}, after {} \
             ({ratio:.2}×): part of any difference may be the workload's (or the patch's own, \
             when it changes what a scheme applies)",
            list(&rb),
            list(&ra)
        ));
    }
    w
}

/// Whether the probe floors let raw differences be read as the functions' own: some runs
/// calibrated and others not, or a side's floors of one attach method further from the other
/// side's than their uncertainties, are said (every calibration measures anew, so floors are
/// never identical).
fn calibration_warning(b: &[(&str, &Capture)], a: &[(&str, &Capture)]) -> Vec<String> {
    let cal = |side: &[(&str, &Capture)]| -> Vec<Option<Calibration>> {
        side.iter()
            .map(|r| Calibration::from_meta(r.1.meta.calibration.as_ref()))
            .collect()
    };
    let (cb, ca) = (cal(b), cal(a));
    let some = |v: &[Option<Calibration>]| v.iter().filter(|c| c.is_some()).count();
    let (nb, na) = (some(&cb), some(&ca));
    if nb + na == 0 {
        return Vec::new();
    }
    if nb < cb.len() || na < ca.len() {
        return vec![format!(
            "only {} of the {} runs have a probe calibration (before {nb} of {}, after {na} of \
             {}): corrected latencies may mix calibrated and uncorrected floors",
            nb + na,
            cb.len() + ca.len(),
            cb.len(),
            ca.len()
        )];
    }
    let mut out = Vec::new();
    let first = cb[0].as_ref().expect("all calibrated");
    for fb in &first.floors {
        let floors = |side: &[Option<Calibration>]| -> Vec<(f64, f64)> {
            side.iter()
                .flatten()
                .filter_map(|c| c.floor(fb.attach, fb.mode))
                .filter(|f| f.floor.is_some())
                .map(|f| (f.median_ns(), f.uncertainty_ns))
                .collect()
        };
        let (fb_, fa) = (floors(&cb), floors(&ca));
        if fb_.is_empty() || fa.is_empty() {
            continue;
        }
        let mean = |v: &[(f64, f64)]| v.iter().map(|x| x.0).sum::<f64>() / v.len() as f64;
        let unc = |v: &[(f64, f64)]| v.iter().map(|x| x.1).fold(0.0, f64::max);
        let gap = mean(&fa) - mean(&fb_);
        if gap.abs() > unc(&fb_).max(unc(&fa)) {
            out.push(format!(
                "the {}/{} probe floor differs: before {:.0} ± {:.0} ns, after {:.0} ± {:.0} ns: \
                 {} ns of any raw difference is the probe's; read the corrected rows",
                fb.attach,
                fb.mode,
                mean(&fb_),
                unc(&fb_),
                mean(&fa),
                unc(&fa),
                signed(gap)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::byte_rate;

    #[test]
    fn byte_rates_keep_their_digits() {
        // Seed 003's before side: 188 pages in 60 s, which "0.0" MiB/s used to hide.
        assert_eq!(byte_rate(188.0 * 4096.0 / 60.6), "12.4 KiB/s");
        assert_eq!(byte_rate(0.0), "0 B/s");
        assert_eq!(byte_rate(2.3 * 1048576.0), "2.3 MiB/s");
        assert_eq!(byte_rate(512.4), "512 B/s");
    }
}
