## Guest script of vm_cleanup (helpers); the test: Leaving no trace, and ending well on signals:
## checked in a 7.2 guest against what the kernel itself lists (every BPF program, map and link;
## kprobes; ftrace hooks; DAMON's sysfs) and against the captures and the terminal left behind.
## No placeholders: lab/tests/vm_systemd.rs includes it as is (HELPERS).

snap() {
    i=0
    while :; do
        $snap_bin doctor --json --leftovers > /out/$1.json 2> /dev/null
        grep -q '"ours": true' /out/$1.json || break
        i=$((i+1)); [ $i -ge 20 ] && break
        sleep 0.5
    done
}
metrics() {
    i=0
    until wget -q -O "$1" http://127.0.0.1:9464/metrics; do
        i=$((i+1)); [ $i -gt 240 ] && return 1; sleep 0.5
    done
}
as_alice() { runuser -l alice -c "$1"; }
live_pty() {
    # `sudo damon-trace live` typed by the user in a ROWS x COLS terminal: `script` gives the
    # login shell a pty (sudo, as Debian configures it, puts another between itself and live);
    # q is typed once live's own screen is up (its `LIVE` header: the lines before it, printed
    # by the attach, name the functions too) and has been redrawn for a few seconds.
    n=$1x$2
    rm -f /run/keys-$n; mkfifo /run/keys-$n
    as_alice "script -q -e -c 'stty rows $1 cols $2; stty -g > stty-before; sudo damon-trace live; echo \$? > live.rc; stty -g > stty-after' typescript" \
        < /run/keys-$n > /dev/null 2> /out/live-$n.err &
    pid=$!
    exec 3> /run/keys-$n
    i=0
    until grep -aq LIVE ~alice/typescript 2> /dev/null; do
        i=$((i+1)); [ $i -gt 240 ] && break; sleep 0.5
    done
    sleep 8
    printf q >&3
    wait $pid; echo $? > /out/live-$n.script-rc
    exec 3>&-
    for f in typescript live.rc stty-before stty-after; do
        mv ~alice/$f /out/live-$n.$f 2> /dev/null
    done
}
leftovers() {
    while read -r f; do
        [ "$f" = /. ] && continue
        if [ -L "$f" ] || [ -f "$f" ]; then echo "file $f"
        elif [ -d "$f" ] && ! dpkg -S "$f" > /dev/null 2>&1; then echo "dir $f"
        fi
    done < /out/dpkg-files.txt
    find /etc/systemd /run/systemd/system /usr/lib/systemd /var/lib/systemd -name '*damon-trace*' \
        2> /dev/null | sed 's/^/path /'
    systemctl list-unit-files --no-legend 'damon-trace*' | sed 's/^/unit-file /'
    systemctl list-units --all --no-legend 'damon-trace*' | sed 's/^/unit /'
    getent passwd damon-trace-serve | sed 's/^/user /'
    grep -h damon /etc/passwd /etc/group /etc/shadow | sed 's/^/account /'
    ls -d /var/lib/private/damon* /var/lib/damon* /var/cache/damon* /var/log/damon* 2> /dev/null \
        | sed 's/^/state /'
    dpkg-query -W -f='${Status}\n' damon-trace 2> /dev/null | sed 's/^/dpkg /'
    pgrep -a damon-trace | sed 's/^/process /'
    true
}
