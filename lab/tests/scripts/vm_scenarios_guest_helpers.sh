## `state NAME`: every file of DAMON's sysfs with its value, and DAMON_STAT, into
## /out/NAME.state (`damon_dump` of [`DAMON_HELPERS`], which the script must come after).
## No placeholders: lab/tests/vm_scenarios.rs includes it as is (GUEST_HELPERS).

state() { damon_dump /out/$1.state; }
# run NAME ARGS...: `record` (of $FUNCS if set) around `scenario ARGS`, then the report.
run() {
  name=$1; shift
  echo "$name at $(cut -d' ' -f1 /proc/uptime) s"
  state $name.before
  damon-trace record -o /out/$name.dtcap --duration 120s --no-calibrate ${FUNCS:+--functions $FUNCS} \
    > /out/$name.rec.out 2>&1 &
  rec=$!
  while [ ! -s /out/$name.dtcap ]; do sleep 0.2; done
  damon-trace scenario "$@" --workload-mib 64 --hot-mib 16 > /out/$name.out 2> /out/$name.err
  echo $? > /out/$name.status
  kill -INT $rec
  wait $rec
  damon-trace report /out/$name.dtcap --format json > /out/$name.json
  state $name.after
}
