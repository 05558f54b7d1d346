use std::path::{Path, PathBuf};

use super::{
    plan::{self, Plan, Toolchain},
    *,
};

fn plan() -> (Plan, Toolchain) {
    (
        Plan {
            chroot: PathBuf::from("/cache/livepatch/sid/root"),
            base: PathBuf::from("/cache/kernel-ab"),
            series: "7.2".into(),
            jobs: 2,
        },
        Toolchain {
            source_version: "7.2.13-1".into(),
            compiler_text: "x86_64-linux-gnu-gcc-16 (Debian 16.2.0-4) 16.2.0".into(),
            cc: "x86_64-linux-gnu-gcc-16".into(),
        },
    )
}

#[test]
fn paths_and_make_lines() {
    let (p, tc) = plan();
    assert_eq!(p.source_package(), "linux-source-7.2");
    assert_eq!(p.tarball(), "/usr/src/linux-source-7.2.tar.xz");
    assert_eq!(
        p.source_dir(&tc),
        "/build/kernel-ab/7.2.13-1/linux-source-7.2"
    );
    assert_eq!(p.out_dir(&tc), "/build/kernel-ab/7.2.13-1/out");
    assert_eq!(
        p.host_path(&p.out_dir(&tc)),
        Path::new("/cache/livepatch/sid/root/build/kernel-ab/7.2.13-1/out")
    );
    assert_eq!(
        p.make_args(&tc, &["bzImage"]).join(" "),
        "-C /build/kernel-ab/7.2.13-1/linux-source-7.2 O=/build/kernel-ab/7.2.13-1/out \
         CC=x86_64-linux-gnu-gcc-16 HOSTCC=x86_64-linux-gnu-gcc-16 -j2 bzImage"
    );
    assert!(p.image("abc").ends_with("kernel-ab/images/abc/bzImage"));
    assert_eq!(
        plan::series_of("7.2.13+deb14-amd64").as_deref(),
        Some("7.2")
    );
    assert_eq!(
        plan::series_of("6.12.57+deb13-amd64").as_deref(),
        Some("6.12")
    );
    assert_eq!(plan::series_of("7.2.13-damon-ab").as_deref(), Some("7.2"));
    assert_eq!(plan::series_of("vmlinuz"), None);
}

#[test]
fn cache_keys_change_with_every_input_and_only_then() {
    let (_, tc) = plan();
    let base = plan::base_key(&tc, "CONFIG_X=y\n");
    assert_eq!(base, plan::base_key(&tc, "CONFIG_X=y\n"), "stable");
    assert_ne!(base, plan::base_key(&tc, "CONFIG_X=n\n"), "fragment");
    let newer = Toolchain {
        source_version: "7.2.14-1".into(),
        ..tc.clone()
    };
    assert_ne!(
        base,
        plan::base_key(&newer, "CONFIG_X=y\n"),
        "source version"
    );
    let other_cc = Toolchain {
        compiler_text: "gcc-15".into(),
        ..tc
    };
    assert_ne!(base, plan::base_key(&other_cc, "CONFIG_X=y\n"), "compiler");
    let v = plan::variant_key(&base, b"diff", true);
    assert_eq!(v, plan::variant_key(&base, b"diff", true));
    assert_ne!(v, plan::variant_key(&base, b"diff", false), "direction");
    assert_ne!(v, plan::variant_key(&base, b"diff2", true), "patch");
    assert_ne!(v, plan::variant_key("0000", b"diff", true), "base");
}

#[test]
fn patch_lines_dry_run_first_and_either_direction() {
    assert_eq!(
        plan::patch_args("/s/x.diff", true, true).join(" "),
        "-p1 --reverse --dry-run --batch -i /s/x.diff"
    );
    assert_eq!(
        plan::patch_args("/s/x.diff", false, false).join(" "),
        "-p1 --forward --batch -i /s/x.diff"
    );
}

#[test]
fn the_final_config_must_keep_the_fragment() {
    let fragment =
        "# a comment\nCONFIG_A=y\nCONFIG_S=\"x\"\n# CONFIG_B is not set\n# CONFIG_C is not set\n";
    let good = "CONFIG_A=y\nCONFIG_S=\"x\"\n# CONFIG_B is not set\nCONFIG_AB=y\n";
    assert!(plan::missing_options(fragment, good).is_empty());
    let bad = "CONFIG_S=\"y\"\nCONFIG_B=y\nCONFIG_C=m\n";
    assert_eq!(
        plan::missing_options(fragment, bad),
        [
            "CONFIG_A=y",
            "CONFIG_S=\"x\"",
            "# CONFIG_B is not set",
            "# CONFIG_C is not set"
        ]
    );
}

#[test]
fn every_shipped_patch_describes_itself_and_applies_to_the_right_files() {
    let dir = patches_dir();
    let names = list_patches(&dir).expect("listing");
    assert_eq!(names, ["control", "seed-000", "seed-001", "seed-003"]);
    let files = |n: &str| {
        let (p, _) = load_patch(&dir, n, false).expect(n);
        plan::touched_files(&p.text)
    };
    assert_eq!(files("seed-000"), ["mm/damon/ops-common.c"]);
    assert_eq!(files("seed-001"), ["kernel/time/timer.c"]);
    assert_eq!(files("seed-003"), ["mm/damon/vaddr.c"]);
    assert_eq!(files("control"), ["mm/damon/ops-common.c"]);
    for n in ["seed-000", "seed-001", "seed-003"] {
        let (p, h) = load_patch(&dir, n, false).expect(n);
        assert!(
            p.reverse,
            "{n}: the source as shipped has the seed: applied reversed"
        );
        assert!(
            !h.functions.is_empty() && !h.description.is_empty(),
            "{n}: {h:?}"
        );
    }
    let (control, h) = load_patch(&dir, "control", false).expect("control");
    assert!(!control.reverse && h.functions == ["damon_hot_score"]);
    assert!(
        control.text.contains("+\tndelay(1000);"),
        "the known delay is added"
    );
    let (_, h3) = load_patch(&dir, "seed-003", false).expect("003");
    assert_eq!(h3.scenario_args, "--dest-node same");
    assert_eq!(
        h3.functions,
        ["damos_va_migrate_dests_add", "damon_migrate_pages"]
    );
    // The seed's own change is what the diff adds (so reversing it gives "before").
    let (p3, _) = load_patch(&dir, "seed-003", false).expect("003");
    assert!(
        p3.text
            .contains("+\tif (folio_nid(folio) == dests->node_id_arr[i])")
    );
    let (p0, _) = load_patch(&dir, "seed-000", false).expect("000");
    assert!(
        p0.text
            .contains("+\t\tage_in_log = min_t(int, ilog2(age_in_sec) + 1,")
    );
    assert!(p0.text.contains("-\tfor (age_in_log = 0;"));
    let err = load_patch(&dir, "nope", false).expect_err("unknown");
    assert!(format!("{err:#}").contains("seed-000"), "{err:#}");
}

#[test]
fn a_users_diff_works_the_same_way() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("my-fix.patch");
    std::fs::write(
        &path,
        "Subject: a fix\n\n--- a/kernel/x.c\t2026-01-01\n+++ b/kernel/x.c\t2026-01-02\n@@ -1 +1 @@\n-a\n+b\n",
    )
    .expect("write");
    let (p, h) = load_patch(&patches_dir(), &path.display().to_string(), true).expect("load");
    assert_eq!(p.name, "my-fix");
    assert!(p.reverse, "--reverse");
    assert!(h.functions.is_empty(), "record's default functions");
    assert_eq!(plan::touched_files(&p.text), ["kernel/x.c"]);
    std::fs::write(&path, "not a diff\n").expect("write");
    assert!(load_patch(&patches_dir(), &path.display().to_string(), false).is_err());
}

#[test]
fn the_pair_boots_with_kprobe_sessions_and_the_patch_functions() {
    let (_, h) = load_patch(&patches_dir(), "seed-003", false).expect("003");
    let mut o = KernelAbOptions::new("seed-003");
    o.runs = 3;
    let ab = ab_options(
        &o,
        &h,
        Path::new("/o/before.bzImage"),
        Path::new("/o/after.bzImage"),
        Path::new("/o"),
    );
    assert_eq!(ab.runs, 3);
    assert_eq!(ab.attach.name(), "kprobe-session");
    assert_eq!(ab.scenario_args, "--dest-node same");
    assert_eq!(
        ab.functions,
        ["damos_va_migrate_dests_add", "damon_migrate_pages"]
    );
    assert_eq!(ab.before.short_name(), "before.bzImage");
    o.scenario_args = Some(String::new());
    let ab = ab_options(
        &o,
        &h,
        Path::new("/o/b"),
        Path::new("/o/a"),
        Path::new("/o"),
    );
    assert_eq!(ab.scenario_args, "", "--scenario-args replaces the patch's");
}

#[test]
fn progress_counts_compiled_objects() {
    let log =
        "  CC      kernel/irq/matrix.o\n  LD      vmlinux.o\n  CC      mm/damon/core.o\nwarning\n";
    assert_eq!(plan::compiled_objects(log), 2);
}

/// The shipped patches' headers: each names its functions; seed-001's own view is 500 ns
/// rows under the wall clock (its calls take microseconds under TCG) and the seed's 20-unit
/// rows under the instruction clock (its calls are ~530 instructions).
#[test]
fn shipped_headers_choose_the_view_per_clock() {
    use crate::vm::GuestClock;
    let dir = crate::util::workspace_root()
        .join("xtask")
        .join("kernel-ab");
    for name in ["seed-000", "seed-001", "seed-003", "control"] {
        let text = std::fs::read_to_string(dir.join(format!("{name}.diff"))).expect(name);
        let h = plan::parse_header(&text);
        assert!(!h.functions.is_empty(), "{name}: {h:?}");
        if name == "seed-001" {
            assert_eq!(
                h.compare_args(GuestClock::Wall).join(" "),
                "--bucket-ns 500 --max-ns 20000"
            );
            assert_eq!(
                h.compare_args(GuestClock::Instructions).join(" "),
                "--bucket-ns 20 --max-ns 640"
            );
        } else {
            assert_eq!(
                h.compare_args(GuestClock::Instructions),
                h.compare_args(GuestClock::Wall),
                "{name}"
            );
        }
    }
}
