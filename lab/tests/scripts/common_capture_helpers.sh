## Guest shell functions around a recorder writing a capture: `grown FILE` waits for its first
## chunk after the metadata, `kill_recorder PID NAME` logs the capture's growth to
## /out/NAME.flushes for {{KILL_AFTER_S}} seconds, then SIGKILLs PID (lab/tests/common/mod.rs,
## capture_helpers). Placeholder: {{KILL_AFTER_S}} (common::KILL_AFTER_S).

grown() {
    # The 16-byte file header, then the metadata chunk (16-byte chunk header whose bytes 8..12
    # are its stored length, then that many bytes), written one after the other.
    i=0
    # (The braces: a redirection that fails is reported before a later `2>` applies.)
    until [ "$({ wc -c < "$1"; } 2> /dev/null || echo 0)" -ge 32 ]; do
        i=$((i+1)); [ $i -gt 600 ] && { echo "$1 never appeared" >&2; exit 98; }; sleep 0.2
    done
    meta_end=$((32 + $(od -A n -t u4 -j 24 -N 4 "$1")))
    i=0
    until [ "$(wc -c < "$1")" -gt $meta_end ]; do
        i=$((i+1)); [ $i -gt 1200 ] && { echo "$1 has no chunk after its metadata" >&2; exit 98; }
        sleep 0.1
    done
}
kill_recorder() {
    # Each poll reads the clock, then the size: a size that differs from the previous poll's
    # was written after that poll's clock read ($before) and about when this one's ($now).
    # The deadline is in hundredths of a second (/proc/uptime has two decimals; the 1 put
    # before them keeps "08" from reading as octal).
    log=/out/$2.flushes
    read before _ < /proc/uptime
    size=$(wc -c < /out/$2.dtcap)
    echo "watch $before" > $log
    end=$((${before%.*}00 + 1${before#*.} - 100 + {{KILL_AFTER_S}}00))
    while :; do
        sleep 0.1
        read now _ < /proc/uptime
        new=$(wc -c < /out/$2.dtcap)
        [ "$new" = "$size" ] || echo "grew $before $now" >> $log
        before=$now size=$new
        [ $((${now%.*}00 + 1${now#*.} - 100)) -lt $end ] || break
    done
    read now _ < /proc/uptime
    echo "killed $now" >> $log
    kill -KILL $1
}
