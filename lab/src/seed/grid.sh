## `grid FUNCTION CAPTURE...`: the range-table arguments (--bucket-ns, --max-ns) covering FUNCTION's
## calls in the captures (seed/mod.rs). Placeholders: {{BUCKET_NS}} (bucket width), {{ROWS}} (rows at most).
grid() {
  f=$1; shift
  for c in "$@"; do damon-trace report "$c" --format csv --functions "$f" | awk -F, 'NR==2 {print $10, $13}'; done |
  awk -v w={{BUCKET_NS}} -v rows={{ROWS}} '
    $1 != "" { if (n == 0 || $1 < lo) lo = $1; if ($2 > hi) hi = $2; n++ }
    END {
      lo -= lo % w; hi += (w - hi % w) % w
      if (hi <= lo) hi = lo + w
      if (hi > lo + rows * w) hi = lo + rows * w
      printf "--bucket-ns %d --max-ns %d\n", w, hi
    }'
}
