//! Shell snippets that guest scripts share (the VM tests in `xtask/tests/`, `soak`, `demo`).

/// [`WAIT_KDAMOND_ON`] as a literal, for `concat!` in `const` guest scripts.
#[macro_export]
macro_rules! wait_kdamond_on {
    () => {
        "# Until the scenario's kdamond runs: a fixed sleep lost that race on a loaded 6.12 guest.
i=0
until [ \"$(cat /sys/kernel/mm/damon/admin/kdamonds/0/state 2>/dev/null)\" = on ]; do
  i=$((i+1))
  if [ $i -gt 300 ]; then
    echo 'kdamond 0 not on 60 s after the scenario started' >&2
    cat /out/scenario.err /out/scenario.log >&2 2>/dev/null || true
    exit 97
  fi
  sleep 0.2
done
"
    };
}

/// Waits (polling every 0.2 s) until kdamond 0 is on — the scenario started in the background
/// just before runs — and fails the guest script with status 97, the scenario's stderr on the
/// console, if that takes more than 60 s. Ends with a newline.
pub const WAIT_KDAMOND_ON: &str = wait_kdamond_on!();
