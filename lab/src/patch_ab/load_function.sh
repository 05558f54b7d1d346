## The livepatch loader of `cargo xtask patch-ab`'s guests: lp_load MODULE [REPLACED].
## Placeholders: {{GUEST_DIR}} (where the .ko files are), {{FUNCTION}} (the patched function).
lp_tick() { # WHAT: one more 0.1 s of waiting for WHAT, 60 s at most
  i=$((i+1))
  if [ $i -gt 600 ]; then echo "patch-ab: $1 after 60 s" >&2; exit 98; fi
  sleep 0.1
}
lp_load() { # MODULE [REPLACED]
  insmod {{GUEST_DIR}}/$1.ko
  i=0
  until [ "$(cat /sys/kernel/livepatch/$1/transition)" = 0 ]; do
    lp_tick "livepatch $1 still in transition"
  done
  if [ -n "$2" ]; then
    i=0
    while [ -e /sys/kernel/livepatch/$2 ]; do lp_tick "replaced livepatch $2 still there"; done
    rmmod $2
  fi
  n=$(grep -cw {{FUNCTION}} /proc/kallsyms || true)
  if [ "$n" != 1 ]; then echo "patch-ab: $n copies of {{FUNCTION}} in kallsyms" >&2; exit 98; fi
  echo "$1 live" >> /out/loads.txt
}
