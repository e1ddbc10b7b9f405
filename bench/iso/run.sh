#!/usr/bin/env bash
# Measures how long it takes to build the same 3-file NoCloud seed (cidata:
# user-data, meta-data, network-config, 168 bytes in all) with vminit's
# iso9660 writer, with go-diskfs v1.9.4, and by running genisoimage and
# xorrisofs, and prints a markdown table of time per image and output size.
# It also reports the writer's allocations and its 64 MiB streaming rate.
#
# Usage: bench/iso/run.sh [runs]   (runs of each external tool, default 200)
# Uses hyperfine when installed, else a timed loop. Needs genisoimage and
# xorrisofs on PATH; a missing tool's row says so.
set -euo pipefail

runs=${1:-200}
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The seed, byte for byte the one in bench/iso/diskfs_test.go.
mkdir -p "$tmp/seed"
printf '#cloud-config\nhostname: seed\nssh_authorized_keys:\n  - ssh-ed25519 AAAA test\n' >"$tmp/seed/user-data"
printf 'instance-id: iid-local01\nlocal-hostname: seed\n' >"$tmp/seed/meta-data"
printf 'version: 2\nethernets:\n  eth0:\n    dhcp4: true\n' >"$tmp/seed/network-config"

# --- Go benchmarks -----------------------------------------------------------
cd "$root"
gobench() { # package directory, regexp, count
  (cd "$1" && go test . -run '^$' -bench "$2" -benchtime 2s -count "$3") 2>&1 | tee -a "$tmp/go.txt" >&2
}
gobench iso9660 'NoCloudSeed|Stream64MiB' 5
gobench bench/iso 'NoCloudSeed' 5 # a module of its own (bench/iso/go.mod)

# median of a field of the benchmark lines matching a name; field names as
# in the output: "ns/op", "B/op", "allocs/op", "MB/s", "image-bytes"
median() {
  grep -E "^$1-[0-9]+ " "$tmp/go.txt" | awk -v unit="$2" '
    { for (i = 3; i <= NF; i++) if ($(i) == unit) print $(i-1) }' |
    sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'
}

# --- External tools ----------------------------------------------------------
cd "$tmp/seed"
# seconds per run: the median with hyperfine, else the mean
timeit() { # name, command...
  local name=$1
  shift
  if command -v hyperfine >/dev/null; then
    # One retry: on a busy machine xorrisofs has been seen to exit 1 once
    # in a few hundred runs.
    hyperfine -N --warmup 5 --runs "$runs" --export-json "$tmp/$name.json" "$*" >&2 ||
      hyperfine -N --warmup 5 --runs "$runs" --export-json "$tmp/$name.json" "$*" >&2 ||
      return 1
    grep -o '"median": *[0-9.e-]*' "$tmp/$name.json" | head -1 | sed 's/.*: *//'
  else
    local t0 t1
    "$@" >/dev/null 2>&1
    t0=$(date +%s%N)
    for ((i = 0; i < runs; i++)); do "$@" >/dev/null 2>&1 || return 1; done
    t1=$(date +%s%N)
    awk -v d=$((t1 - t0)) -v n="$runs" 'BEGIN { printf "%.9f\n", d / n / 1e9 }'
  fi
}

row() { # method, seconds-or-ns, unit (s|ns), bytes, allocs
  local t=$2
  if [ "$3" = s ]; then t=$(awk -v s="$2" 'BEGIN { print s * 1e9 }'); fi
  awk -v m="$1" -v ns="$t" -v b="$4" -v a="$5" -v base="$base" 'BEGIN {
    if (ns >= 1e6) tm = sprintf("%.2f ms", ns / 1e6); else tm = sprintf("%.1f µs", ns / 1e3)
    printf "| %s | %s | %s× | %s | %s |\n", m, tm, sprintf("%.0f", ns / base), b, a }'
}

base=$(median BenchmarkNoCloudSeed/Buffer ns/op)
echo
echo "| Method (3-file cidata seed, RR + Joliet) | Time per image | vs. vminit | Output bytes | Allocs/op |"
echo "|---|---|---|---|---|"
row "vminit iso9660, in memory (BenchmarkNoCloudSeed/Buffer)" "$base" ns \
  "$(median BenchmarkNoCloudSeed/Buffer image-bytes)" "$(median BenchmarkNoCloudSeed/Buffer allocs/op)"
row "vminit iso9660, fresh strings.Readers (BenchmarkVminitNoCloudSeed)" "$(median BenchmarkVminitNoCloudSeed ns/op)" ns \
  "$(median BenchmarkVminitNoCloudSeed image-bytes)" "$(median BenchmarkVminitNoCloudSeed allocs/op)"
row "go-diskfs v1.9.4, workspace on disk (BenchmarkGoDiskfsNoCloudSeed)" "$(median BenchmarkGoDiskfsNoCloudSeed ns/op)" ns \
  "$(median BenchmarkGoDiskfsNoCloudSeed image-bytes)" "$(median BenchmarkGoDiskfsNoCloudSeed allocs/op)"
if command -v genisoimage >/dev/null; then
  if s=$(timeit genisoimage genisoimage -quiet -output "$tmp/gen.iso" -volid cidata -joliet -rock user-data meta-data network-config); then
    row "exec genisoimage -joliet -rock" "$s" s "$(stat -c %s "$tmp/gen.iso")" "—"
  else
    echo "| exec genisoimage -joliet -rock | failed (see stderr) | | | |"
  fi
else
  echo "| genisoimage | not installed | | | |"
fi
if command -v xorrisofs >/dev/null; then
  if s=$(timeit xorrisofs xorrisofs -quiet -o "$tmp/xo.iso" -V cidata -J -R user-data meta-data network-config); then
    row "exec xorrisofs -J -R" "$s" s "$(stat -c %s "$tmp/xo.iso")" "—"
  else
    echo "| exec xorrisofs -J -R | failed (see stderr) | | | |"
  fi
else
  echo "| xorrisofs | not installed | | | |"
fi
echo
echo "Streaming one 64 MiB file to io.Discard (BenchmarkStream64MiB): $(median BenchmarkStream64MiB MB/s) MB/s, $(median BenchmarkStream64MiB allocs/op) allocs/op"
echo
echo "Go $(go env GOVERSION), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'); external tools: $runs runs each$(command -v hyperfine >/dev/null && echo ' (hyperfine -N, median)')"
