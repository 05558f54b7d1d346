## Guest script of vm_7_2_record_keeps_damons_configuration_while_another_tool_holds_its_lock: records
## while loops keep DAMON's sysfs busy (cat reads that fail with EBUSY), then reports. Runs under the
## migrate-hot scenario (script::with_scenario).
## No placeholders: lab/tests/vm_scenarios.rs includes it as is.
kd=/sys/kernel/mm/damon/admin/kdamonds/0
ask() { while [ ! -e /run/stop ]; do sh -c "echo update_schemes_stats > $kd/state" 2>/dev/null || true; done; }
ask & a1=$!
ask & a2=$!
busy=0
for i in $(seq 50); do cat $kd/state $kd/pid > /dev/null 2>&1 || busy=$((busy+1)); done
echo $busy > /out/busy-reads
damon-trace record --duration 1s --no-calibrate -o /out/busy.dtcap 2> /out/busy.err
touch /run/stop
wait $a1 $a2
damon-trace report /out/busy.dtcap --format json > /out/busy.json