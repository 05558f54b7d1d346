## Guest shell: `start_mine` starts the selected workload paused (its pid in $mine; `$1` runs in
## it first), `trace` records vfs_write and vfs_read with `$1`'s filter options while both
## workloads run, then exports the capture and its report as /out/$name.{json,report.json}.
## No placeholders: lab/tests/vm_adhoc.rs includes it as is (FILTER_RUN).
start_mine() {
  rm -f /tmp/go; mkfifo /tmp/go
  sh -c "$1; read x < /tmp/go; exec dd if=/dev/zero of=/dev/null bs=1 count=MINE 2>&-" &
  mine=$!
}
trace() {
  name=$1; shift
  damon-trace record --func vfs_write --func vfs_read --no-calibrate --duration 600s \
    -o /out/$name.dtcap "$@" 2> /out/$name.err &
  rec=$!
  attached $name
  dd if=/dev/zero of=/dev/null bs=1 count=OTHER 2> /out/$name.other &
  other=$!
  echo go > /tmp/go
  st=0; wait $mine || st=$?; echo $st > /out/$name.mine.status
  wait $other
  echo $mine > /out/$name.pid
  kill -INT $rec
  wait $rec
  damon-trace export /out/$name.dtcap --format json -o /out/$name.json
  damon-trace report /out/$name.dtcap --format json > /out/$name.report.json
  damon-trace report /out/$name.dtcap > /out/$name.report.txt
}
