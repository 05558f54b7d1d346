//! Facts about the running kernel that decide whether and how a function can be traced.
//!
//! Parsing is separated from reading so it is unit-tested on real text from /proc and /sys.
use std::{collections::HashMap, fs, path::Path};

use serde::Serialize;

/// Kernel lockdown mode, from `/sys/kernel/security/lockdown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Lockdown {
    None,
    Integrity,
    Confidentiality,
}

/// Parses the lockdown file, whose active mode is the bracketed word: `none [integrity] confidentiality`.
pub fn parse_lockdown(text: &str) -> Option<Lockdown> {
    let start = text.find('[')?;
    let end = text[start..].find(']')? + start;
    match &text[start + 1..end] {
        "none" => Some(Lockdown::None),
        "integrity" => Some(Lockdown::Integrity),
        "confidentiality" => Some(Lockdown::Confidentiality),
        _ => None,
    }
}

/// Reads the lockdown mode, mounting securityfs first if needed. `None` when the kernel has no
/// lockdown LSM (or securityfs cannot be mounted).
pub fn read_lockdown() -> Option<Lockdown> {
    const FILE: &str = "/sys/kernel/security/lockdown";
    if !Path::new(FILE).exists() {
        mount_if_missing("securityfs", "/sys/kernel/security");
    }
    parse_lockdown(&fs::read_to_string(FILE).ok()?)
}

/// Mounts a pseudo filesystem at its usual place when it is not mounted yet. Failure is not an
/// error: callers look for the files they need and report what is absent.
pub fn mount_if_missing(fstype: &str, target: &str) {
    let Ok(mounts) = fs::read_to_string("/proc/self/mounts") else {
        return;
    };
    if mounts
        .lines()
        .any(|l| l.split_whitespace().nth(1) == Some(target))
    {
        return;
    }
    let (Ok(src), Ok(ty), Ok(dst)) = (
        std::ffi::CString::new(fstype),
        std::ffi::CString::new(fstype),
        std::ffi::CString::new(target),
    ) else {
        return;
    };
    // SAFETY: all pointers are valid NUL-terminated strings for the duration of the call; a null
    // data pointer is allowed for these filesystems.
    unsafe {
        libc::mount(src.as_ptr(), dst.as_ptr(), ty.as_ptr(), 0, std::ptr::null());
    }
}

/// How a function appears in `/proc/kallsyms`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SymbolPresence {
    /// The exact symbol exists: fentry and kprobe can target it.
    Present,
    /// Only compiler clones exist (`name.isra.0`, `name.constprop.0`, `name.part.0`): the
    /// function was inlined or specialised and its plain name cannot be traced.
    ClonesOnly(Vec<String>),
    Absent,
}

/// Symbol names of kallsyms, with compiler clones grouped under their base name.
#[derive(Debug, Default)]
pub struct Kallsyms {
    exact: std::collections::HashSet<String>,
    clones: HashMap<String, Vec<String>>,
}

impl Kallsyms {
    pub fn parse(text: &str) -> Kallsyms {
        let mut k = Kallsyms::default();
        for line in text.lines() {
            let mut parts = line.split_whitespace();
            let (Some(_addr), Some(kind), Some(name)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            // Only text symbols can be traced; `__pfx_NAME` and `__cfi_NAME` label the padding
            // before a function (CONFIG_FUNCTION_PADDING, kCFI), not functions.
            if !matches!(kind, "t" | "T" | "w" | "W")
                || name.starts_with("__pfx_")
                || name.starts_with("__cfi_")
            {
                continue;
            }
            // Module symbols carry a trailing "[module]" column; the name is still the third.
            match name.split_once('.') {
                Some((base, _)) => k
                    .clones
                    .entry(base.to_owned())
                    .or_default()
                    .push(name.to_owned()),
                None => {
                    k.exact.insert(name.to_owned());
                }
            }
        }
        k
    }

    /// `/proc/kallsyms`, read and parsed once per start (see [`super::sysfiles`]).
    pub fn read() -> std::io::Result<std::sync::Arc<Kallsyms>> {
        let text = super::sysfiles::kallsyms()?;
        Ok(KALLSYMS_PARSED.get_or_init(|| {
            let _t = crate::timing::phase("kallsyms: parsed");
            std::sync::Arc::new(Kallsyms::parse(&text))
        }))
    }

    pub fn contains(&self, name: &str) -> bool {
        self.exact.contains(name)
    }

    pub fn presence(&self, name: &str) -> SymbolPresence {
        if self.exact.contains(name) {
            SymbolPresence::Present
        } else if let Some((base, _)) = name.split_once('.')
            && self
                .clones
                .get(base)
                .is_some_and(|c| c.iter().any(|n| n == name))
        {
            // A clone named in full (`name.isra.0`): kprobes can attach to it.
            SymbolPresence::Present
        } else if let Some(c) = self.clones.get(name) {
            SymbolPresence::ClonesOnly(c.clone())
        } else {
            SymbolPresence::Absent
        }
    }
}

impl Kallsyms {
    /// The text symbol closest to `name` (edit distance at most 2, or 3 for names of 12+
    /// characters), for "did you mean"; ties go to the alphabetically first.
    pub fn closest(&self, name: &str) -> Option<String> {
        let limit = if name.len() >= 12 { 3 } else { 2 };
        let mut best: Option<(usize, &str)> = None;
        let clones = self.clones.values().flatten();
        for cand in self.exact.iter().chain(clones) {
            if cand.len().abs_diff(name.len()) > limit || cand == name {
                continue;
            }
            let bound = best.map_or(limit, |(d, _)| d);
            if let Some(d) = edit_distance(name, cand, bound)
                && best.is_none_or(|(bd, bn)| d < bd || (d == bd && cand.as_str() < bn))
            {
                best = Some((d, cand));
            }
        }
        best.map(|(_, n)| n.to_owned())
    }
}

/// Levenshtein distance between `a` and `b` when it is at most `bound`.
fn edit_distance(a: &str, b: &str, bound: usize) -> Option<usize> {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, &ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        let mut row_min = cur[0];
        for (j, &cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
            row_min = row_min.min(cur[j + 1]);
        }
        if row_min > bound {
            return None;
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    Some(prev[b.len()]).filter(|&d| d <= bound)
}

/// Functions on the kernel's kprobe blacklist (`/sys/kernel/debug/kprobes/blacklist`, lines
/// `0xSTART-0xEND\tname`): kprobes refuse them. `None` when the list cannot be read.
pub fn kprobe_blacklist() -> Option<std::collections::HashSet<String>> {
    const FILE: &str = "/sys/kernel/debug/kprobes/blacklist";
    if !Path::new(FILE).exists() {
        mount_if_missing("debugfs", "/sys/kernel/debug");
    }
    Some(parse_kprobe_blacklist(&fs::read_to_string(FILE).ok()?))
}

pub fn parse_kprobe_blacklist(text: &str) -> std::collections::HashSet<String> {
    text.lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .map(str::to_owned)
        .collect()
}

/// Whether the kernel was built with kprobes (CONFIG_KPROBES): the kprobe core's symbols exist.
pub fn kprobes_supported(kallsyms: &Kallsyms) -> bool {
    kallsyms.contains("register_kprobe")
}

/// Functions ftrace can attach to (`available_filter_functions`); fentry needs the target there.
/// The error says why the list could not be read.
pub fn ftrace_functions() -> Result<std::collections::HashSet<String>, String> {
    const FILE: &str = "/sys/kernel/tracing/available_filter_functions";
    let text = super::sysfiles::filter_functions(|| {
        if !Path::new(FILE).exists() {
            mount_if_missing("tracefs", "/sys/kernel/tracing");
        }
        fs::read_to_string(FILE).map_err(|e| format!("cannot read {FILE}: {e}"))
    })?;
    let _t = crate::timing::phase("tracefs: ftrace's function set built");
    Ok(text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect())
}

/// `Kallsyms::read`'s parse of [`super::sysfiles::kallsyms`], kept for the start like it.
pub(in crate::probe) static KALLSYMS_PARSED: super::sysfiles::StartCache<std::sync::Arc<Kallsyms>> =
    super::sysfiles::StartCache::new();

// Defined with the capture it describes, so the capture codec has no dependency on probing.
pub use crate::capture::KernelIdentity;

impl KernelIdentity {
    pub fn read() -> KernelIdentity {
        let read = |p: &str| fs::read_to_string(p).unwrap_or_default().trim().to_owned();
        KernelIdentity {
            release: read("/proc/sys/kernel/osrelease"),
            version: read("/proc/sys/kernel/version"),
            boot_id: read("/proc/sys/kernel/random/boot_id"),
            cmdline: read("/proc/cmdline"),
        }
    }
}

/// Capabilities that matter for tracing.
pub const CAP_SYS_ADMIN: u32 = 21;
pub const CAP_PERFMON: u32 = 38;
pub const CAP_BPF: u32 = 39;

/// Parses `CapEff:` from /proc/self/status.
pub fn parse_cap_eff(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line.trim_start_matches("CapEff:").trim(), 16).ok()
}

pub fn effective_caps() -> Option<u64> {
    parse_cap_eff(&fs::read_to_string("/proc/self/status").ok()?)
}

pub fn has_cap(caps: u64, cap: u32) -> bool {
    caps & (1u64 << cap) != 0
}

/// Whether a function is in the kernel's BTF (fentry needs its prototype).
pub fn btf_has_function(btf: &aya::Btf, name: &str) -> bool {
    let _t = crate::timing::phase(format_args!("btf: {name} looked up"));
    btf.id_by_type_name_kind(name, aya_obj::btf::BtfKind::Func)
        .is_ok()
}

/// Whether this process sees the initial pid namespace, whose ids are the ones the kernel
/// programs record (`bpf_get_current_pid_tgid`); its `/proc/self/ns/pid` inode is the fixed
/// `PROC_PID_INIT_INO` (0xEFFFFFFC).
pub(crate) fn in_initial_pid_namespace() -> bool {
    std::fs::read_link("/proc/self/ns/pid").is_ok_and(|l| l.as_os_str() == "pid:[4026531836]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lockdown_modes() {
        assert_eq!(
            parse_lockdown("none [integrity] confidentiality\n"),
            Some(Lockdown::Integrity)
        );
        assert_eq!(
            parse_lockdown("[none] integrity confidentiality"),
            Some(Lockdown::None)
        );
        assert_eq!(
            parse_lockdown("none integrity [confidentiality]"),
            Some(Lockdown::Confidentiality)
        );
        assert_eq!(parse_lockdown("none integrity confidentiality"), None);
        assert_eq!(parse_lockdown(""), None);
    }

    // Lines as they appear in /proc/kallsyms of Debian 6.12/7.2 kernels (addresses zeroed for
    // unprivileged readers), including a module symbol and compiler clones.
    const KALLSYMS: &str = "\
0000000000000000 T damon_hot_score
0000000000000000 t lock_timer_base
0000000000000000 t damon_pa_migrate_folio_list.isra.0
0000000000000000 t damon_pa_migrate_folio_list.constprop.0
0000000000000000 D damon_data_symbol
0000000000000000 T register_kprobe
0000000000000000 t ext4_fill_super\t[ext4]
0000000000000000 t __pfx_lock_timer_base
0000000000000000 t __cfi_lock_timer_base
";

    #[test]
    fn kallsyms_presence() {
        let k = Kallsyms::parse(KALLSYMS);
        assert_eq!(k.presence("damon_hot_score"), SymbolPresence::Present);
        assert_eq!(k.presence("lock_timer_base"), SymbolPresence::Present);
        assert_eq!(k.presence("damon_migrate_pages"), SymbolPresence::Absent);
        assert_eq!(
            k.presence("damon_pa_migrate_folio_list"),
            SymbolPresence::ClonesOnly(vec![
                "damon_pa_migrate_folio_list.isra.0".into(),
                "damon_pa_migrate_folio_list.constprop.0".into()
            ])
        );
        // Data symbols are not traceable functions.
        assert_eq!(k.presence("damon_data_symbol"), SymbolPresence::Absent);
        // Padding labels are not functions.
        assert_eq!(k.presence("__pfx_lock_timer_base"), SymbolPresence::Absent);
        assert_eq!(k.presence("__cfi_lock_timer_base"), SymbolPresence::Absent);
        assert!(k.contains("ext4_fill_super"));
        assert!(kprobes_supported(&k));
        assert!(!kprobes_supported(&Kallsyms::parse("0 T foo\n")));
    }

    #[test]
    fn clones_named_in_full_and_close_names() {
        let k = Kallsyms::parse(KALLSYMS);
        assert_eq!(
            k.presence("damon_pa_migrate_folio_list.isra.0"),
            SymbolPresence::Present
        );
        assert_eq!(
            k.presence("damon_pa_migrate_folio_list.isra.9"),
            SymbolPresence::Absent
        );
        assert_eq!(
            k.closest("damon_hot_scor").as_deref(),
            Some("damon_hot_score")
        );
        assert_eq!(
            k.closest("lock_timerbase").as_deref(),
            Some("lock_timer_base")
        );
        assert_eq!(k.closest("completely_different"), None);
        assert_eq!(edit_distance("kitten", "sitting", 3), Some(3));
        assert_eq!(edit_distance("kitten", "sitting", 2), None);
        assert_eq!(edit_distance("", "ab", 2), Some(2));
    }

    #[test]
    fn kprobe_blacklist_lines() {
        let b = parse_kprobe_blacklist(
            "0xffffffff81001000-0xffffffff81001020\tdo_int3\n             0xffffffff81002000-0xffffffff81002040\tnotify_die\n",
        );
        assert!(b.contains("do_int3") && b.contains("notify_die") && b.len() == 2);
    }

    #[test]
    fn capabilities() {
        let status = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t000001fffeffffff\n";
        let caps = parse_cap_eff(status).expect("CapEff");
        assert!(has_cap(caps, CAP_BPF));
        assert!(has_cap(caps, CAP_PERFMON));
        assert!(!has_cap(caps, 24));
        assert_eq!(parse_cap_eff("CapEff:\tzz\n"), None);
    }

    #[test]
    fn reads_this_hosts_kallsyms() {
        // Real data: every Linux kernel exports at least `schedule` as a text symbol.
        let k = Kallsyms::read().expect("/proc/kallsyms");
        assert!(k.contains("schedule"));
    }
}

/// The kernel's preemption model, as far as it can be read, and what it means for each attach
/// method.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Preemption {
    /// `none`, `voluntary`, `full`, `lazy` or `rt`; `None` when it cannot be told.
    pub model: Option<String>,
    /// Where it was read.
    pub source: String,
}

impl Preemption {
    /// Reads `/sys/kernel/debug/sched/preempt` (the active model in parentheses, kernels with
    /// dynamic preemption), else the build flags in `/proc/sys/kernel/version` and a
    /// `preempt=` on the command line.
    pub fn read() -> Preemption {
        mount_if_missing("debugfs", "/sys/kernel/debug");
        let debugfs = fs::read_to_string("/sys/kernel/debug/sched/preempt").map_err(|e| {
            if e.kind() == std::io::ErrorKind::PermissionDenied {
                "debugfs is readable by root only"
            } else {
                "no debugfs"
            }
        });
        let version = fs::read_to_string("/proc/sys/kernel/version").unwrap_or_default();
        let cmdline = fs::read_to_string("/proc/cmdline").unwrap_or_default();
        Preemption::parse(debugfs.as_deref().map_err(|e| *e), &version, &cmdline)
    }

    /// `debugfs`: the text of `sched/preempt`, or why it could not be read.
    pub fn parse(debugfs: Result<&str, &str>, version: &str, cmdline: &str) -> Preemption {
        let unreadable = debugfs.err().unwrap_or("no model in it");
        if let Some(model) = debugfs.ok().and_then(|t| {
            t.split_whitespace()
                .find_map(|w| w.strip_prefix('(')?.strip_suffix(')'))
        }) {
            return Preemption {
                model: Some(model.to_owned()),
                source: "/sys/kernel/debug/sched/preempt".to_owned(),
            };
        }
        let flags: Vec<&str> = version.split_whitespace().collect();
        let from_cmdline = cmdline
            .split_whitespace()
            .find_map(|w| w.strip_prefix("preempt="));
        let (model, source) = if flags.contains(&"PREEMPT_RT") {
            (Some("rt"), "PREEMPT_RT in the kernel version".to_owned())
        } else if flags.contains(&"PREEMPT_DYNAMIC") {
            match from_cmdline {
                Some(m) => (Some(m), "preempt= on the kernel command line".to_owned()),
                None => (
                    None,
                    format!("PREEMPT_DYNAMIC kernel, model not readable ({unreadable})"),
                ),
            }
        } else if flags.contains(&"PREEMPT") {
            (Some("full"), "PREEMPT in the kernel version".to_owned())
        } else {
            (
                None,
                "no PREEMPT flag in the kernel version (none or voluntary)".to_owned(),
            )
        };
        Preemption {
            model: model.map(str::to_owned),
            source,
        }
    }

    /// Whether a task can be preempted inside a fentry/fexit program (trampoline programs run
    /// with migration disabled but preemptible): true for full, lazy and rt; also when the
    /// model is unknown on a kernel that could run any (assume the worst).
    pub fn preempts_trampolines(&self) -> bool {
        match self.model.as_deref() {
            Some("none" | "voluntary") => false,
            Some(_) => true,
            None => self.source.starts_with("PREEMPT_DYNAMIC"),
        }
    }
}

#[cfg(test)]
mod preemption_tests {
    use super::Preemption;

    #[test]
    fn reads_the_active_model_and_falls_back_to_build_flags() {
        let p = Preemption::parse(Ok("none voluntary full (lazy)\n"), "", "");
        assert_eq!(p.model.as_deref(), Some("lazy"));
        assert!(p.preempts_trampolines());
        let p = Preemption::parse(Ok("none (voluntary) full lazy\n"), "", "");
        assert_eq!(p.model.as_deref(), Some("voluntary"));
        assert!(!p.preempts_trampolines());
        let v = "#1 SMP PREEMPT_DYNAMIC Debian 7.2.13-1 (2026-10-01)";
        let p = Preemption::parse(Err("no debugfs"), v, "root=/dev/vda preempt=full");
        assert_eq!(p.model.as_deref(), Some("full"));
        let p = Preemption::parse(Err("no debugfs"), v, "root=/dev/vda");
        assert_eq!(p.model, None);
        assert!(
            p.preempts_trampolines(),
            "unknown on a dynamic kernel: assume preemptible"
        );
        // Why it could not be read is said, not guessed: a user outside root meets this.
        let p = Preemption::parse(Err("debugfs is readable by root only"), v, "");
        assert_eq!(
            p.source,
            "PREEMPT_DYNAMIC kernel, model not readable (debugfs is readable by root only)"
        );
        assert!(p.preempts_trampolines());
        let p = Preemption::parse(Err("no debugfs"), "#1 SMP PREEMPT_RT Debian", "");
        assert_eq!(p.model.as_deref(), Some("rt"));
        let p = Preemption::parse(Err("no debugfs"), "#1 SMP Debian 6.1.0", "");
        assert!(!p.preempts_trampolines());
    }
}
