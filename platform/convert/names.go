package convert

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vminit/vminit/internal/lib/lazyre"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/spec"
)

// templateVariable matches a clusterctl (or envsubst) variable, ${NAME} or
// ${NAME:=default}, as cluster templates are published.
var templateVariable = lazyre.New(`\$\{[A-Za-z_][A-Za-z0-9_]*(?::?[-=+?][^}]*)?\}`)

// nameProblem is the error of a Kubernetes object whose metadata.name the
// API server would refuse (a DNS subdomain, RFC 1123), or nil. The name
// becomes the guest's host name and instance id, so vminit refuses it
// too; a name holding ${VARIABLES} is a template not yet generated, which
// is said with the command that generates it, instead of the noise the
// rest of its unsubstituted fields would make.
func nameProblem(d *platform.Document) *spec.FieldError {
	if d.APIVersion == "" || d.Name == "" {
		return nil // not a Kubernetes object (oVirt's bodies), or a missing name reported by its converter
	}
	if vars := templateVariable.FindAllString(d.Name, -1); len(vars) > 0 {
		return d.Error("metadata.name", fmt.Sprintf("%q holds the template variable %s, not substituted: a cluster template is published with ${VARIABLES} that clusterctl substitutes (clusterctl generate cluster NAME --from FILE, or envsubst < FILE) before the API server sees it, and the API server refuses the name as it is; give the generated file",
			d.Name, strings.Join(vars, ", ")))
	}
	if msgs := validation.IsDNS1123Subdomain(d.Name); len(msgs) > 0 {
		return d.Error("metadata.name", fmt.Sprintf("%q: the API server refuses the name (%s), and vminit names the guest after it", d.Name, strings.Join(msgs, "; ")))
	}
	return nil
}
