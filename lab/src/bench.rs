//! `cargo xtask bench`: what tracing costs, measured in one run.
//!
//! - Per-call overhead in one guest boot: `damon-trace bench-loop` makes N `getppid` system
//!   calls and times them with CLOCK_MONOTONIC, for R rounds, each round running the loop
//!   untraced, under bpftrace (the same fentry/fexit timing as ours: an entry stamp keyed by
//!   thread id, the delta into a linear histogram at exit) and under `damon-trace record --func`
//!   in stream/fentry, stream/kprobe and kernel/fentry. Each traced run must have counted at
//!   least N calls, so a failed attach cannot pass for zero overhead.
//! - Userspace throughput on the host: `damon-trace bench-decode` (release build).
//! - Optionally, `live`'s resident memory over minutes at full rate (`--live-rss-minutes`).
//!
//! Results: `target/bench/bench.md` and `target/bench/bench.json`.
pub mod above_floor;
pub mod boots;
pub mod bpftrace;
mod guest_script;
pub mod startup;
pub mod stats;
pub mod table;

pub use self::guest_script::{guest_script, ring_bytes, round_order};

use std::{
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use self::table::{Config, Run};
use crate::{
    guest::Guest,
    kernel::Kernel,
    script,
    util::{self, status},
    vm::{Interactive, KeyStep},
};

/// The kernel function behind `getppid(2)` on Debian's 7.2 (`__x64_sys_getppid` is not
/// traceable there: the syscall table's wrappers are inlined into `x64_sys_call`).
pub const DEFAULT_FUNC: &str = "__do_sys_getppid";

/// What `cargo xtask bench` runs.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub kernel: Kernel,
    /// System calls per loop.
    pub calls: u64,
    pub rounds: u32,
    /// Guest boots of the overhead runs; with two or more, verdicts come from the boots
    /// ([`boots`]).
    pub boots: u32,
    /// Only combine these earlier runs' `bench.json` files across boots; run nothing.
    pub combine: Vec<PathBuf>,
    pub func: String,
    /// Records per `bench-decode` path.
    pub decode_records: u64,
    /// 0: skip the live memory run.
    pub live_rss_minutes: u64,
    /// Skip the guest overhead runs (userspace and live memory only).
    pub skip_overhead: bool,
    /// The configurations of the overhead runs (`--configs`; all by default).
    pub configs: Vec<Config>,
    pub binary: PathBuf,
    /// The same build without the probes' log calls, for [`Config::StreamKsessionNoLog`].
    pub binary_no_log: Option<PathBuf>,
    pub out_dir: PathBuf,
    /// The guests' clock (`--clock`): under the instruction clock every time is the
    /// instructions executed, so "added per call" is the instructions a tracer adds.
    pub clock: crate::vm::GuestClock,
}

/// The configurations `--configs` names, in table order, with untraced and bpftrace (the
/// ratios need them); every one when it names none.
pub fn selected_configs(named: &[Config]) -> Vec<Config> {
    let wanted = |c: &Config| {
        named.is_empty() || matches!(c, Config::Untraced | Config::Bpftrace) || named.contains(c)
    };
    Config::ALL.into_iter().filter(wanted).collect()
}

/// The build without the probes' log calls, when overhead runs will run its configuration.
pub fn binary_without_probe_log(runs: bool, configs: &[Config]) -> Result<Option<PathBuf>> {
    if !runs || !configs.contains(&Config::StreamKsessionNoLog) {
        return Ok(None);
    }
    let tc = crate::bootstrap::ensure()?;
    crate::build::build_static_without_probe_log(&tc).map(Some)
}

/// Calls a traced run timed: bpftrace's histogram total; ours: the function's `count` (records
/// kept) in the capture's JSON report in stream mode, its `emitted` (calls added to the
/// kernel's histogram) in kernel mode.
fn traced_calls(dir: &Path, stem: &str, config: Config, func: &str) -> Option<u64> {
    let read = |ext: &str| fs::read_to_string(dir.join(format!("{stem}.{ext}"))).ok();
    match config {
        Config::Untraced | Config::FloorFentry | Config::FloorKprobe => None,
        Config::Bpftrace => read("bt").and_then(|t| table::bpftrace_hist_total(&t)),
        _ => {
            let kernel_mode = config.name().starts_with("kernel-");
            let field = if kernel_mode { "emitted" } else { "count" };
            read("report.json")
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .and_then(|v| {
                    v["functions"]
                        .as_array()?
                        .iter()
                        .find(|f| f["name"] == func)
                        .and_then(|f| f[field].as_u64())
                })
        }
    }
}

/// Reads every run the guest left in `dir/runs`.
pub fn collect_runs(
    dir: &Path,
    rounds: u32,
    func: &str,
    configs: &[Config],
) -> Result<(Vec<Run>, u64)> {
    let runs_dir = dir.join("runs");
    let mut runs = Vec::new();
    let mut calls = None;
    let mut missing = Vec::new();
    for round in 1..=rounds {
        for &config in configs {
            let stem = format!("{round}-{}", config.name());
            let Ok(text) = fs::read_to_string(runs_dir.join(format!("{stem}.loop"))) else {
                missing.push(stem);
                continue;
            };
            let Ok((n, ns)) = table::parse_loop(&text) else {
                missing.push(stem);
                continue;
            };
            calls = Some(n);
            runs.push(Run {
                round,
                config,
                ns_per_call: ns,
                traced: traced_calls(&runs_dir, &stem, config, func),
            });
        }
    }
    if !missing.is_empty() {
        status(
            "bench",
            format!(
                "warning: no loop result for {} (see their .err files in {})",
                missing.join(", "),
                runs_dir.display()
            ),
        );
    }
    Ok((runs, calls.context("no loop ran in the guest")?))
}

/// `damon-trace bench-decode` of `binary` on this machine.
fn decode_bench(binary: &Path, records: u64) -> Result<Value> {
    status(
        "bench",
        format!(
            "userspace: {} bench-decode --records {records}",
            binary.display()
        ),
    );
    let out = util::output(
        Command::new(binary)
            .arg("bench-decode")
            .arg("--records")
            .arg(records.to_string()),
    )?;
    let line = out
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .context("bench-decode printed no JSON")?;
    serde_json::from_str(line).context("bench-decode output")
}

/// The host's own release build (`cargo build --release -p damon-user --features
/// instruments`, glibc), next to the static musl one the guest runs: allocator and libc
/// differ, and so does their speed.
fn host_release_binary() -> Result<PathBuf> {
    let tc = crate::bootstrap::ensure()?;
    status(
        "bench",
        "cargo build --release -p damon-user --features instruments",
    );
    util::run(
        Command::new("cargo")
            .current_dir(util::workspace_root())
            .args(["build", "--release", "-p", "damon-user"])
            .args(crate::build::INSTRUMENTS)
            .env("PATH", util::path_with(&tc.bpf_linker_dir)?),
    )
    .context("building the host's release damon-trace")?;
    Ok(util::target_dir().join("release/damon-trace"))
}

/// The userspace table: one column per build.
fn userspace_markdown(builds: &[(&str, &Value)]) -> String {
    let mut md = String::from("## Userspace throughput (one core of this host)\n\n| path |");
    for (name, _) in builds {
        let _ = write!(md, " {name} |");
    }
    md.push_str(" target |\n|---|");
    md.push_str(&"---:|".repeat(builds.len()));
    md.push_str("---|\n");
    let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    let mut row = |label: &str, cell: &dyn Fn(&Value) -> String, target: &str| {
        let _ = write!(md, "| {label} |");
        for (_, v) in builds {
            let _ = write!(md, " {} |", cell(v));
        }
        let _ = writeln!(md, " {target} |");
    };
    row(
        "ring drain + decode (records/s)",
        &|v| format!("{:.1} M", f(v, "decode_per_sec") / 1e6),
        "",
    );
    let met = builds
        .iter()
        .map(|(n, v)| {
            let ok = f(v, "decode_aggregate_per_sec") >= 20e6;
            format!("{n} {}", if ok { "✓" } else { "✗" })
        })
        .collect::<Vec<_>>()
        .join(", ");
    row(
        "ring drain + decode + `live`'s aggregation (records/s)",
        &|v| format!("{:.1} M", f(v, "decode_aggregate_per_sec") / 1e6),
        &format!("≥ 20 M ({met})"),
    );
    row(
        "ring drain + decode + `record`'s capture write (records/s)",
        &|v| {
            format!(
                "{:.1} M ({:.0} MB/s)",
                f(v, "capture_write_per_sec") / 1e6,
                f(v, "capture_write_mb_per_sec")
            )
        },
        "",
    );
    row(
        "capture bytes per record",
        &|v| format!("{:.2}", f(v, "capture_bytes_per_record")),
        "",
    );
    md.push('\n');
    md
}

/// The live-memory guest script: `live` on the console (the harness's terminal) tracing the
/// loop's function with the four built-ins under the migrate-hot scenario, the loop running
/// flat out in the background, and a sample of live's memory every `every_s` seconds.
pub fn live_script(func: &str, every_s: u64) -> String {
    format!(
        r#"{spawn}( while :; do damon-trace bench-loop --calls 200000 >> /out/live-loop.txt; done ) &
loop=$!
(
  while [ ! -s /tmp/live.pid ]; do sleep 0.2; done
  pid=$(cat /tmp/live.pid)
  while [ -d /proc/$pid ]; do
    now=$(cut -d' ' -f1 /proc/uptime)
    tmp=$(du -sk /tmp 2>/dev/null | cut -f1)
    awk -v t=$now -v tmp=$tmp '/^VmRSS/{{r=$2}} /^RssAnon/{{a=$2}} /^VmHWM/{{h=$2}} END{{if (r != "") print t, r, a, h, tmp}}' /proc/$pid/status >> /out/live-rss.txt
    sleep {every_s}
  done
) &
sh -c 'echo $$ > /tmp/live.pid; exec damon-trace live --func {func}'
rc=$?
kill $loop $scenario 2>/dev/null
kill -INT $scenario 2>/dev/null
wait
exit $rc
"#,
        spawn = script::spawn_scenario(86400, "")
    )
}

/// One `uptime rss anon hwm tmp` line of the live-memory samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RssSample {
    pub t_s: f64,
    pub rss_kib: u64,
    pub anon_kib: u64,
    pub hwm_kib: u64,
    pub tmp_kib: u64,
}

pub fn parse_rss(text: &str) -> Vec<RssSample> {
    let mut t0 = None;
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let t: f64 = f.first()?.parse().ok()?;
            let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            let t0 = *t0.get_or_insert(t);
            Some(RssSample {
                t_s: t - t0,
                rss_kib: n(1),
                anon_kib: n(2),
                hwm_kib: n(3),
                tmp_kib: n(4),
            })
        })
        .collect()
}

fn live_rss(opts: &BenchOptions) -> Result<Value> {
    let minutes = opts.live_rss_minutes;
    let out = opts.out_dir.join("live-vm");
    let guest = Guest::new(opts.kernel.clone(), live_script(&opts.func, 10))
        .binary(Some(opts.binary.clone()))
        .out_dir(&out)
        .quiet()
        .interactive(Interactive::script(
            40,
            120,
            vec![KeyStep::after(Duration::from_secs(minutes * 60 + 20), "q")],
        ))
        .timeout(Duration::from_secs(minutes * 60 + 300))
        // live spools every record to $TMPDIR (the guest's RAM): room for minutes at full rate.
        .memory_mib(4096);
    status(
        "bench",
        format!(
            "live memory: {minutes} min of `live --func {}` at full rate",
            opts.func
        ),
    );
    let outcome = guest.run()?;
    let samples = parse_rss(&fs::read_to_string(out.join("live-rss.txt")).unwrap_or_default());
    let last = samples.last().copied();
    // The screen as it was just before `q`.
    let screen = outcome
        .terminal
        .as_ref()
        .and_then(|t| t.steps.last())
        .map(|s| s.screen.clone())
        .unwrap_or_default();
    fs::write(opts.out_dir.join("live-screen.txt"), &screen)?;
    // The loop's own rate while traced: the calls per second live was fed.
    let loops: Vec<f64> = fs::read_to_string(out.join("live-loop.txt"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| table::parse_loop(l).ok().map(|(_, ns)| ns))
        .collect();
    let calls_per_sec = table::median(&loops).map(|ns| 1e9 / ns);
    Ok(json!({
        "minutes": minutes,
        "exit_status": outcome.status,
        "samples": samples.iter().map(|s| json!([s.t_s, s.rss_kib, s.anon_kib, s.hwm_kib, s.tmp_kib])).collect::<Vec<_>>(),
        "last_rss_kib": last.map(|s| s.rss_kib),
        "last_anon_kib": last.map(|s| s.anon_kib),
        "peak_rss_kib": last.map(|s| s.hwm_kib),
        "last_t_s": last.map(|s| s.t_s),
        "spool_kib": last.map(|s| s.tmp_kib),
        "target_kib": 40 * 1024,
        "loop_calls_per_sec": calls_per_sec,
    }))
}

/// The per-call overhead runs in one guest boot: their tables into `md`, their data into
/// `report`; false when a tracer missed some of the loop's calls.
fn overhead(opts: &BenchOptions, md: &mut String, report: &mut Value) -> Result<bool> {
    let suite = opts.kernel.userland_suite().context(
        "the overhead runs need a Debian kernel (7.3, 7.2, 6.12 or 6.1) for its bpftrace",
    )?;
    let root = bpftrace::ensure(suite)?;
    let guest_out = opts.out_dir.join("vm");
    let outcome = Guest::new(
        opts.kernel.clone(),
        guest_script(&opts.func, opts.calls, opts.rounds, &opts.configs),
    )
    .binary(Some(opts.binary.clone()))
    .files(
        opts.binary_no_log
            .iter()
            .map(|b| (b.clone(), "/usr/bin/damon-trace-nolog".to_owned()))
            .collect(),
    )
    .trees(vec![root])
    .clock(opts.clock)
    .out_dir(&guest_out)
    .timeout(Duration::from_secs(600 + u64::from(opts.rounds) * 600))
    .run()?;
    if outcome.status != 0 {
        bail!(
            "the guest's bench script failed with status {} (console above)",
            outcome.status
        );
    }
    let (runs, calls) = collect_runs(&guest_out, opts.rounds, &opts.func, &opts.configs)?;
    let mut rows = table::rows(&runs, calls)?;
    if opts.clock == crate::vm::GuestClock::Instructions {
        // The targets are about time (on hardware, what a user waits); instructions executed
        // answer a different question, so no verdict is made against them here.
        for r in &mut rows {
            r.target_vs_bpftrace = None;
            r.verdict = None;
            r.target_met = None;
        }
    }
    let version = fs::read_to_string(guest_out.join("bpftrace-version.txt"))
        .unwrap_or_default()
        .trim()
        .to_owned();
    let _ = writeln!(
        md,
        "## Per-call overhead\n\n`{}` traced in a loop of {calls} `getppid` calls, {} rounds, \
         one boot of {} ({}); {version}.\n",
        opts.func,
        opts.rounds,
        outcome.kernel_release,
        match opts.clock {
            crate::vm::GuestClock::Wall => "QEMU TCG: ratios matter, absolute times do not",
            crate::vm::GuestClock::Instructions =>
                "QEMU TCG under the instruction clock: every number is instructions executed \
                 (insn), not time; a configuration whose work does not vary costs the same \
                 in every round and boot (a reader draining on the same vCPU does vary); \
                 what they cost in time on hardware is the wall clock's question, and the \
                 targets, which are about time, are not judged here",
        }
    );
    md.push_str(&table::markdown(&rows, opts.clock.unit()));
    let above = above_floor::above_floor(&runs);
    let _ = writeln!(
        md,
        "\nThe intervals are over the rounds of this one boot: they say how well this run \
         pins its ratios, not how much another boot or a busier host would move them (a \
         loaded host has moved a ratio by more than its interval). A verdict meant to hold \
         beyond this boot needs more boots: `cargo xtask bench --boots N` judges across them, \
         and `--combine` across earlier runs' bench.json.\n\n\
         ### Above the floors\n\n\
         Each tracer's cost over the floors of its attach method, and each floor's over \
         the one below it (every floor reads the clock twice, as timing a call must; the \
         stamp floors also keep each task's entry time in a hash map, as an exact timing \
         must; the record floor also writes one ring record per call, as a stream tracer \
         must), and each tracer with `--disturbance` over the same tracer without it (what \
         the snapshots cost), paired by round:\n"
    );
    md.push_str(&above_floor::markdown(&above, opts.clock.unit()));
    md.push('\n');
    report["above_floor"] = above.iter().map(above_floor::AboveFloor::to_json).collect();
    report["kernel"] = json!(outcome.kernel_release);
    report["bpftrace"] = json!(version);
    report["overhead"] = rows.iter().map(table::Row::to_json).collect();
    report["runs"] = runs.iter().map(Run::to_json).collect();
    Ok(rows.iter().all(|r| r.all_traced))
}

/// Runs everything asked for and writes the results; false when a run failed to count the
/// loop's calls (results are still written).
pub fn run(opts: &BenchOptions) -> Result<bool> {
    fs::create_dir_all(&opts.out_dir)
        .with_context(|| format!("creating {}", opts.out_dir.display()))?;
    if !opts.combine.is_empty() {
        return boots::combine(opts);
    }
    let mut md = String::from("# damon-trace benchmarks\n\n");
    let mut report = json!({
        "func": opts.func,
        "calls": opts.calls,
        "rounds": opts.rounds,
        "clock": opts.clock.as_str(),
        "unit": opts.clock.unit(),
    });
    let mut ok = true;

    if !opts.skip_overhead {
        ok &= if opts.boots > 1 {
            boots::overhead_boots(opts, &mut md, &mut report)?
        } else {
            overhead(opts, &mut md, &mut report)?
        };
    }

    let host = host_release_binary()?;
    let glibc = decode_bench(&host, opts.decode_records)?;
    let musl = decode_bench(&opts.binary, opts.decode_records)?;
    md.push_str(&userspace_markdown(&[
        ("release build (glibc)", &glibc),
        ("static musl build (the guest's)", &musl),
    ]));
    report["userspace"] = json!({ "glibc_release": glibc, "static_musl": musl });

    if opts.live_rss_minutes > 0 {
        let live = live_rss(opts)?;
        let kib = |k: &str| live[k].as_u64().unwrap_or(0);
        let _ = writeln!(
            md,
            "## `live` memory\n\nAfter {:.1} min of `live --func {}` with the loop calling it \
             flat out (~{:.0} k calls/s traced) and the migrate-hot scenario running: VmRSS \
             {:.1} MB (heap {:.1} MB, peak {:.1} MB; target ≤ 40 MB {}); spool {:.0} MB.\n",
            live["last_t_s"].as_f64().unwrap_or(0.0) / 60.0,
            opts.func,
            live["loop_calls_per_sec"].as_f64().unwrap_or(0.0) / 1e3,
            kib("last_rss_kib") as f64 / 1024.0,
            kib("last_anon_kib") as f64 / 1024.0,
            kib("peak_rss_kib") as f64 / 1024.0,
            if kib("last_rss_kib") > 0 && kib("last_rss_kib") <= 40 * 1024 {
                "✓"
            } else {
                "✗"
            },
            kib("spool_kib") as f64 / 1024.0,
        );
        report["live_rss"] = live;
    }

    println!("{md}");
    write_results(&opts.out_dir, "bench", &md, &report)?;
    Ok(ok)
}

/// Writes `dir/stem.md` and `dir/stem.json` and says so.
fn write_results(dir: &Path, stem: &str, md: &str, json: &Value) -> Result<()> {
    let md_path = dir.join(format!("{stem}.md"));
    fs::write(&md_path, md).with_context(|| format!("writing {}", md_path.display()))?;
    fs::write(
        dir.join(format!("{stem}.json")),
        serde_json::to_string_pretty(json)?,
    )?;
    status(
        "bench",
        format!("wrote {} and {stem}.json", md_path.display()),
    );
    Ok(())
}

#[cfg(test)]
mod tests;
