## Guest script of vm_7_2_scenario_restores_damon_after_sigkill_sigterm_sigint_and_sighup: a scenario
## stopped by each signal must leave DAMON's sysfs and DAMON_STAT as before and no workload; one killed
## with its guardian leaves a stale configuration for doctor. Comes after DAMON_HELPERS.
## No placeholders: lab/tests/vm_cleanup.rs includes it as is.

kd=/sys/kernel/mm/damon/admin/kdamonds
stat=/sys/module/damon_stat/parameters/enabled
# A stopped kdamond configured by someone else, and DAMON_STAT on if the kernel has it.
[ -e $stat ] && echo N > $stat
damon_leave_stopped_kdamond
[ -e $stat ] && echo Y > $stat
[ -e $stat ] && echo present > /out/damon_stat.txt
# Our processes still alive (workloads, scenarios, guardians): those whose program is
# damon-trace (the shell running this script has the same words in its command line).
ours() {
    for p in /proc/[0-9]*; do
        prog=$(tr '\0' '\n' < $p/cmdline 2> /dev/null | head -n 1)
        case "$prog" in
            *damon-trace) echo "${p#/proc/} $(tr '\0' ' ' < $p/cmdline 2> /dev/null)";;
        esac
    done
}
damon_dump /out/before.txt
start() {
    damon-trace scenario migrate-hot --duration 300s --workload-mib 64 --hot-mib 16 \
        > /out/$1.out 2> /out/$1.err &
    pid=$!
    # Until the kdamond is on and the scenario says so (its run loop comes next).
    i=0
    until grep -q 'kdamond on' /out/$1.err; do
        i=$((i+1)); [ $i -gt 900 ] && break; sleep 0.2
    done
}
for sig in KILL TERM INT HUP; do
    start $sig
    kill -$sig $pid
    wait $pid
    echo $? > /out/$sig.rc
    i=0
    while :; do
        damon_dump /out/$sig.after.txt
        ours > /out/$sig.procs
        cmp -s /out/before.txt /out/$sig.after.txt && [ ! -s /out/$sig.procs ] && break
        i=$((i+1)); [ $i -ge 40 ] && break
        sleep 0.25
    done
done
# Scenario and guardian both SIGKILLed: nobody restores, doctor must say so.
start stale
guardian=$(for p in /proc/[0-9]*; do
    [ "$(cat $p/comm 2> /dev/null)" = damon-guardian ] && echo ${p#/proc/}
done)
echo "$guardian" > /out/guardian.pid
kill -KILL $guardian $pid
wait $pid
# Until both (and the workload) are gone: doctor would still see a running scenario.
i=0
while [ -n "$(ours)" ]; do i=$((i+1)); [ $i -gt 100 ] && break; sleep 0.1; done
ours > /out/stale.procs
damon-trace doctor --json --functions lock_timer_base > /out/stale-doctor.json
echo off > $kd/0/state 2> /dev/null
echo 0 > $kd/nr_kdamonds
damon-trace doctor --json --functions lock_timer_base > /out/clean-doctor.json
exit 0