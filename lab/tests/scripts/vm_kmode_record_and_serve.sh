## Guest script of vm_7_2_record_mode_kernel_reports_every_function_with_its_bound: --mode kernel
## record, report and export, a SIGKILLed kernel-mode recorder, and serve --mode kernel scraped until
## lock_timer_base's count changes and again after uname(2) calls. Placeholders: {{SCENARIO}} (starts
## the scenario), {{K_RECORD_S}}, {{CAPTURE_HELPERS}}, {{N}} (uname calls), {{BUILTINS}} (FOUR, comma-
## separated), {{UNAME_THEN_SCRAPE}}, {{STOP_SCENARIO}}.
set -e
{{SCENARIO}}damon-trace record --mode kernel -o /out/k.dtcap --duration {{K_RECORD_S}}s --no-calibrate 2> /out/record.err
damon-trace report /out/k.dtcap --format json > /out/k.json
damon-trace report /out/k.dtcap > /out/k.txt
damon-trace export /out/k.dtcap --format json -o /out/k-export.json
# A kernel-mode recorder killed with SIGKILL, at a moment unrelated to its snapshots: its
# capture reads to its last snapshot.
{{CAPTURE_HELPERS}}
damon-trace record --mode kernel -o /out/killed.dtcap --duration 120s --no-calibrate 2> /out/killed.err &
rec=$!
grown /out/killed.dtcap
kill_recorder $rec killed
wait $rec || true
damon-trace report /out/killed.dtcap --format json > /out/killed.json
damon-trace export /out/killed.dtcap --format json -o /out/killed-export.json
status=0; damon-trace report /out/k.dtcap --cpu 0 > /out/cpu.txt 2> /out/cpu.err || status=$?
echo $status > /out/cpu.status
# serve --mode kernel: scrapes from the kernel's running histograms; also of uname(2), called
# {{N}} times between the second and the third scrape.
damon-trace serve --mode kernel --functions {{BUILTINS}} --func __x64_sys_newuname --listen 127.0.0.1:9464 --duration 120s --no-calibrate 2> /out/serve.err &
srv=$!
i=0
until wget -q -O /out/m1.txt http://127.0.0.1:9464/metrics; do i=$((i+1)); [ $i -gt 240 ] && exit 9; sleep 0.5; done
# Scrape again until lock_timer_base's count has changed, not after a fixed sleep (whether a
# call lands in 4 s is the guest's speed, not the code's); up to 60 s, then the host's check
# that it grew fails.
timer() { grep '^damon_trace_call_duration_seconds_count{function="lock_timer_base"}' $1; }
i=0
while :; do
  wget -q -O /out/m2.txt http://127.0.0.1:9464/metrics
  [ "$(timer /out/m2.txt)" != "$(timer /out/m1.txt)" ] && break
  i=$((i+1))
  [ $i -gt 120 ] && { echo 'lock_timer_base: no call bucketed in 60 s of scrapes' >&2; break; }
  sleep 0.5
done
{{UNAME_THEN_SCRAPE}}kill -INT $srv
wait $srv
{{STOP_SCENARIO}}