## Guest shell functions over DAMON's sysfs: - `damon_dump FILE`: every file under
## /sys/kernel/mm/damon/admin (its path relative to admin/, then each readable one with its
## value: every setting and state) except the scheme counters under `stats/` and
## `tried_regions/` (results, not settings), and DAMON_STAT's `enabled` when the kernel has it,
## sorted, into FILE; - `damon_leave_stopped_kdamond`: configures a stopped kdamond as someone
## else could have left it, with a value other than the default in each group of settings
## (intervals, region bounds, a target region, a scheme's access pattern, quotas, weights,
## watermarks and apply interval), so that a restore that misses any of them shows in the dump.
## No placeholders: lab/tests/common/mod.rs includes it as is (DAMON_HELPERS).

damon_dump() {
    a=/sys/kernel/mm/damon/admin
    {
        find $a -type f | grep -v -e /stats/ -e /tried_regions/ | sed "s|^$a/|file |"
        grep -r '' $a 2> /dev/null | grep -v -e /stats/ -e /tried_regions/ | sed "s|^$a/||"
        st=/sys/module/damon_stat/parameters/enabled
        [ -e $st ] && echo "damon_stat=$(cat $st)"
    } | sort > "$1"
}
damon_leave_stopped_kdamond() {
    k=/sys/kernel/mm/damon/admin/kdamonds
    echo 1 > $k/nr_kdamonds
    c=$k/0/contexts
    echo 1 > $c/nr_contexts
    c=$c/0
    echo paddr > $c/operations
    echo 7000 > $c/monitoring_attrs/intervals/sample_us
    echo 140000 > $c/monitoring_attrs/intervals/aggr_us
    echo 2100000 > $c/monitoring_attrs/intervals/update_us
    echo 12 > $c/monitoring_attrs/nr_regions/min
    echo 345 > $c/monitoring_attrs/nr_regions/max
    echo 1 > $c/targets/nr_targets
    echo 1 > $c/targets/0/regions/nr_regions
    echo 4194304 > $c/targets/0/regions/0/start
    echo 12582912 > $c/targets/0/regions/0/end
    echo 1 > $c/schemes/nr_schemes
    s=$c/schemes/0
    echo pageout > $s/action
    echo 8192 > $s/access_pattern/sz/min
    echo 3 > $s/access_pattern/nr_accesses/max
    echo 7 > $s/access_pattern/age/min
    echo 17 > $s/quotas/ms
    echo 1048576 > $s/quotas/bytes
    echo 900 > $s/quotas/reset_interval_ms
    echo 3 > $s/quotas/weights/sz_permil
    echo 5 > $s/quotas/weights/nr_accesses_permil
    echo 11 > $s/quotas/weights/age_permil
    echo free_mem_rate > $s/watermarks/metric
    echo 5000000 > $s/watermarks/interval_us
    echo 900 > $s/watermarks/high
    echo 500 > $s/watermarks/mid
    echo 100 > $s/watermarks/low
    [ -e $s/apply_interval_us ] && echo 40000 > $s/apply_interval_us
    return 0
}
