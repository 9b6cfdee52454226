#!/bin/bash
# Convert hwloc's Linux sysfs snapshots (tests/hwloc/linux/*.tar.bz2 of hwloc's source) to hwloc XML
# the way hwloc's tests/hwloc/linux/test-topology.sh reads them (HWLOC_FSROOT, the snapshot's .env).
# Usage: convert.sh HWLOC_SOURCE_DIR OUT_DIR
set -euo pipefail
src="$1/tests/hwloc/linux"
out="$(realpath "$2")"
export LANG=C LC_ALL=C HWLOC_COMPONENTS=linux,stop HWLOC_DUMPED_HWDATA_DIR=/var/run/hwloc
export HWLOC_DEBUG_SORT_CHILDREN=1 HWLOC_DONT_ADD_VERSION_INFO=1 HWLOC_XML_EXPORT_SUPPORT=0
# NAME [SOURCE-TARBALL-NAME] [EXTRA lstopo OPTIONS...]
convert() {
    local name="$1" tarball="$2"; shift 2
    local dir; dir="$(mktemp -d)"
    (cd "$dir" && bunzip2 -c "$src/$tarball.tar.bz2" | tar xf -)
    (
        [ -f "$src/$name.env" ] && . "$src/$name.env"
        HWLOC_FSROOT="$(echo "$dir"/*)" lstopo-no-graphics "$@" --of xml - >"$out/$name.xml"
    )
    rm -rf "$dir"
}
for t in "$src"/*.tar.bz2; do
    name="$(basename "$t" .tar.bz2)"
    opts=()
    grep -qs -- --whole-io "$src/$name.options" && opts+=(--whole-io)
    convert "$name" "$name" "${opts[@]}"
done
# Variants hwloc's tests read from the same snapshots with other settings (nvidiagpunumanodes.kept is
# ../power9-nvidia-gpu-numanodes.xml):
convert 16amd64-8n2c-cpusets_noadmin 16amd64-8n2c-cpusets --disallowed   # the cgroup's disallowed PUs and nodes kept
convert 64intel64-fakeKNL-SNC4-hybrid-msc 64intel64-fakeKNL-SNC4-hybrid  # .env: HWLOC_KNL_MSCACHE_L3=0
