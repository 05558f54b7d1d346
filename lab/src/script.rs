//! Shell snippets that guest scripts share (the VM tests in `lab/tests/`, `seed`, `ab`,
//! `soak`, `demo`, `bench`), and [`fill`], which puts values into a script kept as a `.sh`
//! file.

/// `template` (a guest script kept as a `.sh` file) with each `{{NAME}}` replaced by its
/// value. The `##` lines the file starts with say what the script does and which `{{NAME}}`s
/// it takes; they are for its readers and left out. Panics if a `{{NAME}}` is left without a
/// value: a script and its caller disagree.
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = without_header(template).to_owned();
    for (name, value) in values {
        out = out.replace(&format!("{{{{{name}}}}}"), value);
    }
    if let Some(at) = out.find("{{") {
        let rest = &out[at..];
        let name = &rest[..rest.find("}}").map_or(rest.len(), |e| e + 2)];
        panic!("guest script placeholder {name} has no value");
    }
    out
}

/// `template` without the `##` lines it starts with (see [`fill`]): for a `.sh` file without
/// placeholders, included as a `const` (`without_header(include_str!("x.sh"))`).
pub const fn without_header(template: &str) -> &str {
    let mut rest = template.as_bytes();
    while let [b'#', b'#', ..] = rest {
        let mut i = 0;
        while i < rest.len() && rest[i] != b'\n' {
            i += 1;
        }
        rest = if i < rest.len() {
            rest.split_at(i + 1).1
        } else {
            &[]
        };
    }
    match std::str::from_utf8(rest) {
        Ok(rest) => rest,
        Err(_) => panic!("a split after a newline is UTF-8"),
    }
}

/// How long [`WAIT_KDAMOND_ON`] waits at most: the scenario's own 120 s for its workload to
/// become ready (`READY_TIMEOUT` in damon-user/src/damon/scenario.rs) plus a minute for
/// configuring DAMON on a slow guest. The script (`script/wait_kdamond_on.sh`) spells the
/// number out; a unit test keeps the two equal.
pub const KDAMOND_WAIT_S: u64 = 180;

/// Waits (polling every 0.2 s) until kdamond 0 is on — the scenario started in the background
/// just before runs, its pid in `$scenario` — and fails the guest script with status 97 and
/// the scenario's stderr on the console if the scenario exits first or the kdamond is not on
/// within [`KDAMOND_WAIT_S`] (by the guest's `/proc/uptime`). Ends with a newline.
pub const WAIT_KDAMOND_ON: &str = include_str!("script/wait_kdamond_on.sh");

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
/// kdamond is on, and fails (status 97) if the scenario exits first or the kdamond is not on
/// within [`KDAMOND_WAIT_S`]. Ends with a newline.
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
        // At least the scenario's own 120 s for its workload, and the number the script uses.
        const { assert!(KDAMOND_WAIT_S >= 120 + 30) };
        assert!(
            WAIT_KDAMOND_ON.contains(&format!("kd_t0)) -ge {KDAMOND_WAIT_S} ]"))
                && WAIT_KDAMOND_ON.contains(&format!("not on {KDAMOND_WAIT_S} s after")),
            "{WAIT_KDAMOND_ON}"
        );
        // A dead scenario fails the wait at once, with its status.
        assert!(WAIT_KDAMOND_ON.contains("/proc/$scenario/status"));
    }

    #[test]
    fn fill_puts_every_value_in_and_refuses_a_missing_one() {
        assert_eq!(
            fill("a={{A}} b={{B}} ${x}", &[("A", "1"), ("B", "2")]),
            "a=1 b=2 ${x}"
        );
        let missing = std::panic::catch_unwind(|| fill("a={{A}} b={{B}}", &[("A", "1")]));
        assert!(missing.is_err());
        // The `##` header (which names the placeholders) is left out; other comments stay.
        assert_eq!(
            fill(
                "## takes {{A}}\n## more\n# a={{A}}\na={{A}}\n",
                &[("A", "1")]
            ),
            "# a=1\na=1\n"
        );
        const BODY: &str = without_header("## what\n## more\nx\n## not a header\n");
        assert_eq!(BODY, "x\n## not a header\n");
        assert_eq!(without_header("## only"), "");
    }
}
