## The traceable functions matching an extended regex, as the kernel lists them (ftrace's list
## minus the kprobe blacklist), one per line, sorted: `$1` the regex, `$2` the file.
## No placeholders: lab/tests/vm_adhoc.rs includes it as is (TRACEABLE).
traceable() {
  cut -d' ' -f1 /sys/kernel/tracing/available_filter_functions | grep -E "$1" | sort -u > /tmp/all
  cut -f2 /sys/kernel/debug/kprobes/blacklist 2>/dev/null | sort -u > /tmp/black
  grep -vxF -f /tmp/black /tmp/all > /out/$2 || true
}
