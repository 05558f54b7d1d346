//! What the programs read besides time: the traced functions' arguments (through BTF-derived
//! offsets the loader writes into the globals below), and the frame that identifies one
//! invocation in both of its probes.
use aya_ebpf::{
    EbpfContext as _,
    helpers::bpf_probe_read_kernel,
    macros::map,
    maps::Array,
    programs::{FEntryContext, FExitContext, ProbeContext, RetProbeContext},
};
use damon_common::{MAX_NODE_RANGES, NodePfnRange, OFFSET_UNKNOWN};

/// Which node owns which page frames (from sysfs, filled by userspace).
#[map(name = "NODE_PFNS")]
pub(crate) static NODE_PFNS: Array<NodePfnRange> = Array::with_max_entries(MAX_NODE_RANGES, 0);

/// Offsets in `struct damos_migrate_dests`, from BTF.
#[unsafe(no_mangle)]
pub(crate) static DESTS_NODE_ID_ARR_OFF: u32 = OFFSET_UNKNOWN;
#[unsafe(no_mangle)]
pub(crate) static DESTS_NR_OFF: u32 = OFFSET_UNKNOWN;
/// Address of the kernel variable `vmemmap_base` (0 = unknown).
#[unsafe(no_mangle)]
pub(crate) static VMEMMAP_BASE_SYM: u64 = 0;
/// `sizeof(struct page)` (0 = unknown).
#[unsafe(no_mangle)]
pub(crate) static PAGE_STRUCT_SIZE: u64 = 0;

/// Byte offset of `nr_accesses` in `struct damon_region`, set by userspace from the running
/// kernel's BTF (no CO-RE in Rust eBPF); [`OFFSET_UNKNOWN`] = not read.
#[unsafe(no_mangle)]
pub(crate) static REGION_NR_ACCESSES_OFF: u32 = OFFSET_UNKNOWN;
/// Byte offset of `age` in `struct damon_region`, as above.
#[unsafe(no_mangle)]
pub(crate) static REGION_AGE_OFF: u32 = OFFSET_UNKNOWN;

/// Reads a global that the loader may have rewritten (volatile, so the compiler does not fold
/// the default in).
#[inline(always)]
pub(crate) fn global(v: &u32) -> u32 {
    // SAFETY: a valid reference to a static.
    unsafe { core::ptr::read_volatile(v) }
}

#[inline(always)]
pub(crate) fn global64(v: &u64) -> u64 {
    // SAFETY: a valid reference to a static.
    unsafe { core::ptr::read_volatile(v) }
}

/// The `u64` at `addr` in kernel memory.
#[inline(always)]
pub(crate) fn kernel_u64(addr: u64) -> Option<u64> {
    // SAFETY: the helper checks the address and fails instead of faulting.
    unsafe { bpf_probe_read_kernel(addr as *const u64) }.ok()
}

/// NUMA node of the folio at `folio` (a `struct folio *` = its head `struct page *`), -1 when
/// unknown: pfn = (folio − vmemmap_base) / sizeof(struct page), then the node whose range
/// holds the pfn. Exact on SPARSEMEM_VMEMMAP kernels, where the page array is linear.
#[inline(always)]
pub(crate) fn folio_nid(folio: u64) -> i64 {
    let sym = global64(&VMEMMAP_BASE_SYM);
    let size = global64(&PAGE_STRUCT_SIZE);
    if sym == 0 || size == 0 || folio == 0 {
        return -1;
    }
    let Some(base) = kernel_u64(sym) else {
        return -1;
    };
    if folio < base || !(folio - base).is_multiple_of(size) {
        return -1;
    }
    let pfn = (folio - base) / size;
    for i in 0..MAX_NODE_RANGES {
        if let Some(r) = NODE_PFNS.get(i)
            && pfn >= r.start_pfn
            && pfn < r.end_pfn
        {
            return r.nid as i64;
        }
    }
    -1
}

/// The destination node `damos_va_migrate_dests_add` picks when the scheme has exactly one
/// destination (then every folio goes there); -1 otherwise (none: `target_nid`, which this
/// function does not see; several: weighted interleave by address, not recomputed here).
#[inline(always)]
pub(crate) fn single_dest_nid(dests: u64) -> i64 {
    let (arr_off, nr_off) = (global(&DESTS_NODE_ID_ARR_OFF), global(&DESTS_NR_OFF));
    if arr_off == OFFSET_UNKNOWN || nr_off == OFFSET_UNKNOWN || dests == 0 {
        return -1;
    }
    if kernel_u64(dests + u64::from(nr_off)) != Some(1) {
        return -1;
    }
    let Some(arr) = kernel_u64(dests + u64::from(arr_off)) else {
        return -1;
    };
    if arr == 0 {
        return -1;
    }
    // SAFETY: the helper checks the address and fails instead of faulting.
    unsafe { bpf_probe_read_kernel(arr as *const u32) }
        .map(i64::from)
        .unwrap_or(-1)
}

/// The `u32` at `base + off` in kernel memory; 0 when the offset is unknown or the read fails.
#[inline(always)]
pub(crate) fn kernel_u32(base: u64, off: u32) -> i64 {
    if off == OFFSET_UNKNOWN || base == 0 {
        return 0;
    }
    // SAFETY: the helper checks the address and fails instead of faulting.
    unsafe { bpf_probe_read_kernel((base + u64::from(off)) as *const u32) }
        .map(i64::from)
        .unwrap_or(0)
}

/// Raw 64-bit argument `n` of the traced function, for both attach modes.
pub(crate) trait Args {
    fn raw(&self, n: usize) -> u64;
}

impl Args for FEntryContext {
    /// Copied out of the context with the helper rather than loaded: a load gives the verifier
    /// a typed BTF pointer (`struct folio *`), on which it refuses the arithmetic that turns a
    /// folio into a pfn; the copy is a plain number, as in kprobe mode.
    #[inline(always)]
    fn raw(&self, n: usize) -> u64 {
        let slot = (self.as_ptr() as *const u64).wrapping_add(n);
        // SAFETY: the helper checks the address and fails instead of faulting.
        unsafe { bpf_probe_read_kernel(slot) }.unwrap_or(0)
    }
}

impl Args for ProbeContext {
    #[inline(always)]
    fn raw(&self, n: usize) -> u64 {
        self.arg(n).unwrap_or(0)
    }
}

/// The invocation a probe runs for (see [`StampStack`]): equal in the entry and the exit probe
/// of one call, different for any two calls open at the same moment.
pub(crate) trait Frame {
    fn frame(&self) -> u64;
}

/// fentry and fexit of one call receive the same context: the argument area on the
/// trampoline's stack frame (`arch_prepare_bpf_trampoline` passes `rbp - regs_off` to both).
/// Kept as a number, which needs a privileged loader (pointer leaks into a map).
impl Frame for FEntryContext {
    #[inline(always)]
    fn frame(&self) -> u64 {
        self.as_ptr() as u64
    }
}

impl Frame for FExitContext {
    #[inline(always)]
    fn frame(&self) -> u64 {
        self.as_ptr() as u64
    }
}

/// At a function-entry kprobe `sp` points at the return address (the rethook saves and
/// replaces it there); at the return probe `sp` is one word above it, the return address
/// popped. Both are the stack pointer just after the call returns.
impl Frame for ProbeContext {
    #[inline(always)]
    fn frame(&self) -> u64 {
        // SAFETY: the context of a kprobe program is the probed task's pt_regs.
        unsafe { (*self.regs).rsp }.wrapping_add(8)
    }
}

impl Frame for RetProbeContext {
    #[inline(always)]
    fn frame(&self) -> u64 {
        // SAFETY: as above.
        unsafe { (*self.regs).rsp }
    }
}

/// No arguments kept.
#[inline(always)]
pub(crate) fn no_args(_a: &impl Args) -> [i64; 2] {
    [0, 0]
}

/// `damon_hot_score`: the region's `nr_accesses` and `age`, the score's inputs.
#[inline(always)]
pub(crate) fn hot_score_args(a: &impl Args) -> [i64; 2] {
    let region = a.raw(1);
    [
        kernel_u32(region, global(&REGION_NR_ACCESSES_OFF)),
        kernel_u32(region, global(&REGION_AGE_OFF)),
    ]
}

/// `damos_va_migrate_dests_add(struct folio *, struct vm_area_struct *, unsigned long,
/// struct damos_migrate_dests *, struct list_head *)`: the folio's node and its destination.
#[inline(always)]
pub(crate) fn dests_add_args(a: &impl Args) -> [i64; 2] {
    [folio_nid(a.raw(0)), single_dest_nid(a.raw(3))]
}

/// `damon_migrate_pages`: `int target_nid`.
#[inline(always)]
pub(crate) fn migrate_pages_args(a: &impl Args) -> [i64; 2] {
    [i64::from(a.raw(1) as i32), 0]
}
