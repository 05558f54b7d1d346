## Guest script of vm_cleanup (helpers); the test: Leaving no trace, and ending well on signals:
## checked in a 7.2 guest against what the kernel itself lists (every BPF program, map and link;
## kprobes; ftrace hooks; DAMON's sysfs) and against the captures and the terminal left behind.
## No placeholders: lab/tests/vm_cleanup.rs includes it as is (HELPERS).

snap() {
    i=0
    while :; do
        damon-trace doctor --json --leftovers > /out/$1.json 2> /dev/null
        echo $? > /out/$1.rc
        grep -q '"ours": true' /out/$1.json || break
        i=$((i+1)); [ $i -ge 20 ] && break
        sleep 0.5
    done
    cat /sys/kernel/debug/kprobes/list > /out/$1.kprobes
    cat /sys/kernel/tracing/enabled_functions > /out/$1.ftrace
}
