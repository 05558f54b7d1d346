## Guest script of vm_drops (SCRIPT); the test: Two drop paths in a real 7.2 guest, each against
## numbers the workload fixes, not the tool: - **Ring full, kprobe.** `--func` on the kernel
## function behind getppid(2), `--attach kprobe`, a 4 KiB ring, and a reader stopped (SIGSTOP)
## while `bench-loop` makes `RING_CALLS` calls: the ring holds at most 64 records, every other
## call is lost to it.
## No placeholders: lab/tests/vm_drops.rs includes it as is (SCRIPT).

T=/sys/kernel/tracing/available_filter_functions
# The ring: the kernel function behind getppid(2).
getppid_function
G=$F
damon-trace record --func $G --attach kprobe --ring-size 4096 --no-calibrate --duration 300s   -o /out/ring.dtcap 2> /out/ring.err &
rec=$!
attached ring
kill -STOP $rec
damon-trace bench-loop --calls @RING_CALLS@ --tasks 1 --no-warmup > /out/ring.loop
kill -CONT $rec
kill -INT $rec
wait $rec
damon-trace report /out/ring.dtcap --format json > /out/ring.report.json
damon-trace export /out/ring.dtcap --format json -o /out/ring.export.json
# The stamp map: `drive NAME MODE` records fifo_open (kprobe, the map shrunk to @MAP@) while
# the FIFO's readers and writer open it.
F=fifo_open
grep -qx "$F" $T || { echo "no $F" >&2; exit 3; }
mkfifo /tmp/fifo
drive() {
  DAMON_TRACE_MAX_IN_FLIGHT=@MAP@ damon-trace record --func $F --attach kprobe --mode $2     --no-calibrate --duration 300s -o /out/$1.dtcap 2> /out/$1.err &
  rec=$!
  attached $1
  pids=""
  i=0
  while [ $i -lt @READERS@ ]; do cat /tmp/fifo > /dev/null & pids="$pids $!"; i=$((i+1)); done
  t=0
  until [ "$(for p in $pids; do cat /proc/$p/wchan 2>/dev/null; echo; done | grep -c wait_for_partner)" -eq @READERS@ ]; do
    t=$((t+1)); [ $t -le 300 ] || { echo "readers not all waiting in fifo_open" >&2; exit 1; }
    sleep 0.2
  done
  echo $pids > /out/$1.readers
  : > /tmp/fifo
  wait $pids
  kill -INT $rec
  wait $rec
  damon-trace report /out/$1.dtcap --format json > /out/$1.report.json
  damon-trace export /out/$1.dtcap --format json -o /out/$1.export.json
}
drive stream stream
drive kernel kernel
