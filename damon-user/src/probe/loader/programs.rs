//! The embedded eBPF object and the names userspace asks it for: programs per traced function
//! and attach method, the calibration trigger, and our maps.
use damon_common::{
    FunctionId, MAP_AGGR_LAST, MAP_COUNTERS, MAP_EVENTS, MAP_HIST, MAP_HIST_STATS, MAP_NODE_PFNS,
    MAP_STAMPS,
};

use crate::trace::{Attach, TracedFunction};

/// The compiled eBPF object, embedded so the binary is self-contained (also inside the VM).
pub(in crate::probe) static EBPF_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/damon"));

/// Program names in the eBPF object for one function and mode: (entry, exit).
pub(in crate::probe) fn program_names(func: &TracedFunction, mode: Attach) -> (String, String) {
    // The table's names; a session's one program runs at both ends.
    let facts = mode.facts();
    let (entry, exit) = (facts.entry_program, facts.exit_program);
    let slot = match func.as_builtin() {
        Some(f) => f.symbol().to_owned(),
        None => format!("u{}", func.id),
    };
    (format!("{entry}_{slot}"), format!("{exit}_{slot}"))
}

/// The never-attached program that calibration runs with `BPF_PROG_TEST_RUN` (see the eBPF
/// object), and the kernel function it is loaded against.
pub const CALIB_TRIGGER: &str = "calib_trigger";
#[allow(dead_code, reason = "used by calibration")]
pub const CALIB_TRIGGER_TARGET: &str = "bpf_fentry_test1";

/// The interval hook's program (see [`crate::probe::tracer::intervals`]).
pub const INTERVALS_PROGRAM: &str = "damon_aggregated";
/// The time breakdown's `sched_switch` program (see [`crate::probe::tracer::disturb`]).
pub const CLOCKS_PROGRAM: &str = "task_clocks";
/// doctor's self-test programs (see [`crate::probe::loader::session::selftest`]): the kprobe
/// session's and the fsession's.
pub const SESSION_SELFTEST_PROGRAM: &str = "sess_probe";
pub const FSESSION_SELFTEST_PROGRAM: &str = "fsess_probe";

/// Every program name of ours, in full: each built-in function and user slot in both modes
/// (entry and exit), the interval hook, the calibration trigger, the benchmark's floor and the
/// session self-test.
pub(in crate::probe) fn all_program_names() -> Vec<String> {
    let user =
        (damon_common::FIRST_USER_FUNC..=damon_common::LAST_USER_FUNC).map(|id| TracedFunction {
            id,
            symbol: String::new(),
        });
    FunctionId::ALL
        .iter()
        .map(|f| TracedFunction::builtin(*f))
        .chain(user)
        .flat_map(|f| {
            Attach::ALL.into_iter().flat_map(move |m| {
                let (entry, exit) = program_names(&f, m);
                // A session's one program is both.
                let exit = (exit != entry).then_some(exit);
                std::iter::once(entry).chain(exit)
            })
        })
        .chain([
            INTERVALS_PROGRAM.to_owned(),
            CLOCKS_PROGRAM.to_owned(),
            CALIB_TRIGGER.to_owned(),
            SESSION_SELFTEST_PROGRAM.to_owned(),
            FSESSION_SELFTEST_PROGRAM.to_owned(),
        ])
        .chain(floor_program_names())
        .chain(
            damon_common::breakdown::IRQ_CLOCK_TRACEPOINTS
                .iter()
                .map(|(name, ..)| (*name).to_owned()),
        )
        .collect()
}

/// The benchmark's floor programs (`bench-floor`), every kind.
fn floor_program_names() -> impl Iterator<Item = String> {
    FloorKind::ALL.into_iter().flat_map(|k| {
        let (entry, exit) = floor_pair_names(k);
        [entry.to_owned(), exit.to_owned()]
    })
}

/// Which floor pair: an attach method of [`ATTACH_TABLE`](damon_common::attach::ATTACH_TABLE)
/// (its hook and how its entry time reaches the exit), with or without the per-task stamp map
/// and with or without one ring record per call. How it attaches derives from its method
/// ([`FloorKind::attach`]), the ring's size from [`FloorKind::ring`]; its `--attach` value and
/// program names are the floor's own (the guest scripts pass the values, and the eBPF object
/// names the programs, the stamp map's use included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloorKind {
    /// fentry/fexit, reading the clock once each.
    Fentry,
    /// kprobe/kretprobe, reading the clock once each.
    Kprobe,
    /// fentry/fexit, reading the clock once each and keeping the entry time per task in a
    /// hash map (lookup on both sides).
    FentryStamp,
    /// kprobe/kretprobe with the same per-task stamp.
    KprobeStamp,
    /// kprobe/kretprobe with the per-task stamp and a 64-byte record reserved and submitted
    /// in the ring per call (no wake-up).
    KprobeStampRing,
    /// One kprobe session program: the entry time in the invocation's cookie, the clock read
    /// again at return (exact, no map).
    Session,
    /// The session floor plus the 72-byte ring record per call.
    SessionRing,
    /// The session floor as an fsession (BPF trampoline).
    Fsession,
}

// Its names are read by the instrument command `bench-floor` only.
#[cfg_attr(not(any(test, feature = "instruments")), allow(dead_code))]
impl FloorKind {
    pub const ALL: [FloorKind; 8] = [
        FloorKind::Fentry,
        FloorKind::Kprobe,
        FloorKind::FentryStamp,
        FloorKind::KprobeStamp,
        FloorKind::KprobeStampRing,
        FloorKind::Session,
        FloorKind::SessionRing,
        FloorKind::Fsession,
    ];

    /// `bench-floor --attach`'s value: a floor-only name (`session` is the kprobe session's
    /// floor, not `kprobe-session`), kept as the guest scripts pass it.
    pub const fn as_str(self) -> &'static str {
        match self {
            FloorKind::Fentry => "fentry",
            FloorKind::Kprobe => "kprobe",
            FloorKind::FentryStamp => "fentry-stamp",
            FloorKind::KprobeStamp => "kprobe-stamp",
            FloorKind::KprobeStampRing => "kprobe-stamp-ring",
            FloorKind::Session => "session",
            FloorKind::SessionRing => "session-ring",
            FloorKind::Fsession => "fsession",
        }
    }

    pub fn parse(s: &str) -> Option<FloorKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The attach method whose hook and timing the floor has: its programs' kind, how they
    /// attach, the kernels that have it ([`AttachFacts::min_kernel`]) and their wording
    /// ([`Attach::probes`]) are that method's.
    ///
    /// [`AttachFacts::min_kernel`]: damon_common::attach::AttachFacts::min_kernel
    pub const fn attach(self) -> Attach {
        match self {
            FloorKind::Fentry | FloorKind::FentryStamp => Attach::Fentry,
            FloorKind::Kprobe | FloorKind::KprobeStamp | FloorKind::KprobeStampRing => {
                Attach::Kprobe
            }
            FloorKind::Session | FloorKind::SessionRing => Attach::KprobeSession,
            FloorKind::Fsession => Attach::Fsession,
        }
    }

    /// Whether it reserves and submits one 72-byte ring record per call (a floor-only extra:
    /// the least a stream tracer writes).
    pub const fn ring(self) -> bool {
        matches!(self, FloorKind::KprobeStampRing | FloorKind::SessionRing)
    }
}

/// The floor pair's program names: (entry, exit); a session's one program is both (as its
/// method's [`AttachFacts`](damon_common::attach::AttachFacts) entry and exit programs are).
/// The names are the eBPF object's own (`floor_` with a floor-only infix), not derived.
pub const fn floor_pair_names(kind: FloorKind) -> (&'static str, &'static str) {
    match kind {
        FloorKind::Fentry => ("floor_fentry", "floor_fexit"),
        FloorKind::Kprobe => ("floor_kprobe", "floor_kretprobe"),
        FloorKind::FentryStamp => ("floor_st_fentry", "floor_st_fexit"),
        FloorKind::KprobeStamp => ("floor_sk_entry", "floor_sk_exit"),
        FloorKind::KprobeStampRing => ("floor_skr_entry", "floor_skr_exit"),
        FloorKind::Session => ("floor_session", "floor_session"),
        FloorKind::SessionRing => ("floor_session_rec", "floor_session_rec"),
        FloorKind::Fsession => ("floor_fsession", "floor_fsession"),
    }
}

/// `load`, the program's load into the kernel (the verifier), as a `--debug-timing` phase.
pub(in crate::probe) fn timed_load<T>(name: &str, load: impl FnOnce() -> T) -> T {
    let _t = crate::timing::phase(format_args!("verifier: {name} loaded"));
    load()
}

/// `attach` of program `name` to `target`, as a `--debug-timing` phase.
pub(in crate::probe) fn timed_attach<T>(name: &str, target: &str, attach: impl FnOnce() -> T) -> T {
    let _t = crate::timing::phase(format_args!("attach: {name} to {target}"));
    attach()
}

/// Every map name of ours, in full.
pub(in crate::probe) const MAP_NAMES: [&str; 17] = [
    MAP_EVENTS,
    MAP_COUNTERS,
    MAP_STAMPS,
    MAP_AGGR_LAST,
    MAP_NODE_PFNS,
    MAP_HIST,
    MAP_HIST_STATS,
    damon_common::MAP_SESSION_PROBE,
    super::probe_log::MAP_AYA_LOGS,
    damon_common::disturb::MAP_SESSION_SNAPS,
    damon_common::disturb::MAP_DISTURB_SCRATCH,
    damon_common::disturb::MAP_DISTURBED_HIST,
    damon_common::disturb::MAP_DISTURBED_STATS,
    damon_common::slow::MAP_SLOW_EVENTS,
    damon_common::slow::MAP_SLOW_COUNTERS,
    damon_common::breakdown::MAP_TASK_CLOCKS,
    damon_common::breakdown::MAP_IRQ_CLOCK,
];

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use aya_obj::{EbpfSectionKind, Object, btf::BtfKind};
    use damon_common::{FIRST_USER_FUNC, MAX_USER_FUNCS};

    use super::*;

    fn object() -> Object {
        Object::parse(EBPF_OBJECT).expect("the embedded eBPF object parses")
    }

    fn user(id: u32, symbol: &str) -> TracedFunction {
        TracedFunction {
            id,
            symbol: symbol.to_owned(),
        }
    }

    /// Every program name the loader can ask for: each built-in function and user slot, both
    /// modes (entry and exit), the slots calibration uses under its functions' own names, the
    /// interval hook and the calibration trigger.
    fn names_the_loader_asks_for() -> BTreeSet<String> {
        let calibration = crate::probe::calibrate::FLOOR_FUNCTIONS
            .iter()
            .chain([&crate::probe::calibrate::HELD_OUT_FUNCTION])
            .zip(FIRST_USER_FUNC..)
            .map(|(symbol, id)| user(id, symbol));
        let slots = (FIRST_USER_FUNC..FIRST_USER_FUNC + MAX_USER_FUNCS).map(|id| user(id, "f"));
        let builtins = FunctionId::ALL.iter().map(|f| TracedFunction::builtin(*f));
        let mut names: BTreeSet<String> = builtins
            .chain(slots)
            .chain(calibration)
            .flat_map(|f| {
                Attach::ALL.into_iter().flat_map(move |m| {
                    let (entry, exit) = program_names(&f, m);
                    [entry, exit]
                })
            })
            .collect();
        names.extend([
            INTERVALS_PROGRAM.to_owned(),
            CLOCKS_PROGRAM.to_owned(),
            CALIB_TRIGGER.to_owned(),
            SESSION_SELFTEST_PROGRAM.to_owned(),
            FSESSION_SELFTEST_PROGRAM.to_owned(),
        ]);
        names.extend(floor_program_names());
        // The interrupt clock's, attached by `tracer::disturb::attach_irq_clock`.
        names.extend(
            damon_common::breakdown::IRQ_CLOCK_TRACEPOINTS
                .iter()
                .map(|(name, ..)| (*name).to_owned()),
        );
        names
    }

    #[test]
    fn program_names_per_function_and_mode() {
        let hot = TracedFunction::builtin(FunctionId::DamonHotScore);
        assert_eq!(
            program_names(&hot, Attach::Fentry),
            (
                "fentry_damon_hot_score".to_owned(),
                "fexit_damon_hot_score".to_owned()
            )
        );
        assert_eq!(
            program_names(&hot, Attach::Kprobe),
            (
                "kprobe_damon_hot_score".to_owned(),
                "kretprobe_damon_hot_score".to_owned()
            )
        );
        // User-named functions use their slot's generic programs, whatever the symbol.
        let slot = user(FIRST_USER_FUNC + 3, "vfs_read");
        assert_eq!(
            program_names(&slot, Attach::Fentry),
            ("fentry_u7".to_owned(), "fexit_u7".to_owned())
        );
        assert_eq!(
            program_names(&slot, Attach::Kprobe),
            ("kprobe_u7".to_owned(), "kretprobe_u7".to_owned())
        );
        // A session is one program, at both ends.
        assert_eq!(
            program_names(&hot, Attach::KprobeSession),
            (
                "ksession_damon_hot_score".to_owned(),
                "ksession_damon_hot_score".to_owned()
            )
        );
        assert_eq!(
            program_names(&slot, Attach::Fsession),
            ("fsession_u7".to_owned(), "fsession_u7".to_owned())
        );
        // A built-in id under another symbol is not the built-in function.
        let renamed = user(FunctionId::LockTimerBase as u32, "vfs_read");
        let id = FunctionId::LockTimerBase as u32;
        assert_eq!(
            program_names(&renamed, Attach::Fentry),
            (format!("fentry_u{id}"), format!("fexit_u{id}"))
        );
    }

    /// Each floor has its method's shape: one program at both ends exactly when the method
    /// times by cookie; every `--attach` value parses back.
    #[test]
    fn floors_follow_their_attach_methods_facts() {
        use damon_common::attach::Timing;
        for k in FloorKind::ALL {
            assert_eq!(FloorKind::parse(k.as_str()), Some(k));
            let (entry, exit) = floor_pair_names(k);
            let facts = k.attach().facts();
            assert_eq!(entry == exit, facts.timing == Timing::Cookie, "{k:?}");
            assert_eq!(
                facts.entry_program == facts.exit_program,
                entry == exit,
                "{k:?}"
            );
        }
    }

    #[test]
    fn every_program_the_loader_asks_for_is_in_the_object() {
        let obj = object();
        let wanted = names_the_loader_asks_for();
        let missing: Vec<&String> = wanted
            .iter()
            .filter(|n| !obj.programs.contains_key(n.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "not in the eBPF object: {missing:?}; it has {:?}",
            obj.programs.keys().collect::<BTreeSet<_>>()
        );
        // The inventory's list (`doctor` tells our programs by it) is the same set.
        let all: BTreeSet<String> = all_program_names().into_iter().collect();
        assert_eq!(all, wanted);
    }

    #[test]
    fn every_program_in_the_object_is_one_of_ours() {
        let all: BTreeSet<String> = all_program_names().into_iter().collect();
        let obj = object();
        let unknown: Vec<&String> = obj
            .programs
            .keys()
            .filter(|n| !all.contains(n.as_str()))
            .collect();
        assert!(
            unknown.is_empty(),
            "programs no name list knows: {unknown:?}"
        );
    }

    #[test]
    fn map_names_are_exactly_the_objects_maps() {
        let obj = object();
        let in_object: BTreeSet<&str> = obj
            .maps
            .iter()
            .filter(|(_, m)| {
                matches!(
                    m.section_kind(),
                    EbpfSectionKind::Maps | EbpfSectionKind::BtfMaps
                )
            })
            .map(|(n, _)| n.as_str())
            .collect();
        let ours: BTreeSet<&str> = MAP_NAMES.into_iter().collect();
        assert_eq!(ours, in_object);
    }

    #[test]
    fn every_global_the_loader_writes_is_in_the_object() {
        use damon_common::{
            GLOBAL_DESTS_NODE_ID_ARR_OFF, GLOBAL_DESTS_NR_OFF, GLOBAL_FILTER_CGROUP,
            GLOBAL_FILTER_TGID, GLOBAL_FILTER_TID, GLOBAL_HIST_WIDTH_NS, GLOBAL_PAGE_STRUCT_SIZE,
            GLOBAL_REGION_AGE_OFF, GLOBAL_REGION_NR_ACCESSES_OFF, GLOBAL_RING_WAKE_BYTES,
            GLOBAL_TRACE_MODE, GLOBAL_VMEMMAP_BASE_SYM, disturb,
        };
        let obj = object();
        let btf = obj.btf.as_ref().expect("the eBPF object has BTF");
        for global in [
            GLOBAL_RING_WAKE_BYTES,
            GLOBAL_TRACE_MODE,
            GLOBAL_HIST_WIDTH_NS,
            GLOBAL_REGION_NR_ACCESSES_OFF,
            GLOBAL_REGION_AGE_OFF,
            GLOBAL_DESTS_NODE_ID_ARR_OFF,
            GLOBAL_DESTS_NR_OFF,
            GLOBAL_VMEMMAP_BASE_SYM,
            GLOBAL_PAGE_STRUCT_SIZE,
            GLOBAL_FILTER_TGID,
            GLOBAL_FILTER_TID,
            GLOBAL_FILTER_CGROUP,
            disturb::GLOBAL_DISTURB_ON,
            disturb::GLOBAL_TASK_NVCSW_OFF,
            disturb::GLOBAL_TASK_NIVCSW_OFF,
            disturb::GLOBAL_PER_CPU_OFFSET_SYM,
            disturb::GLOBAL_KSTAT_IRQS_SUM,
            disturb::GLOBAL_KSTAT_SOFTIRQS,
            disturb::GLOBAL_KSTAT_SOFTIRQS_N,
            disturb::GLOBAL_IRQ_STAT_WORDS,
            disturb::GLOBAL_IRQ_STAT_N,
            damon_common::slow::GLOBAL_SLOW_NS,
            damon_common::breakdown::GLOBAL_BREAKDOWN_ON,
            damon_common::breakdown::GLOBAL_TASK_PID_OFF,
            damon_common::breakdown::GLOBAL_CPU_IRQTIME_TOTAL,
        ] {
            assert!(
                btf.id_by_type_name_kind(global, BtfKind::Var).is_ok(),
                "global {global} is not in the eBPF object"
            );
        }
    }
}
