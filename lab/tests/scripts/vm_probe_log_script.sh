## Guest script of vm_probe_log (SCRIPT); the test: `--debug-probes` on Debian 7.2, one boot:
## the probes' aya-log diagnostics reach `record`'s stderr, one line per event, for every attach
## method.
## No placeholders: lab/tests/vm_probe_log.rs includes it as is (SCRIPT).

getppid_function
one() {
  name=$1; attach=$2; level=$3
  flag=; [ -n "$level" ] && flag="--debug-probes $level"
  damon-trace record --func $F --attach $attach --tgid 1 $flag --no-calibrate --duration 600s \
    -o /out/$name.dtcap 2> /out/$name.err &
  rec=$!
  attached $name
  damon-trace bench-loop --calls CALLS --tasks 1 --pin same --no-warmup > /out/$name.loop
  sleep 2
  kill -INT $rec
  wait $rec
  damon-trace report /out/$name.dtcap --format json > /out/$name.json
}
RUNS
