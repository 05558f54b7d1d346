## Guest script of vm_exact (NO_SESSION); the test: Exact accounting under contention, against
## ground truth the tool does not produce: three tasks each make a known number of `getppid`
## system calls (`damon-trace bench-loop`), pinned to one CPU (they preempt one another, also
## inside the probes) or spread over the CPUs, traced with fentry, kprobe and (where the kernel
## has them) kprobe sessions and fsessions, in stream and kernel mode, on each Debian kernel
## with its default preemption model and with `preempt=full`.
## No placeholders: lab/tests/vm_exact.rs includes it as is (NO_SESSION).

damon-trace record --func $F --attach kprobe-session --no-calibrate --duration 1s \
  -o /out/nosession.dtcap 2> /out/nosession.err && echo 0 > /out/nosession.rc \
  || echo $? > /out/nosession.rc
