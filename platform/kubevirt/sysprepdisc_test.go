package kubevirt_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/vminit/vminit/platform/kubevirt"
)

func TestSysprepDiscCheck(t *testing.T) {
	for want, disc := range map[string]fstest.MapFS{
		"":                                    {"Autounattend.xml": {Data: []byte("<unattend/>")}},
		"no autounattend.xml or unattend.xml": {"readme.txt": {Data: []byte("x")}},
		"unattend.xml is not well-formed":     {"unattend.xml": {Data: []byte("<unattend>")}},
	} {
		_, err := kubevirt.SysprepDisc.Check(disc)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("want %q, got %v", want, err)
		}
	}
}
