//! The programs of the user-named function slots (`--func NAME`), ids
//! `FIRST_USER_FUNC..=LAST_USER_FUNC`: the same six programs as a built-in function's, with no
//! arguments and no value.
use aya_ebpf::{
    EbpfContext as _,
    helpers::bpf_ktime_get_ns,
    macros::{fentry, fexit, kprobe, kretprobe},
    programs::{FEntryContext, FExitContext, ProbeContext, RetProbeContext},
};

use crate::{
    args::{Frame, no_args},
    on_entry, on_exit, session,
};

/// The generic programs of one user-named function slot (`--func NAME`): the id is baked in,
/// no arguments are read and the value is always 0 (the return value of an arbitrary function
/// may be a kernel pointer, which a capture must never hold). The attach target is chosen at
/// load time (fentry: BTF id; kprobe: symbol), so the sections name no function.
macro_rules! user_slot {
    ($id:literal, $fentry:ident, $fexit:ident, $kprobe:ident, $kretprobe:ident,
     $ksession:ident, $fsession:ident) => {
        sessions!($id, $ksession, $fsession, no_args, no_args, |_r: u64| 0);

        #[fentry]
        pub fn $fentry(ctx: FEntryContext) -> u32 {
            on_entry($id, ctx.frame(), [0, 0]);
            0
        }

        #[fexit]
        pub fn $fexit(ctx: FExitContext) -> u32 {
            on_exit(ctx.as_ptr(), $id, ctx.frame(), 0);
            0
        }

        #[kprobe]
        pub fn $kprobe(ctx: ProbeContext) -> u32 {
            on_entry($id, ctx.frame(), [0, 0]);
            0
        }

        #[kretprobe]
        pub fn $kretprobe(ctx: RetProbeContext) -> u32 {
            on_exit(ctx.as_ptr(), $id, ctx.frame(), 0);
            0
        }
    };
}

// Ids FIRST_USER_FUNC..=LAST_USER_FUNC (4..=14); names stay distinct within the kernel's 15
// characters (`kretprobe_u14` is 13).
user_slot!(
    4,
    fentry_u4,
    fexit_u4,
    kprobe_u4,
    kretprobe_u4,
    ksession_u4,
    fsession_u4
);
user_slot!(
    5,
    fentry_u5,
    fexit_u5,
    kprobe_u5,
    kretprobe_u5,
    ksession_u5,
    fsession_u5
);
user_slot!(
    6,
    fentry_u6,
    fexit_u6,
    kprobe_u6,
    kretprobe_u6,
    ksession_u6,
    fsession_u6
);
user_slot!(
    7,
    fentry_u7,
    fexit_u7,
    kprobe_u7,
    kretprobe_u7,
    ksession_u7,
    fsession_u7
);
user_slot!(
    8,
    fentry_u8,
    fexit_u8,
    kprobe_u8,
    kretprobe_u8,
    ksession_u8,
    fsession_u8
);
user_slot!(
    9,
    fentry_u9,
    fexit_u9,
    kprobe_u9,
    kretprobe_u9,
    ksession_u9,
    fsession_u9
);
user_slot!(
    10,
    fentry_u10,
    fexit_u10,
    kprobe_u10,
    kretprobe_u10,
    ksession_u10,
    fsession_u10
);
user_slot!(
    11,
    fentry_u11,
    fexit_u11,
    kprobe_u11,
    kretprobe_u11,
    ksession_u11,
    fsession_u11
);
user_slot!(
    12,
    fentry_u12,
    fexit_u12,
    kprobe_u12,
    kretprobe_u12,
    ksession_u12,
    fsession_u12
);
user_slot!(
    13,
    fentry_u13,
    fexit_u13,
    kprobe_u13,
    kretprobe_u13,
    ksession_u13,
    fsession_u13
);
user_slot!(
    14,
    fentry_u14,
    fexit_u14,
    kprobe_u14,
    kretprobe_u14,
    ksession_u14,
    fsession_u14
);

const _: () = assert!(damon_common::FIRST_USER_FUNC == 4 && damon_common::LAST_USER_FUNC == 14);
