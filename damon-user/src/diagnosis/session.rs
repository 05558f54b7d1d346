//! The `session` and `fsession` checks: per-invocation sessions measured by their self-test.
use super::{Check, Level, check};
use crate::probe::loader::session::{SessionError, selftest, selftest::SelfTest};

/// `session` (kprobe session) and `fsession`: whether each works here as the tool relies on it
/// (one program at a call's entry and return, 8 bytes per invocation), measured by the
/// self-test ([`selftest`]), and what each measured. Sessions are not yet an attach method, so
/// their absence is information, not a warning; a kernel that offers them but breaks a
/// promise is.
pub(super) fn session_checks(
    privileged: bool,
    btf: bool,
) -> ([Check; 2], Option<SelfTest>, Option<SelfTest>) {
    let parsed = (privileged && btf)
        .then(crate::probe::facts::sysfiles::aya_btf)
        .flatten();
    let (kprobe, kprobe_test) = one("session", "kprobe sessions", privileged, || {
        selftest::self_test(parsed.as_deref(), false)
    });
    let (fsession, fsession_test) = one("fsession", "fsessions", privileged, || {
        selftest::self_test(parsed.as_deref(), true)
    });
    ([kprobe, fsession], kprobe_test, fsession_test)
}

fn one(
    name: &'static str,
    what: &str,
    privileged: bool,
    test: impl FnOnce() -> Result<SelfTest, SessionError>,
) -> (Check, Option<SelfTest>) {
    if !privileged {
        let found = format!("{what} not tried (loading the self-test needs the privileges above)");
        return (check(name, Level::Ok, found, None), None);
    }
    match test() {
        Ok(t) if t.holds() => (check(name, Level::Ok, t.describe(), None), Some(t)),
        Ok(t) => {
            let c = check(
                name,
                Level::Warn,
                format!("{what} misbehave here: {}", t.describe()),
                Some("report this kernel's release with `damon-trace doctor --json`"),
            );
            (c, Some(t))
        }
        Err(e @ (SessionError::NoBtf | SessionError::NoKfunc(_) | SessionError::NoFsession)) => {
            let found = format!("no {what}: {e}; kprobe/kretprobe and fentry/fexit are used");
            (check(name, Level::Ok, found, None), None)
        }
        Err(e) => {
            let found = format!("{what} unusable: {e}");
            (check(name, Level::Warn, found, None), None)
        }
    }
}
