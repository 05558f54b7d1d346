use super::*;

#[test]
fn runs_are_collected_with_what_each_tracer_counted() {
    let t = tempfile::tempdir().unwrap();
    let runs = t.path().join("runs");
    fs::create_dir_all(&runs).unwrap();
    let lp = |ns: f64| format!("{{\"calls\":100,\"elapsed_ns\":1,\"ns_per_call\":{ns}}}\n");
    fs::write(runs.join("1-untraced.loop"), lp(10.0)).unwrap();
    fs::write(runs.join("1-bpftrace.loop"), lp(30.0)).unwrap();
    fs::write(runs.join("1-bpftrace.bt"), "@ns:\n[10, 20)  110 |@@@|\n").unwrap();
    fs::write(runs.join("1-stream-fentry.loop"), lp(20.0)).unwrap();
    fs::write(
        runs.join("1-stream-fentry.report.json"),
        r#"{"functions":[{"name":"other","count":1},{"name":"f","count":111,"emitted":5}]}"#,
    )
    .unwrap();
    // Kernel mode, with --disturbance too: the histogram's count.
    for name in ["kernel-fentry", "kernel-fentry-dist"] {
        fs::write(runs.join(format!("1-{name}.loop")), lp(12.0)).unwrap();
        let report = r#"{"functions":[{"name":"f","count":0,"emitted":112}]}"#;
        fs::write(runs.join(format!("1-{name}.report.json")), report).unwrap();
    }
    let (got, calls) = collect_runs(t.path(), 1, "f", &Config::ALL).unwrap();
    assert_eq!(calls, 100);
    let traced: Vec<_> = got.iter().map(|r| (r.config, r.traced)).collect();
    assert_eq!(
        traced,
        [
            (Config::Untraced, None),
            (Config::Bpftrace, Some(110)),
            (Config::StreamFentry, Some(111)),
            (Config::KernelFentry, Some(112)),
            (Config::KernelFentryDist, Some(112)),
        ]
    );
}

#[test]
fn live_samples_parse_relative_to_the_first() {
    let s = parse_rss("10.5 2000 500 2100 64\n\n20.5 2048 512 2200 128\n");
    assert_eq!(s.len(), 2);
    assert_eq!(s[1].t_s, 10.0);
    assert_eq!(
        (s[1].rss_kib, s[1].anon_kib, s[1].hwm_kib, s[1].tmp_kib),
        (2048, 512, 2200, 128)
    );
}

#[test]
fn the_guest_script_runs_every_configuration() {
    let s = guest_script("__do_sys_getppid", 200_000, 3, &Config::ALL);
    // A warm-up round into its own folder, then every configuration once per round, in an
    // order rotated by one per round.
    assert!(s.contains(
        "run_round 0 /out/warmup untraced bpftrace stream-fentry stream-kprobe kernel-fentry stream-fentry-reader floor-fentry floor-kprobe floor-fentry-stamp floor-kprobe-stamp floor-kprobe-stamp-ring floor-session floor-session-ring floor-fsession stream-ksession kernel-ksession stream-fsession kernel-fsession stream-ksession-nolog stream-fentry-dist stream-ksession-dist stream-fsession-dist kernel-fentry-dist kernel-ksession-dist kernel-fsession-dist stream-fentry-slow stream-fentry-slowall\n"
    ), "{s}");
    assert!(s.contains(
        "run_round 1 /out/runs bpftrace stream-fentry stream-kprobe kernel-fentry stream-fentry-reader floor-fentry floor-kprobe floor-fentry-stamp floor-kprobe-stamp floor-kprobe-stamp-ring floor-session floor-session-ring floor-fsession stream-ksession kernel-ksession stream-fsession kernel-fsession stream-ksession-nolog stream-fentry-dist stream-ksession-dist stream-fsession-dist kernel-fentry-dist kernel-ksession-dist kernel-fsession-dist stream-fentry-slow stream-fentry-slowall untraced\n"
    ), "{s}");
    assert!(s.contains("run_round 3 /out/runs"));
    assert!(!s.contains("run_round 4"));
    assert!(s.contains("damon-trace bench-floor --func $F --attach ${c#floor-}"));
    // bench-floor has no SIGINT handler (ignored in a background job): it gets TERM.
    assert!(s.contains("300 TERM bench-floor") && s.contains("600 INT bpftrace"));
    assert!(s.contains("--ring-size 33554432"), "{s}");
    assert_eq!(ring_bytes(1000), 4 << 20);
    assert!(
        s.contains("fentry:vmlinux:$F { @start[tid] = nsecs; }"),
        "{s}"
    );
    assert!(s.contains("--func $F --mode $mode --attach $attach"));
    // `-dist`: the same record with the disturbance counters.
    assert!(s.contains("*-dist) extra=--disturbance;;"));
    // `-slow`: slow calls on, none slow; `-slowall`: every call slow, the reader draining.
    assert!(s.contains("*-slow) extra='--slow 1h';;"), "{s}");
    assert!(
        s.contains("*-slowall) extra='--slow 0.001us --slow-max 1';;"),
        "{s}"
    );
    assert!(s.contains("stream-*-reader|stream-*-slowall) ;;"), "{s}");
    // `ksession` in a configuration's name is --attach kprobe-session.
    assert!(s.contains("[ \"$attach\" = ksession ] && attach=kprobe-session"));
    assert!(s.contains("*-nolog) bin=damon-trace-nolog;;") && s.contains("$bin record"));
    // A subset runs only its configurations, with the two the ratios need.
    let some = selected_configs(&[Config::FloorSession]);
    assert_eq!(
        some,
        [Config::Untraced, Config::Bpftrace, Config::FloorSession]
    );
    let s = guest_script("f", 1000, 1, &some);
    assert!(
        s.contains("run_round 1 /out/runs bpftrace floor-session untraced\n"),
        "{s}"
    );
    assert_eq!(selected_configs(&[]), Config::ALL);
}
