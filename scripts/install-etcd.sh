#!/usr/bin/env bash
# Builds an etcd recent enough for kube-apiserver's watch cache, for the
# Kubernetes benchmarks (internal/bench/kubebench) to measure the API server
# as real clusters run it. Debian's etcd-server (3.4.23, which the tests use)
# predates the progress-notification fix (3.4.31) the watch cache needs, so
# internal/testing/kubetest runs kube-apiserver with --watch-cache=false
# unless VMINIT_TEST_ETCD names this build (docs/kubernetes-test-tools.md).
#
# A benchmark tool, not a test oracle: install-test-tools.sh does not run it.
# etcd is built from the Go module proxy (go.etcd.io/etcd/server/v3 at
# $VERSION, with a main that calls its etcdmain.Main as etcd's own does), in
# a temporary module, never in vminit's go.mod. The result goes to
#   $VMINIT_TEST_TOOLS_DIR (default /var/cache/vminit-test-tools)/etcd-<version>/etcd
# and is not built again while that binary reports $VERSION.
#
# Usage: install-etcd.sh   (prints the binary's path last)
#
# Cost on a 2-core machine: docs/kubernetes-test-tools.md.
set -euo pipefail

# The etcd release: EtcdVersion in internal/testing/kubetest/version.go,
# where the tests look for this build.
VERSION=$("$(dirname "$0")/kubetest-version.sh" EtcdVersion)
DEST="${VMINIT_TEST_TOOLS_DIR:-/var/cache/vminit-test-tools}"
dir="$DEST/etcd-$VERSION"

# installed: the cached binary exists and reports $VERSION.
installed() {
  local out
  [ -x "$dir/etcd" ] || return 1
  out=$("$dir/etcd" --version 2>/dev/null) || return 1
  case $out in *"etcd Version: ${VERSION#v}"*) return 0 ;; esac
  return 1
}

if installed; then
  echo "install-etcd: etcd $VERSION already in $dir" >&2
  echo "$dir/etcd"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The temporary module: outside any workspace, tolerant of go.mod updates.
export GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0
cd "$tmp"
printf 'module etcdtool\n' > go.mod
cat > main.go <<'EOF'
// Command etcd is etcd's server, as etcd's own main package runs it.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
go mod edit -require "go.etcd.io/etcd/server/v3@$VERSION"
go mod tidy
echo "install-etcd: building etcd $VERSION; this takes minutes" >&2
start=$(date +%s)
nice -n 10 go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" .
echo "install-etcd: built in $(( $(date +%s) - start )) s" >&2

if [ "$(id -u)" = 0 ] || [ -w "$DEST" ] || { [ ! -e "$DEST" ] && [ -w "$(dirname "$DEST")" ]; }; then S=""; else S=sudo; fi
$S mkdir -p "$dir"
# Copy under a temporary name, then rename: a concurrent reader sees the old
# binary or the new one, never half of one.
$S install -m 0755 "$tmp/etcd" "$dir/.etcd.new"
$S mv -f "$dir/.etcd.new" "$dir/etcd"
$S chmod a+rx "$DEST" "$dir"
if ! installed; then
  echo "install-etcd: $dir/etcd does not report etcd $VERSION" >&2
  exit 1
fi
echo "install-etcd: installed etcd $VERSION in $dir" >&2
echo "$dir/etcd"
