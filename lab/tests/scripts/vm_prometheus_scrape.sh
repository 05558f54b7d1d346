## Guest script of vm_prometheus: Prometheus scrapes `damon-trace serve` (run under the scenario by
## with_scenario) until it holds serve's final counts, then queries it and stops both.
## Placeholders: {{COUNTS}}, {{FUNCTIONS}}, {{LINGER_S}}, {{COUNT}}, {{DEADLINE}}, {{Q50}}, {{Q99}}, {{BUCKETS}}, {{SCRAPES}}, {{ATTEMPTS}}, {{SLOWEST}} (the test's values of the same names).
prometheus --config.file=/etc/prometheus.yml --storage.tsdb.path=/tmp/prom \
  --web.listen-address=127.0.0.1:9090 > /out/prometheus.log 2>&1 &
prom=$!
t0=$(date +%s)
i=0
until wget -q -O /dev/null http://127.0.0.1:9090/-/ready; do
    i=$((i+1)); [ $i -gt 600 ] && { cat /out/prometheus.log >&2; exit 8; }; sleep 0.5
done
echo "prometheus ready after $(( $(date +%s) - t0 )) s" > /out/prometheus-ready.txt
api=http://127.0.0.1:9090/api/v1/query?query=
cat > /tmp/counts.txt <<'EOF'
{{COUNTS}}EOF
damon-trace serve --functions {{FUNCTIONS}} --duration 30s --linger {{LINGER_S}}s \
  --output /out/serve.dtcap 2> /out/serve.err &
serve=$!
i=0
until grep -q 'tracing ended' /out/serve.err; do
    i=$((i+1))
    [ $i -gt 600 ] && { echo 'serve: tracing did not end' >&2; cat /out/serve.err >&2; exit 9; }
    sleep 0.5
done
t1=$(date +%s)
wget -q -O /out/final.txt http://127.0.0.1:9464/metrics || { echo 'serve: no final numbers' >&2; exit 9; }
while :; do
    ok=1; seen=
    while read -r f q; do
        want=$(grep -F "{{COUNT}}{function=\"$f\"" /out/final.txt | awk '{print $NF}')
        got=$(wget -q -O - "${api}$q" | sed -n 's/.*"value":\[[^,]*,"\([^"]*\)".*/\1/p')
        seen="$seen $f: scraped ${got:-none} of $want;"
        [ "$got" = "$want" ] || ok=0
    done < /tmp/counts.txt
    [ $ok = 1 ] && break
    [ $(( $(date +%s) - t1 )) -ge {{DEADLINE}} ] && {
        echo "Prometheus did not scrape serve's final numbers within {{DEADLINE}} s:$seen" >&2
        tail -20 /out/prometheus.log >&2; exit 10; }
    sleep 1
done
echo "final numbers scraped $(( $(date +%s) - t1 )) s after tracing ended:$seen" > /out/final-scrape.txt
wget -q -O /out/q50.json "${api}{{Q50}}"
wget -q -O /out/q99.json "${api}{{Q99}}"
wget -q -O /out/buckets.json "${api}{{BUCKETS}}"
wget -q -O /out/scrapes.json "${api}{{SCRAPES}}"
wget -q -O /out/attempts.json "${api}{{ATTEMPTS}}"
wget -q -O /out/slowest.json "${api}{{SLOWEST}}"
kill $prom
echo $(( $(date +%s) - t1 )) > /out/term-sent.txt
kill -TERM $serve
wait $serve || { echo "serve exited $?" >&2; cat /out/serve.err >&2; exit 11; }
echo $(( $(date +%s) - t1 )) > /out/serve-ended.txt
damon-trace report /out/serve.dtcap --format json > /out/report.json