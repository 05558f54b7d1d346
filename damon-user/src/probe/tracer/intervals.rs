//! The aggregation-interval hook: the `damon_aggregated` program on the `damon:damon_aggregated`
//! tracepoint, which writes one boundary marker per kdamond per aggregation interval into the
//! call ring (see `damon-ebpf` for why this tracepoint is the hook).
use aya::{Ebpf, programs::TracePoint};
use damon_common::{
    AGGR_TP_NR_REGIONS_OFFSET, AGGR_TP_START_OFFSET, AGGR_TP_TARGET_ID_OFFSET, AGGREGATION_MARK,
    AGGREGATION_TRACEPOINT, Counter,
};

use crate::{
    capture::{IntervalHook, MarkCounters},
    probe::loader::attach::describe_error,
};

/// Name of the program in the eBPF object.
pub use crate::probe::loader::programs::INTERVALS_PROGRAM as PROGRAM;
/// How the hook is named in metadata and reports.
pub const HOOK_NAME: &str = "tracepoint:damon:damon_aggregated";

const FORMAT_PATHS: [&str; 2] = [
    "/sys/kernel/tracing/events/damon/damon_aggregated/format",
    "/sys/kernel/debug/tracing/events/damon/damon_aggregated/format",
];

/// Checks that the tracepoint's record has the fields the program reads where it reads them
/// (`field:<type> <name>;\toffset:<n>;\tsize:<m>;` lines of the format file).
pub fn check_format(format: &str) -> Result<(), String> {
    let want = [
        ("target_id", AGGR_TP_TARGET_ID_OFFSET, 8),
        ("nr_regions", AGGR_TP_NR_REGIONS_OFFSET, 4),
        ("start", AGGR_TP_START_OFFSET, 8),
    ];
    for (name, offset, size) in want {
        let found = format.lines().find_map(|line| {
            let mut parts = line.trim().split(';').map(str::trim);
            let decl = parts.next()?.strip_prefix("field:")?;
            if decl.rsplit(' ').next()? != name {
                return None;
            }
            let off = parts
                .next()?
                .strip_prefix("offset:")?
                .parse::<usize>()
                .ok()?;
            let sz = parts.next()?.strip_prefix("size:")?.parse::<usize>().ok()?;
            Some((off, sz))
        });
        match found {
            Some((o, s)) if o == offset && s == size => {}
            Some((o, s)) => {
                return Err(format!(
                    "damon_aggregated field {name} is at offset {o} size {s}, this build reads offset {offset} size {size}"
                ));
            }
            None => return Err(format!("damon_aggregated has no field {name}")),
        }
    }
    Ok(())
}

/// Loads and attaches the marker program; the returned hook says whether it worked and why
/// not. Never fails the session: without it, reports just have no per-interval numbers.
pub fn attach(bpf: &mut Ebpf) -> IntervalHook {
    let hook = |attached: bool, detail: Option<String>| IntervalHook {
        hook: HOOK_NAME.to_owned(),
        attached,
        detail,
    };
    let Some(format) = FORMAT_PATHS
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
    else {
        return hook(
            false,
            Some(
                "no damon:damon_aggregated tracepoint in tracefs (DAMON or tracefs missing)"
                    .to_owned(),
            ),
        );
    };
    if let Err(e) = check_format(&format) {
        return hook(false, Some(e));
    }
    let result = (|| {
        let prog: &mut TracePoint = bpf
            .program_mut(PROGRAM)
            .ok_or_else(|| aya::programs::ProgramError::InvalidName {
                name: PROGRAM.to_owned(),
            })?
            .try_into()?;
        prog.load()?;
        let (category, name) = AGGREGATION_TRACEPOINT;
        prog.attach(category, name).map(|_| ())
    })();
    match result {
        Ok(()) => hook(true, None),
        Err(e) => {
            detach(bpf);
            hook(false, Some(describe_error(&e)))
        }
    }
}

/// Detaches and unloads the marker program (no-op if it was never loaded).
pub fn detach(bpf: &mut Ebpf) {
    if let Some(prog) = bpf.program_mut(PROGRAM)
        && let Ok(tp) = <&mut TracePoint>::try_from(prog)
    {
        let _ = tp.unload();
    }
}

/// The marker counters, summed over CPUs.
pub fn counters(bpf: &Ebpf) -> anyhow::Result<MarkCounters> {
    use anyhow::Context as _;
    let map = bpf
        .map(damon_common::MAP_COUNTERS)
        .context("counter map missing")?;
    let counters: aya::maps::PerCpuArray<_, u64> = aya::maps::PerCpuArray::try_from(map)?;
    let sum = |c: Counter| -> anyhow::Result<u64> {
        Ok(counters.get(&c.index(AGGREGATION_MARK), 0)?.iter().sum())
    };
    Ok(MarkCounters {
        markers: sum(Counter::Calls)?,
        emitted: sum(Counter::Emitted)?,
        ring_full: sum(Counter::RingFull)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The format file of Debian's 7.2.13 and 6.12.117 kernels (identical for these fields).
    const FORMAT: &str = "name: damon_aggregated\nID: 743\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:unsigned long target_id;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:unsigned int nr_regions;\toffset:16;\tsize:4;\tsigned:0;\n\tfield:unsigned long start;\toffset:24;\tsize:8;\tsigned:0;\n\tfield:unsigned long end;\toffset:32;\tsize:8;\tsigned:0;\n\tfield:unsigned int nr_accesses;\toffset:40;\tsize:4;\tsigned:0;\n\tfield:unsigned int age;\toffset:44;\tsize:4;\tsigned:0;\n\nprint fmt: \"target_id=%lu nr_regions=%u %lu-%lu: %u %u\", REC->target_id\n";

    #[test]
    fn real_format_passes() {
        assert_eq!(check_format(FORMAT), Ok(()));
    }

    #[test]
    fn moved_or_missing_fields_are_refused() {
        let moved = FORMAT.replace("start;\toffset:24", "start;\toffset:32");
        let err = check_format(&moved).unwrap_err();
        assert!(err.contains("start is at offset 32"), "{err}");
        let missing = FORMAT.replace("target_id;", "tid;");
        assert_eq!(
            check_format(&missing).unwrap_err(),
            "damon_aggregated has no field target_id"
        );
    }
}
