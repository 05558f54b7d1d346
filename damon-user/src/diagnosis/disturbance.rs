//! The `disturbance` check: whether `--disturbance` can tell clean calls here, i.e. whether
//! every kernel counter it reads was found (`probe::tracer::disturb`), and if not, which is missing.
use super::{Check, Level, check};

/// Found: where the hard-interrupt count comes from. Missing: why, as a warning only when the
/// privileges to look were there (without them the addresses are hidden, not absent).
pub(super) fn disturbance_check(privileged: bool) -> Check {
    let status = crate::probe::tracer::disturb::available();
    if status.measured {
        let found = format!(
            "--disturbance can tell clean calls: task_struct switch counts, softirqs and hard \
             interrupts from {}",
            status.hardirq_sources.join(" + ")
        );
        return check("disturbance", Level::Ok, found, None);
    }
    let why = status.why_not.unwrap_or_default();
    if !privileged {
        let found = format!("--disturbance not checked without the privileges above ({why})");
        return check("disturbance", Level::Ok, found, None);
    }
    check(
        "disturbance",
        Level::Warn,
        format!("--disturbance cannot read the kernel's counters here: {why}"),
        Some("record without --disturbance; its captures say why the calls are not classified"),
    )
}
