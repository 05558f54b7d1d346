## `exit_signals` runs once in every exiting task (`do_exit`), in that task, and returns; every
## subshell `( : )` of busybox's ash is a forked task that exits.
## No placeholders: lab/tests/vm_stamps.rs includes it as is (SCRIPT).
set -e
F=exit_signals
grep -qx "$F" /sys/kernel/tracing/available_filter_functions || { echo "no $F" >&2; exit 3; }
# The wait below forks nothing (builtins only; `read -t` on a FIFO nobody writes is the
# sleep): a task that exits between the exit probe's attach and the entry probe's is an
# orphan exit by design, and this test counts orphans from the kernel's skips only.
mkfifo /tmp/tick
exec 3<>/tmp/tick
damon-trace record --func $F --attach kprobe --mode kernel --duration 900s -o /out/s.dtcap \
  2> /out/s.err &
rec=$!
while [ ! -s /out/s.dtcap ]; do
  kill -0 $rec 2>/dev/null || { cat /out/s.err; exit 1; }
  read -t 0.2 _ <&3 || true
done
start=$(cut -d' ' -f1 /proc/uptime)
i=0
while [ $i -lt TASKS ]; do ( : ); i=$((i+1)); done
echo "$start $(cut -d' ' -f1 /proc/uptime)" > /out/s.uptime
# Two collections after the last task exited, then stop (again without forking, so no task
# exits while the probes are detached).
read -t 3 _ <&3 || true
kill -INT $rec
wait $rec
damon-trace export /out/s.dtcap --format json -o /out/s.export.json
