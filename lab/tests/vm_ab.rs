//! `cargo xtask ab` through the code the command runs ([`damon_lab::ab::run`]): a small A/A run on
//! 7.2 whose boots must run in the drift-cancelling order A B B A, each leaving a capture that holds calls of
//! every recorded function (read back with `damon-trace report --format json` on the host).
//! The compare step's output format is still changing: only its JSON's `functions` array is
//! checked, and only when the binary knows the multi-run compare.
mod common;
use std::fs;

use common::{assert_traced, function};
use damon_lab::{
    ab::{self, AbOptions},
    kernel::Kernel,
};

const FUNCTIONS: [&str; 2] = ["damon_hot_score", "lock_timer_base"];

#[test]
#[ignore = "boots a QEMU guest; run with `cargo xtask test`"]
fn vm_7_2_ab_a_a_boots_interleaved_and_keeps_a_capture_with_calls_per_run() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut opts = AbOptions::new(Kernel::DEBIAN_7_2, Kernel::DEBIAN_7_2);
    opts.out_dir = tmp.path().join("ab");
    opts.runs = 2;
    opts.seconds = 5;
    opts.functions = FUNCTIONS.iter().map(|f| f.to_string()).collect();
    // A capture from an earlier run must not survive into this one.
    fs::create_dir_all(&opts.out_dir).expect("out dir");
    fs::write(opts.out_dir.join("before-9.dtcap"), "stale").expect("stale capture");

    let o = ab::run(&opts).expect("ab runs");

    let runs_json = common::json(&opts.out_dir, "runs.json");
    let runs = runs_json["runs"].as_array().expect("runs array");
    let order: Vec<(String, u64, u64)> = runs
        .iter()
        .map(|r| {
            (
                r["side"].as_str().expect("side").to_owned(),
                common::u(r, "index"),
                common::u(r, "boot"),
            )
        })
        .collect();
    // A B B A: a linear drift over the boots adds the same to both sides.
    let want = [
        ("before", 1, 1),
        ("after", 1, 2),
        ("after", 2, 3),
        ("before", 2, 4),
    ]
    .map(|(s, i, b)| (s.to_owned(), i, b));
    assert_eq!(order, want, "{runs_json:#}");
    assert_eq!(o.runs.len(), 4);
    assert!(
        !opts.out_dir.join("before-9.dtcap").exists(),
        "stale capture kept"
    );
    assert_eq!((o.before.len(), o.after.len()), (2, 2));

    for r in runs {
        let release = r["kernel_release"].as_str().expect("kernel_release");
        assert!(release.starts_with("7.2."), "{r}");
        assert_eq!(r["kernel"], "7.2", "{r}");
        assert!(r["seconds"].as_f64().expect("seconds") > 5.0, "{r}");
        let file = opts.out_dir.join(r["file"].as_str().expect("file"));
        assert_eq!(
            file.file_name().and_then(|n| n.to_str()),
            Some(format!("{}-{}.dtcap", r["side"].as_str().unwrap(), r["index"]).as_str())
        );
        let report = common::host_report(&file);
        assert_eq!(
            report["meta"]["kernel_release"],
            release,
            "{}",
            file.display()
        );
        for name in FUNCTIONS {
            let f = function(&report, name);
            assert_traced(f, "fentry");
            assert!(
                common::u(f, "count") > 0,
                "{}: no {name} record: {f}",
                file.display()
            );
            println!(
                "{}: {name} count {} p50 {} ns",
                file.display(),
                f["count"],
                f["p50_ns"]
            );
        }
    }

    match &o.compare {
        Ok(c) => {
            assert!(c.json["functions"].is_array(), "{:#}", c.json);
            let on_disk = common::json(&opts.out_dir, "compare.json");
            assert!(on_disk["functions"].is_array(), "{on_disk:#}");
            println!("{}", c.text);
        }
        Err(e) => println!("the compare step failed (the captures are kept): {e:#}"),
    }
}
