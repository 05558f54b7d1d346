//! bpftrace for the guest: Debian's `bpftrace` package of the guest kernel's suite and the
//! shared libraries it needs (its `Depends` closure, glibc and the dynamic loader included),
//! unpacked once into `<cache>/bpftrace/<suite>/<version>/root` and merged into the guest's `/`
//! ([`crate::vm::VmOptions::trees`]). Fetched through the same private apt instance as the
//! kernels, so through the mirror the machine's apt configuration names.
use std::path::PathBuf;

use anyhow::Result;

use crate::debroot::{self, Unpack};

/// Where bpftrace is in the guest.
pub const GUEST_BIN: &str = "/usr/bin/bpftrace";

/// bpftrace with its whole `Depends` closure. Pruned: the parts the benchmark's bpftrace never
/// opens (documentation, the example scripts, the ahead-of-time runtime, glibc's charset
/// converters), to keep the initramfs (which the guest holds in RAM) small.
const BPFTRACE: Unpack = Unpack {
    package: "bpftrace",
    closure_of: &["bpftrace"],
    alone: &[],
    bin: "usr/bin/bpftrace",
    prune: &[
        "usr/share",
        "usr/include",
        "usr/sbin",
        "usr/bin/bpftrace-aotrt",
        "usr/lib/x86_64-linux-gnu/gconv",
    ],
};

/// The unpacked root holding `usr/bin/bpftrace` for `suite`, fetching it if the cache lacks the
/// suite's current version (or using the cached one when the mirror cannot be reached).
pub fn ensure(suite: &str) -> Result<PathBuf> {
    debroot::ensure(&BPFTRACE, suite)
}
