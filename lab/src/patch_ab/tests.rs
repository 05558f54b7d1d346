use std::path::Path;

use super::{build::*, *};

fn plan() -> Plan {
    Plan {
        base: "/c/livepatch".into(),
        suite: "sid".into(),
        release: "7.2.13+deb14-amd64".into(),
    }
}

#[test]
fn plan_paths_and_command_lines() {
    let p = plan();
    assert_eq!(p.chroot(), Path::new("/c/livepatch/sid/root"));
    assert_eq!(p.headers_package(), "linux-headers-7.2.13+deb14-amd64");
    assert_eq!(
        p.debootstrap_args(Path::new("/c/livepatch/sid/root.tmp1"), "http://m/debian"),
        [
            "--variant=minbase",
            "sid",
            "/c/livepatch/sid/root.tmp1",
            "http://m/debian"
        ]
    );
    assert_eq!(
        p.install_args(Some("gcc-16")).join(" "),
        "-o Acquire::Check-Valid-Until=false install -y -q --no-install-recommends \
         linux-headers-7.2.13+deb14-amd64 make libelf-dev dwarves gcc-16"
    );
    assert!(!p.install_args(None).iter().any(|a| a.starts_with("gcc")));
    assert_eq!(
        p.make_args("/build/x", "x86_64-linux-gnu-gcc-16").join(" "),
        "-C /usr/src/linux-headers-7.2.13+deb14-amd64 M=/build/x CC=x86_64-linux-gnu-gcc-16 \
         modules"
    );
    assert_eq!(
        p.module_path("lp_seed_000_after", "00ff"),
        Path::new("/c/livepatch/modules/7.2.13+deb14-amd64/lp_seed_000_after-00ff.ko")
    );
}

#[test]
fn module_names_and_kbuild_per_variant() {
    assert_eq!(module_name("seed-000", Side::Before), "lp_seed_000_before");
    assert_eq!(module_name("control", Side::After), "lp_control_after");
    assert_eq!(
        kbuild("lp_control_after", Side::After),
        "obj-m := lp_control_after.o\nccflags-y := -DLP_AFTER=1\n"
    );
    assert!(kbuild("lp_control_before", Side::Before).contains("-DLP_AFTER=0"));
}

#[test]
fn the_compiler_comes_from_the_headers_config() {
    let config = "CONFIG_CC_IS_GCC=y\n\
                  CONFIG_CC_VERSION_TEXT=\"x86_64-linux-gnu-gcc-16 (Debian 16.2.0-4) 16.2.0\"\n\
                  CONFIG_GCC_VERSION=160200\n";
    let (text, cc, package) = kernel_compiler(config).expect("a compiler");
    assert_eq!(text, "x86_64-linux-gnu-gcc-16 (Debian 16.2.0-4) 16.2.0");
    assert_eq!(cc, "x86_64-linux-gnu-gcc-16");
    assert_eq!(package, "gcc-16");
    let trixie = "CONFIG_CC_VERSION_TEXT=\"gcc-14 (Debian 14.2.0-19) 14.2.0\"\n";
    assert_eq!(kernel_compiler(trixie).expect("gcc-14").2, "gcc-14");
    assert!(kernel_compiler("CONFIG_CC_IS_GCC=y\n").is_none());
}

#[test]
fn cache_keys_follow_every_part_and_are_stable() {
    let a = cache_key(&[b"kbuild", b"7.2.13", b"gcc-16"]);
    assert_eq!(a.len(), 16);
    assert_eq!(a, cache_key(&[b"kbuild", b"7.2.13", b"gcc-16"]));
    assert_ne!(a, cache_key(&[b"kbuild", b"7.2.14", b"gcc-16"]));
    // Part boundaries count: "ab","c" is not "a","bc".
    assert_ne!(cache_key(&[b"ab", b"c"]), cache_key(&[b"a", b"bc"]));
    // FNV-1a of the empty input followed by one 0 byte: a fixed value across Rust versions.
    assert_eq!(cache_key(&[b""]), "af63bd4c8601b7df");
}

#[test]
fn the_shipped_patches_and_their_sources() {
    let dir = patches_dir();
    assert_eq!(list_patches(&dir).expect("list"), ["control", "seed-000"]);
    for patch in ["control", "seed-000"] {
        let s = sources(&dir, patch).expect("sources");
        let names: Vec<&str> = s.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["patch.c", "hot_score.h", "livepatch.h"]);
        let main = String::from_utf8_lossy(&s[0].1).into_owned();
        assert!(
            main.contains("LP_AFTER") && main.contains(FUNCTION),
            "{patch}"
        );
        assert!(
            main.contains("#define LP_OLD_FUNC \"damon_hot_score\""),
            "{patch}"
        );
    }
    let err = sources(&dir, "nope").expect_err("unknown patch");
    assert!(format!("{err:#}").contains("control, seed-000"), "{err:#}");
}

#[test]
fn the_guest_loads_variants_abba_and_removes_the_replaced_module() {
    let cmd = guest_cmd("seed-000", 2, 15, run_attach(&Kernel::DEBIAN_7_2));
    // before-1 after-1 after-2 before-2: the second after run keeps its module loaded.
    let steps: Vec<&str> = cmd
        .lines()
        .filter(|l| l.starts_with("lp_load ") || l.starts_with("damon-trace record -o /out/"))
        .map(|l| {
            l.strip_prefix("damon-trace record -o /out/")
                .map_or(l, |r| r.split(' ').next().unwrap_or(r))
        })
        .collect();
    assert_eq!(
        steps,
        [
            "lp_load lp_seed_000_before ",
            "fentry-attempt.dtcap",
            "before-1.dtcap",
            "lp_load lp_seed_000_after lp_seed_000_before",
            "after-1.dtcap",
            "after-2.dtcap",
            "lp_load lp_seed_000_before lp_seed_000_after",
            "before-2.dtcap",
        ]
    );
    let records: Vec<&str> = cmd
        .lines()
        .filter(|l| l.starts_with("damon-trace record"))
        .collect();
    assert_eq!(records.len(), 5, "{cmd}");
    assert!(records[0].contains("--attach fentry") && records[0].contains("|| true"));
    for (r, (side, i)) in records[1..].iter().zip(schedule(2)) {
        assert!(
            r.starts_with(&format!(
                "damon-trace record -o /out/{}-{i}.dtcap --duration 15s --func {FUNCTION} \
                 --attach fsession",
                side.name()
            )),
            "{r}"
        );
        // Both sides pay the same reads, so the captures compare `--clean` too.
        assert!(r.contains(" --disturbance "), "{r}");
    }
    // Every load comes after the scenario's kdamond is on, and the scenario outlives the runs.
    let wait = cmd.find("kdamond 0 not on").expect("waits for the kdamond");
    assert!(wait < cmd.find("lp_load lp_").expect("a load"));
    assert!(
        cmd.contains("scenario migrate-hot --duration 420s"),
        "{cmd}"
    );
    assert!(cmd.ends_with(script::STOP_SCENARIO));
    let f = load_function();
    assert!(f.contains("/sys/kernel/livepatch/$1/transition") && f.contains("rmmod $2"));
}

#[test]
fn runs_attach_the_cheapest_method_that_reaches_a_module_function() {
    assert_eq!(run_attach(&Kernel::DEBIAN_7_2), "fsession");
    assert_eq!(run_attach(&Kernel::DEBIAN_7_3), "fsession");
    assert_eq!(run_attach(&Kernel::DEBIAN_6_12), "kprobe-session");
    assert_eq!(run_attach(&Kernel::DEBIAN_6_1), "kprobe");
}

#[test]
fn attach_methods_are_read_from_the_record_output() {
    let out = "lp_damon_hot_score          kprobe  \nprobe kprobe/stream floor 1764 ns\n\
               function  attach calls\nlp_damon_hot_score kprobe 2833 2833\n";
    assert_eq!(attach_method(out).as_deref(), Some("kprobe"));
    assert_eq!(attach_method("damon_hot_score fentry 1"), None);
    // The fentry attempt of a control run on 7.2, verbatim.
    let fentry = "calibrated the probe floor (fentry/stream): 20000 test runs\n\
                  lp_damon_hot_score          failed  fentry/fexit: function not in the kernel's BTF\n\
                  damon-trace: error: none of the selected functions could be attached\n";
    assert_eq!(
        fentry_summary(fentry),
        "lp_damon_hot_score failed fentry/fexit: function not in the kernel's BTF"
    );
    assert_eq!(
        fentry_summary("damon-trace: error: no bpf\n"),
        "damon-trace: error: no bpf"
    );
    let run =
        "recording   5.1/15 s  0 records  0/s\nwrote 1284 records (1284 calls made) to /out/a\n";
    assert_eq!(records_written(run), Some(1284));
    assert_eq!(records_written("wrote 0 records (0 calls made)"), Some(0));
    assert_eq!(records_written("recording 5.1/15 s"), None);
}

#[test]
fn the_control_is_detected_only_by_a_slower_verdict() {
    // The verdict lines of `patch-ab control --runs 3` (1 µs added) and of an unresolved run.
    let found = "per-run medians (ns): before 1052, 881, 791; after 1692, 1643, 2114\n\
                 verdict: after is slower by 908 ns at the median [95% CI 372, 1445] over 3 and \
                 3 runs, Welch p=0.0126\n";
    assert!(control_detected(found));
    let unresolved = "verdict: no significant difference over 3 and 3 runs: median +420 ns \
                      [95% CI -916, +1756], Welch p=0.2633\n";
    assert!(!control_detected(unresolved));
    assert!(!control_detected(
        "verdict: after is faster by 90 ns at the median\n"
    ));
    // Under the instruction clock the delay is a longer path, tested or in every run.
    assert!(control_detected(
        "verdict: after is longer in every run: by 1001 insn at the median\n"
    ));
    assert!(control_detected(
        "verdict: after is longer by 990 insn at the median [95% CI 900, 1080]\n"
    ));
    assert!(!control_detected(
        "verdict: after is shorter in every run: by 20 insn at the median\n"
    ));
}
