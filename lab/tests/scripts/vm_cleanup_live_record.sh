## Guest script of vm_7_2_live_record_ends_well_on_q_sigint_sigterm_sighup_and_sigkill: `live --record`
## ended by q (typed by the key script) and by each signal, the terminal and the kernel checked after each.
## Comes after HELPERS and CAPTURE_HELPERS.
## No placeholders: lab/tests/vm_cleanup.rs includes it as is.

stty -g > /out/stty-before.txt
snap live-before
# q: typed by the key script once the panel counts calls.
printf '@@start-q@@\n'
damon-trace live --record /out/live-q.dtcap --functions lock_timer_base < /dev/tty \
    2> /out/live-q.err
echo $? > /out/live-q.rc
stty -g > /out/stty-after-q.txt
printf '@@after-q@@\n'
damon-trace report /out/live-q.dtcap --format json > /out/live-q.json
snap after-q
for sig in INT TERM HUP KILL; do
    printf '@@start-%s@@\n' $sig
    damon-trace live --record /out/live-$sig.dtcap --functions lock_timer_base --no-calibrate \
        < /dev/tty 2> /out/live-$sig.err &
    pid=$!
    grown /out/live-$sig.dtcap
    if [ $sig = KILL ]; then kill_recorder $pid live-KILL; else kill -$sig $pid; fi
    wait $pid
    echo $? > /out/live-$sig.rc
    stty -g > /out/stty-after-$sig.txt
    [ $sig = KILL ] && { stty sane; printf '\033[?1049l\033[?25h'; }
    printf '@@after-%s@@\n' $sig
    damon-trace report /out/live-$sig.dtcap --format json > /out/live-$sig.json
    snap after-$sig
done
damon-trace export /out/live-KILL.dtcap --format json -o /out/live-KILL-export.json
exit 0