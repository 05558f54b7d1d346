## Guest script of vm_disturb (SCRIPT); the test: Disturbed calls against ground truth the tool
## does not produce (`damon-trace disturb-loop`, whose worker, pinned to CPU 0, reads its own
## context-switch counts with `getrusage` before and after every system call), in every attach
## method of 7.2 and 6.12 and some of 6.1 and 7.3, with `--attach auto`; the captures read by
## the tests' own reader (`dtcap`), the export checked against it: - **sleeping**: every
## `nanosleep` is flagged `slept` in `hrtimer_nanosleep`, exactly as often as the task itself
## saw it switch out; - **preempted**: with a spinning thread on the same CPU, most long `read`
## calls of /dev/zero (`read_zero`, 16 MiB or more, so that each takes at least 20 ms, five
## ticks) are flagged `preempted`, and only calls the task itself saw switched out are (a switch
## at the system call's exit is outside the function); - **interrupted**: the local timer
## interrupts a call about HZ times a second (Debian's kernels are built with HZ=250): the calls
## that stayed on the CPU count no more hard interrupts than /proc/interrupts says their CPU
## took while the workload ran, and at least a floor of its interrupts in their share of that
## time, and 64 KiB calls, far shorter than a tick, are mostly clean, no more of them disturbed
## than the CPU took interrupts and the task saw switches; - **clean calls stay put**: 1 MiB
## calls, alone and beside the spinning thread in turn (so both see the same load of the host),
## have the same clean median; - **injected interrupts**: without and with a timer storm on the
## worker's CPU (a perf hrtimer that wakes no task), the same holds, and CPU 0 took more
## interrupts in the storm beyond chance; with the storm on every other call, those calls are
## disturbed more often and the clean calls of both halves have the same median; - **kernel
## mode**: with `--mode both` every call is both recorded and counted in the kernel's histograms
## with the same counts, so the records (checked as above) are ground truth for the kernel's
## disturbed-call counts: per reason, per bucket and in sum they must equal the records', and a
## kernel-mode report of the capture must state the records' fractions and the clean calls'
## percentiles in their buckets; - **time breakdown**: each call's time off the CPU, in
## interrupts and on it, against the 1 ms sleeps asked for and the task's own CPU time read
## around each system call (`CLOCK_THREAD_CPUTIME_ID`), and long calls beside the spinner (every
## other one) as long on the CPU as their neighbours alone; the capture says whether interrupt
## time is measured exactly when /proc/kallsyms has `cpu_irqtime`.
## No placeholders: lab/tests/vm_disturb.rs includes it as is (SCRIPT).

set -e
# IRQ time accounting (the breakdown's interrupt time): whether the kernel has cpu_irqtime.
grep -c -w cpu_irqtime /proc/kallsyms > /out/irqtime.txt || true
one() {
  a=$1 name=${2:-$1} mode=${3:-stream}
  taskset -c 1 damon-trace record --func hrtimer_nanosleep --func read_zero --attach $a \
    --mode $mode --disturbance --no-calibrate --duration 600s -o /out/$name.dtcap \
    2> /out/$name.err &
  rec=$!
  attached $name
  a=$name
  damon-trace disturb-loop --work sleep --calls 30 > /out/$a-sleep.json
  damon-trace disturb-loop --work zero --bytes 16777216 --calls 30 > /out/$a-long.json
  damon-trace disturb-loop --work zero --bytes 16777216 --min-call-ms 20 --calls 30 --hog \
    > /out/$a-long-hog.json
  damon-trace disturb-loop --work zero --bytes 16777216 --min-call-ms 20 --calls 40 --hog-odd \
    > /out/$a-long-hog-odd.json
  damon-trace disturb-loop --work zero --bytes 1048576 --calls 200 --hog-odd > /out/$a-mid.json
  damon-trace disturb-loop --work zero --bytes 65536 --calls 100 > /out/$a-short.json
  damon-trace disturb-loop --work zero --bytes 1048576 --calls 300 > /out/$a-base.json
  damon-trace disturb-loop --work zero --bytes 1048576 --calls 300 --timer-storm 20000 \
    > /out/$a-storm.json
  damon-trace disturb-loop --work zero --bytes 262144 --calls 1000 --timer-storm 5000 \
    --storm-odd > /out/$a-storm-odd.json
  kill -INT $rec
  wait $rec
  damon-trace export /out/$a.dtcap --format csv > /out/$a.csv
  damon-trace report /out/$a.dtcap --format json > /out/$a.report.json
}
METHODS
# Its disturbance check, which depends on no function: one function's trials suffice.
damon-trace doctor --format json --functions lock_timer_base > /out/doctor.json || true
