// Package sysprep reads a Windows answer file (autounattend.xml,
// unattend.xml) as the platforms that pass one through deliver it
// (KubeVirt's sysprep volumes, oVirt's use_sysprep custom_script): one
// well-formed XML document whose root is Microsoft's <unattend>, with the
// configuration passes and the components each configures, which a
// report names. What it cannot check is each component's settings: their
// schema is Windows setup's, which reads them.
package sysprep

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// Namespace is the answer file's XML namespace, which Windows setup
// requires of its root <unattend>.
const Namespace = "urn:schemas-microsoft-com:unattend"

// Pass is one <settings pass="…"> of an answer file and the names of the
// components it configures, in document order.
type Pass struct {
	Name       string
	Components []string
}

// AnswerFile is what Read found in an answer file.
type AnswerFile struct {
	// Root is the root element's name: <unattend> in Namespace for a file
	// Windows setup reads (Problem says otherwise).
	Root   xml.Name
	Passes []Pass
}

// MaxElements bounds the elements Read walks, so a hostile document costs
// bounded time (a real answer file has a few hundred).
const MaxElements = 100000

// Read checks that data is one well-formed XML document, and returns its
// root, passes and components. The error names the line.
func Read(data []byte) (*AnswerFile, error) {
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	a := &AnswerFile{}
	var stack []xml.Name
	roots, elements := 0, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			line, _ := d.InputPos()
			return nil, fmt.Errorf("line %d: %v", line, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if elements++; elements > MaxElements {
				return nil, fmt.Errorf("more than %d elements", MaxElements)
			}
			switch len(stack) {
			case 0:
				if roots++; roots == 1 {
					a.Root = t.Name
				}
			case 1:
				if t.Name.Local == "settings" {
					a.Passes = append(a.Passes, Pass{Name: attr(t, "pass")})
				}
			case 2:
				if t.Name.Local == "component" && stack[1].Local == "settings" {
					p := &a.Passes[len(a.Passes)-1]
					p.Components = append(p.Components, attr(t, "name"))
				}
			}
			stack = append(stack, t.Name)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
	if roots != 1 {
		return nil, fmt.Errorf("%d root elements; an answer file has one (<unattend>)", roots)
	}
	return a, nil
}

func attr(t xml.StartElement, name string) string {
	for _, a := range t.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// Problem says what in the root keeps Windows setup from reading the
// file as an answer file, or "".
func (a *AnswerFile) Problem() string {
	if a.Root.Local != "unattend" || a.Root.Space != Namespace {
		return fmt.Sprintf("its root is <%s> in namespace %q, where Windows setup reads an <unattend xmlns=%q>", a.Root.Local, a.Root.Space, Namespace)
	}
	return ""
}

// String names the passes and their components:
// "windowsPE (Microsoft-Windows-Setup, …); oobeSystem (…)".
func (a *AnswerFile) String() string {
	if len(a.Passes) == 0 {
		return "no configuration passes"
	}
	parts := make([]string, len(a.Passes))
	for i, p := range a.Passes {
		parts[i] = fmt.Sprintf("%s (%s)", p.Name, strings.Join(p.Components, ", "))
	}
	return strings.Join(parts, "; ")
}

// Report is the warning that says what was and was not checked of the
// answer file name, passed through how: the components, a root Windows
// setup would not read, and Unchecked.
func Report(name string, a *AnswerFile, how string) string {
	msg := fmt.Sprintf("%s passed through %s: well-formed XML configuring %s", name, how, a)
	if p := a.Problem(); p != "" {
		msg += "; but " + p
	}
	return msg + "; not checked: " + Unchecked
}

// Unchecked says what a reader of the answer file here cannot check,
// for the report beside the components.
const Unchecked = "each component's settings are Windows setup's to check (their schema is not here), and whether the image runs setup with this file"
