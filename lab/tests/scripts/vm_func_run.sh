## One traced run: record with `FLAGS` until `dd` has copied [`BYTES`] bytes one by one, then
## report and export.
## No placeholders: lab/tests/vm_func.rs includes it as is (RUN).
run() {
  name=$1; shift
  damon-trace record --func vfs_read --func vfs_write --duration 600s --no-calibrate \
    -o /out/$name.dtcap "$@" \
    2> /out/$name.err &
  rec=$!
  attached $name
  dd if=/dev/zero of=/dev/null bs=1 count=BYTES 2> /out/$name.dd &
  dd=$!
  wait $dd
  echo $dd > /out/$name.ddpid
  kill -INT $rec
  wait $rec
  damon-trace export /out/$name.dtcap --format json -o /out/$name.export.json
}
