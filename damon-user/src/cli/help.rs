//! The end of each subcommand's `--help`: real examples, then the exit statuses the code
//! returns (`main::exit_status`: 2 for usage and input errors, 1 for every other failure;
//! doctor, calibrate and scenario add their own).

pub const DOCTOR: &str = "\
Examples:
  damon-trace doctor
  damon-trace doctor --functions lock_timer_base --format json
  damon-trace doctor --functions damon_hot_score --attach kprobe
  until damon-trace doctor --leftovers > /dev/null; do sleep 1; done

Exit status:
  0  the selected functions can be traced here (with --leftovers: no object of ours is loaded)
  1  nothing selected can be traced (the report says why), or the checks failed (with
     --leftovers: objects of damon-trace are loaded, or the kernel's could not be listed)
  2  usage error (unknown option or function name)";

pub const LIVE: &str = "\
Examples:
  sudo damon-trace live
  sudo damon-trace live --functions lock_timer_base --record run.dtcap
  damon-trace live --replay run.dtcap --speed 10
  damon-trace live --replay run.dtcap --time on-cpu   (needs a capture recorded with --disturbance)

On the screen `?` lists the keys; `x` opens the selected function's slow calls (kept with
--slow) with their breakdown, task, arguments and kernel stacks.

Exit status:
  0  the screen was quit (q) or interrupted (Ctrl-C)
  1  tracing or drawing failed (missing privileges, the kernel refused, --time on-cpu on a
     tracer that cannot measure the time breakdown)
  2  usage error (bad option, unknown function, unreadable capture, existing --record file,
     --time on-cpu with --mode kernel or with a capture that has no time breakdown)";

pub const RECORD: &str = "\
Examples:
  sudo damon-trace record -o run.dtcap --duration 1m30s
  sudo damon-trace record -o run.dtcap --functions lock_timer_base --ring-size 8M
  sudo damon-trace record -o run.dtcap --duration 30s --format json
  sudo damon-trace record -o - --duration 10s | damon-trace report -
  sudo damon-trace record -o slow.dtcap --func vfs_read --slow 2ms   (slow calls with stacks)

Exit status:
  0  the capture was written (also when Ctrl-C or SIGTERM ended the recording early)
  1  tracing failed (missing privileges, the kernel refused a probe, a write failed)
  2  usage error (bad option, unknown function, -o FILE exists without --force)";

pub const REPORT: &str = "\
Examples:
  damon-trace report run.dtcap
  damon-trace report run.dtcap --format json --functions damon_hot_score
  damon-trace report run.dtcap --bucket-ns 50 --max-ns 2000 --format markdown
  damon-trace report run.dtcap --heatmap run.svg --format markdown > run.md   (links run.svg)
  damon-trace record -o - --duration 10s | damon-trace report -   (`-`: the capture on stdin)
  damon-trace report run.dtcap --time on-cpu   (each call's time on the CPU: --disturbance)
  damon-trace report run.dtcap --slowest 10   (the slow calls `record --slow` kept)

A capture recorded with --disturbance (stream mode) also shows where each function's time went
(off the CPU, in interrupts, on it); one recorded with --slow, each function's slowest calls
with their breakdown, arguments, CPU, task and kernel stack (JSON: every kept one).

Exit status:
  0  the report was written
  1  a runtime failure (e.g. reading the file failed)
  2  usage error (bad option, unknown function, missing/broken/foreign capture, --heatmap file
     exists, --heatmap of a kernel-mode capture)";

pub const COMPARE: &str = "\
Examples:
  damon-trace compare unpatched.dtcap patched.dtcap
  damon-trace compare --before a1.dtcap a2.dtcap a3.dtcap --after b1.dtcap b2.dtcap b3.dtcap
  damon-trace compare before.dtcap after.dtcap --format json
  damon-trace compare before.dtcap after.dtcap --plot - > plot.svg   (the SVG alone on stdout)
  damon-trace compare before.dtcap after.dtcap --time on-cpu   (on-CPU times: --disturbance)

Each function also gets each run's share of slow calls (wall time at least the captures' --slow
threshold, or the rule stated) and how their time splits where the captures have the breakdown.

The run (one boot, one recording) is the unit of replication: calls of one run share its boot
and are not independent. A verdict needs at least two runs a side (Welch's t on the per-run
medians, Holm-adjusted across functions); with one capture a side the difference is described
and the runs needed to resolve it are estimated. Record the runs of both sides interleaved
(boot A, boot B, boot A, …) so that drift hits both. One capture may be `-` (stdin).

Exit status:
  0  the comparison was written
  1  a runtime failure (e.g. writing the plot failed)
  2  usage error (bad option, missing/broken capture, --plot file exists, `-` twice)";

pub const EXPORT: &str = "\
Examples:
  damon-trace export run.dtcap --format csv -o calls.csv
  damon-trace export run.dtcap --format openmetrics > run.prom
  damon-trace export run.dtcap --format json | jq .accounting
  damon-trace export - --format csv-buckets < run.dtcap   (`-`: the capture on stdin)
  damon-trace export run.dtcap --format csv-buckets --time on-cpu   (on-CPU range rows)

json and csv carry each call's off_cpu_ns and irq_ns when the capture has the breakdown
(--disturbance), json also the kept slow calls with their stacks.

A reader that stops early (`| head`) ends the export normally (status 0).

Exit status:
  0  the export was written (or its reader stopped reading)
  1  a runtime failure (e.g. the output could not be written)
  2  usage error (bad option, missing/broken capture, OUT exists without --force)";

pub const SERVE: &str = "\
Examples:
  sudo damon-trace serve --listen 127.0.0.1:9464
  sudo damon-trace serve --listen [::]:9464 --mode kernel --duration 1h
  curl -s http://127.0.0.1:9464/metrics

Exit status:
  0  stopped by --duration, SIGINT or SIGTERM
  1  tracing or serving failed (missing privileges, address in use)
  2  usage error (bad option or address, unknown function)";

pub const CALIBRATE: &str = "\
Examples:
  sudo damon-trace calibrate
  sudo damon-trace calibrate --attach fentry --mode stream,kernel --format json
  sudo damon-trace calibrate --calls 100000

Exit status:
  0  a probe floor was measured
  1  no floor could be measured (each attach method's reason is printed)
  2  usage error (bad option)";

pub const SCENARIO: &str = "\
Examples:
  sudo damon-trace scenario list
  sudo damon-trace scenario migrate-hot --duration 2m
  sudo damon-trace scenario pageout --duration 30s --regions 200

Exit status:
  0  the scenario ran and DAMON's previous state was restored
  1  it could not run (no DAMON, DAMON busy, missing privileges)
  2  usage error (bad option)
  128+N  stopped by signal N (130: Ctrl-C, 143: SIGTERM), after restoring DAMON";

pub const COMPLETIONS: &str = "\
Examples:
  damon-trace completions bash > /usr/share/bash-completion/completions/damon-trace
  damon-trace completions zsh > /usr/share/zsh/vendor-completions/_damon-trace
  damon-trace completions fish > /usr/share/fish/vendor_completions.d/damon-trace.fish
  source <(damon-trace completions bash)        # this shell only

Exit status:
  0  the script was written (also when the reader closed the pipe early)
  1  writing it failed
  2  usage error (unknown shell)";

pub const MAN: &str = "\
Examples:
  damon-trace man | man -l -
  damon-trace man --dir /usr/local/share/man/man1   # damon-trace.1, damon-trace-record.1, …

Exit status:
  0  the page(s) were written (also when the reader closed the pipe early)
  1  writing a page failed (e.g. DIR is not writable)
  2  usage error";

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use crate::cli::Cli;

    /// Every visible subcommand, at every depth, ends its `--help` with examples that run the
    /// binary and the exit statuses.
    #[test]
    fn every_subcommand_has_examples_and_exit_statuses() {
        fn walk(cmd: &mut clap::Command, path: &str, missing: &mut Vec<String>) {
            // clap's own `help` subcommand prints the others' help.
            let visible = |s: &&mut clap::Command| !s.is_hide_set() && s.get_name() != "help";
            for sub in cmd.get_subcommands_mut().filter(visible) {
                let path = format!("{path} {}", sub.get_name());
                let help = sub.render_long_help().to_string();
                let examples = help.split("Examples:").nth(1).unwrap_or("");
                if !examples.contains("damon-trace ") || !help.contains("Exit status:") {
                    missing.push(path.clone());
                }
                if !help.contains("  2  usage error") {
                    missing.push(format!("{path} (status 2)"));
                }
                walk(sub, &path, missing);
            }
        }
        let mut missing = Vec::new();
        let mut cli = Cli::command();
        walk(&mut cli, "damon-trace", &mut missing);
        assert!(
            missing.is_empty(),
            "--help without Examples/Exit status: {missing:?}"
        );
    }
}
