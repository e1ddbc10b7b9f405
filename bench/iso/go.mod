// The ISO benchmarks are a module of their own so that go-diskfs, which
// they only compare against, stays out of vminit's own dependencies.
module github.com/vminit/vminit/bench/iso

go 1.26.0

require (
	github.com/diskfs/go-diskfs v1.9.4
	github.com/vminit/vminit v0.0.0
)

require (
	github.com/djherbis/times v1.6.0 // indirect
	golang.org/x/sys v0.43.0 // indirect
)

replace github.com/vminit/vminit => ../..
