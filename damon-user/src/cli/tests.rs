//! The command line's own rules (what parses, what conflicts).
use super::*;

#[test]
fn live_flags() {
    let parse = |args: &[&str]| {
        Cli::try_parse_from(["damon-trace", "live"].iter().chain(args)).map(|c| c.command)
    };
    let Ok(Command::Live(a)) = parse(&[]) else {
        panic!("bare live parses")
    };
    assert_eq!((a.bucket_ns, a.window, a.speed), (20, 10, 1.0));
    assert!(a.replay.is_none() && a.record.is_none());
    assert!(parse(&["--replay", "x", "--record", "y"]).is_err());
    assert!(parse(&["--speed", "10"]).is_err(), "--speed needs --replay");
    assert!(parse(&["--force"]).is_err(), "--force needs --record");
    assert!(parse(&["--bucket-ns", "0"]).is_err());
    assert!(parse(&["--window", "0"]).is_err());
    assert!(parse(&["--replay", "x", "--speed", "0", "--window", "30"]).is_ok());
    assert_eq!(a.time, TimeBasis::Wall, "wall time unless asked");
    let Ok(Command::Live(a)) = parse(&["--replay", "x", "--time", "on-cpu"]) else {
        panic!("--time on-cpu parses")
    };
    assert_eq!(a.time, TimeBasis::OnCpu);
    assert!(parse(&["--time", "cpu"]).is_err());
}

/// `--clock` on the tracing commands: wall unless stated (DAMON_TRACE_CLOCK, set by the guest
/// harness, is clap's `env` and not set here), instructions when asked, nothing else.
#[test]
fn clock_flag() {
    let clock = |args: &[&str]| match Cli::try_parse_from(
        ["damon-trace", "record", "-o", "x.dtcap"]
            .iter()
            .chain(args),
    )
    .map(|c| c.command)
    {
        Ok(Command::Record(r)) => Ok(r.trace.clock),
        Ok(_) => panic!("record parses as record"),
        Err(e) => Err(e),
    };
    assert_eq!(clock(&[]).ok(), Some(ClockArg::Wall));
    assert_eq!(
        clock(&["--clock", "instructions"]).ok(),
        Some(ClockArg::Instructions)
    );
    assert!(clock(&["--clock", "cycles"]).is_err());
}

#[test]
fn cli_is_consistent() {
    use clap::CommandFactory;
    Cli::command().debug_assert();
}
