// Package sysprep reads a Windows answer file (autounattend.xml,
// unattend.xml) as the platforms that pass one through deliver it
// (KubeVirt's sysprep volumes, oVirt's use_sysprep custom_script): one
// well-formed XML document whose root is Microsoft's <unattend>, with the
// configuration passes and the components each configures, which a
// report names; and checks the disc a platform delivers it on (Disc),
// for `vminit inspect`. What it cannot check is each component's
// settings: their schema is Windows setup's, which reads them.
package sysprep

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"io/fs"
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

// A Disc is how a platform delivers its answer file: the names Windows
// setup looks for at the root of the disc (matched regardless of case,
// as FAT and Joliet names are), and the words Report says it with.
type Disc struct {
	// Answers are the answer files' names; one that does not end in .xml
	// (sysprep.inf, the INI file of Windows XP and 2003) is found and
	// reported but not read.
	Answers []string
	// How is Report's how: "as KubeVirt delivers it, on the disc
	// labelled unattendCD".
	How string
}

// IsAnswer reports whether a file of the disc's root is one of its
// answer files.
func (d Disc) IsAnswer(name string) bool {
	for _, a := range d.Answers {
		if strings.EqualFold(name, a) {
			return true
		}
	}
	return false
}

// Holds reports whether fsys's root holds one of the disc's answer files.
func (d Disc) Holds(fsys fs.FS) bool {
	entries, _ := fs.ReadDir(fsys, ".")
	for _, e := range entries {
		if !e.IsDir() && d.IsAnswer(e.Name()) {
			return true
		}
	}
	return false
}

// Check checks a disc's root (fsys) as Windows setup reads it: that it
// holds an answer file, each XML one well-formed. It returns what the
// platform's conversion warns of each (Report, or for an answer file
// that is not XML, that it is not read): `vminit inspect` says of a
// disc what `vminit build` said as it wrote it. The error names a file
// that is not well-formed and its line, or says the disc has none.
func (d Disc) Check(fsys fs.FS) ([]string, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	var names, reports []string
	for _, e := range entries {
		names = append(names, e.Name())
		if e.IsDir() || !d.IsAnswer(e.Name()) {
			continue
		}
		if !strings.EqualFold(e.Name()[max(0, len(e.Name())-4):], ".xml") {
			reports = append(reports, fmt.Sprintf("%s passed through %s: not XML (the answer file of Windows XP and 2003), not read here; not checked: %s", e.Name(), d.How, Unchecked))
			continue
		}
		data, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, err
		}
		a, err := Read(data)
		if err != nil {
			return nil, fmt.Errorf("%s is not well-formed XML: Windows setup would stop on it: %v", e.Name(), err)
		}
		reports = append(reports, Report(e.Name(), a, d.How))
	}
	if len(reports) == 0 {
		return nil, fmt.Errorf("no %s (the disc has %s): Windows setup would find no answer file", strings.Join(d.Answers, " or "), strings.Join(names, ", "))
	}
	return reports, nil
}
