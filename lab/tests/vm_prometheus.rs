//! A real Prometheus scrapes `damon-trace serve` in the 7.2 guest under the migrate-hot
//! scenario, with the shipped `docs/prometheus.yml` (its interval shortened to 10 s); the same
//! session is written with `serve --output`. Prometheus (Debian's package of the guest's
//! suite, run in the guest) answers `histogram_quantile(0.5|0.99, …_bucket)` over its scraped
//! buckets, and each answer must lie in the bucket that holds `damon-trace report`'s exact
//! percentile of that capture: PromQL interpolates inside one bucket, so the bucket is the
//! resolution at which the two can agree. `serve --linger` keeps the final numbers up after
//! tracing, and the guest waits until Prometheus has scraped them (its `_count` of every function
//! equals serve's final one) before querying, so Prometheus has the same calls as the capture
//! however slow the emulation is.
use std::{fs, path::PathBuf, time::Duration};

mod common;
use common::{FOUR, function, json};
use damon_lab::{debroot, kernel::Kernel, script::with_scenario};

/// Prometheus and glibc for its dynamically linked binary; not its web assets, promtool or
/// documentation (the guest holds the initramfs in RAM).
const PROMETHEUS: debroot::Unpack = debroot::Unpack {
    package: "prometheus",
    closure_of: &["libc6"],
    alone: &["prometheus"],
    bin: "usr/bin/prometheus",
    prune: &[
        "usr/share",
        "usr/bin/promtool",
        "usr/lib/x86_64-linux-gnu/gconv",
        "etc/init.d",
        "etc/default",
    ],
};

/// Functions with fewer timed calls than this have percentiles too coarse to compare.
const MIN_CALLS: u64 = 20;

/// Percent-encodes a PromQL query for a URL (busybox wget sends the URL as given).
fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

const BUCKET: &str = "damon_trace_call_duration_seconds_bucket";

/// How long `serve` answers with its final numbers after tracing. Only one scrape in it
/// matters (the first that succeeds), and the guest stops waiting for it as soon as Prometheus
/// has it, then ends the rest with SIGTERM (which `serve` must honour while it lingers). 60 s
/// is 6 scrape intervals of [`SCRAPE_S`], each with its full timeout (three runs on a loaded
/// 2-core host had the final numbers 1, 4 and 9 s after tracing ended).
const LINGER_S: u64 = 60;

/// Scrape interval, with the shipped timeout kept (Prometheus refuses a timeout above the
/// interval). With Prometheus, serve and the scenario all emulated on a loaded 2-core host, a
/// successful scrape took up to 8.6 s (the former 1 s timeout left every scrape to the host's
/// load); scrapes also fail while serve calibrates and attaches (port bound, nothing answers
/// yet): 5 of 13 (at a 5 s timeout), 7 of 12 and 2 of 7 in three runs, which does not matter:
/// the guest waits for the one scrape the comparisons need.
const SCRAPE_S: u64 = 10;

const COUNT: &str = "damon_trace_call_duration_seconds_count";

/// The guest script: Prometheus up, then `serve` for 30 s with a capture; once tracing has
/// ended, serve's final `_count` of each function is read from serve itself and Prometheus is
/// polled until its latest scrape holds the same (failing with what it saw if that does not
/// happen while serve lingers); then Prometheus is queried, the scenario stopped, the capture
/// reported.
fn script() -> String {
    let functions = FOUR.join(",");
    // Stale markers end a series once the target is gone: look back over the whole run instead.
    let query = |q: f64| {
        encode(&format!(
            "histogram_quantile({q}, last_over_time({BUCKET}[10m]))"
        ))
    };
    let (q50, q99) = (query(0.5), query(0.99));
    let buckets = encode(&format!("last_over_time({BUCKET}[10m])"));
    let scrapes = encode("sum_over_time(up[10m])");
    let attempts = encode("count_over_time(up[10m])");
    // The slowest successful scrape (failed ones last the timeout or end at once).
    let slowest = encode("max_over_time((scrape_duration_seconds and up == 1)[10m:1s])");
    // One `name encoded-query` line per function: its latest scraped `_count`.
    let counts: String = FOUR
        .iter()
        .map(|f| format!("{f} {}\n", encode(&format!("{COUNT}{{function=\"{f}\"}}"))))
        .collect();
    let deadline = LINGER_S - 5;
    let body = damon_lab::script::fill(
        include_str!("scripts/vm_prometheus_scrape.sh"),
        &[
            ("COUNTS", &counts),
            ("FUNCTIONS", &functions),
            ("LINGER_S", &LINGER_S.to_string()),
            ("COUNT", COUNT),
            ("DEADLINE", &deadline.to_string()),
            ("Q50", &q50),
            ("Q99", &q99),
            ("BUCKETS", &buckets),
            ("SCRAPES", &scrapes),
            ("ATTEMPTS", &attempts),
            ("SLOWEST", &slowest),
        ],
    );
    with_scenario(300, "", &body)
}

/// `docs/prometheus.yml` with the scrape interval the test needs (10 s: a 30 s session gets a
/// few scrapes while tracing; the timeout stays the shipped 10 s).
fn scrape_config() -> PathBuf {
    let shipped = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/prometheus.yml");
    let text = fs::read_to_string(&shipped).expect("docs/prometheus.yml");
    assert!(text.contains("scrape_interval: 15s") && text.contains("scrape_timeout: 10s"));
    let fast = text.replace(
        "scrape_interval: 15s",
        &format!("scrape_interval: {SCRAPE_S}s"),
    );
    let path = std::env::temp_dir().join(format!("vm-prometheus-{}.yml", std::process::id()));
    fs::write(&path, fast).expect("write the scrape config");
    path
}

/// The instant vector of a query answer: (labels, value).
fn vector(answer: &serde_json::Value) -> Vec<(serde_json::Value, f64)> {
    assert_eq!(answer["status"], "success", "{answer}");
    answer["data"]["result"]
        .as_array()
        .expect("result")
        .iter()
        .map(|s| {
            let v = s["value"][1]
                .as_str()
                .expect("value")
                .parse()
                .expect("number");
            (s["metric"].clone(), v)
        })
        .collect()
}

/// The value for `name` in a vector, by its `function` label.
fn of(v: &[(serde_json::Value, f64)], name: &str) -> Option<f64> {
    v.iter()
        .find(|(m, _)| m["function"] == name)
        .map(|(_, x)| *x)
}

/// The bucket `[lo, hi]` (seconds) of `name`'s scraped histogram that holds `x` seconds.
fn bucket_holding(buckets: &[(serde_json::Value, f64)], name: &str, x: f64) -> (f64, f64) {
    let mut les: Vec<f64> = buckets
        .iter()
        .filter(|(m, _)| m["function"] == name)
        .map(|(m, _)| {
            let le = m["le"].as_str().expect("le");
            if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().expect("le")
            }
        })
        .collect();
    les.sort_by(f64::total_cmp);
    let i = les.partition_point(|&le| le < x * (1.0 - 1e-12));
    let lo = if i == 0 { 0.0 } else { les[i - 1] };
    (lo, les[i])
}

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_prometheus_quantiles_match_report() {
    let kernel = Kernel::DEBIAN_7_2;
    let suite = kernel.userland_suite().expect("a Debian kernel");
    let root = debroot::ensure(&PROMETHEUS, suite).expect("Prometheus from Debian");
    let started = std::time::Instant::now();
    let run = common::boot_ok(
        common::guest(kernel, script(), Duration::from_secs(900))
            .trees(vec![root])
            .files(vec![(scrape_config(), "/etc/prometheus.yml".into())])
            .memory_mib(1536),
    );
    let dir = run.dir();
    eprintln!(
        "guest run {:.0} s; {}",
        started.elapsed().as_secs_f64(),
        run.read("prometheus-ready.txt").trim()
    );
    let report = json(dir, "report.json");
    let buckets = vector(&json(dir, "buckets.json"));
    let scrapes = vector(&json(dir, "scrapes.json"));
    eprintln!(
        "successful scrapes {scrapes:?} of {:?}, slowest successful {:?} s; {}",
        vector(&json(dir, "attempts.json")),
        vector(&json(dir, "slowest.json")),
        run.read("final-scrape.txt").trim()
    );
    // SIGTERM sent while serve lingered ends it at once, and the capture it then finishes is
    // whole (report.json read it). (Seconds after tracing ended, by the guest's clock: a
    // linger that had already run out gets no say.)
    let secs = |name: &str| -> u64 {
        let text = run.read(name);
        text.trim()
            .parse()
            .unwrap_or_else(|e| panic!("{name}: {e}: {text:?}"))
    };
    let (sent, ended) = (secs("term-sent.txt"), secs("serve-ended.txt"));
    let serve_err = run.read("serve.err");
    eprintln!(
        "SIGTERM sent {sent} s after tracing ended, serve gone at {ended} s, of a {LINGER_S} s linger"
    );
    if sent + 1 < LINGER_S {
        assert!(
            serve_err.contains("stopped answering with the final numbers early: terminated"),
            "{serve_err}"
        );
        assert!(
            ended < LINGER_S,
            "serve sat out its linger after SIGTERM: {ended} s"
        );
    }
    // The comparisons below need one scrape: the one after tracing with the final numbers,
    // which the guest waited for (so it is there whatever the host's speed).
    assert!(scrapes.iter().any(|(_, n)| *n >= 1.0), "{scrapes:?}");
    let mut compared = 0;
    for (q, file, key) in [(0.5, "q50.json", "p50_ns"), (0.99, "q99.json", "p99_ns")] {
        let promql = vector(&json(dir, file));
        for name in FOUR {
            let f = function(&report, name);
            let count = f["count"].as_u64().unwrap_or(0);
            if count < MIN_CALLS {
                eprintln!("{name}: {count} timed calls, not compared");
                continue;
            }
            let exact = f[key].as_u64().expect(key) as f64 / 1e9;
            let answer =
                of(&promql, name).unwrap_or_else(|| panic!("{name}: no {q} in {promql:?}"));
            let (lo, hi) = bucket_holding(&buckets, name, exact);
            let scraped = buckets
                .iter()
                .find(|(m, _)| m["function"] == name && m["le"] == "+Inf")
                .map_or(0.0, |(_, n)| *n);
            eprintln!(
                "{name} p{}: PromQL {:.0} ns, report {:.0} ns, bucket ({:.0}, {:.0}] ns; \
                 {scraped} calls in the last scrape, {count} in the capture",
                q * 100.0,
                answer * 1e9,
                exact * 1e9,
                lo * 1e9,
                hi * 1e9
            );
            // The guest waited until the last scrape had serve's final `_count`: the capture's.
            assert_eq!(
                scraped, count as f64,
                "{name}: the last scrape missed calls"
            );
            assert!(
                lo * (1.0 - 1e-9) <= answer && answer <= hi * (1.0 + 1e-9),
                "{name} q{q}: PromQL {answer} s outside the bucket ({lo}, {hi}] of report's {exact} s"
            );
            compared += 1;
        }
    }
    assert!(compared >= 4, "only {compared} percentiles compared");
}
