# Until the scenario's kdamond runs: a fixed sleep lost that race on a loaded 6.12 guest.
# The scenario gives its workload up to 120 s to become ready (READY_TIMEOUT in
# damon-user/src/damon/scenario.rs) before it configures DAMON, so a deadline shorter than
# that fails a slow host, not a broken build: wait up to 180 s by the guest's clock, and stop
# as soon as the scenario has exited (then it failed, and says why on its stderr).
kd_t0=$(cut -d. -f1 /proc/uptime)
until [ "$(cat /sys/kernel/mm/damon/admin/kdamonds/0/state 2>/dev/null)" = on ]; do
  case "$(cat /proc/$scenario/status 2>/dev/null)" in
    '' | *'State:'*'Z (zombie)'*)
      kd_rc=0; wait $scenario || kd_rc=$?
      echo "kdamond 0 not on: the scenario exited (status $kd_rc) before turning it on" >&2
      cat /out/scenario.err >&2 2>/dev/null || true
      exit 97;;
  esac
  if [ $(($(cut -d. -f1 /proc/uptime) - kd_t0)) -ge 180 ]; then
    echo 'kdamond 0 not on 180 s after the scenario started (it allows its workload 120 s)' >&2
    cat /out/scenario.err /out/scenario.out >&2 2>/dev/null || true
    exit 97
  fi
  sleep 0.2
done
