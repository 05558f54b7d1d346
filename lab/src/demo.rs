//! `cargo xtask demo`: the product's main job on a machine whose kernel forbids tracing. The
//! 7.2 guest runs the DAMON migrate-hot scenario and `damon-trace live` on a guest console sized
//! like the user's terminal; `q` quits the screen and powers the guest off. Without a terminal
//! (CI, a pipe) it records a while and prints the report instead.
use std::time::Duration;

use anyhow::Result;

use crate::{
    guest::Guest,
    kernel::Kernel,
    script,
    util::status,
    vm::{self, Interactive},
};

/// How long the scenario keeps DAMON busy under the live screen; the guest is stopped a few
/// minutes after it (the harness's timeout), so an abandoned demo does not run forever.
const LIVE_SCENARIO: Duration = Duration::from_secs(3600);
/// What the live screen traced, kept for `damon-trace report` (the guest's /out comes back
/// into target/vm-out).
const LIVE_CAPTURE: &str = "live.dtcap";
const REPORT_CAPTURE: &str = "damon.dtcap";

/// What `cargo xtask demo` runs.
#[derive(Debug, Clone)]
pub struct Demo {
    pub kernel: Kernel,
    /// Record and print the report instead of the live screen.
    pub report: bool,
    /// Report mode: seconds to record.
    pub seconds: u64,
    /// Report mode: extra `damon-trace record` arguments.
    pub record_args: String,
    /// Live mode: extra `damon-trace live` arguments.
    pub live_args: String,
    /// Live mode: the guest terminal (size and TERM of the user's by default).
    pub terminal: Interactive,
    /// The guest's clock (`--clock`).
    pub clock: vm::GuestClock,
}

/// Runs the demo and returns the guest command's exit status.
pub fn run(demo: &Demo, binary: std::path::PathBuf) -> Result<i32> {
    let live = !demo.report && vm::host_is_interactive();
    if !demo.report && !live {
        status(
            "demo",
            "stdin or stdout is not a terminal, so the live screen cannot be shown: recording \
             instead and printing the report (what `cargo xtask demo --report` does)",
        );
    }
    let guest = if live {
        status(
            "demo",
            format!(
                "live screen in a {}x{} guest console; `h` heatmaps, `?` keys, `q` quits \
                 (Ctrl-A x kills the guest)",
                demo.terminal.cols, demo.terminal.rows
            ),
        );
        Guest::new(demo.kernel.clone(), live_command(&demo.live_args))
            .interactive(demo.terminal.clone())
            .timeout(LIVE_SCENARIO + Duration::from_secs(300))
    } else {
        Guest::new(
            demo.kernel.clone(),
            report_command(demo.seconds, &demo.record_args),
        )
        .timeout(Duration::from_secs(demo.seconds + 240))
    };
    let outcome = guest.binary(Some(binary)).clock(demo.clock).run()?;
    let capture = outcome
        .dir()
        .join(if live { LIVE_CAPTURE } else { REPORT_CAPTURE });
    if outcome.status == 0 && capture.is_file() {
        status(
            "demo",
            format!(
                "capture: {} (read it with `damon-trace report`)",
                capture.display()
            ),
        );
    }
    Ok(outcome.status)
}

/// Guest script of the live demo: the scenario in the background for as long as the screen is
/// open, stopped with SIGINT (so that it restores DAMON's sysfs state) when the screen quits.
pub fn live_command(live_args: &str) -> String {
    format!(
        "{}damon-trace live --record /out/{LIVE_CAPTURE} {live_args}
rc=$?
{}
exit $rc",
        script::spawn_scenario(LIVE_SCENARIO.as_secs(), ""),
        script::STOP_SCENARIO
    )
}

/// Guest script of the report demo: the scenario in the background (its output goes to /out),
/// a recording while it runs, then the report.
pub fn report_command(seconds: u64, record_args: &str) -> String {
    let record = format!(
        "damon-trace record -o /out/{REPORT_CAPTURE} --duration {seconds}s {record_args} || exit $?"
    );
    format!(
        "{}
echo
damon-trace report /out/{REPORT_CAPTURE}",
        script::with_scenario(seconds + 30, "", &record)
    )
}
