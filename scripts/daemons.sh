# Start/stop the real services the tests use; sourced by scripts/test.
# No systemd here: daemons are started by hand and stopped by PID (never by name).
# Expects RUN (a directory for pid files and logs).

start_daemons() {
  # hugetlbfs must be mounted before libvirtd starts: it looks for mounts only then.
  echo 128 > /sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages || true
  if ! mountpoint -q /dev/hugepages; then
    mkdir -p /dev/hugepages && mount -t hugetlbfs hugetlbfs /dev/hugepages
  fi
  # 1 GiB pages: mounted (none reserved) so the QEMU driver can turn 1G-backed
  # domains into command lines (domxml-to-native) in the golden tests.
  if [[ -d /sys/kernel/mm/hugepages/hugepages-1048576kB ]] && ! mountpoint -q /dev/hugepages1G; then
    mkdir -p /dev/hugepages1G && mount -t hugetlbfs -o pagesize=1G hugetlbfs /dev/hugepages1G
  fi
  # Without udev, /dev/kvm stays root-only: libvirt then finds KVM "not available"
  # to the qemu user after probing it as root, and re-probes QEMU (~1 min) on
  # every call. Debian's udev rule gives root:kvm 0660; apply the same here.
  if [[ -c /dev/kvm && "$(stat -c %G /dev/kvm)" != kvm ]]; then
    chgrp kvm /dev/kvm && chmod 0660 /dev/kvm
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

# A second libvirtd on this machine, a migration peer that libvirt takes for another host:
# its own mount namespace with private state directories (/run, /var/lib, /var/cache,
# /var/log and /etc of libvirt), its own host UUID, its own hugetlbfs mount, its socket
# under $PEER_DIR/sock (qemu+unix:///system?socket=...), and its own cgroup subtree
# (each v1 controller's vnuma-peer directory bound over the controller), so its domains'
# cgroups never meet the first daemon's (a migrated domain has the same name on both).
# Exports VNUMA_TEST_PEER_URI. Needs start_daemons first (it copies the QEMU probe cache).
start_peer_daemon() {
  PEER_DIR=$(mktemp -d /tmp/vnuma-peer.XXXXXX)
  mkdir -p "$PEER_DIR"/{run,lib,cache,log,etc,sock}
  cp -a /etc/libvirt/. "$PEER_DIR/etc/"
  cp -a /var/lib/libvirt/. "$PEER_DIR/lib/"
  cp -a /var/cache/libvirt/. "$PEER_DIR/cache/" 2>/dev/null || true
  rm -rf "$PEER_DIR"/lib/qemu/domain-* "$PEER_DIR"/etc/qemu/*.xml
  {
    echo "host_uuid = \"$(cat /proc/sys/kernel/random/uuid)\""
    echo "unix_sock_dir = \"$PEER_DIR/sock\""
  } >>"$PEER_DIR/etc/libvirtd.conf"
  PEER_DIR="$PEER_DIR" unshare -m --propagation private /bin/bash -c '
    set -eu
    for d in run:/run/libvirt lib:/var/lib/libvirt cache:/var/cache/libvirt log:/var/log/libvirt etc:/etc/libvirt; do
      mkdir -p "${d#*:}" && mount --bind "$PEER_DIR/${d%%:*}" "${d#*:}"
    done
    if mountpoint -q /dev/hugepages; then mount -t hugetlbfs hugetlbfs /dev/hugepages; fi
    # cgroup v1 only (as on this kind of machine); on a unified (v2) hierarchy both daemons share /machine.
    [[ -f /sys/fs/cgroup/cgroup.controllers ]] || for c in /sys/fs/cgroup/*/; do
      c=${c%/}
      [[ -f $c/cgroup.procs && ! -L $c && $(basename "$c") != systemd && $(basename "$c") != unified ]] || continue
      mkdir -p "$c/vnuma-peer"
      if [[ -f $c/cpuset.cpus ]]; then
        cat "$c/cpuset.cpus" >"$c/vnuma-peer/cpuset.cpus"
        cat "$c/cpuset.mems" >"$c/vnuma-peer/cpuset.mems"
      fi
      mount --bind "$c/vnuma-peer" "$c"
    done
    /usr/sbin/virtlogd -d -p "$PEER_DIR/virtlogd.pid"
    /usr/sbin/libvirtd -d -p "$PEER_DIR/libvirtd.pid"
  ' >"$RUN/peer.log" 2>&1 || { cat "$RUN/peer.log" >&2; return 1; }
  export VNUMA_TEST_PEER_URI="qemu+unix:///system?socket=$PEER_DIR/sock/libvirt-sock"
  export VNUMA_TEST_PEER_DIR="$PEER_DIR"
  local i
  for i in $(seq 1 60); do
    virsh -c "$VNUMA_TEST_PEER_URI" version >/dev/null 2>&1 && break
    sleep 0.5
  done
  virsh -c "$VNUMA_TEST_PEER_URI" version >/dev/null || { echo "test: the peer libvirtd did not come up" >&2; return 1; }
  echo "test: peer libvirtd up (pid $(cat "$PEER_DIR/libvirtd.pid"), $VNUMA_TEST_PEER_URI)" >&2
}

stop_peer_daemon() {
  [[ -n "${PEER_DIR:-}" ]] || return 0
  local name f
  for name in $(virsh -c "$VNUMA_TEST_PEER_URI" list --name 2>/dev/null); do
    virsh -c "$VNUMA_TEST_PEER_URI" destroy "$name" >/dev/null 2>&1 || true
  done
  for f in "$PEER_DIR/libvirtd.pid" "$PEER_DIR/virtlogd.pid"; do
    stop_pidfile "$f"
  done
  # Empty cgroups go deepest first; one still holding a process stays (rmdir refuses it).
  find /sys/fs/cgroup/*/vnuma-peer -depth -type d -exec rmdir {} \; 2>/dev/null || true
  rm -rf "$PEER_DIR"
}

start_postgres() {
  # A throw-away cluster of our own (trust auth, loopback only), run as the postgres user.
  # huge_pages=off: its shared memory would otherwise take the 2 MiB pages the guests need.
  # Its directory lives under /tmp: the checkout may sit where postgres cannot enter.
  local bin
  bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  PG_DIR=$(mktemp -d /tmp/vnuma-pg.XXXXXX)
  chown postgres:postgres "$PG_DIR"
  # Callers test this function with ||, which switches set -e off inside it: every step is checked.
  su postgres -s /bin/sh -c "$bin/initdb -D '$PG_DIR/data' -A trust -U postgres" >"$RUN/pg-init.log" 2>&1 || return 1
  su postgres -s /bin/sh -c "$bin/pg_ctl -D '$PG_DIR/data' -w -l '$PG_DIR/log' \
      -o \"-p 54329 -k '$PG_DIR' -c listen_addresses=127.0.0.1 -c fsync=off -c huge_pages=off\" start" \
      >>"$RUN/pg-init.log" 2>&1 || { cat "$PG_DIR/log" >>"$RUN/pg-init.log" 2>/dev/null; rm -rf "$PG_DIR"; return 1; }
  PG_PID=$(head -n 1 "$PG_DIR/data/postmaster.pid") || return 1
  export VNUMA_TEST_PG="postgresql+psycopg://postgres@127.0.0.1:54329/postgres"
  echo "test: postgres up (pid $PG_PID)" >&2
}

stop_postgres() {
  [[ -n "${PG_PID:-}" ]] || return 0
  kill -TERM "$PG_PID" 2>/dev/null || true
  for _ in $(seq 1 40); do kill -0 "$PG_PID" 2>/dev/null || break; sleep 0.25; done
  [[ -n "${PG_DIR:-}" ]] && rm -rf "$PG_DIR"
}

check_daemons_alive() {
  local stat
  stat=$(ps -o stat= -p "${LIBVIRTD_PID:-0}" 2>/dev/null || true)
  if [[ -z "$stat" || "$stat" == Z* ]]; then
    echo "test: libvirtd (pid ${LIBVIRTD_PID:-?}) died during the run" >&2
    return 1
  fi
}

# SIGTERM the process a pid file names, wait up to 5 s for it to go (a zombie counts as gone), remove the file.
stop_pidfile() {
  local pid
  [[ -f "$1" ]] || return 0
  pid=$(cat "$1")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 20); do
    kill -0 "$pid" 2>/dev/null && [[ "$(ps -o stat= -p "$pid" 2>/dev/null)" != Z* ]] || break
    sleep 0.25
  done
  rm -f "$1"
}

stop_daemons() {
  local f
  for f in "$RUN/libvirtd.pid" "$RUN/virtlogd.pid"; do
    stop_pidfile "$f"
  done
}
