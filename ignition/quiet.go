package ignition

import (
	"path"
	"reflect"
	"slices"
	"strings"
)

// quietIf holds, for the validators that cost the most in a rendering,
// a test that is enough for the validator to report nothing: a value that
// passes it cannot break the validator's rules, and one that does not is
// handed to the validator. The tests are narrower than the rules (they
// accept the forms the renderer writes and the plain form of unit files),
// so they never decide a verdict on their own. Without them, these
// validators were four fifths of a typical rendering: go-systemd's unit
// lexer and the data URL decoder each start a goroutine and pass tokens
// over a channel, and Systemd.Validate compiles a regular expression on
// every call. TestValidateStructIsIgnitions, FuzzValidateStruct,
// FuzzQuietUnitContents and FuzzQuietDataURL hold them to the validators.
//
// The validators are the same in every 3.x version (3.1 renamed
// FileContents to Resource and added HTTP headers), so the tests read the
// values by field name.
var quietIf = map[reflect.Type]func(reflect.Value) bool{}

// quietTypes are, for each 3.x version, the types of a file's contents,
// a unit, a drop-in and the systemd section, found from the version's
// config type.
var quietTypes [][4]reflect.Type

func init() {
	field := func(t reflect.Type, name string) reflect.Type {
		f, _ := t.FieldByName(name)
		return f.Type
	}
	for _, sv := range stable3() {
		systemd := field(sv.config, "Systemd")
		unit := field(systemd, "Units").Elem()
		ts := [4]reflect.Type{
			field(field(field(sv.config, "Storage"), "Files").Elem(), "Contents"),
			unit,
			field(unit, "Dropins").Elem(),
			systemd,
		}
		quietTypes = append(quietTypes, ts)
		quietIf[ts[0]] = quietResource
		quietIf[ts[1]] = quietUnit
		quietIf[ts[2]] = quietDropin
		quietIf[ts[3]] = quietSystemd
	}
}

// quietResource stands in for the checks of a file's contents: the
// compression, a hash without a source, HTTP headers (3.1 and later)
// with a source that is not HTTP, and the source URL, which for a data
// URL means decoding it.
func quietResource(v reflect.Value) bool {
	if c := optString(v.FieldByName("Compression")); c != nil && *c != "" && *c != "gzip" {
		return false
	}
	if h := v.FieldByName("HTTPHeaders"); h.IsValid() && h.Len() > 0 {
		return false
	}
	src := optString(v.FieldByName("Source"))
	if src == nil {
		return v.FieldByName("Verification").FieldByName("Hash").IsNil()
	}
	return *src == "" || quietDataURL(*src)
}

// quietUnit stands in for Unit.Validate: the name's extension, the
// contents parsed by go-systemd, and the warning for an enabled unit
// without an [Install] section.
func quietUnit(v reflect.Value) bool {
	if !unitExts[path.Ext(v.FieldByName("Name").String())] {
		return false
	}
	contents := optString(v.FieldByName("Contents"))
	if contents == nil || *contents == "" {
		return true
	}
	parses, install := quietUnitContents(*contents)
	enabled := v.FieldByName("Enabled")
	return parses && (install || enabled.IsNil() || !enabled.Elem().Bool())
}

// quietDropin stands in for Dropin.Validate: the name's extension and
// the contents parsed by go-systemd.
func quietDropin(v reflect.Value) bool {
	if path.Ext(v.FieldByName("Name").String()) != ".conf" {
		return false
	}
	contents := optString(v.FieldByName("Contents"))
	if contents == nil {
		return true
	}
	parses, _ := quietUnitContents(*contents)
	return parses
}

// quietSystemd stands in for Systemd.Validate, which looks only at
// enabled instances of template units (names like a@b.service).
func quietSystemd(v reflect.Value) bool {
	units := v.FieldByName("Units")
	for i := range units.Len() {
		if strings.Contains(units.Index(i).FieldByName("Name").String(), "@") {
			return false
		}
	}
	return true
}

// optString is the *string in v, nil when unset.
func optString(v reflect.Value) *string {
	if v.IsNil() {
		return nil
	}
	return v.Interface().(*string)
}

// unitExts are the unit name extensions Ignition's Unit.Validate accepts.
var unitExts = map[string]bool{
	".service": true, ".socket": true, ".device": true, ".mount": true, ".automount": true, ".swap": true,
	".target": true, ".path": true, ".timer": true, ".snapshot": true, ".slice": true, ".scope": true,
}

// quietDataURL reports whether s is a data URL of the two forms dataURL
// writes, which Ignition's URL check always accepts: "data:," with the
// characters percentEncode leaves and upper-case percent escapes, or
// "data:;base64," with padded standard base64.
func quietDataURL(s string) bool {
	if rest, ok := strings.CutPrefix(s, "data:,"); ok {
		for i := 0; i < len(rest); i++ {
			switch c := rest[i]; {
			case c == '%':
				if i+2 >= len(rest) || !isUpperHex(rest[i+1]) || !isUpperHex(rest[i+2]) {
					return false
				}
				i += 2
			case !unescaped(c):
				return false
			}
		}
		return true
	}
	rest, ok := strings.CutPrefix(s, "data:;base64,")
	if !ok || len(rest)%4 != 0 {
		return false
	}
	body := strings.TrimRight(rest, "=")
	if len(rest)-len(body) > 2 {
		return false
	}
	for i := 0; i < len(body); i++ {
		if c := body[i]; !isAlnum(c) && c != '+' && c != '/' {
			return false
		}
	}
	return true
}

// quietUnitContents reports whether go-systemd's unit parser, which
// Ignition runs on unit and drop-in contents, certainly accepts s, and if
// so whether s has an option in an [Install] section (without one, an
// enabled unit gets Ignition's warning). It accepts the plain form of
// unit files: lines under 2,000 bytes with no carriage return; before
// the first section only blank lines and comments; sections as
// "[Name]" alone on their line; in sections, blank lines, comments that
// do not end in a backslash, and Name=value options, whose value may go on
// over lines ending in a backslash. Anything else is left to the parser:
// false says nothing about it.
func quietUnitContents(s string) (parses, install bool) {
	if strings.IndexByte(s, '\r') >= 0 {
		return false, false
	}
	section, inSection, continued := "", false, false
	for line := range strings.Lines(s) {
		line = strings.TrimSuffix(line, "\n")
		if len(line) >= 2000 {
			return false, false
		}
		if continued {
			// The lexer takes the line as the option's value whatever
			// it holds, and a blank one ends the value.
			continued = strings.TrimSpace(line) != "" && strings.HasSuffix(line, "\\")
			continue
		}
		body := strings.TrimLeft(line, " \t")
		if body == "" {
			continue
		}
		switch c := body[0]; {
		case c < 0x21 || c > 0x7e:
			// Other white space, which the lexer skips as it skips
			// blanks, or a byte that may start one.
			return false, false
		case c == '#' || c == ';':
			if strings.HasSuffix(strings.TrimRight(line, " "), "\\") || !inSection && body != line {
				return false, false
			}
		case !inSection && body != line:
			return false, false
		case c == '[':
			name, rest, ok := strings.Cut(body[1:], "]")
			if !ok || strings.Trim(rest, " \t") != "" {
				return false, false
			}
			section, inSection = name, true
		case !inSection || !strings.Contains(body, "="):
			return false, false
		default:
			install = install || section == "Install"
			continued = strings.HasSuffix(line, "\\")
		}
	}
	return true, install
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isUpperHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'A' && c <= 'F' }

// distinctKeys reports whether no two of the n entries of a struct's
// lists have the same key, which is enough for Ignition's duplicate check
// to find nothing: it looks for a key twice within one list or within
// lists it merges. Keys are taken as that check takes them (a string is
// its own key, anything else has a Key method); an element with neither
// is left to the check.
func distinctKeys(w *walker, v reflect.Value, n int) bool {
	keys := make([]string, 0, n)
	for _, idx := range w.lists {
		l := v.FieldByIndex(idx)
		for i := range l.Len() {
			e := l.Index(i)
			switch {
			case e.Kind() == reflect.String:
				keys = append(keys, e.String())
			case e.Type().Implements(keyedType):
				keys = append(keys, e.Interface().(interface{ Key() string }).Key())
			default:
				return false
			}
		}
	}
	slices.Sort(keys)
	for i := 1; i < len(keys); i++ {
		if keys[i] == keys[i-1] {
			return false
		}
	}
	return true
}

var keyedType = reflect.TypeFor[interface{ Key() string }]()
