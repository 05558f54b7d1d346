//! The two text formats, checked line by line against their specifications' rules.
use std::path::Path;

use super::*;
use crate::{analysis::ReportOptions, capture::format::read_file};

fn opts() -> ReportOptions {
    ReportOptions {
        bucket_ns: 20,
        ..Default::default()
    }
}

fn fixture_snapshot(name: &str) -> MetricsSnapshot {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    let c = read_file(&path).expect("fixture");
    crate::export::openmetrics_exporter::snapshot(&c, &opts())
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
        clock: Default::default(),
    };
    t.family("x", Kind::Gauge, None, "a \\ b \"c\"\nd");
    // 0.0.4 help escapes only backslash and newline; quotes stay.
    assert_eq!(t.out, "# HELP x a \\\\ b \"c\"\\nd\n# TYPE x gauge\n");
    let mut t = Text {
        out: String::new(),
        format: Exposition::OpenMetrics,
        clock: Default::default(),
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
fn exported_buckets(text: &str, function: &str, clock: Clock) -> Vec<(u64, u64)> {
    let (family, ns_per_unit) = timed("damon_trace_call_duration", clock);
    let family = format!("{family}_bucket");
    crate::export::tests::parse_samples(text)
        .into_iter()
        .filter(|(n, l, _)| *n == family && l.get("function").map(String::as_str) == Some(function))
        .map(|(_, l, v)| {
            let le = match l["le"].as_str() {
                "+Inf" => u64::MAX,
                s => (s.parse::<f64>().expect("le") * ns_per_unit).round() as u64,
            };
            (le, v as u64)
        })
        .collect()
}

/// The family a guest-clock `stem` is exported as for a capture under `clock`, and how many
/// of the capture's ns one of its units is: `_seconds` (1e9), or `_instructions` (1).
fn timed(stem: &str, clock: Clock) -> (String, f64) {
    match clock {
        Clock::Wall => (format!("{stem}_seconds"), 1e9),
        Clock::Instructions => (format!("{stem}_instructions"), 1.0),
    }
}

/// The `le` label of the bucket bound `ns` under `clock`.
fn le_label(ns: u64, clock: Clock) -> String {
    match clock {
        Clock::Wall => seconds(u128::from(ns)),
        Clock::Instructions => ns.to_string(),
    }
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
            let buckets = exported_buckets(&text, &f.name, c.meta.clock);
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
    let opts = opts();
    let mut worst = (0.0f64, String::new());
    let mut checked = 0;
    for (name, c) in fixtures().iter().filter(|(_, c)| !c.is_kernel_mode()) {
        let report = crate::analysis::build(c, &opts).expect("report");
        let text = render(&crate::export::openmetrics_exporter::snapshot(c, &opts));
        for f in report.functions.iter().filter(|f| f.matched >= MIN_CALLS) {
            let buckets: Vec<(f64, f64)> = exported_buckets(&text, &f.name, c.meta.clock)
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

/// The value of the one sample `name` with the given labels.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    crate::export::tests::parse_samples(text)
        .into_iter()
        .find(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.2)
}

/// DAMON's cost per aggregation interval, its pages migrated and hot scores, exported from
/// every stream fixture, equal what `report` states for the same capture.
#[test]
fn damon_metrics_equal_report() {
    let opts = opts();
    let (mut intervals, mut scores, mut pages) = (0, 0, 0);
    for (name, c) in fixtures().iter().filter(|(_, c)| !c.is_kernel_mode()) {
        let report = crate::analysis::build(c, &opts).expect("report");
        let text = render(&crate::export::openmetrics_exporter::snapshot(c, &opts));
        check(&text, Exposition::OpenMetrics);
        for f in &report.functions {
            let fl = [("function", f.name.as_str())];
            let (cost_family, ns_per_unit) = timed("damon_trace_interval_cost", c.meta.clock);
            let cost = |suffix: &str| sample(&text, &format!("{cost_family}{suffix}"), &fl);
            match &f.per_interval {
                Some(p) => {
                    assert_eq!(
                        cost("_count"),
                        Some(p.intervals as f64),
                        "{name} {}",
                        f.name
                    );
                    let sum = cost("_sum").expect("sum");
                    assert!(
                        (sum - p.total_ns_in_intervals as f64 / ns_per_unit).abs() < 1e-12,
                        "{name} {}: {sum}",
                        f.name
                    );
                    let max = p.max_total_ns;
                    let le = BOUNDS_NS[BOUNDS_NS.partition_point(|&b| b < max)];
                    let at = sample(
                        &text,
                        &format!("{cost_family}_bucket"),
                        &[("function", &f.name), ("le", &le_label(le, c.meta.clock))],
                    );
                    assert_eq!(at, Some(p.intervals as f64), "{name} {}: le {le}", f.name);
                    intervals += 1;
                }
                None => assert_eq!(cost("_count"), None, "{name} {}", f.name),
            }
            let Some(v) = f.values.as_ref().and_then(|v| v.value.as_ref()) else {
                continue;
            };
            match f.name.as_str() {
                "damon_hot_score" => {
                    let get = |s: &str| sample(&text, s, &[]).expect(s);
                    assert_eq!(get("damon_trace_hot_score_count"), v.count as f64, "{name}");
                    assert_eq!(get("damon_trace_hot_score_sum"), v.sum as f64, "{name}");
                    let cold = sample(&text, "damon_trace_hot_score_bucket", &[("le", "0.0")]);
                    assert_eq!(cold.is_some_and(|n| n > 0.0), v.min == 0, "{name}");
                    if v.max <= 99 {
                        let all = sample(&text, "damon_trace_hot_score_bucket", &[("le", "99.0")]);
                        assert_eq!(all, Some(v.count as f64), "{name}");
                    }
                    scores += 1;
                }
                "damon_migrate_pages" => {
                    assert_eq!(
                        sample(&text, "damon_trace_migrated_pages_total", &[]),
                        Some(v.sum as f64),
                        "{name}"
                    );
                    pages += 1;
                }
                _ => {}
            }
        }
    }
    println!("checked: {intervals} interval costs, {scores} score histograms, {pages} page counts");
    assert!(
        intervals > 0 && scores > 0 && pages > 0,
        "{intervals} {scores} {pages}"
    );
}

/// The calibrated fixture's floors, as `report` gives them, and the process families when set.
#[test]
fn tool_metrics_render_when_set() {
    let (_, c) = fixtures()
        .into_iter()
        .find(|(n, _)| n == "calibrated-7.2.dtcap")
        .expect("calibrated fixture");
    let mut snap = crate::export::openmetrics_exporter::snapshot(&c, &opts());
    let report = crate::analysis::build(&c, &opts()).expect("report");
    let floors = report.meta.calibration.as_ref().expect("calibration")["floors"]
        .as_array()
        .expect("floors")
        .clone();
    assert!(!floors.is_empty());
    let before = render(&snap);
    assert!(
        !before.contains("process_"),
        "unset process metrics are left out"
    );
    for f in floors.iter().filter(|f| f["floor"].is_object()) {
        let labels = [
            ("attach", f["attach"].as_str().expect("attach")),
            ("mode", f["mode"].as_str().expect("mode")),
        ];
        let got = sample(&before, "damon_trace_probe_floor_seconds", &labels).expect("floor");
        let want = f["floor"]["median_ns"].as_f64().expect("median") / 1e9;
        assert!((got - want).abs() < 1e-15, "{labels:?}: {got} != {want}");
    }
    snap.process.cpu_seconds = Some(1.25);
    snap.process.resident_memory_bytes = Some(12_345_678);
    for format in [Exposition::OpenMetrics, Exposition::PrometheusText004] {
        let text = render_as(&snap, format);
        let families = check(&text, format);
        assert_eq!(sample(&text, "process_cpu_seconds_total", &[]), Some(1.25));
        assert_eq!(
            sample(&text, "process_resident_memory_bytes", &[]),
            Some(12_345_678.0)
        );
        let cpu_family = match format {
            Exposition::OpenMetrics => "process_cpu_seconds",
            Exposition::PrometheusText004 => "process_cpu_seconds_total",
        };
        assert!(
            families
                .iter()
                .any(|(n, k)| n == cpu_family && k == "counter")
        );
    }
}

/// Clean and disturbed calls per function, by reason, exactly as counted, in both formats;
/// nothing of it when the records do not say.
#[test]
fn disturbed_calls_render_by_reason_where_measured() {
    use damon_common::disturb::{LOST, UNKNOWN};
    let status = FunctionStatus {
        name: "lock_timer_base".into(),
        id: 3,
        attach: crate::capture::AttachState::Traced(crate::trace::Attach::Fentry),
        detail: None,
    };
    let call = |d: [u16; 4]| {
        let mut r = CallRecord {
            func: 3,
            duration_ns: 500,
            ..CallRecord::default()
        };
        r.set_disturbance(d);
        r
    };
    let calls = [
        call([0; 4]),
        call([0; 4]),
        call([0; 4]),
        call([2, 1, UNKNOWN, UNKNOWN]),
        call([0, 1, UNKNOWN, UNKNOWN]),
        call([0, 0, 0, 3]),
        call(LOST),
    ];
    for measured in [true, false] {
        let mut s = MetricsSnapshot::new(
            "7.2",
            crate::capture::Mode::Stream,
            std::slice::from_ref(&status),
        )
        .with_disturbance(measured);
        for r in &calls {
            s.observe(r);
        }
        for format in [Exposition::OpenMetrics, Exposition::PrometheusText004] {
            let text = render_as(&s, format);
            check(&text, format);
            let f = [("function", "lock_timer_base")];
            let reason = |r| {
                sample(
                    &text,
                    "damon_trace_calls_disturbed_total",
                    &[("function", "lock_timer_base"), ("reason", r)],
                )
            };
            if measured {
                assert_eq!(
                    sample(&text, "damon_trace_calls_clean_total", &f),
                    Some(3.0)
                );
                for (r, n) in [
                    ("slept", 1.0),
                    ("preempted", 1.0),
                    ("interrupted", 1.0),
                    ("lost", 1.0),
                ] {
                    assert_eq!(reason(r), Some(n), "{r}");
                }
            } else {
                assert!(!text.contains("damon_trace_calls_clean"), "{text}");
                assert!(!text.contains("damon_trace_calls_disturbed"), "{text}");
            }
        }
    }
}
