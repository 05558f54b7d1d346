## Guest shell helpers for a recorder started in the background as `$rec`, writing
## `/out/NAME.dtcap` with its standard error in `/out/NAME.err`: - `attached NAME`: waits until
## the capture file is not empty (it appears once the probes are attached); if the recorder has
## died, prints its errors and fails the script.
## No placeholders: lab/tests/common/mod.rs includes it as is (RECORDER_HELPERS).

attached() {
  while [ ! -s /out/$1.dtcap ]; do
    kill -0 $rec 2>/dev/null || { cat /out/$1.err >&2; exit 1; }
    sleep 0.2
  done
}
getppid_function() {
  F=
  for f in __do_sys_getppid __x64_sys_getppid; do
    if grep -qx "$f" /sys/kernel/tracing/available_filter_functions; then F=$f; break; fi
  done
  [ -n "$F" ] || { echo "no getppid function to trace" >&2; exit 3; }
  echo $F > /out/func
}
