//! Shell snippets that guest scripts share (the VM tests in `xtask/tests/`, `seed`, `ab`,
//! `soak`, `demo`, `bench`).

/// [`WAIT_KDAMOND_ON`] as a literal, for `concat!` in `const` guest scripts.
#[macro_export]
macro_rules! wait_kdamond_on {
    () => {
        "# Until the scenario's kdamond runs: a fixed sleep lost that race on a loaded 6.12 guest.
i=0
until [ \"$(cat /sys/kernel/mm/damon/admin/kdamonds/0/state 2>/dev/null)\" = on ]; do
  i=$((i+1))
  if [ $i -gt 300 ]; then
    echo 'kdamond 0 not on 60 s after the scenario started' >&2
    cat /out/scenario.err /out/scenario.log >&2 2>/dev/null || true
    exit 97
  fi
  sleep 0.2
done
"
    };
}

/// Waits (polling every 0.2 s) until kdamond 0 is on — the scenario started in the background
/// just before runs — and fails the guest script with status 97, the scenario's stderr on the
/// console, if that takes more than 60 s. Ends with a newline.
pub const WAIT_KDAMOND_ON: &str = wait_kdamond_on!();

/// Starts `damon-trace scenario migrate-hot --duration SECONDSs ARGS` in the background, its
/// pid in `$scenario`, its stdout and stderr in /out/scenario.out and /out/scenario.err, and
/// does not wait for it (for `live`, whose screen shows DAMON coming up). Ends with a newline.
pub fn spawn_scenario(seconds: u64, args: &str) -> String {
    let args = if args.is_empty() {
        String::new()
    } else {
        format!(" {args}")
    };
    format!(
        "damon-trace scenario migrate-hot --duration {seconds}s{args} > /out/scenario.out \
         2> /out/scenario.err &\nscenario=$!\n"
    )
}

/// [`spawn_scenario`], then [`WAIT_KDAMOND_ON`]: the script goes on once the scenario's
/// kdamond is on, and fails (status 97) if it is not on within 60 s. Ends with a newline.
pub fn start_scenario(seconds: u64, args: &str) -> String {
    format!("{}{WAIT_KDAMOND_ON}", spawn_scenario(seconds, args))
}

/// Stops the scenario [`spawn_scenario`] started with SIGINT (it restores DAMON's sysfs state)
/// and waits for it; neither fails a `set -e` script. No newline at the end.
pub const STOP_SCENARIO: &str = "kill -INT $scenario 2>/dev/null || true\nwait $scenario || true";

/// `BODY` run under the migrate-hot scenario: [`start_scenario`] (SECONDS, ARGS), `BODY`, then
/// [`STOP_SCENARIO`]. No newline at the end.
pub fn with_scenario(seconds: u64, args: &str, body: &str) -> String {
    let body = body.trim_end_matches('\n');
    format!("{}{body}\n{STOP_SCENARIO}", start_scenario(seconds, args))
}

/// A recording of the scenario [`start_scenario`] started, a second after its kdamond came on:
/// `damon-trace record -o /out/CAPTURE RECORD_ARGS`. The seeds and `cargo xtask ab` record this
/// way. No newline at the end.
pub fn record_settled(capture: &str, record_args: &str) -> String {
    format!("sleep 1\ndamon-trace record -o /out/{capture} {record_args}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_scenario_starts_waits_runs_and_stops() {
        let s = with_scenario(60, "--dest-node same", "damon-trace record\n");
        assert!(
            s.starts_with(
                "damon-trace scenario migrate-hot --duration 60s --dest-node same > \
                 /out/scenario.out 2> /out/scenario.err &\nscenario=$!\n"
            ),
            "{s}"
        );
        let wait = s.find(WAIT_KDAMOND_ON).expect("waits for the kdamond");
        let body = s.find("damon-trace record\n").expect("body");
        assert!(wait < body, "{s}");
        assert!(
            s.ends_with(&format!("damon-trace record\n{STOP_SCENARIO}")),
            "{s}"
        );
        assert!(spawn_scenario(5, "").contains("--duration 5s > /out"));
        // The wait fails the script instead of going on without a kdamond.
        assert!(WAIT_KDAMOND_ON.contains("exit 97"));
        assert!(!WAIT_KDAMOND_ON.contains("break"));
    }
}
