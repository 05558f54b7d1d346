//! The tracer's lifecycle: loads the eBPF object, attaches every selected function, reads the
//! counters and histograms, collects the stamps of exited tasks, and detaches in the order that
//! keeps the call accounting exact.
pub mod disturb;
pub mod globals;
pub mod intervals;
pub mod kernel_maps;
pub mod ring;
pub mod slow;

use std::{
    collections::{BTreeMap, HashSet},
    time::Duration,
};

use anyhow::Context as _;
use aya::{
    Btf, Ebpf, EbpfLoader,
    maps::{HashMap as BpfHashMap, MapData, PerCpuArray, RingBuf},
    programs::FEntry,
};
use damon_common::{
    Counter, FunctionId, GLOBAL_HIST_WIDTH_NS, GLOBAL_TRACE_MODE, HistStats, MAP_COUNTERS,
    MAP_EVENTS, MAP_HIST, MAP_HIST_STATS, MAP_STAMPS, STAMP_DEPTH, StampStack, stamp_key_func,
    stamp_key_tid,
};
use globals::{field_offsets, stamp_map_entries};

use crate::{
    capture::{FunctionCounters, FunctionStatus, KernelDisturbed},
    probe::{
        facts::{KernelFacts, kernel::Kallsyms},
        loader::{
            attach::{attach_present, describe_error, program, unload},
            auto::resolve_auto,
            probe_log::{ProbeLog, ProbeLogLevel},
            programs::{CALIB_TRIGGER, CALIB_TRIGGER_TARGET, EBPF_OBJECT, program_names},
            session::links::{SessionCounts, SessionLinks, session_counters},
        },
    },
    timing,
    trace::{Attach, AttachChoice, ModeConfig, TracedFunction},
};

/// How long stopping waits for calls that entered before the entry probes went away.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// Loaded, attached probes. Dropping it detaches and unloads everything.
pub struct Tracer {
    bpf: Ebpf,
    /// The functions a session program times (`--attach kprobe-session | fsession`).
    sessions: SessionLinks,
    attached: Vec<(TracedFunction, Attach)>,
    statuses: Vec<FunctionStatus>,
    /// Boxed: kept small, the session lives in an enum next to the replay source.
    interval_hook: Box<crate::capture::IntervalHook>,
    args: Vec<crate::capture::ArgStatus>,
    disturbance: crate::capture::DisturbanceStatus,
    trace_mode: u32,
    /// State of [`Tracer::collect_stamps`]; `None` when tids cannot be checked here. Boxed, as
    /// `interval_hook`.
    stamp_gc: Option<Box<StampGc>>,
    /// Whether this kernel counts the kprobe runs it skips (Linux >= 6.7).
    kprobe_skips_counted: bool,
    /// Per function id, the kernel's skip counts (entry, exit) read just before each program
    /// was unloaded: after [`Tracer::detach`] the programs are gone, their counts stay here.
    final_skips: BTreeMap<u32, (Option<u64>, Option<u64>)>,
}

/// The entry or the exit program of a traced function.
#[derive(Debug, Clone, Copy)]
enum Side {
    Entry,
    Exit,
}

/// How often [`Tracer::collect_stamps`] looks at the stamp map.
const STAMP_COLLECTION: Duration = Duration::from_secs(1);

struct StampGc {
    /// When the stamp map was last looked at.
    last: std::time::Instant,
    /// Keys at depth 0 whose task was gone then.
    stale: HashSet<u64>,
}

pub struct LoadOptions {
    /// Built-in and user-named functions, each with its id.
    pub functions: Vec<TracedFunction>,
    pub attach: AttachChoice,
    pub ring_size: u32,
    /// The trace mode and the kernel histograms' bucket width.
    pub mode: ModeConfig,
    /// Whose calls are timed (written into the programs' globals).
    pub filter: crate::capture::TaskFilter,
    /// Which of the probes' diagnostics they log (`--debug-probes`).
    pub debug_probes: ProbeLogLevel,
    /// `record --slow`: the threshold in ns of a slow call, kept with its stack (stream mode);
    /// 0 = off.
    pub slow_ns: u64,
}

impl Tracer {
    /// Loads the object and attaches what it can. Functions that cannot be traced are reported
    /// in the statuses, not as errors; an error means nothing could be set up at all.
    pub fn load(opts: &LoadOptions) -> anyhow::Result<Tracer> {
        let kallsyms = Kallsyms::read().context("reading /proc/kallsyms")?;
        let btf = crate::probe::facts::sysfiles::aya_btf();
        let builtins: Vec<FunctionId> = opts
            .functions
            .iter()
            .filter_map(TracedFunction::as_builtin)
            .collect();
        let parsed = crate::probe::facts::btf::Btf::from_sys_fs();
        let offsets_phase = timing::phase("field offsets, disturbance counters");
        let (mut offsets, mut globals64, node_ranges, args) = field_offsets(&builtins, &parsed);
        let mut disturbance = crate::probe::tracer::disturb::counters(opts.mode, &parsed)
            .into_globals(&mut offsets, &mut globals64);
        drop(offsets_phase);
        let mut bpf = {
            let _t = timing::phase("object: ELF parsed, maps created (EbpfLoader::load)");
            load_object(opts, &offsets, &globals64, &disturbance, btf.as_deref())?
        };
        crate::probe::facts::folio_node::fill_node_pfns(&mut bpf, &node_ranges)?;
        {
            let _t = timing::phase("task clocks: sched_switch program loaded, attached");
            disturb::attach_clocks(&mut bpf, btf.as_deref(), &mut disturbance);
        }
        // Boundaries first, so that the first calls already fall inside an interval.
        let interval_hook = {
            let _t = timing::phase("interval hook: tracepoint program loaded, attached");
            Box::new(crate::probe::tracer::intervals::attach(&mut bpf))
        };
        let (attached, statuses, sessions) =
            attach_functions(&mut bpf, opts, &kallsyms, btf.as_deref());
        // Arguments of functions that are not traced here are not in the capture.
        let mut args = args;
        args.retain(|a| attached.iter().any(|(f, _)| f.symbol == a.function));
        for a in &mut args {
            let by_session = attached
                .iter()
                .any(|(f, m)| f.symbol == a.function && *m == Attach::KprobeSession);
            if by_session {
                crate::probe::loader::session::links::kprobe_session_args(a);
            }
        }
        Ok(Tracer {
            bpf,
            sessions,
            attached,
            statuses,
            interval_hook,
            args,
            disturbance,
            trace_mode: opts.mode.mode.bits(),
            stamp_gc: crate::probe::facts::kernel::in_initial_pid_namespace().then(|| {
                Box::new(StampGc {
                    last: std::time::Instant::now(),
                    stale: HashSet::new(),
                })
            }),
            kprobe_skips_counted: crate::probe::loader::skips::kernel_counts_kprobe_skips(
                &KernelFacts::get().identity().release,
            ),
            final_skips: BTreeMap::new(),
        })
    }

    /// Whether the records carry disturbance counts, and why not.
    pub fn disturbance(&self) -> &crate::capture::DisturbanceStatus {
        &self.disturbance
    }

    /// Which arguments the records carry, per traced function that has some.
    pub fn arg_statuses(&self) -> &[crate::capture::ArgStatus] {
        &self.args
    }

    /// The aggregation-interval hook and whether it is attached.
    pub fn interval_hook(&self) -> &crate::capture::IntervalHook {
        &self.interval_hook
    }

    /// Counters of the interval boundary markers, when the hook is attached.
    pub fn mark_counters(&self) -> Option<crate::capture::MarkCounters> {
        self.interval_hook
            .attached
            .then(|| crate::probe::tracer::intervals::counters(&self.bpf).ok())
            .flatten()
    }

    pub fn statuses(&self) -> &[FunctionStatus] {
        &self.statuses
    }

    pub fn any_attached(&self) -> bool {
        !self.attached.is_empty()
    }

    /// Starts reading the probes' log (`--debug-probes`); after every program is loaded.
    pub fn start_probe_log(&mut self) -> anyhow::Result<ProbeLog> {
        let names = self.attached.iter().map(|(f, _)| (f.id, f.symbol.clone()));
        ProbeLog::start(&mut self.bpf, names.collect())
    }

    /// Takes the ring buffer out of the object for the reader.
    pub fn take_ring(&mut self) -> anyhow::Result<RingBuf<MapData>> {
        let map = self
            .bpf
            .take_map(MAP_EVENTS)
            .context("ring buffer map missing from the eBPF object")?;
        RingBuf::try_from(map).context("EVENTS is not a ring buffer")
    }

    /// Detaches entry probes first, lets calls already inside the functions finish, then detaches
    /// exit probes: every call that entered is then either recorded, counted as dropped, or still
    /// holds a stamp (in flight).
    pub fn detach(&mut self) {
        // Boundaries off first: calls after the last boundary are counted as outside any
        // complete interval, never lost.
        crate::probe::tracer::intervals::detach(&mut self.bpf);
        self.unload_side(Side::Entry);
        // A session program's link carries both ends: it goes now, and a call still inside
        // its function stays in flight (no stamp to wait for).
        self.sessions.detach_all();
        // Calls can be long (a damon_migrate_pages call takes ~0.1 s under emulation): wait, up
        // to a bound, until no stamp is left, so they end as records rather than in flight.
        let deadline = std::time::Instant::now() + EXIT_GRACE;
        while self.open_calls() > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.unload_side(Side::Exit);
    }

    /// Unloads every attached function's entry (or exit) program, keeping the kernel's skip
    /// count of it as read just before.
    fn unload_side(&mut self, side: Side) {
        for (func, mode) in self.attached.iter().filter(|(_, m)| !m.is_session()) {
            let (entry, exit) = program_names(func, *mode);
            let name = match side {
                Side::Entry => entry,
                Side::Exit => exit,
            };
            let skipped = self.skipped_runs(&name, *mode);
            let saved = self.final_skips.entry(func.id).or_default();
            match side {
                Side::Entry => saved.0 = skipped,
                Side::Exit => saved.1 = skipped,
            }
            unload(&mut self.bpf, &name, *mode);
        }
    }

    /// Runs of program `name` the kernel skipped, by its own count (see `probe::loader::skips`);
    /// `None` when the program is not loaded or this kernel does not count them.
    fn skipped_runs(&self, name: &str, mode: Attach) -> Option<u64> {
        use std::os::fd::AsFd as _;
        let prog = self.bpf.program(name)?;
        let fd = prog.fd().ok()?.as_fd();
        match mode {
            Attach::Fentry => crate::probe::loader::skips::recursion_misses(fd),
            Attach::Kprobe if self.kprobe_skips_counted => {
                let in_prog = crate::probe::loader::skips::recursion_misses(fd)?;
                let in_link = crate::probe::loader::skips::prog_id(fd)
                    .and_then(crate::probe::loader::skips::kprobe_link_missed)
                    .unwrap_or(0);
                Some(in_prog + in_link)
            }
            Attach::Kprobe => None,
            // Counted by `SessionLinks`, per function.
            Attach::KprobeSession | Attach::Fsession => None,
        }
    }

    /// The kernel's skip counts of function `id`'s entry and exit programs: live while they are
    /// loaded, else as read when they were unloaded.
    fn skips(&self, func: &TracedFunction, mode: Attach) -> (Option<u64>, Option<u64>) {
        let (entry, exit) = program_names(func, mode);
        let saved = self.final_skips.get(&func.id).copied().unwrap_or_default();
        let live = |name: &str, saved: Option<u64>| match self.bpf.program(name) {
            Some(p) if p.fd().is_ok() => self.skipped_runs(name, mode),
            _ => saved,
        };
        (live(&entry, saved.0), live(&exit, saved.1))
    }

    /// Deletes the stamp entries of exited tasks; returns how many. Sessions call it on their
    /// timer; it looks at the map at most once per [`STAMP_COLLECTION`].
    ///
    /// The kernel keeps a task's entry when its depth returns to 0 (no insert/delete per call),
    /// so without this the map would fill with the entries of dead tasks in a long session and
    /// every later first call would be dropped as `StampFull`. An entry is deleted only when
    /// its depth is 0, its key is not an idle task's (those never exit), and its tid has had no
    /// `/proc/<tid>` at two collections in a row, its depth read again just before the delete.
    ///
    /// Why this keeps the accounting exact:
    /// - A depth-0 entry holds no open call: deleting it changes no count. In-flight calls
    ///   (the depth sum) and the detach grace wait read the same depths as before.
    /// - A dead task runs no program, so nothing uses its key. Two collections in a row (≥ 1 s
    ///   apart) rule out a task seen between its pid being freed and its last instructions
    ///   (an interrupt can still run there under its tid, for microseconds).
    /// - The one race left is pid reuse: a new task given the same tid, entering the function
    ///   between the last depth read and the delete (a few microseconds, two syscalls). The
    ///   kernel hands out pids cyclically, so a freed tid comes back only after the allocator
    ///   has gone round all of `pid_max` (32768 to 4194304); at a fork rate f, a given dead tid
    ///   is reused inside a window w with probability about f·w/pid_max (10 000 forks/s, 10 µs,
    ///   32768: 3·10⁻⁶ per collected entry), and the new task must also call the traced
    ///   function inside that window. If it happens, that one call loses its stamp: counted in
    ///   `calls` and as an orphan exit, not timed — visible, never silently wrong.
    /// - Only in the initial pid namespace (tids from the kernel are global, `/proc` must show
    ///   the same ones); elsewhere nothing is collected and a full map counts `StampFull`.
    pub fn collect_stamps(&mut self) -> anyhow::Result<usize> {
        let Some(gc) = self.stamp_gc.as_mut() else {
            return Ok(0);
        };
        if gc.last.elapsed() < STAMP_COLLECTION {
            return Ok(0);
        }
        gc.last = std::time::Instant::now();
        let stale = &mut gc.stale;
        let map = self.bpf.map_mut(MAP_STAMPS).context("stamp map missing")?;
        let mut stamps: BpfHashMap<_, u64, StampStack> = BpfHashMap::try_from(map)?;
        let mut gone = HashSet::new();
        for entry in stamps.iter() {
            let (key, stack) = entry?;
            if stack.depth == 0
                && let Some(tid) = stamp_key_tid(key)
                && !task_exists(tid)
            {
                gone.insert(key);
            }
        }
        let mut removed = 0;
        for &key in gone.intersection(stale) {
            let tid = stamp_key_tid(key).unwrap_or(0);
            if task_exists(tid) || !matches!(stamps.get(&key, 0), Ok(s) if s.depth == 0) {
                continue;
            }
            if stamps.remove(&key).is_ok() {
                removed += 1;
            }
        }
        *stale = gone;
        Ok(removed)
    }

    /// Calls entered and not yet exited (0 if the stamp map cannot be read).
    fn open_calls(&self) -> u64 {
        let Some(map) = self.bpf.map(MAP_STAMPS) else {
            return 0;
        };
        let Ok(stamps) = BpfHashMap::<_, u64, StampStack>::try_from(map) else {
            return 0;
        };
        stamps
            .iter()
            .filter_map(Result::ok)
            .map(|(_, s)| u64::from(s.depth))
            .sum()
    }

    /// Sums the per-CPU counters and counts the calls still holding an entry stamp.
    pub fn counters(&self) -> anyhow::Result<BTreeMap<u32, FunctionCounters>> {
        let counters: PerCpuArray<_, u64> =
            PerCpuArray::try_from(self.bpf.map(MAP_COUNTERS).context("counter map missing")?)?;
        // Kernel mode alone: exits do not bump `Emitted` (one per-CPU slot less per call); the
        // calls added to the histogram are the sum of its buckets, the same number.
        let kernel_only = self.trace_mode & damon_common::MODE_STREAM == 0;
        let mut out = BTreeMap::new();
        for (func, mode) in &self.attached {
            let id = func.id;
            let (skipped_entries, skipped_exits) = self.skips(func, *mode);
            let sum = |c: Counter| -> anyhow::Result<u64> {
                Ok(counters.get(&c.index(id), 0)?.iter().sum())
            };
            let calls = sum(Counter::Calls)?;
            let emitted = if kernel_only {
                self.histogram(id)?.0.count
            } else {
                sum(Counter::Emitted)?
            };
            let ring_full = sum(Counter::RingFull)?;
            if mode.is_session() {
                let c = session_counters(SessionCounts {
                    calls,
                    timed: emitted,
                    ring_full,
                    orphans: sum(Counter::OrphanExits)?,
                    misses: self.sessions.misses(id),
                    fsession: *mode == Attach::Fsession,
                });
                let filtered = sum(Counter::Filtered)?;
                out.insert(id, FunctionCounters { filtered, ..c });
                continue;
            }
            out.insert(
                id,
                FunctionCounters {
                    calls,
                    emitted,
                    ring_full,
                    stamp_full: sum(Counter::StampFull)?,
                    too_deep: sum(Counter::TooDeep)?,
                    orphan_exits: sum(Counter::OrphanExits)?,
                    in_flight: 0,
                    stale_entries: sum(Counter::StaleEntries)?,
                    skipped_entries,
                    skipped_exits,
                    filtered: sum(Counter::Filtered)?,
                },
            );
        }
        let stamps: BpfHashMap<_, u64, StampStack> =
            BpfHashMap::try_from(self.bpf.map(MAP_STAMPS).context("stamp map missing")?)?;
        for entry in stamps.iter() {
            let (key, stack) = entry?;
            if let Some(c) = out.get_mut(&stamp_key_func(key)) {
                c.in_flight += u64::from(stack.depth.min(STAMP_DEPTH as u32));
            }
        }
        Ok(out)
    }

    /// Per traced function id: the in-kernel histogram statistics summed over CPUs (count and
    /// sum added, min of the non-empty CPUs' minimums, max of maximums) and the bucket counts
    /// summed over CPUs (`HIST_BUCKETS` of them). Cumulative since load; empty unless the
    /// trace mode has [`damon_common::MODE_KERNEL`] (the maps are then not even sized).
    pub fn kernel_histograms(&self) -> anyhow::Result<BTreeMap<u32, (HistStats, Vec<u64>)>> {
        if self.trace_mode & damon_common::MODE_KERNEL == 0 {
            return Ok(BTreeMap::new());
        }
        let mut out = BTreeMap::new();
        for (func, _) in &self.attached {
            out.insert(func.id, self.histogram(func.id)?);
        }
        Ok(out)
    }

    /// Function `id`'s in-kernel histogram (`kernel_maps::histogram`).
    fn histogram(&self, id: u32) -> anyhow::Result<(HistStats, Vec<u64>)> {
        kernel_maps::histogram(&self.bpf, id)
    }

    /// Per traced function id: its disturbed calls, when the kernel counts them (kernel mode
    /// with disturbance measured; empty otherwise). Read after the histograms, for the reason
    /// `kernel_maps::disturbed` gives.
    pub fn kernel_disturbed(&self) -> anyhow::Result<BTreeMap<u32, KernelDisturbed>> {
        if self.trace_mode & damon_common::MODE_KERNEL == 0 || !self.disturbance.measured {
            return Ok(BTreeMap::new());
        }
        let ids = self.attached.iter().map(|(f, _)| f.id);
        ids.map(|id| Ok((id, kernel_maps::disturbed(&self.bpf, id)?)))
            .collect()
    }

    /// Loads (once) the never-attached `calib_trigger` program against
    /// [`CALIB_TRIGGER_TARGET`] and returns its fd, for `BPF_PROG_TEST_RUN`: each run makes the
    /// kernel call `bpf_fentry_test1..N` once each.
    #[allow(dead_code, reason = "used by calibration")]
    pub fn calibration_trigger(&mut self) -> anyhow::Result<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd as _;
        let prog: &mut FEntry = program(&mut self.bpf, CALIB_TRIGGER)
            .map_err(|e| anyhow::anyhow!("{CALIB_TRIGGER}: {}", describe_error(&e)))?;
        if prog.fd().is_err() {
            let btf =
                crate::probe::facts::sysfiles::aya_btf().context("reading the kernel's BTF")?;
            let _t = timing::phase(format_args!("verifier: {CALIB_TRIGGER} loaded"));
            prog.load(CALIB_TRIGGER_TARGET, &btf).map_err(|e| {
                anyhow::anyhow!(
                    "loading {CALIB_TRIGGER} against {CALIB_TRIGGER_TARGET}: {}",
                    describe_error(&e)
                )
            })?;
        }
        Ok(prog.fd()?.as_fd())
    }
}

/// Attaches each function of `opts` its way (`--attach`, or what auto picks); the attached
/// ones with their method, a status for each, and the session programs' links.
fn attach_functions(
    bpf: &mut Ebpf,
    opts: &LoadOptions,
    kallsyms: &Kallsyms,
    btf: Option<&Btf>,
) -> (
    Vec<(TracedFunction, Attach)>,
    Vec<FunctionStatus>,
    SessionLinks,
) {
    let mut attached = Vec::new();
    let mut statuses = Vec::new();
    let mut sessions = SessionLinks::default();
    let facts = {
        let _t = timing::phase("auto facts: preemption, kfuncs in BTF, fsession");
        let facts = KernelFacts::get();
        // Read here, as this phase.
        facts.preemption();
        facts.kprobe_session();
        facts.fsession();
        facts
    };
    let streams = opts.mode.mode.streams();
    for func in &opts.functions {
        let _t = timing::phase(format_args!("{}: attached", func.symbol));
        let (order, auto_note) = resolve_auto(opts.attach, facts, streams, func);
        let (state, detail) =
            attach_present(bpf, &mut sessions, kallsyms, func, &order, &auto_note, btf);
        if let Some(method) = state.attach() {
            attached.push((func.clone(), method));
        }
        statuses.push(FunctionStatus {
            name: func.symbol.clone(),
            id: func.id,
            attach: state,
            detail,
        });
    }
    sessions.attached_all();
    (attached, statuses, sessions)
}

/// Loads the eBPF object with the globals and map sizes of this session written into it (the
/// programs are loaded into the kernel later, one by one, as they are attached).
fn load_object(
    opts: &LoadOptions,
    offsets: &[(&'static str, u32)],
    globals64: &[(&'static str, u64)],
    disturbance: &crate::capture::DisturbanceStatus,
    btf: Option<&Btf>,
) -> anyhow::Result<Ebpf> {
    let hist_width = opts.mode.hist_width_ns.max(1);
    let trace_mode = opts.mode.mode.bits();
    // Batched wake-ups: the reader is woken when a sixteenth of the ring waits, and drains on
    // its own short timer (`RingReader`) in between. (Benchmarks compare with the kernel's
    // default, a wake-up whenever the reader has caught up: DAMON_TRACE_WAKE_EVERY_RECORD=1.)
    let wake_bytes = if std::env::var_os("DAMON_TRACE_WAKE_EVERY_RECORD").is_some() {
        0
    } else {
        u64::from(opts.ring_size / damon_common::RING_WAKE_DIVISOR)
    };
    let mut loader = EbpfLoader::new();
    loader.override_global(damon_common::GLOBAL_RING_WAKE_BYTES, &wake_bytes, true);
    loader.override_global(GLOBAL_TRACE_MODE, &trace_mode, true);
    loader.override_global(GLOBAL_HIST_WIDTH_NS, &hist_width, true);
    let slow_ns = slow::threshold(opts);
    slow::configure(&mut loader, &slow_ns);
    let filter = &opts.filter;
    let (tgid, tid) = (filter.tgid.unwrap_or(0), filter.tid.unwrap_or(0));
    let cgroup = filter.cgroup.as_ref().map_or(0, |c| c.id);
    loader.override_global(damon_common::GLOBAL_FILTER_TGID, &tgid, true);
    loader.override_global(damon_common::GLOBAL_FILTER_TID, &tid, true);
    loader.override_global(damon_common::GLOBAL_FILTER_CGROUP, &cgroup, true);
    crate::probe::loader::probe_log::configure(&mut loader, opts.debug_probes);
    for (global, off) in offsets {
        loader.override_global(global, off, true);
    }
    for (global, v) in globals64 {
        loader.override_global(global, v, true);
    }
    loader.map_max_entries(MAP_STAMPS, stamp_map_entries());
    if !opts.mode.mode.buckets_in_kernel() {
        // Stream mode never touches the histograms: one entry each, not ~70 KiB per CPU.
        loader.map_max_entries(MAP_HIST, 1);
        loader.map_max_entries(MAP_HIST_STATS, 1);
    }
    if !disturbance.breakdown {
        // No task clocks: one entry, not 16384.
        loader.map_max_entries(damon_common::breakdown::MAP_TASK_CLOCKS, 1);
    }
    if !opts.mode.mode.buckets_in_kernel() || !disturbance.measured {
        loader.map_max_entries(damon_common::disturb::MAP_DISTURBED_HIST, 1);
        loader.map_max_entries(damon_common::disturb::MAP_DISTURBED_STATS, 1);
    }
    loader
        .btf(btf)
        .map_max_entries(MAP_EVENTS, opts.ring_size)
        .load(EBPF_OBJECT)
        .context("creating the BPF maps (ring buffer, counters, stamps); run `damon-trace doctor`")
}

/// Whether task `tid` (global id) still exists: only a missing `/proc/<tid>` says no (any other
/// error keeps the task, and its stamp entry, alive).
fn task_exists(tid: u32) -> bool {
    match std::fs::symlink_metadata(format!("/proc/{tid}")) {
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
        Ok(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_exist_while_proc_shows_them() {
        assert!(task_exists(std::process::id()));
        // Above PID_MAX_LIMIT (4 194 304): never a task.
        assert!(!task_exists(u32::MAX));
    }
}
