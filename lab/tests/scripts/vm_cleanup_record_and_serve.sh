## Guest script of vm_7_2_record_and_serve_leave_no_bpf_object_and_end_well_on_signals: records that
## end normally, on a full filesystem, by SIGKILL (fentry and kprobe) and by INT/TERM/HUP, a SIGKILLed
## serve, and doctor with ftrace or kprobes off, a `snap` after each. Comes after HELPERS and
## common::capture_helpers(). No placeholders: lab/tests/vm_cleanup.rs includes it as is.

snap before
damon-trace record -o /out/normal.dtcap --duration 5s 2> /out/normal.err
echo $? > /out/normal.rc
snap after-normal

# A runtime failure after attaching: the capture's filesystem fills up.
mkdir -p /small && mount -t tmpfs -o size=16k tmpfs /small
damon-trace record -o /small/full.dtcap --duration 120s --no-calibrate 2> /out/full.err
echo $? > /out/full.rc
snap after-full

for attach in fentry kprobe; do
    damon-trace record -o /out/killed-$attach.dtcap --duration 120s --attach $attach --no-calibrate \
        --functions lock_timer_base 2> /out/killed-$attach.err &
    rec=$!
    grown /out/killed-$attach.dtcap
    # The full doctor beside the fentry recorder; its quick listing beside the kprobe one.
    if [ $attach = fentry ]; then
        damon-trace doctor --json --functions lock_timer_base > /out/during-$attach.json
    else
        damon-trace doctor --json --leftovers > /out/during-$attach.json
    fi
    echo $? > /out/during-$attach.rc
    echo $rec > /out/during-$attach.pid
    kill_recorder $rec killed-$attach
    wait $rec
    echo $? > /out/killed-$attach.rc
    damon-trace report /out/killed-$attach.dtcap --format json > /out/killed-$attach.json
    echo $? > /out/killed-$attach-report.rc
    damon-trace export /out/killed-$attach.dtcap --format json -o /out/killed-$attach-export.json
    snap after-killed-$attach
done

damon-trace serve --listen 127.0.0.1:9464 --duration 120s --no-calibrate 2> /out/serve.err &
srv=$!
i=0
until wget -q -O /out/serve.txt http://127.0.0.1:9464/metrics; do
    i=$((i+1)); [ $i -gt 600 ] && break; sleep 0.2
done
kill -KILL $srv
wait $srv
echo $? > /out/serve.rc
snap after-serve

for sig in INT TERM HUP; do
    damon-trace record -o /out/$sig.dtcap --duration 120s --functions lock_timer_base --no-calibrate \
        2> /out/$sig.err &
    rec=$!
    grown /out/$sig.dtcap
    kill -$sig $rec
    wait $rec
    echo $? > /out/$sig.rc
    damon-trace report /out/$sig.dtcap --format json > /out/$sig.json
    snap after-$sig
done

# doctor predicts probes that attach but never fire.
echo 0 > /proc/sys/kernel/ftrace_enabled
damon-trace doctor --json --functions lock_timer_base > /out/ftrace-off.json
echo 1 > /proc/sys/kernel/ftrace_enabled
echo 0 > /sys/kernel/debug/kprobes/enabled
damon-trace doctor --json --functions lock_timer_base > /out/kprobes-off.json
echo 1 > /sys/kernel/debug/kprobes/enabled
exit 0