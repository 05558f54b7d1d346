## Guest script of vm_exact (SCRIPT); the test: Exact accounting under contention, against
## ground truth the tool does not produce: three tasks each make a known number of `getppid`
## system calls (`damon-trace bench-loop`), pinned to one CPU (they preempt one another, also
## inside the probes) or spread over the CPUs, traced with fentry, kprobe and (where the kernel
## has them) kprobe sessions and fsessions, in stream and kernel mode, on each Debian kernel
## with its default preemption model and with `preempt=full`.
## No placeholders: lab/tests/vm_exact.rs includes it as is (SCRIPT).

mount -t debugfs none /sys/kernel/debug 2>/dev/null || true
cat /sys/kernel/debug/sched/preempt > /out/preempt 2>/dev/null || echo unknown > /out/preempt
getppid_function
one() {
  name=$1; attach=$2; mode=$3; pin=$4
  damon-trace record --func $F --attach $attach --mode $mode --no-calibrate --duration 600s \
    -o /out/$name.dtcap 2> /out/$name.err &
  rec=$!
  attached $name
  damon-trace bench-loop --calls CALLS --tasks TASKS --pin $pin --no-warmup > /out/$name.loop
  kill -INT $rec
  wait $rec
  damon-trace report /out/$name.dtcap --format json > /out/$name.json
}
RUNS
