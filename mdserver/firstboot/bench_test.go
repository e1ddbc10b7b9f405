package firstboot

import (
	"strconv"
	"testing"
)

// BenchmarkFetch is what the metadata handler adds to every request it
// answers: a fetch of a boot already fetched through the same dialect
// (a crawl's second request onwards), one instance and across a fleet.
func BenchmarkFetch(b *testing.B) {
	b.Run("one", func(b *testing.B) {
		tr := New(Options{})
		tr.Fetch("vm", "u", AgentCloudInit, "ec2", "/latest/meta-data/")
		b.ReportAllocs()
		for b.Loop() {
			tr.Fetch("vm", "u", AgentCloudInit, "ec2", "/latest/meta-data/instance-id")
		}
	})
	b.Run("fleet", func(b *testing.B) {
		tr := New(Options{})
		names := make([]string, 1000)
		for i := range names {
			names[i] = "vm-" + strconv.Itoa(i)
			tr.Fetch(names[i], "u", AgentCloudInit, "ec2", "/latest/meta-data/")
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				tr.Fetch(names[i%len(names)], "u", AgentCloudInit, "ec2", "/latest/meta-data/instance-id")
			}
		})
	})
}
