package ovirt_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/ovirt"
)

// splitText is an oVirt <vm> whose <name> is n characters of text split
// by comments, processing instructions and CDATA sections: each piece is
// a token of its own, the shape that made decoding quadratic (an 800 KB
// body took 5.8 s).
func splitText(n int) []byte {
	var b strings.Builder
	b.WriteString("<vm><name>")
	for i := range n {
		b.WriteString([]string{"a<!---->", "b<?p?>", "<![CDATA[c]]>"}[i%3])
	}
	b.WriteString("</name></vm>")
	return []byte(b.String())
}

// bytesAllocated is what one decode of data allocates, in bytes.
func bytesAllocated(data []byte) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ovirt.Decode(&platform.Document{File: "vm.xml", Line: 1, Format: platform.XML, Raw: data})
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDecodeLinear: decoding text split into many tokens allocates in
// proportion to its size. Four times the input may cost at most eight
// times the bytes (linear: about four; quadratic, as before: sixteen).
// Bytes are counted, not time, so the machine's load cannot decide it.
func TestDecodeLinear(t *testing.T) {
	small, large := bytesAllocated(splitText(5_000)), bytesAllocated(splitText(20_000))
	t.Logf("5,000 pieces: %d bytes allocated; 20,000: %d (×%.1f)", small, large, float64(large)/float64(small))
	if large > 8*small {
		t.Errorf("4× the input allocated %.1f× the bytes: decoding is not linear", float64(large)/float64(small))
	}
}

// BenchmarkDecodeSplitText decodes an 800 KB <vm> whose text is split in
// 90,000 pieces.
func BenchmarkDecodeSplitText(b *testing.B) {
	data := splitText(90_000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		ovirt.Decode(&platform.Document{File: "vm.xml", Line: 1, Format: platform.XML, Raw: data})
	}
}
