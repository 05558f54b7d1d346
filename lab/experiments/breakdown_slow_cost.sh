## What `record --disturbance`'s time breakdown and `record --slow` cost, in instructions
## (docs/benchmarks.md, "Time breakdown" and "Slow calls"). Run in a guest under the
## instruction clock, where a duration is a path length and the same in every boot:
##   cargo xtask build-static
##   cargo xtask vm --kernel 7.2 --clock instructions --out target/cost --timeout 2400 \
##     -- "$(cat lab/experiments/breakdown_slow_cost.sh)"
## then read target/cost/loop-*.json (ns_per_call: instructions per getppid call), sw-*.json
## (ns_per_round_trip: instructions per round trip, two context switches) and
## loop-storm*.json with loc-storm* (instructions per 256 KiB read and local timer interrupts).
## With a binary older than the breakdown (`--bin`), the parts it lacks are skipped.
## Every traced configuration has the recorder stopped (SIGSTOP) while the loop runs, so the
## loop pays the probes and nothing of the reader.
set -e
attached() {
  while [ ! -s /tmp/$1.dtcap ]; do
    kill -0 $rec 2>/dev/null || { cat /out/$1.err >&2; exit 1; }
    sleep 0.2
  done
  sleep 1
}
start() {
  n=$1; shift
  taskset -c 1 damon-trace record "$@" --no-calibrate --duration 3600s -o /tmp/$n.dtcap \
    --format json > /out/$n.json 2> /out/$n.err &
  rec=$!
  attached $n
  kill -STOP $rec
}
stop() { kill -CONT $rec; sleep 0.5; kill -INT $rec; wait $rec; }
F=__do_sys_getppid
grep -q " $F$" /proc/kallsyms || F=__x64_sys_getppid
new=; damon-trace record --help | grep -q -- '--slow' && new=1
for r in 1 2; do
  damon-trace bench-loop --calls 20000 --pin spread > /out/loop-none-$r.json
  [ -n "$new" ] && damon-trace switch-loop --round-trips 20000 > /out/sw-none-$r.json
  for cfg in plain dist ${new:+slow1h}; do
    case $cfg in plain) x=;; dist) x=--disturbance;; slow1h) x='--slow 1h';; esac
    start $cfg-$r --func $F --attach fentry $x
    damon-trace bench-loop --calls 20000 --pin spread > /out/loop-$cfg-$r.json
    [ -n "$new" ] && damon-trace switch-loop --round-trips 20000 > /out/sw-$cfg-$r.json
    stop
  done
  [ -n "$new" ] || continue
  # Per interrupt: 200 reads of 256 KiB under a 20 kHz timer storm on the worker's CPU, alone
  # and beside a --disturbance session of a function the loop does not call (on a kernel
  # without IRQ time accounting, the session's interrupt clock runs two programs per
  # interrupt). The worker's CPU time per call (cpu_ns) holds the interrupts that ran during
  # it; /proc/interrupts' LOC (local timer) line counts them.
  for cfg in stormnone stormdist; do
    [ $cfg = stormdist ] && start $cfg-$r --func $F --attach fentry --disturbance
    grep LOC: /proc/interrupts > /out/loc-$cfg-$r-before
    damon-trace disturb-loop --work zero --bytes 262144 --calls 200 --timer-storm 20000 \
      > /out/loop-$cfg-$r.json
    grep LOC: /proc/interrupts > /out/loc-$cfg-$r-after
    [ $cfg = stormdist ] && stop
  done
  # Every call slow and kept: 300 calls, whose slow records fit the 256 KiB ring.
  for cfg in plain300 slowall300; do
    case $cfg in plain300) x=;; slowall300) x='--slow 0.001us';; esac
    start $cfg-$r --func $F --attach fentry $x
    damon-trace bench-loop --calls 300 --no-warmup --pin spread > /out/loop-$cfg-$r.json
    stop
  done
  # Every call slow, the ring full after the first ~760: a failed reserve per call.
  start slowfull-$r --func $F --attach fentry --slow 0.001us --slow-max 1
  damon-trace bench-loop --calls 20000 --pin spread > /out/loop-slowfull-$r.json
  stop
done
echo done
