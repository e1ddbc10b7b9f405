package cloudinit

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/vminit/vminit/internal/lib/gzipbound"
	"github.com/vminit/vminit/internal/lib/yaml11"
	"github.com/vminit/vminit/spec"
)

// MaxUserDataSize bounds user-data after gzip decompression, so that a
// small compressed input cannot expand without limit.
const MaxUserDataSize = 64 << 20

// Content types of user-data parts, as cloud-init names them.
const (
	TypeCloudConfig        = "text/cloud-config"
	TypeCloudConfigJSONP   = "text/cloud-config-jsonp"
	TypeCloudConfigArchive = "text/cloud-config-archive"
	TypeShellScript        = "text/x-shellscript"
	TypeCloudBoothook      = "text/cloud-boothook"
	TypeIncludeURL         = "text/x-include-url"
	TypeIncludeOnceURL     = "text/x-include-once-url"
	TypePartHandler        = "text/part-handler"
	TypeJinja2             = "text/jinja2"
)

// startTypes is handlers.INCLUSION_TYPES_MAP, longest prefix first as
// cloud-init searches it (so #cloud-config-archive is not #cloud-config).
var startTypes = []struct{ prefix, ctype string }{
	{"text/x-shellscript-per-instance", "text/x-shellscript-per-instance"},
	{"text/x-shellscript-per-boot", "text/x-shellscript-per-boot"},
	{"text/x-shellscript-per-once", "text/x-shellscript-per-once"},
	{"#cloud-config-archive", TypeCloudConfigArchive},
	{"#cloud-config-jsonp", TypeCloudConfigJSONP},
	{"## template: jinja", TypeJinja2},
	{"#cloud-boothook", TypeCloudBoothook},
	{"#include-once", TypeIncludeOnceURL},
	{"#cloud-config", TypeCloudConfig},
	{"#part-handler", TypePartHandler},
	{"#include", TypeIncludeURL},
	{"#!", TypeShellScript},
}

// PartType returns the content type cloud-init gives a user-data part by
// how it starts (handlers.type_from_starts_with: case-insensitive, after
// leading white space), or "" when it recognises none, in which case
// cloud-init ignores the part.
func PartType(data []byte) string {
	if !utf8.Valid(data) {
		return ""
	}
	s := strings.TrimLeftFunc(string(data), pyIsSpace)
	if len(s) > 64 {
		s = s[:64]
	}
	s = strings.Map(asciiLower, s)
	for _, t := range startTypes {
		if strings.HasPrefix(s, t.prefix) {
			return t.ctype
		}
	}
	return ""
}

// pyIsSpace is Python's str.isspace, which str.lstrip uses.
func pyIsSpace(r rune) bool { return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f }

// asciiLower lowers what Python's str.lower lowers into ASCII; other
// characters cannot start an ASCII prefix either way.
func asciiLower(r rune) rune {
	switch {
	case r >= 'A' && r <= 'Z':
		return r + 'a' - 'A'
	case r == '\u212a': // KELVIN SIGN lowers to k
		return 'k'
	}
	return r
}

// isMIME reports whether cloud-init parses user-data as a MIME message
// (user_data.convert_string: "mime-version:" in the first 4096 bytes).
func isMIME(data []byte) bool {
	head := data[:min(len(data), 4096)]
	return bytes.Contains(bytes.ToLower(head), []byte("mime-version:"))
}

// UserData renders the instance's user-data: the generated #cloud-config
// (CloudConfig) combined with spec.cloudInit.userData (Combine). Problems
// come back as spec.Errors naming the field.
//
// With spec.cloudInit.userDataOnly the user-data is spec.cloudInit.userData
// as given (validation has refused what only the generated document could
// carry), checked like vendor-data: something cloud-init reads. Data
// cloud-init ignores (ErrIgnored) is delivered all the same, as the
// platforms deliver it (render.Instance warns): it is what the guest of a
// platform object got.
func UserData(inst *spec.Instance) ([]byte, error) {
	if ci := &inst.Spec.CloudInit; ci.UserDataOnly {
		if err := CheckUserData([]byte(ci.UserData)); err != nil && !errors.Is(err, ErrIgnored) {
			return nil, spec.Errors{{Field: "spec.cloudInit.userData", Message: err.Error()}}
		}
		return []byte(ci.UserData), nil
	}
	gen, err := CloudConfig(inst)
	if err != nil {
		return nil, err
	}
	out, err := Combine(gen, []byte(inst.Spec.CloudInit.UserData))
	if err != nil {
		return nil, spec.Errors{{Field: "spec.cloudInit.userData", Message: err.Error()}}
	}
	return out, nil
}

// UserDataError returns the error UserData would return for inst,
// without rendering the user data where that cannot fail: with no user
// data of the user's own, the generated document is built but not
// encoded (yaml11.Encodes). A check that needs only the verdict (the
// metadata server's, on every instance it loads) runs it.
func UserDataError(inst *spec.Instance) error {
	if ci := &inst.Spec.CloudInit; ci.UserDataOnly || strings.TrimSpace(ci.UserData) != "" {
		_, err := UserData(inst)
		return err
	}
	doc, err := cloudConfig(inst)
	if err != nil {
		return err
	}
	return yaml11.Encodes(doc) // marshalCloudConfig's only failure
}

// Combine combines a generated #cloud-config document with user-supplied
// user-data so that cloud-init does what each says, the user's part coming
// second:
//
//   - no user data: the generated document as is;
//   - gzip: decompressed first, as cloud-init does;
//   - a #cloud-config document: merged into the generated one with
//     cloud-init's merge rules (MergeCloudConfig), giving one document;
//   - any other part cloud-init knows (#!, #include, #cloud-boothook,
//     ## template: jinja, #part-handler, #cloud-config-archive,
//     #cloud-config-jsonp) or a MIME message: a MIME multipart message
//     holding the generated document first and the user's data second (a
//     user's MIME message is nested unchanged; cloud-init walks nested
//     multiparts);
//   - anything else is an error, since cloud-init would ignore it.
//
// The result is deterministic: the multipart boundary derives from a hash
// of the content and the headers are fixed.
func Combine(generated, user []byte) ([]byte, error) {
	if len(bytes.TrimSpace(user)) == 0 {
		return generated, nil
	}
	user, err := gunzip(user)
	if err != nil {
		return nil, err
	}
	if isMIME(user) {
		if !utf8.Valid(user) {
			return nil, errors.New("a MIME message must be UTF-8 text (cloud-init decodes it as such before parsing)")
		}
		return multipart(simplePart(TypeCloudConfig, generated), nestedPart(user)), nil
	}
	ctype := PartType(user)
	switch ctype {
	case "":
		if !utf8.Valid(user) {
			return nil, errors.New("is neither UTF-8 text nor gzip; cloud-init would ignore it")
		}
		return nil, errors.New("cloud-init does not recognise this user-data and would ignore it: start it with #cloud-config, #!, #include, #cloud-boothook, ## template: jinja, #part-handler or #cloud-config-archive, or give a MIME multipart message")
	case TypeCloudConfig:
		doc, err := normalize(user)
		if err != nil {
			return nil, fmt.Errorf("#cloud-config %w", err)
		}
		if doc == nil {
			return generated, nil // cloud-init skips an empty part
		}
		if lookup(doc, "launch-index") != nil {
			// cloud-init drops a part whose launch-index differs from the
			// instance's; merged, it would take the generated data along.
			break
		}
		return MergeCloudConfig(generated, user)
	}
	return multipart(simplePart(TypeCloudConfig, generated), simplePart(ctype, user)), nil
}

// gunzip decompresses gzip data, as cloud-init does before anything else
// (util.decomp_gzip, which returns the input unchanged when it is not gzip
// or does not decompress); only data past MaxUserDataSize is an error.
func gunzip(data []byte) ([]byte, error) {
	if !gzipbound.IsGzip(data) {
		return data, nil
	}
	out, err := gzipbound.Decompress(data, MaxUserDataSize)
	if errors.Is(err, gzipbound.ErrTooLarge) {
		return nil, err
	}
	if err != nil {
		return data, nil
	}
	return out, nil
}

// part is one body part of the multipart message.
type part struct {
	header string // header lines, each ending in "\n"; empty for a nested message
	body   string // the encoded body, or the whole nested message
}

// simplePart encodes data as a part of the given type. Pure ASCII text is
// left readable (7bit); anything else is base64, because cloud-init parses
// the message from a Python str, and Python's email package then mangles
// 8-bit bytes (a UTF-8 "ü" arrives as "\udcfc").
func simplePart(ctype string, data []byte) part {
	h := "Content-Type: " + ctype
	if strings.HasPrefix(ctype, "text/") {
		h += `; charset="utf-8"`
	}
	h += "\nMIME-Version: 1.0\n"
	if is7bit(data) {
		return part{header: h + "Content-Transfer-Encoding: 7bit\n", body: string(data)}
	}
	return part{header: h + "Content-Transfer-Encoding: base64\n", body: base64Lines(data)}
}

// base64Lines is data in base64, in lines of 76 characters as MIME has
// them (the last without its line break).
func base64Lines(data []byte) string {
	enc := base64.StdEncoding.EncodeToString(data)
	var b strings.Builder
	for len(enc) > 76 {
		b.WriteString(enc[:76])
		b.WriteByte('\n')
		enc = enc[76:]
	}
	b.WriteString(enc)
	return b.String()
}

// Part is one part of the message Multipart assembles, for another
// agent's user data (package cloudbaseinit) in the same deterministic
// MIME form as cloud-init's.
type Part struct {
	// Type is the part's content type, e.g. TypeCloudConfig.
	Type string
	// Filename, if set, is the part's Content-Disposition file name
	// (cloudbase-init's shell-script handler writes the part to a file of
	// that name and needs one).
	Filename string
	// Data is the part's content; with Nested, a whole MIME message
	// carried headers and all (Type and Filename are then unused).
	Data   []byte
	Nested bool
}

// Multipart assembles parts as a multipart/mixed message, as Combine
// does: the same parts give the same bytes.
func Multipart(parts ...Part) []byte {
	ps := make([]part, len(parts))
	for i, p := range parts {
		switch {
		case p.Nested:
			ps[i] = nestedPart(p.Data)
		default:
			ps[i] = simplePart(p.Type, p.Data)
			if p.Filename != "" {
				ps[i].header += fmt.Sprintf("Content-Disposition: attachment; filename=%q\n", p.Filename)
			}
		}
	}
	return multipart(ps...)
}

// Decompress is user data as its agent reads it: gzip decompressed,
// bounded by MaxUserDataSize; anything else unchanged.
func Decompress(data []byte) ([]byte, error) { return gunzip(data) }

// nestedPart carries a user's MIME message as a part of ours, headers and
// all, so every part of it reaches cloud-init unchanged.
func nestedPart(msg []byte) part { return part{body: string(msg)} }

// is7bit reports whether data can travel as 7bit MIME text: ASCII without
// NUL or bare CR, lines of at most 998 bytes (RFC 5322).
func is7bit(data []byte) bool {
	line := 0
	for i, c := range data {
		switch {
		case c == '\n':
			line = 0
			continue
		case c >= 0x80, c == 0, c == '\r' && (i+1 == len(data) || data[i+1] != '\n'):
			return false
		}
		if line++; line > 998 {
			return false
		}
	}
	return true
}

// multipart assembles a multipart/mixed message. The boundary is a hash of
// the parts, so the same input always gives the same bytes, and it is
// checked against the content (a part cannot contain its own hash, but a
// nested message could contain anything).
func multipart(parts ...part) []byte {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s%d:%s", len(p.header), p.header, len(p.body), p.body)
	}
	sum := h.Sum(nil)
	var boundary string
	for i := 0; ; i++ {
		boundary = fmt.Sprintf("vminit-%s", hex.EncodeToString(sum[:20]))
		if i > 0 {
			boundary += fmt.Sprintf("-%d", i)
		}
		clash := false
		for _, p := range parts {
			if strings.Contains(p.body, "--"+boundary) || strings.Contains(p.header, boundary) {
				clash = true
			}
		}
		if !clash {
			break
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=\"%s\"\nMIME-Version: 1.0\n\n", boundary)
	for _, p := range parts {
		fmt.Fprintf(&b, "--%s\n", boundary)
		if p.header != "" {
			b.WriteString(p.header)
			b.WriteByte('\n')
		}
		b.WriteString(p.body)
		// The line break before a boundary belongs to the boundary, so
		// this one keeps the body's own final newline, if any.
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "--%s--\n", boundary)
	return []byte(b.String())
}
