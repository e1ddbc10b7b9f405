#!/bin/sh
# Metadata server benchmarks (docs/benchmarks.md, "## Metadata server").
# Keep-alive GETs of user-data with 100,000 instances loaded, vminit vs a
# bare net/http handler serving a constant, with wrk (apt-get install wrk);
# then the 1,000-VM boot storm. Loopback only; everything stops by itself.
set -eu
cd "$(dirname "$0")/../.."
go build -o /tmp/mdbench ./bench/mdserver
/tmp/mdbench -mode serve -n 100000 > /tmp/mdbench.out 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
sleep 3
cat /tmp/mdbench.out
md=$(grep -o 'mdserver=[^ ]*' /tmp/mdbench.out | cut -d= -f2)
bare=$(grep -o 'bare=[^ ]*' /tmp/mdbench.out | cut -d= -f2)
for round in 1 2 3; do
	echo "round $round"
	echo "bare:";     wrk -t1 -c16 -d5s "$bare" | grep -E 'Requests/sec|Latency'
	echo "mdserver:"; wrk -t1 -c16 -d5s "$md"   | grep -E 'Requests/sec|Latency'
done
kill $pid; wait $pid 2>/dev/null || true
for c in 1 8 32; do
	/tmp/mdbench -mode storm -n 100000 -vms 1000 -concurrency $c | grep -E '^(instances|storm|heap)'
done
