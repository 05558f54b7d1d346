//! The instrument commands of the benchmarks and guest tests (`bench-loop`, `disturb-loop`,
//! `bench-decode`, `bench-floor`, `bench-heatmap`) exist with damon-user's `instruments`
//! feature only: the shipped binary (built without it) does not know them.
use std::process::Command;

#[test]
fn instrument_commands_exist_with_the_feature_only() {
    for cmd in [
        "bench-loop",
        "disturb-loop",
        "bench-decode",
        "bench-floor",
        "bench-heatmap",
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_damon-trace"))
            .args([cmd, "--help"])
            .output()
            .expect("damon-trace runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.success(),
            cfg!(feature = "instruments"),
            "{cmd}: {stderr}"
        );
        if !cfg!(feature = "instruments") {
            assert!(
                stderr.contains("unrecognized subcommand"),
                "{cmd}: {stderr}"
            );
        }
    }
}
