//! The `session` check: kprobe sessions measured by their self-test.
use super::{Check, Level, check};

/// `session`: whether kprobe sessions (one program at a call's entry and return, 8 bytes per
/// invocation) work here as the tool relies on them, measured by the self-test
/// ([`crate::probe::session::selftest`]). Sessions are not yet an attach method, so their
/// absence is information, not a warning; a kernel that offers them but breaks a promise is.
pub(super) fn session_check(
    privileged: bool,
    btf: bool,
) -> (Check, Option<crate::probe::session::selftest::SelfTest>) {
    use crate::probe::session::{SessionError, selftest};
    if !privileged {
        let c = check(
            "session",
            Level::Ok,
            "kprobe sessions not tried (loading the self-test needs the privileges above)",
            None,
        );
        return (c, None);
    }
    let parsed = btf.then(|| aya::Btf::from_sys_fs().ok()).flatten();
    match selftest::self_test(parsed.as_ref()) {
        Ok(t) if t.holds() => (check("session", Level::Ok, t.describe(), None), Some(t)),
        Ok(t) => {
            let c = check(
                "session",
                Level::Warn,
                format!("kprobe sessions misbehave here: {}", t.describe()),
                Some("report this kernel's release with `damon-trace doctor --json`"),
            );
            (c, Some(t))
        }
        Err(e @ (SessionError::NoBtf | SessionError::NoKfunc(_))) => {
            let found =
                format!("no kprobe sessions: {e}; kprobe/kretprobe and fentry/fexit are used");
            (check("session", Level::Ok, found, None), None)
        }
        Err(e) => {
            let found = format!("kprobe sessions unusable: {e}");
            (check("session", Level::Warn, found, None), None)
        }
    }
}
