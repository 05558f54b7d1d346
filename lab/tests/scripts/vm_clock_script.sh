## Guest script of vm_clock (SCRIPT); the test: The instruction clock (`cargo xtask vm --clock
## instructions`: QEMU's `-icount shift=0`) on Debian 7.2, in one boot: - a tight loop of 20 000
## `getppid` calls (`damon-trace disturb-loop`, which counts its own calls: ground truth the
## tool does not produce), traced by the default attach method: every call recorded, and at
## least 99 % of them take exactly the same number of instructions; - the guest's damon-trace
## was told its clock: the capture, the report (JSON, text) and the per-call CSV name it and its
## unit (`insn`); - A/A: two sessions a side of the same loop in this boot compare as no
## difference, with finite numbers (identical per-run medians, a run-to-run SD of 0, must not
## make a verdict); - a capture stated to be of the wall clock (`record --clock wall`) is
## refused beside them, with the cause and the remedy; - `calibrate` under this clock: every
## attach method's floor in instructions, checked as `vm_calibrate` checks wall-clock floors
## (the held-out empty function within the stated ±).
## No placeholders: lab/tests/vm_clock.rs includes it as is (SCRIPT).

set -e
getppid_function
session() {
  name=$1 calls=$2; shift 2
  damon-trace record --func $F --no-calibrate --duration 600s -o /out/$name.dtcap "$@" \
    2> /out/$name.err &
  rec=$!
  attached $name
  damon-trace disturb-loop --work getppid --calls $calls > /out/$name.json
  kill -INT $rec
  wait $rec
}
damon-trace calibrate --calls {CAL_CALLS} --attach auto --json > /out/cal.json 2> /out/cal.err
damon-trace calibrate --calls 200 --attach fentry > /out/cal.txt 2>> /out/cal.err
session loop 20000
damon-trace report /out/loop.dtcap --format json > /out/loop.report.json
damon-trace report /out/loop.dtcap > /out/loop.txt
damon-trace export /out/loop.dtcap --format csv > /out/loop.csv
for s in a1 a2 b1 b2; do session $s 2000; done
session wall 2000 --clock wall
damon-trace compare --before /out/a1.dtcap /out/a2.dtcap --after /out/b1.dtcap /out/b2.dtcap \
  --format json > /out/aa.json
damon-trace compare --before /out/a1.dtcap /out/a2.dtcap --after /out/b1.dtcap /out/b2.dtcap \
  > /out/aa.txt
set +e
damon-trace compare /out/a1.dtcap /out/wall.dtcap > /out/mixed.out 2> /out/mixed.err
echo $? > /out/mixed.status
