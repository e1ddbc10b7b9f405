package crd_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/deploy/kubernetes/crd"
)

// TestDocsShowTheCRDColumns: every `kubectl get instances` the README and
// docs show, as a header in a comment or as the output's first line, has
// the columns kubectl prints for the CRD (its additionalPrinterColumns of
// priority 0, after NAME; -o wide adds the rest), so the pages cannot fall
// behind the types' printcolumn markers.
func TestDocsShowTheCRDColumns(t *testing.T) {
	var c struct {
		Spec struct {
			Versions []struct {
				Columns []struct {
					Name     string `yaml:"name"`
					Priority int    `yaml:"priority"`
				} `yaml:"additionalPrinterColumns"`
			} `yaml:"versions"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(crd.Instances, &c); err != nil || len(c.Spec.Versions) != 1 {
		t.Fatalf("the CRD: %v (%d versions)", err, len(c.Spec.Versions))
	}
	normal, wide := []string{"NAME"}, []string{"NAME"}
	for _, col := range c.Spec.Versions[0].Columns {
		if col.Priority == 0 {
			normal = append(normal, strings.ToUpper(col.Name))
		}
		wide = append(wide, strings.ToUpper(col.Name))
	}
	pages, _ := filepath.Glob("../../../docs/*.md")
	pages = append(pages, "../../../README.md", "../../README.md")
	shown := 0
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i, l := range lines {
			cmd, comment, _ := strings.Cut(l, "#")
			if !strings.Contains(cmd, "kubectl get instances") || strings.Contains(cmd, "`") || strings.Contains(cmd, " -o ") && !strings.Contains(cmd, "-o wide") {
				continue
			}
			want := normal
			if strings.Contains(cmd, "-o wide") {
				want = wide
			}
			header := strings.Fields(comment)
			if len(header) == 0 || header[0] != "NAME" {
				if i+1 == len(lines) {
					continue
				}
				header = strings.Fields(lines[i+1])
			}
			if len(header) == 0 || header[0] != "NAME" {
				continue
			}
			shown++
			if !slices.Equal(header, want) {
				t.Errorf("%s:%d: %s shows %v; kubectl prints %v (the CRD's columns)", page, i+1, strings.TrimSpace(cmd), header, want)
			}
		}
	}
	if shown == 0 {
		t.Fatal("no page shows kubectl get instances's columns: is this test reading them?")
	}
}
