## Start-up race of damon-trace, bpftrace and live (`cargo xtask bench startup`): one line per start
## in /out/starts.txt, ROUND<TAB>LABEL<TAB>T0<TAB>T1. Placeholders: {{FUNCTIONS}} (the functions
## to trace, space-separated), {{LIVE}} (live's label), {{ROUNDS}} (the start_* calls, one a line).
set -e
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
uname -r > /out/uname.txt
bpftrace --version > /out/bpftrace-version.txt 2>&1
funcs=
for f in {{FUNCTIONS}}; do
  if grep -qx "$f" /sys/kernel/tracing/available_filter_functions; then funcs="$funcs $f"; fi
done
echo $funcs > /out/functions.txt
: > /tmp/kprobe.bt; : > /tmp/fentry.bt
first='{ printf("first %d\n", nsecs - @s[tid]); exit(); }'
for f in $funcs; do
  printf '%s\n' "kprobe:$f { @s[tid] = nsecs; } kretprobe:$f /@s[tid]/ $first" >> /tmp/kprobe.bt
  printf '%s\n' "fentry:vmlinux:$f { @s[tid] = nsecs; } fexit:vmlinux:$f /@s[tid]/ $first" \
    >> /tmp/fentry.bt
done
now() { cut -d' ' -f1 /proc/uptime; }
# Reads the pipe until a line contains $1, writes the time to $2, then drains the rest.
first() {
  while IFS= read -r line; do
    case "$line" in *"$1"*) now > "$2"; break;; esac
  done
  cat > /dev/null
}
# One start: the label, then the command; its first-record line matched by $pattern.
timed() {
  label=$1; shift
  rm -f /tmp/t1 /tmp/start.dtcap
  t0=$(now)
  { timeout 300 "$@" 2>&1 >/dev/null || true; } | tee /tmp/start.out | first "$pattern" /tmp/t1
  t1=$(cat /tmp/t1 2>/dev/null || echo none)
  printf '%s\t%s\t%s\t%s\n' "$round" "$label" "$t0" "$t1" >> /out/starts.txt
  if [ "$t1" = none ]; then cp /tmp/start.out "/out/no-first-record-$round-$(echo $label | tr ' ' _).txt"; fi
}
start_dt() {
  label=$1; shift
  pattern='first record'
  timed "$label" damon-trace record --debug-timing --duration 1s -o /tmp/start.dtcap "$@"
}
start_bt() {
  pattern='first '
  timed "$1" sh -c "exec bpftrace -B line $2 1>&2"
}
# live on the console until the host types q; T1 from its --debug-timing table: T0 plus the
# ms before main began ("the process began N ms before") and the mark's ms since then.
start_live() {
  t0=$(now)
  damon-trace live --debug-timing 2> /tmp/live.err || true
  t1=$(awk -v t0=$t0 '/the process began/ { for (i = 1; i < NF; i++) if ($i == "began") b = $(i + 1) }
    /first frame showing a call/ { f = $1 }
    END { if (f == "") print "none"; else printf "%.3f\n", t0 + (f + b) / 1000 }' /tmp/live.err)
  printf '%s\t%s\t%s\t%s\n' "$round" "{{LIVE}}" "$t0" "$t1" >> /out/starts.txt
  if [ "$t1" = none ]; then cp /tmp/live.err "/out/no-first-record-$round-live.txt"; fi
}
{{ROUNDS}}