#!/bin/sh
# Metadata server benchmarks (docs/benchmarks.md, "## Metadata server").
# Keep-alive GETs of user-data with 100,000 instances loaded, vminit vs a
# bare net/http handler serving a constant, with wrk (apt-get install wrk);
# then the 1,000-VM boot storm, in one process with both clients, and with
# server and client pinned to CPUs of their own (taskset) so they do not
# take each other's time; last, vminit serve's own start-up on 100,000
# spec files. Loopback only; everything stops by itself.
# The testing.B twins: go test -run '^$' -bench . ./mdserver/
set -eu
cd "$(dirname "$0")/../.."
go build -o /tmp/mdbench ./bench/mdserver
uptime
/tmp/mdbench -mode serve -n 100000 > /tmp/mdbench.out 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
sleep 3
cat /tmp/mdbench.out
md=$(grep -o 'mdserver=[^ ]*' /tmp/mdbench.out | cut -d= -f2)
bare=$(grep -o 'bare=[^ ]*' /tmp/mdbench.out | cut -d= -f2)
# Ten short alternating rounds: the machine's speed drifts, so a round's
# ratio varies; the sum over the rounds is the figure to compare.
for round in 1 2 3 4 5 6 7 8 9 10; do
	b=$(wrk -t1 -c16 -d3s "$bare" | awk '/Requests\/sec/ {print $2}')
	m=$(wrk -t1 -c16 -d3s "$md" | awk '/Requests\/sec/ {print $2}')
	echo "$round $b $m"
done | awk '{printf "keepalive round=%d bare=%.0f req/s mdserver=%.0f req/s ratio=%.3f\n", $1, $2, $3, $3/$2; sb += $2; sm += $3}
	END {printf "keepalive all rounds: mdserver/bare = %.3f\n", sm/sb}'
kill $pid; wait $pid 2>/dev/null || true
uptime
for c in 1 8 32; do
	for client in raw nethttp; do
		/tmp/mdbench -mode storm -n 100000 -vms 1000 -concurrency $c -client $client | grep -E '^(instances|storm|heap)'
	done
done
if command -v taskset > /dev/null && [ "$(nproc)" -ge 2 ]; then
	echo "pinned: server on CPU 0, client on CPU 1"
	for c in 1 8 32; do
		# A new server for each run, so that every VM's first request renders.
		taskset -c 0 /tmp/mdbench -mode serve -n 100000 > /tmp/mdbench.out 2>&1 &
		pid=$!
		sleep 3
		md=$(grep -o 'mdserver=http://[^/]*' /tmp/mdbench.out | cut -d/ -f3)
		bare=$(grep -o 'bare=http://[^/]*' /tmp/mdbench.out | cut -d/ -f3)
		taskset -c 1 /tmp/mdbench -mode storm -md "$md" -bare "$bare" -vms 1000 -concurrency $c
		kill $pid; wait $pid 2>/dev/null || true
	done
fi
uptime
# The storm with and without cloud-init's first-boot reporting events.
/tmp/mdbench -mode events -n 100000 -vms 1000 -concurrency 32 -rounds 5 | grep '^events'
uptime
# vminit serve's start-up on 100,000 spec files: cold, then with --instances-cache.
go build -o /tmp/vminit-bench ./cmd/vminit
/tmp/mdbench -mode startup -vminit /tmp/vminit-bench -n 100000
uptime
