//! The kernel's big read-only files, `/proc/kallsyms`, `/sys/kernel/btf/vmlinux` and tracefs'
//! `available_filter_functions`, read once per start.
//!
//! One `record` consults them many times: function selection, the diagnosis, the attach
//! trial, the field offsets, the kfunc ids and the loaders. Every read of `/proc/kallsyms`
//! makes the kernel format some 200 000 lines, and every parse of the vmlinux BTF walks a few
//! MB. `record` read kallsyms 3 times and the BTF 5 times; reading each once (and parsing
//! kallsyms once, in `Kallsyms::read`) took a 1 s `record --no-calibrate` under QEMU/TCG on 7.2
//! from 11.1–12.1 s to 7.9–8.1 s, and its start on a host up to the diagnosis from 0.44 s to
//! 0.22 s. A symbol or type that appears after the first
//! read (a module loaded while the command runs) is not seen until [`crate::probe::release`]: load the
//! module first, as `patch-ab` does.
//!
//! The copies are large (on 7.2 the text, the BTF and aya's parse of it held ~60 MiB of heap),
//! so a session that has attached and finished its calibration drops them with [`crate::probe::release`]:
//! a later use reads the file again.
use std::{
    io,
    sync::{Arc, Mutex},
};

/// A value computed on first use and kept until [`StartCache::release`]: what a session's
/// start reads many times and its steady state never.
pub struct StartCache<T>(Mutex<Option<T>>);

impl<T: Clone> StartCache<T> {
    pub const fn new() -> Self {
        StartCache(Mutex::new(None))
    }

    /// The kept value, or `init`'s (kept). Callers on other threads wait for a running `init`.
    pub fn get_or_init(&self, init: impl FnOnce() -> T) -> T {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.get_or_insert_with(init).clone()
    }

    /// Drops the kept value; holders of a clone keep theirs.
    pub fn release(&self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

impl<T: Clone> Default for StartCache<T> {
    fn default() -> Self {
        Self::new()
    }
}

static KALLSYMS_TEXT: StartCache<Result<Arc<str>, (io::ErrorKind, String)>> = StartCache::new();
static BTF_BYTES: StartCache<Result<Arc<[u8]>, String>> = StartCache::new();
static FILTER_TEXT: StartCache<Result<Arc<str>, String>> = StartCache::new();
static AYA_BTF: StartCache<Option<Arc<aya::Btf>>> = StartCache::new();
/// Drops every kept file and aya's parse (see [`crate::probe::release`], which drops the
/// other parses too). The next use reads again.
pub(in crate::probe) fn release() {
    KALLSYMS_TEXT.release();
    BTF_BYTES.release();
    FILTER_TEXT.release();
    AYA_BTF.release();
}

/// Where the kernel lists its symbols.
pub const KALLSYMS: &str = "/proc/kallsyms";
/// Where the kernel exposes its own BTF.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// The text of `/proc/kallsyms`, read on first use.
pub fn kallsyms() -> io::Result<Arc<str>> {
    KALLSYMS_TEXT
        .get_or_init(|| {
            let _t = crate::timing::phase("kallsyms: /proc/kallsyms read");
            std::fs::read_to_string(KALLSYMS)
                .map(Arc::from)
                .map_err(|e| (e.kind(), e.to_string()))
        })
        .map_err(|(kind, msg)| io::Error::new(kind, msg))
}

/// The bytes of the vmlinux BTF, read on first use; the error names the file.
pub fn vmlinux_btf() -> Result<Arc<[u8]>, String> {
    BTF_BYTES.get_or_init(|| {
        let _t = crate::timing::phase("btf: /sys/kernel/btf/vmlinux read");
        std::fs::read(VMLINUX_BTF)
            .map(Arc::from)
            .map_err(|e| format!("reading {VMLINUX_BTF}: {e}"))
    })
}

/// The text of tracefs' `available_filter_functions`, from `read` on first use (the caller
/// knows where tracefs is and mounts it if needed).
pub fn filter_functions(read: impl FnOnce() -> Result<String, String>) -> Result<Arc<str>, String> {
    FILTER_TEXT.get_or_init(|| {
        let _t = crate::timing::phase("tracefs: available_filter_functions read");
        read().map(Arc::from)
    })
}

/// The vmlinux BTF as aya parses it (what its loaders relocate against), parsed on first use;
/// `None` when the kernel has none or it does not parse.
pub fn aya_btf() -> Option<Arc<aya::Btf>> {
    AYA_BTF.get_or_init(|| {
        let bytes = vmlinux_btf().ok()?;
        let _t = crate::timing::phase("btf: vmlinux parsed by aya");
        aya::Btf::parse(&bytes, aya::Endianness::default())
            .ok()
            .map(Arc::new)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cached reads give what a fresh read gives, and the same allocation each time.
    #[test]
    fn a_second_read_is_the_first_one() {
        match (kallsyms(), std::fs::read_to_string(KALLSYMS)) {
            (Ok(a), Ok(fresh)) => {
                let b = kallsyms().expect("cached");
                assert!(Arc::ptr_eq(&a, &b));
                // Module symbols may come and go between two reads; the first lines are
                // the core kernel's.
                let head = |t: &str| t.lines().take(100).collect::<Vec<_>>().join("\n");
                assert_eq!(head(&a), head(&fresh));
            }
            (Err(a), Err(fresh)) => assert_eq!(a.kind(), fresh.kind()),
            (a, fresh) => panic!("cached {:?} vs fresh {:?}", a.is_ok(), fresh.is_ok()),
        }
        match (vmlinux_btf(), std::fs::read(VMLINUX_BTF)) {
            (Ok(a), Ok(fresh)) => {
                assert_eq!(&a[..], &fresh[..]);
                assert!(Arc::ptr_eq(&a, &vmlinux_btf().expect("cached")));
                assert!(aya_btf().is_some(), "aya parses the host's BTF");
            }
            (Err(e), Err(_)) => {
                assert!(e.contains(VMLINUX_BTF), "{e}");
                assert!(aya_btf().is_none());
            }
            (a, fresh) => panic!("cached {:?} vs fresh {:?}", a.is_ok(), fresh.is_ok()),
        }
        // Released, the next use reads the file again: a new allocation, the same bytes.
        if let Ok(a) = vmlinux_btf() {
            release();
            let b = vmlinux_btf().expect("read again");
            assert!(!Arc::ptr_eq(&a, &b));
            assert_eq!(&a[..], &b[..]);
        }
    }
}
