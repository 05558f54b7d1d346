## The overhead runs of `cargo xtask bench` in one boot (bench/guest_script.rs): each round runs
## every configuration, into /out/runs (round 0, a warm-up, into /out/warmup). Placeholders: {{FUNC}}
## (the traced function), {{CALLS}} (calls per run), {{RING}} (ring bytes), {{ROUNDS}} (run_round lines).
F={{FUNC}}
N={{CALLS}}
mkdir -p /out/runs /out/warmup
# bpftrace's compiler writes through /dev/fd/N, which busybox's /dev lacks.
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
uname -r > /out/uname.txt
if ! grep -qx "$F" /sys/kernel/tracing/available_filter_functions; then
  echo "bench: $F is not in available_filter_functions" >&2; exit 3
fi
bpftrace --version > /out/bpftrace-version.txt 2>&1 || { cat /out/bpftrace-version.txt >&2; exit 4; }
# The peer: the same timing as ours (entry stamp keyed by tid, delta at exit into a linear
# histogram of 10 ns buckets like kernel mode's), nothing else per call. Its printing
# probe shows that the output loop runs, which bpftrace starts once every probe is attached.
cat > /tmp/bench.bt <<EOF
fentry:vmlinux:$F { @start[tid] = nsecs; }
fexit:vmlinux:$F { \$s = @start[tid]; if (\$s != 0) { @ns = lhist((int64)(nsecs - \$s), 0, 5120, 10); delete(@start, tid); } }
interval:ms:200 { printf("ready\n"); }
END { clear(@start); }
EOF
# Waits up to $3 seconds for file $1 to match $2 while process $4 lives.
wait_for() {
  i=0
  while ! grep -q "$2" "$1" 2>/dev/null; do
    kill -0 "$4" 2>/dev/null || return 1
    i=$((i+1)); [ $i -gt $(($3*10)) ] && return 1
    sleep 0.1
  done
}
# timed_under STEM OUT PATTERN SECONDS SIGNAL WHAT CMD...: starts CMD (stdout into OUT), and
# once OUT shows PATTERN (CMD's probes are attached) times the loop into STEM.loop; then stops
# CMD with SIGNAL. (A background job of a non-interactive shell ignores SIGINT unless it
# handles it: bpftrace does, and prints its histogram; bench-floor does not, and gets TERM.)
timed_under() {
  p=$1; out=$2; pat=$3; secs=$4; sig=$5; what=$6; shift 6
  "$@" > $out 2> $p.err & t=$!
  if wait_for $out "$pat" $secs $t; then
    sleep 1
    damon-trace bench-loop --calls $N > $p.loop
  else
    echo "bench: $what did not attach" >> $p.err
  fi
  kill -$sig $t; wait $t
}
# run_one ROUND DIR CONFIG: one timed loop under one configuration.
run_one() {
  r=$1; c=$3; p=$2/$r-$c
  echo "bench: round $r $c" >&2
  case $c in
  untraced)
    damon-trace bench-loop --calls $N > $p.loop ;;
  bpftrace)
    timed_under $p $p.bt '^ready' 600 INT bpftrace bpftrace /tmp/bench.bt ;;
  floor-*)
    timed_under $p $p.floor '^attached' 300 TERM bench-floor \
      damon-trace bench-floor --func $F --attach ${c#floor-} ;;
  *)
    mode=${c%%-*}; attach=${c#*-}; attach=${attach%%-*}
    [ "$attach" = ksession ] && attach=kprobe-session
    # -nolog: the build without the probes' log calls (`cargo xtask bench` copies it in).
    bin=damon-trace; case $c in *-nolog) bin=damon-trace-nolog;; esac
    # -dist: with the disturbance counters.
    # -slow: slow calls on, none slow; -slowall: every call slow (one kept, the rest counted).
    extra=; case $c in *-dist) extra=--disturbance;; *-slow) extra='--slow 1h';;
      *-slowall) extra='--slow 0.001us --slow-max 1';; esac
    rm -f /tmp/bench.dtcap
    $bin record -o /tmp/bench.dtcap --duration 3600s --func $F --mode $mode --attach $attach --ring-size {{RING}} $extra 2> $p.err & t=$!
    # The capture's header is written once the probes are attached.
    i=0
    while [ ! -s /tmp/bench.dtcap ] && kill -0 $t 2>/dev/null && [ $i -lt 3000 ]; do i=$((i+1)); sleep 0.1; done
    if [ -s /tmp/bench.dtcap ] && kill -0 $t 2>/dev/null; then
      sleep 1
      # Stream mode: the reader stopped while the loop runs (the ring holds every record),
      # except in the -reader configuration.
      case $c in stream-*-reader|stream-*-slowall) ;; stream-*) kill -STOP $t;; esac
      damon-trace bench-loop --calls $N > $p.loop
      kill -CONT $t
    else
      echo "bench: record did not attach" >> $p.err
    fi
    kill -INT $t; wait $t; echo $? > $p.rc
    damon-trace report /tmp/bench.dtcap --format json > $p.report.json 2>> $p.err ;;
  esac
}
# run_round ROUND DIR CONFIG...
run_round() {
  r=$1; d=$2; shift 2
  for c in "$@"; do run_one $r $d $c; done
}
{{ROUNDS}}exit 0
