## `cargo xtask soak`: records for a long run and samples the recorder's memory and the capture
## meanwhile (soak.rs). Placeholders: {{MOST}} (the recording's backstop duration, s), {{LAST}}, {{STEADY}}
## (the last sample and where the steady state begins, s), {{EVERY_S}} (seconds between samples).
damon-trace record -o /out/soak.dtcap --duration {{MOST}}s 2> /out/record.err &
rec=$!
# The capture file appears once the probes are attached: sampling starts there.
while [ ! -s /out/soak.dtcap ]; do sleep 0.2; done
set +e
stop={{LAST}}
while :; do
  st=$(cat /proc/$rec/status 2>/dev/null) || break
  case "$st" in *'State:'*'Z (zombie)'*) break;; esac
  fds=$(ls /proc/$rec/fd 2>/dev/null | wc -l)
  now=$(cut -d' ' -f1 /proc/uptime)
  t0=${t0:-$now}
  # The last second is the session's end (drain, summary, detach), not its steady state.
  awk -v n=$now -v t=$t0 -v s=$stop 'BEGIN { exit !(n - t >= s) }' && break
  # The probe floor's lines: the calibration beside the session has ended (and with it its
  # own tracer, thread and heap) before this sample; the steady state is judged after it.
  if [ ! -s /out/calibrated.txt ] && grep -q '^probe ' /out/record.err; then
    awk -v n=$now -v t=$t0 'BEGIN { print n - t }' > /out/calibrated.txt
    stop=$(awk -v c=$(cat /out/calibrated.txt) -v s={{LAST}} 'BEGIN { print (c + {{STEADY}} > s) ? c + {{STEADY}} : s }')
  fi
  echo "$st" | awk -v t=$now -v fds=$fds \
    '/^VmRSS/{r=$2} /^RssAnon/{a=$2} /^RssFile/{f=$2} /^RssShmem/{s=$2} \
     END{if (r != "") print t, r, a, f, s, fds}' >> /out/samples.txt
  # Sleep until the next slot t0 + k*{{EVERY_S}} s still ahead, not a fixed {{EVERY_S}} s: the forks
  # above take a while on a busy emulated guest, and a fixed sleep would let them stretch the
  # period (fewer samples on a slower host). A slot already missed is skipped, not made up.
  sleep $(awk -v t=$t0 -v e={{EVERY_S}} \
    '{ printf "%.2f", t + (int(($1 - t) / e) + 1) * e - $1 }' /proc/uptime)
done
set -e
kill -INT $rec 2>/dev/null || true
wait $rec
damon-trace report /out/soak.dtcap --format json > /out/report.json
ls -l /out/soak.dtcap > /out/capture-size.txt
