## Guest script of vm_slow (SCRIPT); the test: slow calls (`record --slow`) against ground truth
## the tool does not produce, per attach method: every 1 ms nanosleep of `disturb-loop` is slow
## at 500 µs, with the syscall path in its stack; `read-mix` calls vfs_read from read(2) of
## 16 MiB (slow) and pread64(2) of 16 bytes (fast): the slow calls' stacks name the read path,
## the pread path (almost) never; a run whose slow calls outrun the per-function bound counts
## every one it drops (kept + ring full + over limit = the slow calls in the records).
## No placeholders: lab/tests/vm_slow.rs replaces the line METHODS.

set -e
one() {
  a=$1
  taskset -c 1 damon-trace record --func hrtimer_nanosleep --func vfs_read --attach $a \
    --slow 500us --no-calibrate --duration 600s -o /out/$a.dtcap --format json \
    > /out/$a.json 2> /out/$a.err &
  rec=$!
  attached $a
  damon-trace disturb-loop --work sleep --calls 30 > /out/$a-sleep.json
  damon-trace read-mix --reads 40 --preads 400 > /out/$a-mix.json
  kill -INT $rec
  wait $rec
  taskset -c 1 damon-trace record --func vfs_read --attach $a --slow 0.001us --slow-max 300 \
    --no-calibrate --duration 600s -o /out/$a-bounded.dtcap --format json \
    > /out/$a-bounded.json 2> /out/$a-bounded.err &
  rec=$!
  attached $a-bounded
  damon-trace read-mix --reads 0 --preads 20000 > /out/$a-flood.json
  kill -INT $rec
  wait $rec
}
METHODS
