//! Loads the eBPF object and attaches each selected function with fentry/fexit, falling back to
//! kprobe/kretprobe; detaches in the order that keeps the call accounting exact.
use std::{
    collections::{BTreeMap, HashSet},
    path::Path,
    time::Duration,
};

use anyhow::Context as _;
use aya::{
    Btf, Ebpf, EbpfLoader,
    maps::{HashMap as BpfHashMap, MapData, PerCpuArray, RingBuf},
    programs::{FEntry, FExit, KProbe, ProgramError},
};
use damon_common::{
    Counter, FunctionId, GLOBAL_HIST_WIDTH_NS, GLOBAL_TRACE_MODE, HIST_BUCKETS, HistStats,
    MAP_COUNTERS, MAP_EVENTS, MAP_HIST, MAP_HIST_STATS, MAP_STAMPS, STAMP_DEPTH, StampStack,
    stamp_key_func, stamp_key_tid,
};
use serde::Serialize;

use crate::{
    capture::{AttachState, FunctionCounters, FunctionStatus},
    probe::kernel::{Kallsyms, SymbolPresence, btf_has_function, kprobes_supported},
    trace::{AttachChoice, AttachMethod, ModeConfig, TracedFunction},
};

/// The compiled eBPF object, embedded so the binary is self-contained (also inside the VM).
static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/damon"));

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Fentry,
    Kprobe,
}

/// Program names in the eBPF object for one function and mode: (entry, exit).
fn program_names(func: &TracedFunction, mode: Mode) -> (String, String) {
    match (func.as_builtin(), mode) {
        (Some(f), Mode::Fentry) => (
            format!("fentry_{}", f.symbol()),
            format!("fexit_{}", f.symbol()),
        ),
        (Some(f), Mode::Kprobe) => (
            format!("kprobe_{}", f.symbol()),
            format!("kretprobe_{}", f.symbol()),
        ),
        (None, Mode::Fentry) => (
            format!("fentry_u{}", func.id),
            format!("fexit_u{}", func.id),
        ),
        (None, Mode::Kprobe) => (
            format!("kprobe_u{}", func.id),
            format!("kretprobe_u{}", func.id),
        ),
    }
}

/// The never-attached program that calibration runs with `BPF_PROG_TEST_RUN` (see the eBPF
/// object), and the kernel function it is loaded against.
pub const CALIB_TRIGGER: &str = "calib_trigger";
#[allow(dead_code, reason = "used by calibration")]
pub const CALIB_TRIGGER_TARGET: &str = "bpf_fentry_test1";

/// How long stopping waits for calls that entered before the entry probes went away.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// Loaded, attached probes. Dropping it detaches and unloads everything.
pub struct Tracer {
    bpf: Ebpf,
    attached: Vec<(TracedFunction, Mode)>,
    statuses: Vec<FunctionStatus>,
    /// Boxed: kept small, the session lives in an enum next to the replay source.
    interval_hook: Box<crate::capture::IntervalHook>,
    args: Vec<crate::capture::ArgStatus>,
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
}

/// Explains a program load/attach error with its errno and the likely reason.
pub fn describe_error(err: &ProgramError) -> String {
    let io = match err {
        ProgramError::LoadError {
            io_error,
            verifier_log,
        } => {
            let log = verifier_log.to_string();
            // The verifier's reason comes before its closing statistics: show the last lines
            // that are not statistics, then the statistics.
            let is_stats = |l: &&str| {
                l.starts_with("verification time")
                    || l.starts_with("processed ")
                    || l.starts_with("stack depth")
            };
            let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
            let reason: Vec<&str> = lines.iter().copied().filter(|l| !is_stats(l)).collect();
            let mut tail: Vec<&str> = reason[reason.len().saturating_sub(2)..].to_vec();
            tail.extend(lines.iter().copied().filter(is_stats));
            if !tail.is_empty() && io_error.raw_os_error() != Some(libc::EPERM) {
                return format!(
                    "verifier rejected the program ({io_error}): {}",
                    tail.join(" | ")
                );
            }
            io_error
        }
        ProgramError::SyscallError(e) => &e.io_error,
        other => {
            // Keep the whole chain: aya's top-level message alone can be just a path.
            let mut msg = other.to_string();
            let mut source = std::error::Error::source(other);
            while let Some(s) = source {
                msg.push_str(": ");
                msg.push_str(&s.to_string());
                source = s.source();
            }
            return msg;
        }
    };
    let hint = match io.raw_os_error() {
        Some(libc::EPERM) => {
            " — the kernel refused: lockdown or another security policy, or missing CAP_BPF/CAP_PERFMON"
        }
        Some(libc::ENOENT) => " — the kernel has no such attach point",
        Some(libc::ESRCH) => " — function not found in the kernel's BTF",
        Some(libc::EINVAL) => " — the kernel rejected the attach type or target",
        Some(libc::EBUSY) => " — the function is already attached by too many programs",
        Some(ENOTSUPP) => " — not supported by this kernel",
        _ => "",
    };
    format!("{io}{hint}")
}

/// Test knob: the environment variable that sets the stamp map's size (see
/// [`stamp_map_entries`]).
pub const STAMP_MAP_ENTRIES_ENV: &str = "DAMON_TRACE_MAX_IN_FLIGHT";

/// Entries of the stamp map (one per task and traced function that has called it):
/// [`damon_common::MAX_IN_FLIGHT`], or `$DAMON_TRACE_MAX_IN_FLIGHT` when that is a positive
/// number. A test knob, not a user option: a map small enough to fill lets a guest test drive
/// the `stamp_full` drop path with a handful of tasks (`xtask/tests/vm_drops.rs`). The size
/// is not stored in the capture: the drop warning names the size of the process that prints it.
pub fn stamp_map_entries() -> u32 {
    std::env::var(STAMP_MAP_ENTRIES_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(damon_common::MAX_IN_FLIGHT)
}

/// Kernel-internal ENOTSUPP, which leaks to userspace from some BPF paths.
const ENOTSUPP: i32 = 524;

impl Tracer {
    /// Loads the object and attaches what it can. Functions that cannot be traced are reported
    /// in the statuses, not as errors; an error means nothing could be set up at all.
    pub fn load(opts: &LoadOptions) -> anyhow::Result<Tracer> {
        let kallsyms = Kallsyms::read().context("reading /proc/kallsyms")?;
        let btf = Btf::from_sys_fs().ok();
        let builtins: Vec<FunctionId> = opts
            .functions
            .iter()
            .filter_map(TracedFunction::as_builtin)
            .collect();
        let (offsets, globals64, node_ranges, args) = field_offsets(&builtins);
        let hist_width = opts.mode.hist_width_ns.max(1);
        // Batched wake-ups: the reader is woken when a sixteenth of the ring waits, and
        // drains on its own short timer (`RingReader`) in between.
        // (Benchmarks compare with the kernel's default, a wake-up whenever the reader has
        // caught up, by setting DAMON_TRACE_WAKE_EVERY_RECORD=1.)
        let wake_bytes = if std::env::var_os("DAMON_TRACE_WAKE_EVERY_RECORD").is_some() {
            0
        } else {
            u64::from(opts.ring_size / damon_common::RING_WAKE_DIVISOR)
        };
        let mut loader = EbpfLoader::new();
        loader.override_global(damon_common::GLOBAL_RING_WAKE_BYTES, &wake_bytes, true);
        let trace_mode = opts.mode.mode.bits();
        loader.override_global(GLOBAL_TRACE_MODE, &trace_mode, true);
        loader.override_global(GLOBAL_HIST_WIDTH_NS, &hist_width, true);
        for (global, off) in &offsets {
            loader.override_global(global, off, true);
        }
        for (global, v) in &globals64 {
            loader.override_global(global, v, true);
        }
        loader.map_max_entries(MAP_STAMPS, stamp_map_entries());
        if !opts.mode.mode.buckets_in_kernel() {
            // Stream mode never touches the histograms: one entry each instead of ~70 KiB per
            // CPU.
            loader.map_max_entries(MAP_HIST, 1);
            loader.map_max_entries(MAP_HIST_STATS, 1);
        }
        let mut bpf = loader
            .btf(btf.as_ref())
            .map_max_entries(MAP_EVENTS, opts.ring_size)
            .load(EBPF_OBJECT)
            .context(
                "creating the BPF maps (ring buffer, counters, stamps); run `damon-trace doctor`",
            )?;
        if !node_ranges.is_empty() {
            let mut map: aya::maps::Array<_, damon_common::NodePfnRange> =
                aya::maps::Array::try_from(
                    bpf.map_mut(damon_common::MAP_NODE_PFNS)
                        .context("the node pfn map is missing from the eBPF object")?,
                )?;
            for (i, r) in node_ranges.iter().enumerate() {
                map.set(i as u32, r, 0)
                    .context("filling the node pfn map")?;
            }
        }
        // Boundaries first, so that the first calls already fall inside an interval.
        let interval_hook = Box::new(crate::probe::intervals::attach(&mut bpf));
        let mut attached = Vec::new();
        let mut statuses = Vec::new();
        let (choice, auto_note) = resolve_auto(opts.attach);
        for func in &opts.functions {
            let (state, detail) = match kallsyms.presence(&func.symbol) {
                SymbolPresence::Absent => (
                    AttachState::Missing,
                    Some(
                        "not in /proc/kallsyms: this kernel does not have the function".to_owned(),
                    ),
                ),
                SymbolPresence::ClonesOnly(c) => (
                    AttachState::Inlined,
                    Some(format!(
                        "only compiler clones exist ({}); the plain function was inlined{}",
                        c.join(", "),
                        if func.as_builtin().is_none() {
                            format!("; trace a clone with --func {} (kprobe)", c[0])
                        } else {
                            String::new()
                        }
                    )),
                ),
                SymbolPresence::Present => {
                    let (state, detail) = attach_one(&mut bpf, func, choice, btf.as_ref());
                    let detail = match (&auto_note, state) {
                        (Some(note), AttachState::Kprobe) if detail.is_none() => Some(note.clone()),
                        _ => detail,
                    };
                    (state, detail)
                }
            };
            match state {
                AttachState::Fentry => attached.push((func.clone(), Mode::Fentry)),
                AttachState::Kprobe => attached.push((func.clone(), Mode::Kprobe)),
                _ => {}
            }
            statuses.push(FunctionStatus {
                name: func.symbol.clone(),
                id: func.id,
                attach: state,
                detail,
            });
        }
        // Arguments of functions that are not traced here are not in the capture.
        let mut args = args;
        args.retain(|a| attached.iter().any(|(f, _)| f.symbol == a.function));
        Ok(Tracer {
            bpf,
            attached,
            statuses,
            interval_hook,
            args,
            trace_mode,
            stamp_gc: in_initial_pid_namespace().then(|| {
                Box::new(StampGc {
                    last: std::time::Instant::now(),
                    stale: HashSet::new(),
                })
            }),
            kprobe_skips_counted: crate::probe::skips::kernel_counts_kprobe_skips(
                &crate::probe::kernel::KernelIdentity::read().release,
            ),
            final_skips: BTreeMap::new(),
        })
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
            .then(|| crate::probe::intervals::counters(&self.bpf).ok())
            .flatten()
    }

    pub fn statuses(&self) -> &[FunctionStatus] {
        &self.statuses
    }

    pub fn any_attached(&self) -> bool {
        !self.attached.is_empty()
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
        crate::probe::intervals::detach(&mut self.bpf);
        for (func, mode) in &self.attached {
            let (entry, _) = program_names(func, *mode);
            let skipped = self.skipped_runs(&entry, *mode);
            self.final_skips.entry(func.id).or_default().0 = skipped;
            unload(&mut self.bpf, &entry, *mode);
        }
        // Calls can be long (a damon_migrate_pages call takes ~0.1 s under emulation): wait, up
        // to a bound, until no stamp is left, so they end as records rather than in flight.
        let deadline = std::time::Instant::now() + EXIT_GRACE;
        while self.open_calls() > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        for (func, mode) in &self.attached {
            let (_, exit) = program_names(func, *mode);
            let skipped = self.skipped_runs(&exit, *mode);
            self.final_skips.entry(func.id).or_default().1 = skipped;
            unload(&mut self.bpf, &exit, *mode);
        }
    }

    /// Runs of program `name` the kernel skipped, by its own count (see `probe::skips`);
    /// `None` when the program is not loaded or this kernel does not count them.
    fn skipped_runs(&self, name: &str, mode: Mode) -> Option<u64> {
        use std::os::fd::AsFd as _;
        let prog = self.bpf.program(name)?;
        let fd = prog.fd().ok()?.as_fd();
        match mode {
            Mode::Fentry => crate::probe::skips::recursion_misses(fd),
            Mode::Kprobe if self.kprobe_skips_counted => {
                let in_prog = crate::probe::skips::recursion_misses(fd)?;
                let in_link = crate::probe::skips::prog_id(fd)
                    .and_then(crate::probe::skips::kprobe_link_missed)
                    .unwrap_or(0);
                Some(in_prog + in_link)
            }
            Mode::Kprobe => None,
        }
    }

    /// The kernel's skip counts of function `id`'s entry and exit programs: live while they are
    /// loaded, else as read when they were unloaded.
    fn skips(&self, func: &TracedFunction, mode: Mode) -> (Option<u64>, Option<u64>) {
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
        // calls added to the histogram are its count, the same number.
        let hist_stats: Option<PerCpuArray<_, HistStats>> =
            if self.trace_mode & damon_common::MODE_STREAM == 0 {
                Some(PerCpuArray::try_from(
                    self.bpf
                        .map(MAP_HIST_STATS)
                        .context("histogram statistics map missing")?,
                )?)
            } else {
                None
            };
        let mut out = BTreeMap::new();
        for (func, mode) in &self.attached {
            let id = func.id;
            let (skipped_entries, skipped_exits) = self.skips(func, *mode);
            let sum = |c: Counter| -> anyhow::Result<u64> {
                Ok(counters.get(&c.index(id), 0)?.iter().sum())
            };
            let calls = sum(Counter::Calls)?;
            let emitted = match &hist_stats {
                Some(stats) => stats.get(&id, 0)?.iter().map(|s| s.count).sum(),
                None => sum(Counter::Emitted)?,
            };
            out.insert(
                id,
                FunctionCounters {
                    calls,
                    emitted,
                    ring_full: sum(Counter::RingFull)?,
                    stamp_full: sum(Counter::StampFull)?,
                    too_deep: sum(Counter::TooDeep)?,
                    orphan_exits: sum(Counter::OrphanExits)?,
                    in_flight: 0,
                    stale_entries: sum(Counter::StaleEntries)?,
                    skipped_entries,
                    skipped_exits,
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
        let stats: PerCpuArray<_, HistStats> = PerCpuArray::try_from(
            self.bpf
                .map(MAP_HIST_STATS)
                .context("histogram statistics map missing")?,
        )?;
        let hist: PerCpuArray<_, u64> =
            PerCpuArray::try_from(self.bpf.map(MAP_HIST).context("histogram map missing")?)?;
        let mut out = BTreeMap::new();
        for (func, _) in &self.attached {
            let id = func.id;
            let per_cpu = stats.get(&id, 0)?;
            let total = sum_stats(per_cpu.iter());
            let mut buckets = Vec::with_capacity(HIST_BUCKETS as usize);
            for b in 0..HIST_BUCKETS {
                buckets.push(hist.get(&(id * HIST_BUCKETS + b), 0)?.iter().sum());
            }
            out.insert(id, (total, buckets));
        }
        Ok(out)
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
            let btf = Btf::from_sys_fs().context("reading the kernel's BTF")?;
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

/// Per-CPU [`HistStats`] summed: counts and sums added, min over CPUs that saw a call, max.
pub fn sum_stats<'a>(per_cpu: impl Iterator<Item = &'a HistStats>) -> HistStats {
    let mut total = HistStats::default();
    for s in per_cpu {
        if s.count == 0 {
            continue;
        }
        total.min_ns = if total.count == 0 {
            s.min_ns
        } else {
            total.min_ns.min(s.min_ns)
        };
        total.count += s.count;
        total.sum_ns += s.sum_ns;
        total.max_ns = total.max_ns.max(s.max_ns);
    }
    total
}

/// Whether task `tid` (global id) still exists: only a missing `/proc/<tid>` says no (any other
/// error keeps the task, and its stamp entry, alive).
fn task_exists(tid: u32) -> bool {
    match std::fs::symlink_metadata(format!("/proc/{tid}")) {
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
        Ok(_) => true,
    }
}

/// Whether this process sees the initial pid namespace, whose ids are the ones the kernel
/// programs record (`bpf_get_current_pid_tgid`); its `/proc/self/ns/pid` inode is the fixed
/// `PROC_PID_INIT_INO` (0xEFFFFFFC).
fn in_initial_pid_namespace() -> bool {
    std::fs::read_link("/proc/self/ns/pid").is_ok_and(|l| l.as_os_str() == "pid:[4026531836]")
}

fn unload(bpf: &mut Ebpf, name: &str, mode: Mode) {
    let Some(prog) = bpf.program_mut(name) else {
        return;
    };
    // Unloading detaches the program's links; errors here leave nothing we could retry.
    let _ = match mode {
        Mode::Fentry => match <&mut FEntry>::try_from(&mut *prog) {
            Ok(p) => p.unload(),
            Err(_) => <&mut FExit>::try_from(prog).and_then(FExit::unload),
        },
        Mode::Kprobe => <&mut KProbe>::try_from(prog).and_then(KProbe::unload),
    };
}

/// What `--attach auto` means on the running kernel: fentry/fexit first where probes cannot be
/// preempted; kprobe first where they can (there the kernel skips a fentry/fexit run on a CPU
/// while another task is preempted inside the same probe, so calls go uncounted or untimed
/// under contention, while kprobe probes run with preemption disabled). The note says why, for
/// the function's attach detail.
fn resolve_auto(choice: AttachChoice) -> (AttachOrder, Option<String>) {
    match choice {
        AttachChoice::Only(AttachMethod::Fentry) => return (AttachOrder::FentryOnly, None),
        AttachChoice::Only(AttachMethod::Kprobe) => return (AttachOrder::KprobeOnly, None),
        AttachChoice::Auto => {}
    }
    let p = crate::probe::kernel::Preemption::read();
    if p.preempts_trampolines() {
        (
            AttachOrder::KprobeThenFentry,
            Some(format!(
                "kprobe chosen by --attach auto: the kernel is preemptible ({}), where \
                 fentry/fexit runs are skipped while a task is preempted inside them; \
                 --attach fentry to override",
                p.model.as_deref().unwrap_or("dynamic, model unknown")
            )),
        )
    } else {
        (AttachOrder::FentryThenKprobe, None)
    }
}

/// Which probe pairs to try for a function, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AttachOrder {
    FentryOnly,
    KprobeOnly,
    FentryThenKprobe,
    KprobeThenFentry,
}

/// Attaches one function according to the user's choice; returns the state and, for a fallback
/// or failure, why.
fn attach_one(
    bpf: &mut Ebpf,
    func: &TracedFunction,
    order: AttachOrder,
    btf: Option<&Btf>,
) -> (AttachState, Option<String>) {
    let try_fentry = |bpf: &mut Ebpf| match btf {
        None => Err("no kernel BTF at /sys/kernel/btf/vmlinux".to_owned()),
        Some(btf) if !btf_has_function(btf, &func.symbol) => {
            Err("function not in the kernel's BTF".to_owned())
        }
        Some(btf) => attach_fentry(bpf, func, btf).map_err(|e| fentry_failure(&e, &func.symbol)),
    };
    let try_kprobe =
        |bpf: &mut Ebpf| attach_kprobe(bpf, func).map_err(|e| kprobe_failure(&e, &func.symbol));
    let (first, second) = match order {
        AttachOrder::FentryOnly => (Mode::Fentry, None),
        AttachOrder::KprobeOnly => (Mode::Kprobe, None),
        AttachOrder::FentryThenKprobe => (Mode::Fentry, Some(Mode::Kprobe)),
        AttachOrder::KprobeThenFentry => (Mode::Kprobe, Some(Mode::Fentry)),
    };
    let attempt = |mode: Mode, bpf: &mut Ebpf| match mode {
        Mode::Fentry => try_fentry(bpf).map(|()| AttachState::Fentry),
        Mode::Kprobe => try_kprobe(bpf).map(|()| AttachState::Kprobe),
    };
    let pair = |mode: Mode| match mode {
        Mode::Fentry => "fentry/fexit",
        Mode::Kprobe => "kprobe/kretprobe",
    };
    let first_err = match attempt(first, bpf) {
        Ok(state) => return (state, None),
        Err(e) => e,
    };
    let Some(second) = second else {
        return (
            AttachState::Failed,
            Some(format!("{}: {first_err}", pair(first))),
        );
    };
    match attempt(second, bpf) {
        Ok(state) => (
            state,
            Some(format!(
                "{} failed ({first_err}); fell back to {}",
                pair(first),
                match second {
                    Mode::Fentry => "fentry",
                    Mode::Kprobe => "kprobe",
                }
            )),
        ),
        Err(e) => (
            AttachState::Failed,
            Some(format!(
                "{}: {first_err}; {}: {e}",
                pair(first),
                pair(second)
            )),
        ),
    }
}

/// Whether ftrace can patch `symbol` (`None`: its list is unreadable). Read only after a
/// failure: the list is long.
fn in_ftrace(symbol: &str) -> Option<bool> {
    crate::probe::kernel::ftrace_functions()
        .ok()
        .map(|set| set.contains(symbol))
}

/// The errno alone, without [`describe_error`]'s generic guess.
fn errno_only(err: &ProgramError) -> String {
    let d = describe_error(err);
    d.split(" — ").next().unwrap_or(&d).to_owned()
}

/// Why fentry refused `symbol`: the kernel's facts when they explain it (the function is not
/// one ftrace can patch: `notrace`, `noinstr`, ...), else the errno and its usual cause.
fn fentry_failure(err: &ProgramError, symbol: &str) -> String {
    match in_ftrace(symbol) {
        Some(false) => format!(
            "{} — not in available_filter_functions: the function is notrace or noinstr, which \
             fentry cannot attach to",
            errno_only(err)
        ),
        _ => describe_error(err),
    }
}

/// Why kprobes refused `symbol`: on the kernel's kprobe blacklist, or (EINVAL on a function
/// ftrace cannot patch either) most likely `noinstr` code, which kprobes refuse.
fn kprobe_failure(err: &ProgramError, symbol: &str) -> String {
    if crate::probe::kernel::kprobe_blacklist().is_some_and(|l| l.contains(symbol)) {
        return format!("{} — on the kernel's kprobe blacklist", errno_only(err));
    }
    let einval = describe_error(err).contains(&format!("os error {}", libc::EINVAL));
    if einval && in_ftrace(symbol) == Some(false) {
        return format!(
            "{} — the function is not in available_filter_functions either: most likely \
             noinstr code, which kprobes refuse",
            errno_only(err)
        );
    }
    describe_error(err)
}

fn program<'a, T>(bpf: &'a mut Ebpf, name: &str) -> Result<&'a mut T, ProgramError>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program, Error = ProgramError>,
{
    let prog = bpf
        .program_mut(name)
        .ok_or_else(|| ProgramError::InvalidName {
            name: name.to_owned(),
        })?;
    prog.try_into()
}

/// Exit first, then entry: a call that starts while the slow attach runs then either has both
/// probes or only the exit (counted as an orphan), never an entry without its exit.
fn attach_fentry(bpf: &mut Ebpf, func: &TracedFunction, btf: &Btf) -> Result<(), ProgramError> {
    let (entry, exit) = program_names(func, Mode::Fentry);
    let attached = (|| {
        let fexit: &mut FExit = program(bpf, &exit)?;
        fexit.load(&func.symbol, btf)?;
        fexit.attach()?;
        let fentry: &mut FEntry = program(bpf, &entry)?;
        fentry.load(&func.symbol, btf)?;
        fentry.attach().map(|_| ())
    })();
    if attached.is_err() {
        unload_pair(bpf, func, Mode::Fentry);
    }
    attached
}

/// Same order as [`attach_fentry`].
fn attach_kprobe(bpf: &mut Ebpf, func: &TracedFunction) -> Result<(), ProgramError> {
    let (entry, exit) = program_names(func, Mode::Kprobe);
    let attached = (|| {
        let kret: &mut KProbe = program(bpf, &exit)?;
        kret.load()?;
        kret.attach(func.symbol.as_str(), 0)?;
        let kprobe: &mut KProbe = program(bpf, &entry)?;
        kprobe.load()?;
        kprobe.attach(func.symbol.as_str(), 0).map(|_| ())
    })();
    if attached.is_err() {
        unload_pair(bpf, func, Mode::Kprobe);
    }
    attached
}

/// What really attaching one function's probe pairs gave (for `doctor`).
#[derive(Debug, Clone)]
pub struct ProbeTrial {
    pub func: TracedFunction,
    pub in_btf: bool,
    /// "ok" or the error.
    pub fentry: String,
    pub kprobe: String,
}

/// Attaches and immediately detaches each function's fentry and kprobe pairs, so the diagnosis
/// reports what the kernel really allows rather than a guess.
pub fn try_each(functions: &[TracedFunction]) -> Vec<ProbeTrial> {
    let btf = Btf::from_sys_fs().ok();
    let mut loaded = EbpfLoader::new()
        .btf(btf.as_ref())
        .map_max_entries(MAP_EVENTS, 4096)
        .load(EBPF_OBJECT)
        .map_err(|e| format!("creating BPF maps failed: {e}"));
    let kallsyms = Kallsyms::read().unwrap_or_default();
    let mut trials = Vec::new();
    for func in functions {
        let in_btf = btf
            .as_ref()
            .is_some_and(|b| btf_has_function(b, &func.symbol));
        let present = kallsyms.presence(&func.symbol) == SymbolPresence::Present;
        let (fentry, kprobe) = match (&mut loaded, present) {
            (Err(e), _) => (e.clone(), e.clone()),
            (Ok(_), false) => {
                let why = match kallsyms.presence(&func.symbol) {
                    SymbolPresence::ClonesOnly(c) => format!(
                        "inlined: only compiler clones exist ({}); a clone can be traced by \
                         its full name with kprobes",
                        c.join(", ")
                    ),
                    _ => match kallsyms.closest(&func.symbol) {
                        Some(c) => format!("function not in /proc/kallsyms; did you mean `{c}`?"),
                        None => "function not in /proc/kallsyms".to_owned(),
                    },
                };
                (why.clone(), why)
            }
            (Ok(bpf), true) => {
                let fentry = match &btf {
                    None => "no kernel BTF".to_owned(),
                    Some(_) if !in_btf => "function not in the kernel's BTF".to_owned(),
                    Some(b) => match attach_fentry(bpf, func, b) {
                        Ok(()) => "ok".to_owned(),
                        Err(e) => fentry_failure(&e, &func.symbol),
                    },
                };
                unload_pair(bpf, func, Mode::Fentry);
                let kprobe = if kprobes_supported(&kallsyms) {
                    let k = match attach_kprobe(bpf, func) {
                        Ok(()) => "ok".to_owned(),
                        Err(e) => kprobe_failure(&e, &func.symbol),
                    };
                    unload_pair(bpf, func, Mode::Kprobe);
                    k
                } else {
                    "kernel has no kprobes (CONFIG_KPROBES off)".to_owned()
                };
                (fentry, kprobe)
            }
        };
        trials.push(ProbeTrial {
            func: func.clone(),
            in_btf,
            fentry,
            kprobe,
        });
    }
    trials
}

fn unload_pair(bpf: &mut Ebpf, func: &TracedFunction, mode: Mode) {
    let (entry, exit) = program_names(func, mode);
    unload(bpf, &entry, mode);
    unload(bpf, &exit, mode);
}

/// The kernel keeps this many characters of a program or map name (BPF_OBJ_NAME_LEN - 1).
const KERNEL_NAME_LEN: usize = 15;

/// Program names of ours, as the kernel shows them (truncated).
fn our_program_names() -> Vec<String> {
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
            let (a, b) = program_names(&f, Mode::Fentry);
            let (c, d) = program_names(&f, Mode::Kprobe);
            [a, b, c, d]
        })
        .chain([
            super::intervals::PROGRAM.to_owned(),
            CALIB_TRIGGER.to_owned(),
        ])
        .map(|n| n.chars().take(KERNEL_NAME_LEN).collect())
        .collect()
}

/// Map names of ours, as the kernel shows them (truncated).
fn our_map_names() -> Vec<String> {
    [
        MAP_EVENTS,
        MAP_COUNTERS,
        MAP_STAMPS,
        "AGGR_LAST",
        damon_common::MAP_NODE_PFNS,
        MAP_HIST,
        MAP_HIST_STATS,
    ]
    .iter()
    .map(|n| n.chars().take(KERNEL_NAME_LEN).collect())
    .collect()
}

/// One BPF program, map or link the kernel holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BpfObject {
    pub id: u32,
    /// Kernel type, lower case without prefix: programs `tracing`, `kprobe`; maps `ringbuf`,
    /// `percpuarray`, `hash`; links `tracing`, `perfevent`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Programs and maps: the (truncated) name; links have none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Links: the program they attach.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program_id: Option<u32>,
    /// Has the name of one of damon-trace's programs or maps, or links one of those programs.
    pub ours: bool,
}

/// Every BPF program, map and link in the kernel (all processes, not only ours), read with
/// BPF_{PROG,MAP,LINK}_GET_NEXT_ID; the ground truth for "leaves no trace".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BpfObjects {
    pub programs: Vec<BpfObject>,
    pub maps: Vec<BpfObject>,
    pub links: Vec<BpfObject>,
    /// Why (part of) the listing is missing, e.g. EPERM without CAP_SYS_ADMIN.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl BpfObjects {
    /// Ours only, programs then maps then links, for messages: `program NAME (id N, TYPE)`.
    pub fn ours(&self) -> Vec<String> {
        let describe = |what: &str, o: &BpfObject| match (&o.name, o.program_id) {
            (Some(n), _) => format!("{what} {n} (id {}, {})", o.id, o.kind),
            (None, Some(p)) => format!("{what} {} of program {p} ({})", o.id, o.kind),
            (None, None) => format!("{what} {} ({})", o.id, o.kind),
        };
        let pick = |what: &'static str, v: &'_ [BpfObject]| {
            v.iter()
                .filter(|o| o.ours)
                .map(|o| describe(what, o))
                .collect::<Vec<_>>()
        };
        let mut out = pick("program", &self.programs);
        out.extend(pick("map", &self.maps));
        out.extend(pick("link", &self.links));
        out
    }
}

/// Lower-case type name without the kernel's prefix (`BPF_PROG_TYPE_TRACING` → `tracing`,
/// `PerCpuArray` → `percpuarray`).
fn type_name(debug: String, prefix: &str) -> String {
    debug
        .strip_prefix(prefix)
        .unwrap_or(&debug)
        .to_ascii_lowercase()
}

fn kernel_name(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Lists every BPF object the kernel holds. Uses the raw names (no aya feature probing, which
/// would itself load programs and maps while we list). An object freed between "next id" and
/// "open by id" (ENOENT) is skipped; any other error is kept in `error`.
pub fn list_bpf_objects() -> BpfObjects {
    let mut out = BpfObjects::default();
    let mut errors: Vec<String> = Vec::new();
    let mut note = |what: &str, e: &dyn std::error::Error| {
        let mut msg = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            msg.push_str(": ");
            msg.push_str(&s.to_string());
            source = s.source();
        }
        if !msg.contains("No such file or directory") {
            errors.push(format!("listing {what}: {msg}"));
        }
    };
    let prog_names = our_program_names();
    for p in aya::programs::loaded_programs() {
        match p {
            Ok(p) => {
                let name = kernel_name(p.name());
                out.programs.push(BpfObject {
                    id: p.id(),
                    kind: type_name(format!("{:?}", p.program_type()), "BPF_PROG_TYPE_"),
                    ours: prog_names.contains(&name),
                    name: Some(name),
                    program_id: None,
                });
            }
            Err(e) => note("programs", &e),
        }
    }
    let map_names = our_map_names();
    for m in aya::maps::loaded_maps() {
        match m {
            Ok(m) => {
                let name = kernel_name(m.name());
                let kind = m.map_type().map_or_else(
                    |_| "unknown".to_owned(),
                    |t| type_name(format!("{t:?}"), ""),
                );
                out.maps.push(BpfObject {
                    id: m.id(),
                    kind,
                    ours: map_names.contains(&name),
                    name: Some(name),
                    program_id: None,
                });
            }
            Err(e) => note("maps", &e),
        }
    }
    for l in aya::programs::loaded_links() {
        match l {
            Ok(l) => {
                let prog = l.program_id();
                let kind = l.link_type().map_or_else(
                    |_| "unknown".to_owned(),
                    |t| type_name(format!("{t:?}"), ""),
                );
                out.links.push(BpfObject {
                    id: l.id(),
                    kind,
                    name: None,
                    program_id: Some(prog),
                    ours: out.programs.iter().any(|p| p.id == prog && p.ours),
                });
            }
            Err(e) => note("links", &e),
        }
    }
    errors.dedup();
    if !errors.is_empty() {
        out.error = Some(errors.join("; "));
    }
    out
}

/// What [`field_offsets`] gives the loader: `u32` offsets, `u64` globals, the node pfn ranges
/// and what each function's records will carry.
type Fields = (
    Vec<(&'static str, u32)>,
    Vec<(&'static str, u64)>,
    Vec<damon_common::NodePfnRange>,
    Vec<crate::capture::ArgStatus>,
);

/// The struct field offsets and kernel facts the programs need ([`OFFSET_UNKNOWN`] / 0 where
/// they cannot be found) and what each function's records will carry.
fn field_offsets(functions: &[FunctionId]) -> Fields {
    use damon_common::{
        GLOBAL_DESTS_NODE_ID_ARR_OFF, GLOBAL_DESTS_NR_OFF, GLOBAL_PAGE_STRUCT_SIZE,
        GLOBAL_REGION_AGE_OFF, GLOBAL_REGION_NR_ACCESSES_OFF, GLOBAL_VMEMMAP_BASE_SYM,
        OFFSET_UNKNOWN,
    };
    let parsed = crate::probe::btf::Btf::from_sys_fs();
    let btf = || parsed.as_ref().map_err(Clone::clone);
    let mut globals = Vec::new();
    let mut globals64 = Vec::new();
    let mut ranges = Vec::new();
    let mut statuses = Vec::new();
    for &func in functions {
        let names = func.arg_names();
        if names.iter().all(|n| n.is_empty()) {
            continue;
        }
        let mut status = crate::capture::ArgStatus {
            function: func.symbol().to_owned(),
            recorded: Vec::new(),
            missing: Vec::new(),
            detail: None,
        };
        match func {
            FunctionId::DamonHotScore => {
                for (field, global) in [
                    ("nr_accesses", GLOBAL_REGION_NR_ACCESSES_OFF),
                    ("age", GLOBAL_REGION_AGE_OFF),
                ] {
                    match btf().and_then(|b| b.int_member_offset("damon_region", field, 4)) {
                        Ok(off) => {
                            globals.push((global, off));
                            status.recorded.push(field.to_owned());
                        }
                        Err(e) => {
                            globals.push((global, OFFSET_UNKNOWN));
                            status.missing.push(field.to_owned());
                            status.detail = Some(format!("struct damon_region.{field}: {e}"));
                        }
                    }
                }
            }
            FunctionId::DamosVaMigrateDestsAdd => {
                let folio = (|| {
                    let sym = crate::probe::folio_node::data_symbol_address("vmemmap_base")?;
                    let size = btf()?.struct_size("page")?;
                    let r = crate::probe::folio_node::node_pfn_ranges(Path::new("/sys"))?;
                    Ok::<_, String>((sym, size, r))
                })();
                match folio {
                    Ok((sym, size, r)) => {
                        globals64.push((GLOBAL_VMEMMAP_BASE_SYM, sym));
                        globals64.push((GLOBAL_PAGE_STRUCT_SIZE, u64::from(size)));
                        ranges = r;
                        status.recorded.push("folio_nid".to_owned());
                    }
                    Err(e) => {
                        status.missing.push("folio_nid".to_owned());
                        status.detail = Some(format!("folio node: {e}"));
                    }
                }
                let dests = btf().and_then(|b| {
                    Ok((
                        b.ptr_member_offset("damos_migrate_dests", "node_id_arr")?,
                        b.int_member_offset("damos_migrate_dests", "nr_dests", 8)?,
                    ))
                });
                match dests {
                    Ok((arr, nr)) => {
                        globals.push((GLOBAL_DESTS_NODE_ID_ARR_OFF, arr));
                        globals.push((GLOBAL_DESTS_NR_OFF, nr));
                        status.recorded.push("dest_nid".to_owned());
                    }
                    Err(e) => {
                        status.missing.push("dest_nid".to_owned());
                        status.detail = Some(format!("destination node: {e}"));
                    }
                }
            }
            _ => status.recorded.extend(
                names
                    .iter()
                    .filter(|n| !n.is_empty())
                    .map(|n| n.to_string()),
            ),
        }
        statuses.push(status);
    }
    (globals, globals64, ranges, statuses)
}
