//! Runs of our programs that the kernel skipped, read from the kernel's own counters (aya 0.14
//! exposes neither, so through raw `bpf(2)`):
//! - `bpf_prog_info.recursion_misses` of a program: fentry/fexit runs skipped because a run of
//!   the same program was still active on that CPU (`__bpf_prog_enter_recur`, kernels >= 5.12;
//!   with preemptible trampolines, a task preempted inside the program blocks it for every other
//!   task on the CPU), and, since 6.7, kprobe runs skipped because another kprobe or tracepoint
//!   program was running on the CPU (`trace_call_bpf`);
//! - the `missed` count of a kprobe's perf link (kernels >= 6.7): hits the kprobe itself dropped
//!   (re-entered kprobes, ftrace recursion) and, for a kretprobe, returns lost because all its
//!   `maxactive` instances were in use;
//! - the `missed` count of a kprobe-multi link (a kprobe session's fprobe): hits the fprobe
//!   itself dropped.
use std::os::fd::{AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd, RawFd};

use aya_obj::generated::{
    bpf_link_info, bpf_link_info__bindgen_ty_1__bindgen_ty_9 as KprobeMultiLinkInfo,
    bpf_link_info__bindgen_ty_1__bindgen_ty_11 as PerfEventLinkInfo,
    bpf_link_info__bindgen_ty_1__bindgen_ty_11__bindgen_ty_1__bindgen_ty_2 as KprobeLinkInfo,
    bpf_prog_info,
};

const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const BPF_LINK_GET_FD_BY_ID: libc::c_long = 30;
const BPF_LINK_GET_NEXT_ID: libc::c_long = 31;
const BPF_BTF_GET_FD_BY_ID: libc::c_long = 19;
const BPF_BTF_GET_NEXT_ID: libc::c_long = 23;
/// `BPF_LINK_TYPE_PERF_EVENT`.
const LINK_TYPE_PERF_EVENT: u32 = 7;
/// `BPF_LINK_TYPE_KPROBE_MULTI`.
const LINK_TYPE_KPROBE_MULTI: u32 = 8;
/// `BPF_PERF_EVENT_KPROBE` and `BPF_PERF_EVENT_KRETPROBE`.
const PERF_EVENT_KPROBE: u32 = 3;
const PERF_EVENT_KRETPROBE: u32 = 4;

/// `bpf_attr` for `BPF_OBJ_GET_INFO_BY_FD`.
#[repr(C)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// `bpf_attr` for the `BPF_*_GET_NEXT_ID` (`start_id`) and `BPF_*_GET_FD_BY_ID` commands.
#[repr(C)]
struct IdAttr {
    id: u32,
    next_id: u32,
    open_flags: u32,
}

/// A kind of kernel BPF object, by the commands that walk its ids and open one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ObjectKind {
    next_id: libc::c_long,
    fd_by_id: libc::c_long,
}

/// Links: `BPF_LINK_GET_NEXT_ID`, `BPF_LINK_GET_FD_BY_ID`.
pub(crate) const LINKS: ObjectKind = ObjectKind {
    next_id: BPF_LINK_GET_NEXT_ID,
    fd_by_id: BPF_LINK_GET_FD_BY_ID,
};
/// BTF objects (vmlinux's and each module's): `BPF_BTF_GET_NEXT_ID`, `BPF_BTF_GET_FD_BY_ID`.
pub(crate) const BTF_OBJECTS: ObjectKind = ObjectKind {
    next_id: BPF_BTF_GET_NEXT_ID,
    fd_by_id: BPF_BTF_GET_FD_BY_ID,
};

/// Every object of `kind` the kernel holds, opened, in id order; one that goes away between
/// its id and its opening is skipped.
pub(crate) fn kernel_objects(kind: ObjectKind) -> impl Iterator<Item = OwnedFd> {
    let mut id = 0u32;
    std::iter::from_fn(move || {
        loop {
            let mut next = IdAttr {
                id,
                next_id: 0,
                open_flags: 0,
            };
            bpf(kind.next_id, &mut next).ok()?;
            id = next.next_id;
            let mut get = IdAttr {
                id,
                next_id: 0,
                open_flags: 0,
            };
            if let Ok(fd) = bpf(kind.fd_by_id, &mut get) {
                // SAFETY: the kernel just returned this fd to us; OwnedFd closes it.
                return Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
            }
        }
    })
}

pub(crate) fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> std::io::Result<libc::c_long> {
    // SAFETY: `attr` is a valid, writable `bpf_attr` prefix of the size passed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Fills `info` (a zeroed kernel info struct) for the object behind `fd`; returns how many bytes
/// the kernel wrote (fields past it do not exist on this kernel).
pub(crate) fn object_info<T>(fd: RawFd, info: &mut T) -> std::io::Result<usize> {
    let mut attr = InfoAttr {
        bpf_fd: fd as u32,
        info_len: std::mem::size_of::<T>() as u32,
        info: info as *mut T as u64,
    };
    bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    Ok(attr.info_len as usize)
}

/// The program's `recursion_misses`; `None` when this kernel's `bpf_prog_info` has no such
/// field (before 5.12) or the call fails.
pub fn recursion_misses(prog: BorrowedFd<'_>) -> Option<u64> {
    // SAFETY: a plain C struct of integers, for which all zeroes is valid.
    let mut info: bpf_prog_info = unsafe { std::mem::zeroed() };
    let len = object_info(prog.as_raw_fd(), &mut info).ok()?;
    let end = std::mem::offset_of!(bpf_prog_info, recursion_misses) + 8;
    (len >= end).then_some(info.recursion_misses)
}

/// The program's id.
pub fn prog_id(prog: BorrowedFd<'_>) -> Option<u32> {
    // SAFETY: as in `recursion_misses`.
    let mut info: bpf_prog_info = unsafe { std::mem::zeroed() };
    object_info(prog.as_raw_fd(), &mut info).ok()?;
    Some(info.id)
}

/// The `missed` count of the kprobe/kretprobe perf link that attaches program `prog_id`; `None`
/// when there is no such link or the call fails. Kernels before 6.7 have no such field and
/// leave it 0, so callers ask only kernels that have it ([`kernel_counts_kprobe_skips`]).
pub fn kprobe_link_missed(prog_id: u32) -> Option<u64> {
    for fd in kernel_objects(LINKS) {
        // SAFETY: as in `recursion_misses`.
        let mut info: bpf_link_info = unsafe { std::mem::zeroed() };
        let Ok(len) = object_info(fd.as_raw_fd(), &mut info) else {
            continue;
        };
        if info.prog_id != prog_id || info.type_ != LINK_TYPE_PERF_EVENT {
            continue;
        }
        // SAFETY: the kernel filled the perf_event member of the union for a perf link.
        let perf = unsafe { info.__bindgen_anon_1.perf_event };
        if perf.type_ != PERF_EVENT_KPROBE && perf.type_ != PERF_EVENT_KRETPROBE {
            return None;
        }
        // SAFETY: the kprobe member, for a kprobe-type perf link.
        let kprobe = unsafe { perf.__bindgen_anon_1.kprobe };
        // Whether the kernel wrote as far as `missed` (it writes no more than its own struct).
        let end = std::mem::offset_of!(bpf_link_info, __bindgen_anon_1)
            + std::mem::offset_of!(PerfEventLinkInfo, __bindgen_anon_1)
            + std::mem::offset_of!(KprobeLinkInfo, missed)
            + 8;
        return (len >= end).then_some(kprobe.missed);
    }
    None
}

/// The `missed` count of kprobe-multi link `link`; `None` when the kernel's link info has no
/// such field or the call fails.
pub fn kprobe_multi_missed(link: BorrowedFd<'_>) -> Option<u64> {
    // SAFETY: as in `recursion_misses`.
    let mut info: bpf_link_info = unsafe { std::mem::zeroed() };
    let len = object_info(link.as_raw_fd(), &mut info).ok()?;
    // SAFETY: the kernel filled the kprobe-multi member of the union for such a link.
    let k = unsafe { info.__bindgen_anon_1.kprobe_multi };
    let end = std::mem::offset_of!(bpf_link_info, __bindgen_anon_1)
        + std::mem::offset_of!(KprobeMultiLinkInfo, missed)
        + 8;
    (info.type_ == LINK_TYPE_KPROBE_MULTI && len >= end).then_some(k.missed)
}

/// Whether the running kernel counts skipped kprobe runs (in the program's `recursion_misses`
/// and the perf link's `missed`): Linux 6.7 and later. `release` is `uname -r`.
pub fn kernel_counts_kprobe_skips(release: &str) -> bool {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let major = parts.next().unwrap_or(0);
    let minor = parts.next().unwrap_or(0);
    (major, minor) >= (6, 7)
}

#[cfg(test)]
mod tests {
    #[test]
    fn kprobe_skip_counting_starts_with_6_7() {
        for (release, counts) in [
            ("6.1.0-40-amd64", false),
            ("6.6.9", false),
            ("6.7.0", true),
            ("6.12.57+deb13-amd64", true),
            ("7.2.13+deb14-amd64", true),
            ("5.15.0-100-generic", false),
            ("", false),
        ] {
            assert_eq!(
                super::kernel_counts_kprobe_skips(release),
                counts,
                "{release}"
            );
        }
    }
}
