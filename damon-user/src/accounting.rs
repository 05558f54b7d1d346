//! The accounting every output states the same way: what a function lost, why, and what
//! helps; and the identity `calls == timed + dropped + in flight`, whose failure is a bug.
use damon_common::{
    FunctionId,
    attach::{Attach, Hook},
};

use crate::capture::{FunctionCounters, Summary};

/// A built-in function's symbol by id.
pub fn function_name(id: u32) -> String {
    FunctionId::try_from(id)
        .map(|f| f.symbol().to_owned())
        .unwrap_or_else(|id| format!("function {id}"))
}

/// The end-of-session warnings: one line per function that lost calls, saying how many of how
/// many, why and what helps; and a line if the counters do not add up to what was timed
/// (records written, or calls bucketed in kernel mode: see [`identity_warning`]).
pub fn accounting_warnings(
    summary: &Summary,
    name: impl Fn(u32) -> (String, Option<Attach>),
    ring_size: u32,
    timed: u64,
) -> Vec<String> {
    let mut out: Vec<String> = summary
        .counters
        .iter()
        .filter_map(|(&id, c)| {
            let (name, attach) = name(id);
            drop_warning(&name, attach, c, ring_size)
        })
        .collect();
    let sum = |f: fn(&FunctionCounters) -> u64| summary.counters.values().map(f).sum::<u64>();
    out.extend(identity_warning(
        "all functions",
        sum(FunctionCounters::made),
        timed,
        sum(FunctionCounters::dropped),
        sum(|c| c.in_flight),
    ));
    out
}

/// The identity every session keeps: each call the kernel counted was timed (a record, or a
/// kernel bucket), dropped for a counted reason, or is still running. `None` when it holds;
/// otherwise the line that says by how much it fails (a bug to report).
pub fn identity_warning(
    who: &str,
    calls: u64,
    timed: u64,
    dropped: u64,
    in_flight: u64,
) -> Option<String> {
    let accounted = timed + dropped + in_flight;
    (calls != accounted).then(|| {
        format!(
            "{who}: calls ({calls}) != timed ({timed}) + dropped ({dropped}) + in flight \
             ({in_flight}): {} calls unaccounted (please report this)",
            calls as i128 - accounted as i128
        )
    })
}

/// What a function lost, why, and what helps: `12345 of 20000 calls of damon_hot_score were
/// not recorded: the ring buffer (4096 B) was full; use --ring-size 4194304 (or larger) to keep
/// more`. `None` when nothing was lost.
/// `attach`: the function's attach method, which decides what a skipped probe run means and
/// what helps (`None`: not known).
pub fn drop_warning(
    name: &str,
    attach: Option<Attach>,
    c: &FunctionCounters,
    ring_size: u32,
) -> Option<String> {
    let dropped = c.dropped();
    if dropped == 0 {
        return None;
    }
    let mut why = Vec::new();
    if c.ring_full > 0 {
        why.push(format!(
            "the ring buffer ({ring_size} B) was full{}",
            if c.ring_full == dropped {
                String::new()
            } else {
                format!(" for {}", c.ring_full)
            }
        ));
    }
    if c.stamp_full > 0 {
        why.push(format!(
            "the entry-stamp map ({} open calls) was full for {}",
            crate::probe::tracer::globals::stamp_map_entries(),
            c.stamp_full
        ));
    }
    if c.too_deep > 0 {
        why.push(format!(
            "{} nested deeper than {} calls on one task",
            c.too_deep,
            damon_common::STAMP_DEPTH
        ));
    }
    let skipped_entries = c.skipped_entries.unwrap_or(0);
    if skipped_entries > 0 {
        why.push(format!(
            "the kernel skipped the entry probe of {skipped_entries}"
        ));
    }
    if c.stale_entries > 0 {
        why.push(format!(
            "the kernel skipped the exit probe of {} (their entry stamps were discarded, not \
             timed)",
            c.stale_entries
        ));
    }
    let mut line = format!(
        "{dropped} of {} calls of {name} were not recorded: {}",
        c.made(),
        why.join(", ")
    );
    if attach.is_some_and(Attach::is_session) && (skipped_entries > 0 || c.stale_entries > 0) {
        line.push_str(
            "; a session is one program, whose skipped entry and return runs the kernel counts \
             together: calls left open are taken as skipped returns up to that count",
        );
    }
    if c.ring_full > 0 {
        line.push_str(&format!(
            "; use --ring-size {} (or larger) to keep more",
            suggested_ring_size(ring_size)
        ));
    }
    // A kprobe session runs where a kprobe does (preemption disabled), an fsession where a
    // fentry does: their skips have the same causes.
    let kprobe_like = attach.is_some_and(Attach::is_kprobe_hook);
    if skipped_entries > 0 || c.stale_entries > 0 {
        line.push_str(if kprobe_like {
            "; the kernel skips a kprobe program while another kprobe or tracepoint program runs \
             on that CPU (the call came from an interrupt nested in one) or while a preempted \
             bpf(2) map syscall holds that CPU's guard (on a preemptible kernel; damon-trace's \
             own kernel-mode reads are such calls): fewer other tracing programs and BPF tools \
             on the machine help"
        } else {
            "; the kernel runs a fentry/fexit probe once per CPU at a time and skips it while \
             another run is active there: on a preemptible kernel a task preempted inside the \
             probe blocks it for every task on that CPU (use --attach kprobe, whose probes run \
             with preemption disabled)"
        });
    }
    let skipped_exits = c.skipped_exits.unwrap_or(0);
    // kprobe skips come as whole calls (entry and exit), and a session's cookie belongs to one
    // call: only a trampoline's stamp (fentry/fexit) can join two.
    let joins_calls = attach.is_some_and(|a| a.facts().hook == Hook::Trampoline && !a.is_session());
    if joins_calls && skipped_entries > 0 && skipped_exits > 0 {
        line.push_str(&format!(
            "; with both entry and exit runs skipped, up to {} of the recorded durations may \
             span two calls of one task (an exit skipped, then the next entry at the same stack \
             position)",
            skipped_entries.min(skipped_exits)
        ));
    }
    Some(line)
}

/// Four times the ring, at least the default, at most 1 GiB (all powers of two).
pub fn suggested_ring_size(ring_size: u32) -> u32 {
    ring_size
        .saturating_mul(4)
        .clamp(damon_common::DEFAULT_RING_BYTES, 1 << 30)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(counters: &[(u32, FunctionCounters)]) -> Summary {
        Summary::new(1, "duration", counters.iter().copied().collect())
    }

    fn names(id: u32) -> (String, Option<Attach>) {
        (function_name(id), Some(Attach::Fentry))
    }

    #[test]
    fn end_warning_names_function_counts_reason_and_remedy() {
        let hot = FunctionCounters {
            calls: 20000,
            emitted: 7655,
            ring_full: 12345,
            ..Default::default()
        };
        let timer = FunctionCounters {
            calls: 10,
            emitted: 9,
            in_flight: 1,
            ..Default::default()
        };
        let w = accounting_warnings(&summary(&[(0, hot), (3, timer)]), names, 4096, 7664);
        assert_eq!(
            w,
            [
                "12345 of 20000 calls of damon_hot_score were not recorded: the ring buffer \
                 (4096 B) was full; use --ring-size 4194304 (or larger) to keep more"
            ]
        );
        let mixed = FunctionCounters {
            calls: 100,
            emitted: 90,
            ring_full: 5,
            stamp_full: 3,
            too_deep: 2,
            ..Default::default()
        };
        let w = accounting_warnings(&summary(&[(2, mixed)]), names, 1 << 24, 90);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("10 of 100 calls of damon_migrate_pages were not recorded: the ring buffer (16777216 B) was full for 5, the entry-stamp map (16384 open calls) was full for 3, 2 nested deeper than 4"),
            "{}",
            w[0]
        );
        assert!(w[0].ends_with("use --ring-size 67108864 (or larger) to keep more"));
    }

    #[test]
    fn end_warning_when_the_counters_do_not_add_up() {
        let c = FunctionCounters {
            calls: 10,
            emitted: 10,
            ..Default::default()
        };
        assert!(accounting_warnings(&summary(&[(0, c)]), names, 4096, 10).is_empty());
        let w = accounting_warnings(&summary(&[(0, c)]), names, 4096, 8);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("2 calls unaccounted"), "{}", w[0]);
    }

    #[test]
    fn ring_size_suggestion() {
        assert_eq!(suggested_ring_size(4096), damon_common::DEFAULT_RING_BYTES);
        assert_eq!(suggested_ring_size(8 << 20), 32 << 20);
        assert_eq!(suggested_ring_size(1 << 30), 1 << 30);
    }
}
