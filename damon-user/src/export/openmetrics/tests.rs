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
