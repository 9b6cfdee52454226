# Start/stop the real services the tests use; sourced by scripts/test.
# No systemd here: daemons are started by hand and stopped by PID (never by name).
# Expects RUN (a directory for pid files and logs).

start_daemons() {
  # hugetlbfs must be mounted before libvirtd starts: it looks for mounts only then.
  echo 128 > /sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages || true
  if ! mountpoint -q /dev/hugepages; then
    mkdir -p /dev/hugepages && mount -t hugetlbfs hugetlbfs /dev/hugepages
  fi
  /usr/sbin/virtlogd -d -p "$RUN/virtlogd.pid"
  /usr/sbin/libvirtd -d -p "$RUN/libvirtd.pid"
  local i
  for i in $(seq 1 60); do
    virsh -c qemu:///system version >/dev/null 2>&1 && break
    sleep 0.5
  done
  virsh -c qemu:///system version >/dev/null || { echo "test: libvirtd did not come up" >&2; return 1; }
  LIBVIRTD_PID=$(cat "$RUN/libvirtd.pid")
  echo "test: libvirtd up (pid $LIBVIRTD_PID)" >&2
}

check_daemons_alive() {
  local stat
  stat=$(ps -o stat= -p "${LIBVIRTD_PID:-0}" 2>/dev/null || true)
  if [[ -z "$stat" || "$stat" == Z* ]]; then
    echo "test: libvirtd (pid ${LIBVIRTD_PID:-?}) died during the run" >&2
    return 1
  fi
}

stop_daemons() {
  local f pid
  for f in "$RUN/libvirtd.pid" "$RUN/virtlogd.pid"; do
    [[ -f "$f" ]] || continue
    pid=$(cat "$f")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do
      kill -0 "$pid" 2>/dev/null && [[ "$(ps -o stat= -p "$pid" 2>/dev/null)" != Z* ]] || break
      sleep 0.25
    done
    rm -f "$f"
  done
}
