//! The two text formats, checked line by line against their specifications' rules.
use std::path::Path;

use super::*;
use crate::{capture::format::read_file, report::ReportOptions};

fn fixture_snapshot(name: &str) -> MetricsSnapshot {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    let c = read_file(&path).expect("fixture");
    crate::export::openmetrics_exporter::snapshot(&c, &ReportOptions::default())
}

/// The families a text declares, `(name, type)`, in order; panics on a sample whose name
/// does not belong to the family declared last, as both formats require.
fn check(text: &str, format: Exposition) -> Vec<(String, String)> {
    let mut families: Vec<(String, String)> = Vec::new();
    let mut help_of: Option<String> = None;
    for line in text.lines() {
        if line == "# EOF" {
            assert_eq!(format, Exposition::OpenMetrics, "0.0.4 has no # EOF");
            continue;
        }
        if let Some(meta) = line.strip_prefix("# ") {
            let mut words = meta.splitn(3, ' ');
            let (what, name, rest) = (
                words.next().expect("keyword"),
                words.next().expect("name").to_owned(),
                words.next().unwrap_or(""),
            );
            match what {
                "TYPE" => {
                    assert!(
                        families.iter().all(|(n, _)| *n != name),
                        "{name} declared twice"
                    );
                    if format == Exposition::PrometheusText004 {
                        assert_eq!(help_of.take(), Some(name.clone()), "HELP before TYPE");
                    }
                    families.push((name, rest.to_owned()));
                }
                "HELP" => help_of = Some(name),
                "UNIT" => {
                    assert_eq!(format, Exposition::OpenMetrics, "0.0.4 has no UNIT: {line}");
                    assert!(name.ends_with(&format!("_{rest}")), "{line}");
                }
                _ => panic!("unknown comment {line}"),
            }
            continue;
        }
        let name = line.split(['{', ' ']).next().expect("sample name");
        let (family, kind) = families.last().expect("a sample before any TYPE");
        let suffixes: &[&str] = match (format, kind.as_str()) {
            (_, "histogram") => &["_bucket", "_sum", "_count"],
            (Exposition::OpenMetrics, "counter") => &["_total", "_created"],
            (Exposition::OpenMetrics, "info") => &["_info"],
            _ => &[""],
        };
        assert!(
            suffixes.iter().any(|s| name == format!("{family}{s}")),
            "{name} is not a sample of {family} ({kind}) in {format:?}"
        );
        let value = line.rsplit(' ').next().expect("value");
        assert!(
            value == "+Inf" || value.parse::<f64>().is_ok(),
            "value of {line}"
        );
    }
    families
}

#[test]
fn prometheus_text_004_names_samples_and_has_no_openmetrics_only_lines() {
    let snap = fixture_snapshot("migrate-hot-7.2.dtcap");
    let text = render_as(&snap, Exposition::PrometheusText004);
    assert!(!text.contains("# EOF"), "{text}");
    assert!(!text.contains("# UNIT"), "{text}");
    let families = check(&text, Exposition::PrometheusText004);
    let kind = |n: &str| {
        families
            .iter()
            .find(|(f, _)| f == n)
            .map(|(_, k)| k.as_str())
            .unwrap_or_else(|| panic!("no family {n}: {families:?}"))
    };
    assert_eq!(kind("damon_trace_calls_total"), "counter");
    assert_eq!(kind("damon_trace_dropped_total"), "counter");
    assert_eq!(kind("damon_trace_function_info"), "gauge");
    assert_eq!(kind("damon_trace_build_info"), "gauge");
    assert_eq!(kind("damon_trace_call_duration_seconds"), "histogram");
    assert!(text.contains("damon_trace_calls_total{function=\"lock_timer_base\"} 559\n"));
    // Same samples as OpenMetrics, only the metadata differs.
    let om = render_as(&snap, Exposition::OpenMetrics);
    let samples = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(samples(&text), samples(&om));
}

#[test]
fn openmetrics_declares_families_by_their_base_names() {
    let snap = fixture_snapshot("migrate-hot-7.2.dtcap");
    let text = render_as(&snap, Exposition::OpenMetrics);
    assert_eq!(text, render(&snap));
    assert!(text.ends_with("# EOF\n"));
    let families = check(&text, Exposition::OpenMetrics);
    for (name, kind) in [
        ("damon_trace_calls", "counter"),
        ("damon_trace_function", "info"),
        ("damon_trace_call_duration_seconds", "histogram"),
    ] {
        assert!(
            families.iter().any(|(n, k)| n == name && k == kind),
            "{name} {kind}: {families:?}"
        );
    }
    assert!(text.contains("# UNIT damon_trace_call_duration_seconds seconds\n"));
}

#[test]
fn escaping_follows_each_format() {
    let mut snap = fixture_snapshot("migrate-hot-7.2.dtcap");
    snap.kernel_release = "7.2 \"x\"\\y\nz".into();
    let want = r#"kernel="7.2 \"x\"\\y\nz""#;
    for format in [Exposition::OpenMetrics, Exposition::PrometheusText004] {
        let text = render_as(&snap, format);
        assert!(text.contains(want), "{format:?}: {text}");
        check(&text, format);
    }
    let mut t = Text {
        out: String::new(),
        format: Exposition::PrometheusText004,
    };
    t.family("x", Kind::Gauge, None, "a \\ b \"c\"\nd");
    // 0.0.4 help escapes only backslash and newline; quotes stay.
    assert_eq!(t.out, "# HELP x a \\\\ b \"c\"\\nd\n# TYPE x gauge\n");
    let mut t = Text {
        out: String::new(),
        format: Exposition::OpenMetrics,
    };
    t.family("x", Kind::Gauge, None, "a \\ b \"c\"\nd");
    assert_eq!(t.out, "# TYPE x gauge\n# HELP x a \\\\ b \\\"c\\\"\\nd\n");
}

#[test]
fn content_types() {
    assert_eq!(
        Exposition::OpenMetrics.content_type(),
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert_eq!(
        Exposition::PrometheusText004.content_type(),
        "text/plain; version=0.0.4; charset=utf-8"
    );
}

/// Every capture in `tests/data` (and its folders of runs), by file name.
fn fixtures() -> Vec<(String, crate::capture::Capture)> {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(&data).expect("tests/data") {
        let path = entry.expect("entry").path();
        if path.is_dir() && !path.ends_with("fuzz-regressions") {
            for inner in std::fs::read_dir(&path).expect("folder") {
                paths.push(inner.expect("entry").path());
            }
        } else {
            paths.push(path);
        }
    }
    paths.retain(|p| p.extension().is_some_and(|e| e == "dtcap"));
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let name = p
                .strip_prefix(&data)
                .expect("under data")
                .display()
                .to_string();
            let c = read_file(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, c)
        })
        .collect()
}

/// `(le in ns, cumulative count)` of one function's exported histogram, `+Inf` as `u64::MAX`.
fn exported_buckets(text: &str, function: &str) -> Vec<(u64, u64)> {
    crate::export::tests::parse_samples(text)
        .into_iter()
        .filter(|(n, l, _)| {
            n == "damon_trace_call_duration_seconds_bucket"
                && l.get("function").map(String::as_str) == Some(function)
        })
        .map(|(_, l, v)| {
            let le = match l["le"].as_str() {
                "+Inf" => u64::MAX,
                s => (s.parse::<f64>().expect("le") * 1e9).round() as u64,
            };
            (le, v as u64)
        })
        .collect()
}

/// The issue's bug: lock_timer_base's `le="0.00005"` counted calls of the kernel's
/// 40 960–81 920 ns bucket. For every function of every kernel-mode fixture and every `le`,
/// the cumulative count is at most the calls whose kernel bucket lies entirely at or below it.
#[test]
fn kernel_mode_le_never_counts_a_call_above_its_bound() {
    let mut checked = 0;
    for (name, c) in fixtures().iter().filter(|(_, c)| c.is_kernel_mode()) {
        let text = render(&crate::export::openmetrics_exporter::snapshot(
            c,
            &ReportOptions::default(),
        ));
        let end = c.final_hists().expect("final histograms");
        for f in &c.meta.functions {
            let Some((_, h)) = end.functions.get(&f.id) else {
                continue;
            };
            let buckets = exported_buckets(&text, &f.name);
            assert_eq!(buckets.len(), BOUNDS_NS.len() + 1, "{name} {}", f.name);
            for (le, cumulative) in buckets {
                let known_below: u64 = h
                    .buckets
                    .iter()
                    .enumerate()
                    .filter(|&(b, _)| {
                        let (_, hi) = damon_common::hist_bucket_bounds(b as u32, h.width_ns);
                        le == u64::MAX || hi - 1 <= le
                    })
                    .map(|(_, n)| n)
                    .sum();
                assert!(
                    cumulative <= known_below,
                    "{name} {}: le={le} ns counts {cumulative}, only {known_below} calls are \
                     known to be at or below it",
                    f.name
                );
                if le == u64::MAX {
                    assert_eq!(
                        cumulative,
                        h.buckets.iter().sum::<u64>(),
                        "{name} {}",
                        f.name
                    );
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 4, "only {checked} kernel-mode functions found");
}

/// Prometheus' `histogram_quantile` (promql/quantile.go, `BucketQuantile`) over classic
/// buckets `(upper bound, cumulative count)` sorted by bound, `+Inf` last: the rank's bucket
/// is the first whose cumulative count reaches `q · total`; the value is interpolated
/// linearly inside it, from the previous bound (0 for the first bucket); a rank in `+Inf`
/// answers the highest finite bound.
fn histogram_quantile(q: f64, buckets: &[(f64, f64)]) -> f64 {
    assert!(buckets.len() >= 2 && buckets.last().expect("+Inf").0.is_infinite());
    let total = buckets.last().expect("+Inf").1;
    if total == 0.0 {
        return f64::NAN;
    }
    let mut rank = q * total;
    let b = buckets[..buckets.len() - 1]
        .iter()
        .position(|&(_, n)| n >= rank)
        .unwrap_or(buckets.len() - 1);
    if b == buckets.len() - 1 {
        return buckets[buckets.len() - 2].0;
    }
    if b == 0 && buckets[0].0 <= 0.0 {
        return buckets[0].0;
    }
    let (start, mut count) = (if b == 0 { 0.0 } else { buckets[b - 1].0 }, buckets[b].1);
    if b > 0 {
        count -= buckets[b - 1].1;
        rank -= buckets[b - 1].1;
    }
    start + (buckets[b].0 - start) * (rank / count)
}

#[test]
fn prometheus_quantile_follows_its_definition() {
    let b = [(1.0, 10.0), (2.0, 30.0), (f64::INFINITY, 40.0)];
    assert_eq!(histogram_quantile(0.25, &b), 1.0);
    assert_eq!(histogram_quantile(0.5, &b), 1.5);
    assert_eq!(histogram_quantile(0.125, &b), 0.5);
    assert_eq!(histogram_quantile(0.99, &b), 2.0);
}

/// Calls below which the quantile check is not made: a p99 of fewer calls is one call.
const MIN_CALLS: u64 = 100;

/// With the grid, PromQL's p50/p99 of every function of every stream-mode fixture are within
/// 15 % of `report`'s nearest-rank percentiles of the same capture.
#[test]
fn promql_quantiles_are_within_15_percent_of_report() {
    let opts = ReportOptions {
        bucket_ns: 20,
        ..Default::default()
    };
    let mut worst = (0.0f64, String::new());
    let mut checked = 0;
    for (name, c) in fixtures().iter().filter(|(_, c)| !c.is_kernel_mode()) {
        let report = crate::report::build(c, &opts).expect("report");
        let text = render(&crate::export::openmetrics_exporter::snapshot(c, &opts));
        for f in report.functions.iter().filter(|f| f.matched >= MIN_CALLS) {
            let buckets: Vec<(f64, f64)> = exported_buckets(&text, &f.name)
                .into_iter()
                .map(|(le, n)| {
                    let le = if le == u64::MAX {
                        f64::INFINITY
                    } else {
                        le as f64
                    };
                    (le, n as f64)
                })
                .collect();
            let mut line = format!("{name} {} ({} calls):", f.name, f.matched);
            for (q, want) in [(0.5, f.p50_ns), (0.99, f.p99_ns)] {
                let want = want.expect("percentile") as f64;
                let got = histogram_quantile(q, &buckets);
                let err = (got - want).abs() / want;
                line += &format!(
                    " p{}: report {want} promql {got:.0} ({:+.1} %)",
                    q * 100.0,
                    (got - want) / want * 100.0
                );
                if err > worst.0 {
                    worst = (err, format!("{name} {} p{}", f.name, q * 100.0));
                }
                assert!(err <= 0.15, "{line}");
            }
            println!("{line}");
            checked += 1;
        }
    }
    println!(
        "worst: {:.1} % ({}) over {checked} functions",
        worst.0 * 100.0,
        worst.1
    );
    assert!(checked >= 10, "only {checked} functions checked");
}
