package ignition

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/coreos/go-semver/semver"
	types "github.com/coreos/ignition/v2/config/v3_0/types"
)

var (
	v300 = semver.Version{Major: 3}
	v360 = semver.Version{Major: 3, Minor: 6}
)

func (r *renderer) files(cfg *types.Config) {
	for i := range r.inst.Spec.Files {
		f := &r.inst.Spec.Files[i]
		field := fmt.Sprintf("spec.files[%d]", i)
		if !r.claim(f.Path, field+".path") {
			continue
		}
		mode := int(*f.Mode) // spec.Default sets it
		if mode&0o7000 != 0 {
			// Ignition before spec 3.6 ignores setuid, setgid and sticky
			// bits (3.4 and 3.5 warn), and 3.6 masks them off the older
			// configs it translates.
			r.needs(v360, field+".mode", fmt.Sprintf("%04o has setuid, setgid or sticky bits, which Ignition honours from spec 3.6.0", mode))
		}
		r.parentDirs(cfg, f.Path, f.Owner)
		data := f.Data()
		if f.Path == hostsFile {
			data = withHostsLine(data, r.hostsLine())
		}
		r.addFile(cfg, f.Path, data, mode, f.Owner, f.Append)
	}
}

const hostsFile = "/etc/hosts"

// hostsLine is the /etc/hosts line cloud-init's manage_etc_hosts:
// localhost adds for the spec's FQDN (the cloud-init rendering asks for
// it); the Ignition distributions are of the Fedora family, where its
// address is 127.0.0.1. Empty without an FQDN.
func (r *renderer) hostsLine() string {
	s := &r.inst.Spec
	if s.FQDN == "" {
		return ""
	}
	host := s.Hostname
	if host == "" {
		host, _, _ = strings.Cut(s.FQDN, ".")
	}
	return "127.0.0.1 " + s.FQDN + " " + host + "\n"
}

// withHostsLine adds line to an /etc/hosts the spec writes, unless it
// already maps 127.0.0.1 to the same FQDN and host name, as cloud-init
// leaves such a file alone.
func withHostsLine(data []byte, line string) []byte {
	if line == "" {
		return data
	}
	want := strings.Fields(line)
	for l := range strings.Lines(string(data)) {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == want[0] && f[1] == want[1] && slices.Contains(f[2:], want[2]) {
			return data
		}
	}
	out := slices.Clip(data)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return append(out, line...)
}

// parentDirs creates the directories between a user's home and a file
// that user owns, owned by the user: Ignition would create them owned by
// root, and the user could not add a file to, say, ~/.config. (cloud-init
// 22.4's write_files leaves them to root.) Elsewhere missing parents are
// root's, mode 0755, as both agents make them.
func (r *renderer) parentDirs(cfg *types.Config, p, owner string) {
	user, group, _ := strings.Cut(owner, ":")
	home := r.homeOf(user)
	if user == "" || home == "" || !strings.HasPrefix(p, home+"/") {
		return
	}
	var dirs []string
	for d := path.Dir(p); d != home; d = path.Dir(d) {
		dirs = append(dirs, d)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		if r.dirs[d] {
			continue
		}
		if r.dirs == nil {
			r.dirs = map[string]bool{}
		}
		r.dirs[d] = true
		mode := 0o755
		if path.Base(d) == ".ssh" || path.Base(d) == ".gnupg" {
			mode = 0o700 // what ssh and gpg insist on
		}
		dir := types.Directory{Node: types.Node{Path: d}, DirectoryEmbedded1: types.DirectoryEmbedded1{Mode: intPtr(mode)}}
		dir.User.Name, dir.Group.Name = optStr(user), optStr(group)
		cfg.Storage.Directories = append(cfg.Storage.Directories, dir)
	}
}

// addFile adds a file with its content as a data URL. cloud-init's
// write_files replaces an existing file, hence overwrite; an append adds
// to what is there, or creates the file.
func (r *renderer) addFile(cfg *types.Config, p string, data []byte, mode int, owner string, appendTo bool) {
	f := types.File{Node: types.Node{Path: p}, FileEmbedded1: types.FileEmbedded1{Mode: intPtr(mode)}}
	if owner != "" {
		user, group, _ := strings.Cut(owner, ":")
		f.User.Name, f.Group.Name = optStr(user), optStr(group)
	}
	contents := dataURL(data)
	if appendTo {
		// overwrite false is the default, but spelled out it survives the
		// round trip through spec 2.x, whose translation back spells it.
		f.Overwrite = boolPtr(false)
		f.Append = []types.FileContents{contents}
	} else {
		f.Overwrite = boolPtr(true)
		f.Contents = contents
	}
	cfg.Storage.Files = append(cfg.Storage.Files, f)
}

// dataURL returns the shortest of the percent-encoded, base64 and
// gzip+base64 data URLs of data.
func dataURL(data []byte) types.FileContents {
	best := "data:," + percentEncode(data)
	if b64 := "data:;base64," + base64.StdEncoding.EncodeToString(data); len(b64) < len(best) {
		best = b64
	}
	// gzip's 18 bytes of framing and base64's third rarely pay off below a
	// kilobyte, and resetting a compressor costs more than the rest of a
	// small file's rendering.
	if len(data) < 1024 {
		return types.FileContents{Source: &best}
	}
	var zb bytes.Buffer
	zw := gzipPool.Get().(*gzip.Writer)
	// Reset leaves the header zero: no name, no modification time, so the
	// same content always compresses to the same bytes.
	zw.Reset(&zb)
	zw.Write(data)
	zw.Close()
	gzipPool.Put(zw)
	if gz := "data:;base64," + base64.StdEncoding.EncodeToString(zb.Bytes()); len(gz) < len(best) {
		return types.FileContents{Source: &gz, Compression: strPtr("gzip")}
	}
	return types.FileContents{Source: &best}
}

// gzipPool keeps compressors: each holds about 800 KB of state, which
// dominated rendering time when allocated per file.
var gzipPool = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestCompression)
	return zw
}}

// unescaped reports whether percentEncode leaves c as it is: unreserved
// URL characters and a few that are safe in a data URL's payload.
func unescaped(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.~/:=@", c) >= 0
}

// percentEncode escapes everything but unreserved URL characters and a few
// that are safe in a data URL's payload, keeping text readable.
func percentEncode(data []byte) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(data) + len(data)/4)
	for _, c := range data {
		if unescaped(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}
