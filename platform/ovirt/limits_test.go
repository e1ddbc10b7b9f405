package ovirt

import (
	"os"
	"strings"
	"testing"

	"github.com/vminit/vminit/platform"
)

// TestXMLListLimit: an XML element holds at most spec.MaxListEntries
// children, as each list of a spec: 200,000 <nic> elements are refused at
// parse, naming the element and its line.
func TestXMLListLimit(t *testing.T) {
	data, err := os.ReadFile("../testdata/ovirt-cloudinit.xml")
	if err != nil {
		t.Fatal(err)
	}
	nic := "    <nic><name>eth0</name><mac><address>56:6f:1a:2b:00:01</address></mac></nic>\n"
	doc := strings.Replace(string(data), "  <nics>\n", "  <nics>\n"+strings.Repeat(nic, 200_000), 1)
	docs, err := platform.Split("vm.xml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Decode(docs[0])
	if err == nil || !strings.Contains(err.Error(), "vm.xml:8: <nics> holds more than 10000 elements") {
		t.Fatalf("%v", err)
	}
}
