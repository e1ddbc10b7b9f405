package nodecmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containernetworking/cni/pkg/version"

	"github.com/vminit/vminit/cmd/internal/cniplugin"
)

// pluginType is the type of vminit-cni's entry in a conflist: every entry
// of that type is vminit's, whoever wrote it.
const pluginType = "vminit-cni"

// confExts are the extensions of the files a runtime reads network
// configurations from (libcni's ConfFiles as containerd's go-cni and
// CRI-O's ocicni call it), in a directory it reads in lexical order, the
// first being the pod network.
var confExts = []string{".conf", ".conflist", ".json"}

// maxConfSize bounds the configuration file read: a pod network's is a
// few kilobytes.
const maxConfSize = 1 << 20

// entry is vminit-cni's entry for agent and, on a dual-stack node,
// agent6 (else ""), as cniplugin.Config documents it.
func entry(agent, agent6 string) []byte {
	if agent6 == "" {
		return fmt.Appendf(nil, `{"type": %q, "agent": %q}`, pluginType, agent)
	}
	return fmt.Appendf(nil, `{"type": %q, "agent": %q, "agent6": %q}`, pluginType, agent, agent6)
}

// span is one element of a conflist's plugins list: its bytes are
// data[start:end].
type span struct {
	start, end int
	typ        string
}

// conflist is a parsed configuration list: its bytes, and
// where each plugin's entry is, so that an edit changes only the bytes
// of the entry it adds or removes and every other byte (key order,
// spacing, the CNI's own fields) stays the CNI's.
type conflist struct {
	data    []byte
	plugins []span
}

// parseConflist checks a configuration list file as vminit-node edits it,
// listing every problem: name is the file's name, for the messages.
func parseConflist(name string, data []byte) (*conflist, error) {
	if ext := filepath.Ext(name); ext != ".conflist" {
		// A single-plugin file cannot chain a second plugin, and
		// converting it to a list under another name would leave a
		// file the CNI does not know to rewrite.
		return nil, fmt.Errorf("%s is a single-plugin network configuration (%s), and vminit-cni must be chained after the pod network's plugin in a configuration list: "+
			"have the CNI write a .conflist, or use --intercept host if its pod traffic crosses the node's netfilter (docs/kubernetes.md, \"Which path a CNI needs\")", name, ext)
	}
	var top struct {
		CNIVersion  *string          `json:"cniVersion"`
		CNIVersions []string         `json:"cniVersions"`
		Plugins     *json.RawMessage `json:"plugins"`
	}
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("%s: not a network configuration list: %v", name, err)
	}
	c := &conflist{data: data}
	var errs []error
	if top.CNIVersion == nil && len(top.CNIVersions) == 0 {
		errs = append(errs, fmt.Errorf("%s: cniVersion: missing", name))
	}
	for _, v := range chosenVersions(top.CNIVersion, top.CNIVersions) {
		if !slices.Contains(cniplugin.Versions.SupportedVersions(), v) {
			// A runtime calls every plugin of a list with the list's
			// version: one vminit-cni does not speak fails every pod's
			// network set-up on the node.
			errs = append(errs, fmt.Errorf("%s: cniVersion %q: vminit-cni speaks CNI %s, and a runtime calls every plugin of a list with the list's version, so every pod of the node would fail: "+
				"have the CNI write a list of one of those versions, or use --intercept host if its pod traffic crosses the node's netfilter",
				name, v, strings.Join(cniplugin.Versions.SupportedVersions(), ", ")))
		}
	}
	if top.Plugins == nil {
		errs = append(errs, fmt.Errorf("%s: plugins: missing", name))
	} else if spans, err := pluginSpans(data); err != nil {
		errs = append(errs, fmt.Errorf("%s: plugins: %v", name, err))
	} else if len(spans) == 0 || len(spans) == count(spans, pluginType) {
		errs = append(errs, fmt.Errorf("%s: plugins: no pod network plugin to chain vminit-cni after", name))
	} else {
		c.plugins = spans
		for i, s := range spans {
			if s.typ == "" {
				errs = append(errs, fmt.Errorf("%s: plugins[%d]: no type", name, i))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// chosenVersions are the versions a runtime may call the list's plugins
// with: cniVersion (a runtime older than CNI 1.1's cniVersions reads it
// alone), and the highest of cniVersions and cniVersion (which a newer
// runtime picks, when it implements it).
func chosenVersions(cniVersion *string, cniVersions []string) []string {
	var out []string
	all := slices.Clone(cniVersions)
	if cniVersion != nil {
		out = append(out, *cniVersion)
		all = append(all, *cniVersion)
	}
	highest := ""
	for _, v := range all {
		if gt, err := version.GreaterThan(v, highest); highest == "" || err == nil && gt {
			highest = v
		}
	}
	if highest != "" && !slices.Contains(out, highest) {
		out = append(out, highest)
	}
	return out
}

func count(spans []span, typ string) int {
	n := 0
	for _, s := range spans {
		if s.typ == typ {
			n++
		}
	}
	return n
}

// pluginSpans finds the elements of the top-level "plugins" list, each
// with its type.
func pluginSpans(data []byte) ([]span, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("the file is not a JSON object")
	}
	var spans []span
	found := false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		if t != "plugins" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, err
			}
			continue
		}
		if found {
			return nil, errors.New("given twice")
		}
		found = true
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return nil, errors.New("not a list")
		}
		for dec.More() {
			start := skipSeparators(data, int(dec.InputOffset()))
			var p struct {
				Type json.RawMessage `json:"type"`
			}
			if err := dec.Decode(&p); err != nil {
				return nil, fmt.Errorf("[%d]: not an object: %v", len(spans), err)
			}
			s := span{start: start, end: int(dec.InputOffset())}
			_ = json.Unmarshal(p.Type, &s.typ) // not a string: no type
			spans = append(spans, s)
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
	}
	return spans, nil
}

// skipSeparators is the offset of the first byte at or after i that is
// neither JSON whitespace nor a comma: where the next list element
// starts.
func skipSeparators(data []byte, i int) int {
	for i < len(data) && strings.IndexByte(" \t\r\n,", data[i]) >= 0 {
		i++
	}
	return i
}

// without is the list without vminit-cni's entries: each is cut with the
// separator before it (after it, for a first element), so that the list
// reads as it did before with added them.
func (c *conflist) without() []byte {
	out := slices.Clone(c.data)
	for i := len(c.plugins) - 1; i >= 0; i-- {
		s := c.plugins[i]
		if s.typ != pluginType {
			continue
		}
		switch {
		case i > 0:
			out = slices.Delete(out, c.plugins[i-1].end, s.end)
		case len(c.plugins) > 1:
			out = slices.Delete(out, s.start, c.plugins[1].start)
		default:
			out = slices.Delete(out, s.start, s.end)
		}
	}
	return out
}

// with is the list with one vminit-cni entry, for agent and agent6 (as
// entry's), at the end of
// its plugins (after the pod network's, which set the pod up): any other
// vminit-cni entry is removed, so a list never holds two. The entry goes
// after the last plugin with the spacing that precedes that plugin, so a
// list written one plugin a line stays so.
func (c *conflist) with(agent, agent6 string) ([]byte, error) {
	base := c.without()
	clean, err := parseConflist(".conflist", base)
	if err != nil {
		return nil, err
	}
	last := clean.plugins[len(clean.plugins)-1]
	sep := ", "
	if len(clean.plugins) > 1 {
		sep = string(base[clean.plugins[len(clean.plugins)-2].end:last.start])
	} else if i := bytes.LastIndexByte(base[:last.start], '['); i >= 0 && strings.Trim(string(base[i+1:last.start]), " \t") != "" {
		sep = "," + string(base[i+1:last.start])
	}
	return slices.Concat(base[:last.end], []byte(sep), entry(agent, agent6), base[last.end:]), nil
}
