package virtlet_test

import (
	"testing"

	"github.com/vminit/vminit/internal/testing/laughs"
	"github.com/vminit/vminit/internal/testing/platformtest"
	"github.com/vminit/vminit/platform/virtlet"
)

// TestAnnotationLaughs: an annotation holding YAML whose aliases expand
// to 1 GB (the issue's attack) is refused naming the annotation, the path
// in it and the alias's line, before anything expands it.
func TestAnnotationLaughs(t *testing.T) {
	doc := "|\n" + platformtest.Indent(laughs.Mapping(0, laughs.IssueScalar, laughs.IssueWidth), 2)
	var cases []platformtest.Case
	for _, a := range []string{virtlet.AnnotationMetaData, virtlet.AnnotationUserData} {
		cases = append(cases, platformtest.Case{Name: a, Doc: pod(a+": "+doc, "", ""),
			Errs: []string{`metadata.annotations["` + a + `"]: line 3: aliases expand the document past 16777216 bytes at c[0]`}})
	}
	platformtest.Run(t, cases)
}
