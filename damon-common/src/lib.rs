//! Types that cross the kernel/user boundary.
//!
//! Everything here is `#[repr(C)]` with explicit padding so that the eBPF program and the
//! userspace reader agree byte for byte. Enums cross as integers and are decoded on the user side
//! with `TryFrom`.
#![no_std]

/// How many functions one loaded object can trace (built-in ones plus later user-named ones).
pub const MAX_FUNCS: u32 = 16;

/// Maximum number of concurrently open calls (entered, not yet exited) across all tasks.
pub const MAX_IN_FLIGHT: u32 = 16384;

/// Default ring buffer size in bytes (power of two, multiple of the page size).
pub const DEFAULT_RING_BYTES: u32 = 4 << 20;

/// Name of the ring buffer map in the eBPF object.
pub const MAP_EVENTS: &str = "EVENTS";
/// Name of the per-CPU counter array.
pub const MAP_COUNTERS: &str = "COUNTERS";
/// Name of the entry-stamp hash map.
pub const MAP_STAMPS: &str = "STAMPS";

/// Kernel functions (kfuncs) the eBPF object calls, each through a call instruction whose
/// immediate is one of these placeholders: aya loads no kfunc calls, so the session loader
/// (`damon-user`'s `probe::loader::session`) rewrites each into a kfunc call
/// (`BPF_PSEUDO_KFUNC_CALL`, the kfunc's BTF id in the running kernel) before `BPF_PROG_LOAD`.
/// Far above every helper id (a few hundred), so no helper call is mistaken for one.
pub const KFUNC_PLACEHOLDERS: [(i32, &str); 2] = [
    (KFUNC_SESSION_COOKIE, "bpf_session_cookie"),
    (KFUNC_SESSION_IS_RETURN, "bpf_session_is_return"),
];
pub const KFUNC_SESSION_COOKIE: i32 = 0x7d00_0001;
pub const KFUNC_SESSION_IS_RETURN: i32 = 0x7d00_0002;

/// The session self-test's map (`doctor`): `[entries, returns, zero cookies at return,
/// entries that declined their return run, decline flag]`, one array for all CPUs.
pub const MAP_SESSION_PROBE: &str = "SESSION_PROBE";
pub const SESSION_PROBE_SLOTS: u32 = 5;
/// The self-test's program: counts only the calls of this tgid (a global).
pub const GLOBAL_SESSION_PROBE_TGID: &str = "SESSION_PROBE_TGID";

/// The built-in traced functions. The discriminant is the function id carried in every record.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FunctionId {
    DamonHotScore = 0,
    DamosVaMigrateDestsAdd = 1,
    DamonMigratePages = 2,
    LockTimerBase = 3,
}

impl FunctionId {
    pub const ALL: [FunctionId; 4] = [
        FunctionId::DamonHotScore,
        FunctionId::DamosVaMigrateDestsAdd,
        FunctionId::DamonMigratePages,
        FunctionId::LockTimerBase,
    ];

    /// The kernel symbol traced.
    pub const fn symbol(self) -> &'static str {
        match self {
            FunctionId::DamonHotScore => "damon_hot_score",
            FunctionId::DamosVaMigrateDestsAdd => "damos_va_migrate_dests_add",
            FunctionId::DamonMigratePages => "damon_migrate_pages",
            FunctionId::LockTimerBase => "lock_timer_base",
        }
    }

    /// Whether the function's return value is a number worth keeping (and not a kernel pointer
    /// or `void`): the hotness score of `damon_hot_score`, the pages moved by
    /// `damon_migrate_pages`.
    pub const fn has_value(self) -> bool {
        matches!(
            self,
            FunctionId::DamonHotScore | FunctionId::DamonMigratePages
        )
    }

    /// What `arg0` and `arg1` of the function's records hold ("" = nothing):
    /// - `damon_hot_score`: the region's `nr_accesses` and `age` at entry (read through the
    ///   `struct damon_region *` argument at offsets found in the kernel's BTF);
    /// - `damon_migrate_pages`: its `target_nid` argument;
    /// - `damos_va_migrate_dests_add`: the NUMA node the folio is on and the node the function
    ///   picks for it (only when the scheme has exactly one destination), -1 when unknown.
    pub const fn arg_names(self) -> [&'static str; 2] {
        match self {
            FunctionId::DamonHotScore => ["nr_accesses", "age"],
            FunctionId::DamonMigratePages => ["target_nid", ""],
            FunctionId::DamosVaMigrateDestsAdd => ["folio_nid", "dest_nid"],
            _ => ["", ""],
        }
    }

    /// Whether the function belongs to DAMON (as opposed to the timer subsystem).
    pub const fn is_damon(self) -> bool {
        !matches!(self, FunctionId::LockTimerBase)
    }

    pub fn from_symbol(name: &str) -> Option<FunctionId> {
        Self::ALL.into_iter().find(|f| f.symbol() == name)
    }
}

impl TryFrom<u32> for FunctionId {
    type Error = u32;
    fn try_from(v: u32) -> Result<Self, u32> {
        Self::ALL.get(v as usize).copied().ok_or(v)
    }
}

/// One completed call, as written by the exit program into the ring buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallRecord {
    /// `bpf_ktime_get_ns()` at entry (CLOCK_MONOTONIC, ns).
    pub entry_ns: u64,
    /// Exit stamp minus entry stamp, ns; includes the probe's own cost (see calibration).
    pub duration_ns: u64,
    /// Return value for functions where [`FunctionId::has_value`]; 0 otherwise.
    pub value: i64,
    /// First recorded argument (or field read through an argument) at entry, see
    /// [`FunctionId::arg_names`]; 0 for functions without one, or when it could not be read
    /// (the capture's metadata says which).
    pub arg0: i64,
    /// Second recorded argument, as `arg0`.
    pub arg1: i64,
    /// Thread group id (userspace "pid").
    pub pid: u32,
    /// Thread id; 0 for a CPU's idle task.
    pub tid: u32,
    pub cpu: u32,
    /// [`FunctionId`] as an integer.
    pub func: u32,
    /// Times the task slept during the call (voluntary context switches); see [`disturb`]:
    /// these four are 0 for a clean call, [`disturb::UNKNOWN`] where not known, and all 0 in
    /// a capture whose metadata says they were not measured.
    pub slept: u16,
    /// Times the task was preempted during the call (involuntary context switches).
    pub preempted: u16,
    /// Hard interrupts (NMIs and x86 system vectors included) the CPU handled during the call;
    /// [`disturb::UNKNOWN`] for a call that was switched out.
    pub hardirqs: u16,
    /// Softirqs the CPU ran during the call; as `hardirqs`.
    pub softirqs: u16,
    /// Time the task spent off the CPU during the call (switched out: asleep or preempted), ns;
    /// see [`breakdown`]: 0 when not measured, [`breakdown::UNKNOWN_NS`] where not known,
    /// [`breakdown::SATURATED_NS`] from about 4.3 s up.
    pub off_cpu_ns: u32,
    /// Time the call's CPU spent in hard and soft interrupts while the call was on it, ns (the
    /// kernel's IRQ time accounting); as `off_cpu_ns`.
    pub irq_ns: u32,
}

/// Function id of an aggregation-interval boundary marker (a [`CallRecord`] that is not a call).
///
/// The eBPF program on the `damon:damon_aggregated` tracepoint writes one per kdamond each time
/// that kdamond ends an aggregation interval, through the same ring buffer as the calls: its
/// `entry_ns` is the time of the boundary, `tid`/`pid` the kdamond, `value` the number of
/// regions of the kdamond's first target and `duration_ns` 0. Its counters (markers seen,
/// written, lost to a full ring) live at this id's counter slots. The last id of the table, so
/// it never collides with a traced function.
pub const AGGREGATION_MARK: u32 = MAX_FUNCS - 1;

/// Tracepoint system and name of the interval hook.
pub const AGGREGATION_TRACEPOINT: (&str, &str) = ("damon", "damon_aggregated");
/// Byte offsets of the `damon:damon_aggregated` fields the marker program reads, as in the
/// tracepoint's `format` file of Linux 6.12 and 7.2 (`target_id` unsigned long at 8, `start`
/// unsigned long at 24). Userspace checks the running kernel's format before attaching.
pub const AGGR_TP_TARGET_ID_OFFSET: usize = 8;
pub const AGGR_TP_NR_REGIONS_OFFSET: usize = 16;
pub const AGGR_TP_START_OFFSET: usize = 24;
/// Name of the eBPF global holding the byte offset of `nr_accesses` in `struct damon_region`
/// (`u32`; [`OFFSET_UNKNOWN`] when userspace could not find it in the kernel's BTF).
pub const GLOBAL_REGION_NR_ACCESSES_OFF: &str = "REGION_NR_ACCESSES_OFF";
/// Name of the eBPF global holding the byte offset of `age` in `struct damon_region`.
pub const GLOBAL_REGION_AGE_OFF: &str = "REGION_AGE_OFF";
/// A field offset that is not known: the field is not read (its arg stays 0).
pub const OFFSET_UNKNOWN: u32 = u32::MAX;
/// Offsets in `struct damos_migrate_dests` of `node_id_arr` (a pointer) and `nr_dests`.
pub const GLOBAL_DESTS_NODE_ID_ARR_OFF: &str = "DESTS_NODE_ID_ARR_OFF";
pub const GLOBAL_DESTS_NR_OFF: &str = "DESTS_NR_OFF";
/// Kernel address of the `vmemmap_base` variable (`u64`, 0 = unknown): the program reads the
/// variable to turn a folio pointer into a page frame number. Never stored anywhere.
pub const GLOBAL_VMEMMAP_BASE_SYM: &str = "VMEMMAP_BASE_SYM";
/// `sizeof(struct page)` from BTF (`u64`, 0 = unknown).
pub const GLOBAL_PAGE_STRUCT_SIZE: &str = "PAGE_STRUCT_SIZE";
/// Name of the array of [`NodePfnRange`]s (which node owns which page frames).
pub const MAP_NODE_PFNS: &str = "NODE_PFNS";
/// Entries of [`MAP_NODE_PFNS`].
pub const MAX_NODE_RANGES: u32 = 16;

/// Page frames `start_pfn..end_pfn` belong to node `nid`; an entry with `end_pfn == 0` is
/// unused.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodePfnRange {
    pub start_pfn: u64,
    pub end_pfn: u64,
    pub nid: u64,
}

/// Name of the per-kdamond map holding the start address of the last region of target 0 seen.
pub const MAP_AGGR_LAST: &str = "AGGR_LAST";

/// Function ids of user-named functions (`--func NAME`): `FIRST_USER_FUNC..=LAST_USER_FUNC`,
/// one generic program slot each in the eBPF object (same code as the built-in functions, the
/// id baked in), assigned in command-line order. Calibration uses the same slots in a separate,
/// short-lived load.
pub const FIRST_USER_FUNC: u32 = 4;
/// The last slot: the id below [`AGGREGATION_MARK`].
pub const LAST_USER_FUNC: u32 = AGGREGATION_MARK - 1;
/// How many user-named functions one session can trace.
pub const MAX_USER_FUNCS: u32 = LAST_USER_FUNC - FIRST_USER_FUNC + 1;

/// Name of the `u32` eBPF global selecting what exit programs do with a timed call, a set of
/// bits: [`MODE_STREAM`] (one [`CallRecord`] into the ring), [`MODE_KERNEL`] (add it to the
/// per-CPU histogram of its function). Both bits at once time each call once and do both with
/// the same duration: tests use it to check the kernel's bucketing against the records.
pub const GLOBAL_TRACE_MODE: &str = "TRACE_MODE";
pub const MODE_STREAM: u32 = 1;
pub const MODE_KERNEL: u32 = 2;
/// Name of the `u64` eBPF global: exit programs wake the ring's reader only once this many
/// bytes wait in the ring (and submit without a wake-up below it; the reader also drains on a
/// short timer). 0 = the kernel's default, a wake-up whenever the reader has caught up.
pub const GLOBAL_RING_WAKE_BYTES: &str = "RING_WAKE_BYTES";
/// The wake-up threshold as a fraction of the ring: `ring_size / RING_WAKE_DIVISOR`.
pub const RING_WAKE_DIVISOR: u32 = 16;

/// Name of the `u32` eBPF global: when not 0, only calls of tasks of this thread group (the
/// process id userspace sees) are timed; the others bump [`Counter::Filtered`] at entry and are
/// ignored at exit.
pub const GLOBAL_FILTER_TGID: &str = "FILTER_TGID";
/// Name of the `u32` eBPF global: when not 0, only calls of this task (thread id), as above.
pub const GLOBAL_FILTER_TID: &str = "FILTER_TID";
/// Name of the `u64` eBPF global: when not 0, only calls of tasks whose cgroup v2 id
/// (`bpf_get_current_cgroup_id`) is this, as above.
pub const GLOBAL_FILTER_CGROUP: &str = "FILTER_CGROUP";

/// Name of the `u64` eBPF global holding the width in ns of the linear histogram buckets
/// (kernel mode); 0 is treated as 1.
pub const GLOBAL_HIST_WIDTH_NS: &str = "HIST_WIDTH_NS";
/// Default linear bucket width, ns.
pub const DEFAULT_HIST_WIDTH_NS: u64 = 10;
/// Linear buckets: bucket `i` holds durations in `[i*w, (i+1)*w)`.
pub const HIST_LINEAR_BUCKETS: u32 = 512;
/// Log2 buckets above the linear range `R = w * HIST_LINEAR_BUCKETS`: bucket
/// `HIST_LINEAR_BUCKETS + k` holds `[R*2^k, R*2^(k+1))`; the last one is open-ended.
pub const HIST_LOG2_BUCKETS: u32 = 32;
pub const HIST_BUCKETS: u32 = HIST_LINEAR_BUCKETS + HIST_LOG2_BUCKETS;
/// Name of the per-CPU `u64` array of bucket counts, index `func * HIST_BUCKETS + bucket`.
pub const MAP_HIST: &str = "HIST";
/// Name of the per-CPU array of [`HistStats`], index `func`.
pub const MAP_HIST_STATS: &str = "HSTATS";

/// Exact count, sum, min and max of one function's timed calls on one CPU (kernel mode).
/// `min` is meaningful only when `count > 0`. The kernel writes sum, min and max and leaves
/// `count` at 0 (it is the sum of the CPU's histogram buckets, one add less per call);
/// userspace fills it in from the buckets when it reads the map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HistStats {
    pub count: u64,
    pub sum_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
}

/// The bucket a duration falls in (kernel mode), for linear width `width_ns`. Branches only,
/// no loops and no `leading_zeros` (which BPF has no instruction for): the same function runs
/// in the kernel program and in userspace.
#[inline(always)]
pub const fn hist_bucket(duration_ns: u64, width_ns: u64) -> u32 {
    let w = if width_ns == 0 { 1 } else { width_ns };
    let linear = duration_ns / w;
    if linear < HIST_LINEAR_BUCKETS as u64 {
        return linear as u32;
    }
    // floor(log2(floor(d / R))), R = w * HIST_LINEAR_BUCKETS, by binary search.
    let mut q = linear / HIST_LINEAR_BUCKETS as u64;
    let mut k = 0u32;
    if q >= 1 << 32 {
        q >>= 32;
        k += 32;
    }
    if q >= 1 << 16 {
        q >>= 16;
        k += 16;
    }
    if q >= 1 << 8 {
        q >>= 8;
        k += 8;
    }
    if q >= 1 << 4 {
        q >>= 4;
        k += 4;
    }
    if q >= 1 << 2 {
        q >>= 2;
        k += 2;
    }
    if q >= 1 << 1 {
        k += 1;
    }
    let b = HIST_LINEAR_BUCKETS + k;
    if b >= HIST_BUCKETS {
        HIST_BUCKETS - 1
    } else {
        b
    }
}

/// `[lo, hi)` of bucket `bucket` for linear width `width_ns`; the last bucket's `hi` is
/// `u64::MAX` (open-ended).
pub const fn hist_bucket_bounds(bucket: u32, width_ns: u64) -> (u64, u64) {
    let w = if width_ns == 0 { 1 } else { width_ns };
    if bucket < HIST_LINEAR_BUCKETS {
        return (bucket as u64 * w, (bucket as u64 + 1) * w);
    }
    let k = bucket - HIST_LINEAR_BUCKETS;
    let range = w.saturating_mul(HIST_LINEAR_BUCKETS as u64);
    let lo = range.saturating_mul(1u64 << k);
    let hi = if bucket + 1 >= HIST_BUCKETS {
        u64::MAX
    } else {
        range.saturating_mul(1u64 << (k + 1))
    };
    (lo, hi)
}

/// Size of a [`CallRecord`] on the wire.
pub const CALL_RECORD_SIZE: usize = core::mem::size_of::<CallRecord>();
const _: () = assert!(CALL_RECORD_SIZE == 72);

/// Per-CPU, per-function counters, at index `func * NR_COUNTERS + counter`.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// Entry probes that ran.
    Calls = 0,
    /// Records written to the ring buffer. Kernel mode alone (no stream bit): not bumped by the
    /// kernel; userspace reports the histogram's count (HSTATS), the calls added to it.
    Emitted = 1,
    /// Completed calls whose record did not fit in the ring buffer.
    RingFull = 2,
    /// Entries whose stamp could not be stored (stamp map full).
    StampFull = 3,
    /// Retired: entries nested deeper than [`STAMP_DEPTH`] while stamps were paired by depth.
    /// Pairing by invocation ([`StampStack::open`]) never produces it; older captures have it.
    TooDeep = 4,
    /// Exits without an entry of the same invocation: the call started before the entry probe
    /// was attached, or the kernel skipped the entry probe (it then counts the skip).
    OrphanExits = 5,
    /// Entries whose exit never came: the kernel skipped the exit probe, so a later entry of
    /// the same invocation frame, or the exit of an enclosing call, found the stamp still open
    /// (or four stamps were open on one task). Discarded, never turned into a duration.
    StaleEntries = 6,
    /// Entries of tasks the session's task filter ([`GLOBAL_FILTER_TGID`], [`GLOBAL_FILTER_TID`],
    /// [`GLOBAL_FILTER_CGROUP`]) leaves out: not stamped, not in `Calls`, their exits ignored.
    Filtered = 7,
}

pub const NR_COUNTERS: u32 = 8;

impl Counter {
    pub const ALL: [Counter; NR_COUNTERS as usize] = [
        Counter::Calls,
        Counter::Emitted,
        Counter::RingFull,
        Counter::StampFull,
        Counter::TooDeep,
        Counter::OrphanExits,
        Counter::StaleEntries,
        Counter::Filtered,
    ];

    pub const fn index(self, func: u32) -> u32 {
        func * NR_COUNTERS + self as u32
    }
}

/// How many open calls of one function one task can time at once (a power of two). A task's calls nest strictly
/// (an interrupt that calls the function while the task is inside it returns before the task
/// goes on), so a small stack per (task, function) times them all: task, softirq, hardirq, NMI.
pub const STAMP_DEPTH: usize = 4;
const _: () = assert!(STAMP_DEPTH.is_power_of_two());

/// Entry stamps of the open calls of one function on one task, innermost last, each tagged with
/// the invocation it belongs to.
///
/// The frame identifies one invocation among those open at a moment: with fentry/fexit, the
/// address of the trampoline's argument area (the context both programs of one call receive);
/// with kprobe/kretprobe, the stack pointer just after the function returns (entry `sp` + 8,
/// return `sp`). Two open invocations never share a frame, so an exit is paired only with the
/// entry of its own invocation, whatever runs the kernel skipped:
/// - an exit whose entry was skipped finds no stamp with its frame: an orphan, not timed;
/// - an entry whose exit was skipped leaves a stale stamp; it is discarded (counted) when an
///   entry of the same frame comes (the frame is free again, so the old call has ended), when
///   the exit of a call opened before it comes (calls nest, so everything opened after an
///   exiting call has ended), or when all [`STAMP_DEPTH`] slots are taken (the oldest goes).
///
/// A duration is built only from an entry and an exit of one frame with no other entry of that
/// frame between them. The one sequence that still pairs two invocations needs two skips of one
/// task in a row at one frame: an exit skipped, then the next entry at that frame skipped too;
/// the kernel counts both (see `skipped_entries`/`skipped_exits` in the accounting), and with
/// kprobes, whose skips come as whole calls, it cannot happen.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StampStack {
    /// Open calls (at most [`STAMP_DEPTH`]).
    pub depth: u32,
    pub _pad: u32,
    /// The invocation frame of each open call.
    pub frames: [u64; STAMP_DEPTH],
    pub stamps: [u64; STAMP_DEPTH],
    /// The `arg0`/`arg1` read at each stamped entry.
    pub args: [[i64; 2]; STAMP_DEPTH],
    /// The disturbance counters read at each stamped entry (see [`disturb`]).
    pub snaps: [disturb::Snapshot; STAMP_DEPTH],
}

/// What [`StampStack::close`] gives for an exit that has its entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenCall {
    pub stamp: u64,
    pub args: [i64; 2],
    /// The disturbance counters read at its entry.
    pub snap: disturb::Snapshot,
    /// Stale stamps discarded above it (their exits were skipped).
    pub stale: u32,
}

impl StampStack {
    /// Opens a call of invocation `frame`: returns the slot whose stamp the caller writes (last,
    /// so the stamp excludes this work) and how many stale stamps were discarded.
    #[inline(always)]
    pub fn open(&mut self, frame: u64, args: [i64; 2]) -> (usize, u32) {
        let mut depth = self.depth as usize;
        if depth > STAMP_DEPTH {
            depth = STAMP_DEPTH;
        }
        let mut stale = 0u32;
        // A stamp of this very frame is a call that has ended without its exit: it and every
        // stamp pushed after it are stale.
        let mut i = 0;
        while i < STAMP_DEPTH {
            if i < depth && self.frames[i] == frame {
                stale = (depth - i) as u32;
                depth = i;
                break;
            }
            i += 1;
        }
        if depth == STAMP_DEPTH {
            // No real nesting is this deep: the oldest stamp is one whose exit was skipped.
            let mut j = 1;
            while j < STAMP_DEPTH {
                self.frames[j - 1] = self.frames[j];
                self.stamps[j - 1] = self.stamps[j];
                self.args[j - 1] = self.args[j];
                self.snaps[j - 1] = self.snaps[j];
                j += 1;
            }
            depth = STAMP_DEPTH - 1;
            stale += 1;
        }
        // `depth < STAMP_DEPTH` here; the mask says so to verifiers (Linux 6.1's) that lose
        // the bound through the search above. STAMP_DEPTH is a power of two.
        let slot = depth & (STAMP_DEPTH - 1);
        self.frames[slot] = frame;
        self.args[slot] = args;
        self.stamps[slot] = 0;
        self.depth = slot as u32 + 1;
        (slot, stale)
    }

    /// Closes the call of invocation `frame`: its stamp and arguments, or `None` when no open
    /// call has that frame (an orphan exit). Stamps opened after it are discarded as stale.
    #[inline(always)]
    pub fn close(&mut self, frame: u64) -> Option<OpenCall> {
        let mut depth = self.depth as usize;
        if depth > STAMP_DEPTH {
            depth = STAMP_DEPTH;
        }
        let mut i = STAMP_DEPTH;
        while i > 0 {
            i -= 1;
            if i < depth && self.frames[i] == frame {
                self.depth = i as u32;
                return Some(OpenCall {
                    stamp: self.stamps[i],
                    args: self.args[i],
                    snap: self.snaps[i],
                    stale: (depth - 1 - i) as u32,
                });
            }
        }
        None
    }
}

/// Key of an entry stamp stack: one per (task, function). The idle tasks of all CPUs share
/// tid 0, so for them the CPU number stands in for the tid, with the key's top bit set (bit 55
/// of the task part, shifted to 63: a tid is below 2^22, so no real tid reaches it; the bit
/// used to be 62, which the shift dropped, so CPU n's idle task shared tid n's key).
pub const fn stamp_key(tid: u32, cpu: u32, func: u32) -> u64 {
    let task = if tid == 0 {
        (1u64 << 55) | cpu as u64
    } else {
        tid as u64
    };
    (task << 8) | (func as u64 & 0xff)
}

/// The function part of the benchmark's stamp-floor keys in the stamp map (`bench-floor`,
/// `stamp_key(tid, 0, FLOOR_STAMP_FUNC)`). The floor shares the map instead of bringing one
/// of its own, which aya would create in every session (it creates every map of the object);
/// no function id reaches this value, so a floor key is never a traced function's.
pub const FLOOR_STAMP_FUNC: u32 = 0xff;
const _: () = assert!(FLOOR_STAMP_FUNC >= MAX_FUNCS && FLOOR_STAMP_FUNC <= 0xff);

/// Task id encoded in a stamp key; `None` for an idle task's key (those tasks never exit, so
/// userspace never collects their entries).
pub const fn stamp_key_tid(key: u64) -> Option<u32> {
    if key >> 63 != 0 {
        None
    } else {
        Some((key >> 8) as u32)
    }
}

/// Function id encoded in a stamp key (userspace uses it to count calls still in flight).
pub const fn stamp_key_func(key: u64) -> u32 {
    (key & 0xff) as u32
}

pub mod attach;
pub mod breakdown;
pub mod cookie;
pub mod disturb;
pub mod order;
pub mod slow;

#[cfg(feature = "user")]
mod pod {
    // SAFETY: CallRecord is repr(C), made only of integers, with no padding (72 bytes = 5*8+4*4+4*2+2*4).
    unsafe impl aya::Pod for super::CallRecord {}
    // SAFETY: StampStack is repr(C), integers only, padding made explicit by `_pad`.
    unsafe impl aya::Pod for super::StampStack {}
    // SAFETY: NodePfnRange is repr(C), three u64, no padding.
    unsafe impl aya::Pod for super::NodePfnRange {}
    // SAFETY: HistStats is repr(C), four u64, no padding.
    unsafe impl aya::Pod for super::HistStats {}
}

#[cfg(test)]
mod tests {
    #[test]
    fn stamp_keys_of_idle_tasks_are_apart_from_tids() {
        for cpu in [0, 1, 7, 4095] {
            let idle = super::stamp_key(0, cpu, 3);
            assert_eq!(super::stamp_key_tid(idle), None);
            if cpu != 0 {
                // Tid n is not CPU n's idle task (tid 0 is only ever an idle task).
                assert_ne!(idle, super::stamp_key(cpu, 0, 3));
            }
            assert_eq!(super::stamp_key_func(idle), 3);
        }
        let key = super::stamp_key(4_194_303, 0, 14);
        assert_eq!(super::stamp_key_tid(key), Some(4_194_303));
        assert_eq!(super::stamp_key_func(key), 14);
    }

    use super::*;

    #[test]
    fn bucket_edges_linear_and_log2() {
        let w = 10;
        assert_eq!(hist_bucket(0, w), 0);
        assert_eq!(hist_bucket(9, w), 0);
        assert_eq!(hist_bucket(10, w), 1);
        assert_eq!(hist_bucket(5119, w), 511);
        // R = 5120: first log2 bucket [5120, 10240)
        assert_eq!(hist_bucket(5120, w), 512);
        assert_eq!(hist_bucket(10239, w), 512);
        assert_eq!(hist_bucket(10240, w), 513);
        assert_eq!(hist_bucket(u64::MAX, w), HIST_BUCKETS - 1);
        assert_eq!(hist_bucket(7, 0), 7);
    }

    #[test]
    fn every_duration_lies_in_its_buckets_bounds() {
        for w in [1u64, 10, 20, 1000] {
            let mut d = 0u64;
            while d < 1 << 50 {
                let b = hist_bucket(d, w);
                let (lo, hi) = hist_bucket_bounds(b, w);
                assert!(lo <= d && d < hi, "d={d} w={w} bucket={b} [{lo},{hi})");
                d = d * 3 / 2 + 1;
            }
        }
        // Buckets tile the line: each starts where the previous ends.
        for b in 1..HIST_BUCKETS {
            assert_eq!(hist_bucket_bounds(b, 10).0, hist_bucket_bounds(b - 1, 10).1);
        }
    }
}
