#!/bin/sh
# vminit's metadata server beside its peers (docs/benchmarks.md, "Beside
# the peers"): tinkerbell/hegel and poseidon/matchbox, built at pinned
# versions from the Go module proxy, and a bare net/http handler, each
# serving the same fleet alone, pinned to CPU 0, with the client on CPU 1.
#
#	sh bench/peers/run.sh              # 1,000 and 10,000 instances
#	sh bench/peers/run.sh 100000       # other fleet sizes (no matchbox past 10,000)
#
# The peers are built once into $PEERS_BIN (default /tmp/vminit-peers-bin;
# hegel takes ~4 minutes on two cores). `go install MOD@VERSION` cannot be
# used: it looks the module's deprecation up in the proxy's version list,
# which the proxy here refuses (403) for both modules, while the pinned
# versions themselves download. So each module is downloaded at its version
# and built in its own module, with its own go.mod and go.sum. Loopback
# only; every server is stopped after its run.
set -eu
cd "$(dirname "$0")/../.."
if ! command -v taskset > /dev/null || [ "$(nproc)" -lt 2 ]; then
	echo "run.sh: needs taskset (util-linux) and two CPUs: the servers run on CPU 0, the client on CPU 1" >&2
	exit 1
fi
HEGEL=github.com/tinkerbell/hegel@v0.14.2
MATCHBOX=github.com/poseidon/matchbox@v0.11.0
bin=${PEERS_BIN:-/tmp/vminit-peers-bin}
mkdir -p "$bin"

# build MODULE@VERSION PACKAGE NAME builds PACKAGE of the module as $bin/NAME.
build() {
	[ -x "$bin/$3" ] && return
	dir=$(go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -n "$dir" ] || { echo "run.sh: go mod download $1 failed" >&2; exit 1; }
	go build -C "$dir" -o "$bin/$3" "$2"
}
build "$HEGEL" ./cmd/hegel hegel
build "$MATCHBOX" ./cmd/matchbox matchbox
go build -o "$bin/vminit" ./cmd/vminit
go build -o "$bin/peers-bench" ./bench/peers
echo "hegel $HEGEL, matchbox $MATCHBOX, vminit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
[ $# -gt 0 ] || set -- 1000 10000
for n in "$@"; do
	uptime
	# matchbox reads every group file per request: past 10,000 a request
	# takes seconds, and it holds nothing per instance to measure.
	mb="-matchbox $bin/matchbox"
	[ "$n" -le 10000 ] || mb=
	taskset -c 1 "$bin/peers-bench" -n "$n" -pin 0 -vminit "$bin/vminit" -hegel "$bin/hegel" $mb
done
uptime
